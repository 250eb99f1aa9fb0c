from django import forms
from django.utils.translation import gettext_lazy as _

from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType, InstanceType
from portal.catalog.rules import offered_fabrics
from portal.foundation.kernel import NAME_MAX
from portal.web.listing import catalog_sorts, headers
from vms.forms import CatalogChoiceForm, CatalogFilterForm, OfferedIds


class ClusterCreateForm(CatalogChoiceForm):
    """The create form; choices narrow as the user picks (zone → type → fabric).

    It only shapes the input: every rule is checked again by ``create_cluster``.
    """

    name = forms.CharField(
        label=_("클러스터 이름"),
        max_length=NAME_MAX,
        help_text=_("식별 이름. 영문, 숫자, 한글, 하이픈(-) 1~63자"),
    )
    fabric_type = forms.ChoiceField(
        label=_("패브릭 타입"), choices=(), help_text=_("InfiniBand 또는 Ethernet(RoCEv2)")
    )

    # Each field as the product page's 1단계 describes it (the shared fields say it here:
    # VM create chooses a zone and a type for a VM, not for a cluster).
    HELP = {
        "zone": _("클러스터가 배치될 영역"),
        "instance_type": _("클러스터 멤버에 사용할 인스턴스 유형"),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, text in self.HELP.items():
            self.fields[name].help_text = text
        if not self.zone_id:  # a type is chosen after its zone
            self.fields["instance_type"].queryset = InstanceType.objects.none()  # type: ignore[attr-defined]
        fabrics = (
            offered_fabrics(self.zone_id, self.type_id) if self.zone_id and self.type_id else []
        )
        labels = dict(FabricType.choices)
        self.fields["fabric_type"].choices = [("", _("패브릭 타입 선택"))] + [  # type: ignore[attr-defined]
            (value, labels[value]) for value in fabrics
        ]


class ClusterSshKeysForm(forms.Form):
    """The SSH keys a cluster gives its members: at create, beside ``ClusterCreateForm``
    (its own form, outside the fields a zone or type redraws), and on the 정보 tab. It offers
    the project's keys the user may read and takes any id: one that names none of them is
    the service's to refuse (``ssh_keys.chosen_keys``), as for a VM."""

    ssh_keys = OfferedIds(
        label=_("SSH 키"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_(
            "선택한 키는 멤버 가상머신마다 자신의 키와 함께 로그인 사용자(vc)의 "
            "authorized_keys에 들어갑니다. 각 멤버가 다음에 시작할 때 적용됩니다."
        ),
    )

    def __init__(self, *args, ssh_keys=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["ssh_keys"].choices = [  # type: ignore[attr-defined]
            (str(key.pk), f"{key.name} ({key.fingerprint})") for key in ssh_keys
        ]


class ClusterFilterForm(CatalogFilterForm):
    """The cluster list's filters and sort. Members are not a sort key: ordering by the
    member count would run its subquery for every cluster of the project, where the list
    runs it for the 50 rows shown."""

    SORTS = {
        **catalog_sorts(ClusterStatus.values),
        "fabric": ("fabric_type",),
        "created": ("created_at",),
    }
    DEFAULT_SORT = "-created"
    STATUSES = ClusterStatus.choices
    field_order = ["status", "zone", "q"]
    HEADERS = headers(
        VirtualCluster,
        name="name",
        status="status",
        fabric="fabric_type",
        type="instance_type",
        zone="zone",
        members=(_("멤버"), "num"),
        created="created_at",
    )
