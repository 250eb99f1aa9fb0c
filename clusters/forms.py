from django import forms
from django.utils.translation import gettext_lazy as _

from clusters.models import ClusterStatus
from portal.compute.catalog import offered_fabrics
from portal.kernel import NAME_MAX
from portal.listing import ListFilterForm, catalog_sorts
from vms.forms import CatalogChoiceForm
from vms.models import FabricType, InstanceType, Zone


class ClusterCreateForm(CatalogChoiceForm):
    """The create form; choices narrow as the user picks (zone → type → fabric).

    It only shapes the input: every rule is checked again by ``create_cluster``.
    """

    name = forms.CharField(
        label=_("클러스터 이름"),
        max_length=NAME_MAX,
        help_text=_("영문, 숫자, 한글, 하이픈(-) 1~63자"),
    )
    fabric_type = forms.ChoiceField(label=_("패브릭 타입"), choices=())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.zone_id:  # a type is chosen after its zone
            self.fields["instance_type"].queryset = InstanceType.objects.none()
        fabrics = (
            offered_fabrics(self.zone_id, self.type_id) if self.zone_id and self.type_id else []
        )
        labels = dict(FabricType.choices)
        self.fields["fabric_type"].choices = [("", _("패브릭 타입 선택"))] + [
            (value, labels[value]) for value in fabrics
        ]


class ClusterFilterForm(ListFilterForm):
    """The cluster list's filters and sort. Members are not a sort key: ordering by the
    member count would run its subquery for every cluster of the project, where the list
    runs it for the 50 rows shown."""

    SORTS = {
        **catalog_sorts(ClusterStatus.values),
        "fabric": ("fabric_type",),
        "created": ("created_at",),
    }
    DEFAULT_SORT = "-created"
    HEADERS = (
        ("name", _("클러스터 이름"), ""),
        ("status", _("상태"), ""),
        ("fabric", _("패브릭 타입"), ""),
        ("type", _("인스턴스 유형"), ""),
        ("zone", _("가용 영역"), ""),
        ("members", _("멤버"), "num"),
        ("created", _("생성일"), ""),
    )

    status = forms.ChoiceField(
        label=_("상태"), required=False, choices=[("", _("모든 상태"))] + ClusterStatus.choices
    )
    zone = forms.ModelChoiceField(
        label=_("가용 영역"),
        required=False,
        queryset=Zone.objects.all(),
        empty_label=_("모든 영역"),
    )
    q = forms.CharField(label=_("이름 검색"), required=False, max_length=63)
