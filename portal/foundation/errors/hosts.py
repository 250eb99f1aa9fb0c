"""The GPU hosts' own refusal, typed like every other (``portal.foundation.errors.RuleViolation``).

Kept apart from ``portal.foundation.errors`` (at its line limit), as the API's are in
``api.py``; the models of GPU hosts import it, so it is registered wherever a host is.
"""

from typing import Any, ClassVar

from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import BackendError


class HostUriRefused(BackendError):
    """A GPU host's libvirt URI outside what the portal opens (``uri_refusal`` in
    ``portal.compute.models.hosts`` keeps the rule): the admin's form refuses it on its URI field,
    and a stored one is refused again before any connection is opened.

    ``reason`` picks the words naming the part at fault. Without one (what the connection
    opener raises, which a VM's error may show to its project) the message names nothing of
    the URI. A ``BackendError``: what reaches hosts treats the host as one it cannot reach.
    """

    code = "host_uri_refused"
    status = 422
    field = "uri"
    default_message = _("GPU 호스트의 libvirt URI가 허용되지 않는 형식이라 연결하지 않았습니다.")
    reasons: ClassVar[dict[str, Any]] = {
        "chars": _("libvirt URI에는 영문, 숫자와 . _ - / : @ ? & = + [ ]만 쓸 수 있습니다."),
        "scheme": _("libvirt URI는 %(schemes)s 중 하나로 시작해야 합니다."),
        "host": _(
            "libvirt URI의 호스트나 포트가 올바르지 않습니다. 호스트 이름은 영문, 숫자, 점과 "
            "하이픈으로 쓰고 하이픈으로 시작할 수 없으며, 포트는 1에서 65535 사이입니다."
        ),
        "host_required": _("%(scheme)s URI에는 호스트 이름이 필요합니다."),
        "host_forbidden": _("%(scheme)s URI에는 호스트를 쓸 수 없습니다(%(scheme)s:///…)."),
        "user": _(
            "사용자 이름은 qemu+ssh URI에만 쓸 수 있고 영문, 숫자, 점, 밑줄과 하이픈으로 "
            "쓰며(하이픈으로 시작할 수 없음) 비밀번호는 넣을 수 없습니다."
        ),
        "path": _("%(scheme)s URI의 경로는 %(paths)s 중 하나여야 합니다."),
        "test_path": _("test URI의 경로는 /default 또는 .xml 파일의 절대 경로여야 합니다."),
        "param": _(
            "libvirt URI에 쓸 수 없는 매개변수입니다: %(param)s. %(scheme)s URI에 쓸 수 있는 "
            "매개변수는 %(allowed)s뿐입니다."
        ),
        "no_params": _("%(scheme)s URI에는 매개변수를 쓸 수 없습니다: %(param)s"),
    }

    def msg_format(self) -> Any:
        return self.reasons.get(self.params.get("reason", ""), self.default_message)


class ManagementAddressesExhausted(BackendError):
    """Every address of a host's management network is reserved for a guest
    (``portal.compute.backends.libvirt.management.reserve``): one more cannot start there."""

    code = "management_addresses_exhausted"
    default_message = _(
        "호스트의 관리 네트워크에 남은 주소가 없어 VM을 시작할 수 없습니다. 쓰지 않는 VM을 "
        "삭제하거나 관리자에게 문의하세요"
    )
