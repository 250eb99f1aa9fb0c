"""What the page tests share: the header an HTMX request carries, a response's text, and
the words of the attach rules as the pages show them, with the VMs they refuse."""

import pytest

from vms.models import BillingType, VmStatus

HX = {"HTTP_HX_REQUEST": "true"}
SPOT_OR_DR = "스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다"
SAME_TYPE_STOPPED = "동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다"
# The VMs no cluster takes (``world.vm`` keywords ``kw``) and the rule the pages give.
UNATTACHABLE = pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"billing_type": BillingType.SPOT}, SPOT_OR_DR),
        ({"disaster_recovery": True}, SPOT_OR_DR),
        ({"status": VmStatus.RUNNING}, SAME_TYPE_STOPPED),
    ],
    ids=["spot", "dr", "running"],
)


def body(response) -> str:
    return response.content.decode()
