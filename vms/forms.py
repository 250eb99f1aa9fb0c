from collections.abc import Callable
from typing import Any, ClassVar, cast

from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from clusters import services as cluster_services
from clusters.models import VirtualCluster
from clusters.operations.internal import MAX_CREATE
from portal.catalog.models import InstanceType, Zone
from portal.catalog.rules import types_offered_in
from portal.foundation.kernel import NAME_MAX, parse_id
from portal.speed.statements import statements
from portal.web.listing import ListFilterForm, NullsAsPostgres, catalog_sorts, headers
from vms.models import BillingType, VirtualMachine, VmStatus


class InstanceTypeChoice(forms.ModelChoiceField):
    """An instance type named with what it is: "gpu.h100x8 · 8× NVIDIA H100 SXM · 192 vCPU ·
    2048 GiB", wherever one is chosen."""

    def label_from_instance(self, obj) -> str:
        return f"{obj.code} · {obj.summary}"


class CatalogChoiceForm(forms.Form):
    """A create form's zone and instance type (after the subclass's ``name``, first): once
    a zone is chosen, only the types offered there are choices. ``zone_id`` and ``type_id``
    are what is chosen so far, as ids.

    A page redraws only the choices that depend on them (a create template's
    ``create-options``), never what the user typed; the page keeps each choice the redraw
    still offers."""

    field_order = ["name"]
    zone = forms.ModelChoiceField(
        label=_("가용 영역"), queryset=Zone.objects.all(), empty_label=_("가용 영역 선택")
    )
    instance_type = InstanceTypeChoice(
        label=_("인스턴스 유형"),
        queryset=InstanceType.objects.all(),
        empty_label=_("인스턴스 유형 선택"),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        data = self.data if self.is_bound else self.initial
        self.chosen = data
        self.zone_id = parse_id(data.get("zone"))
        self.type_id = parse_id(data.get("instance_type"))
        if self.zone_id:
            self.fields["instance_type"].queryset = types_offered_in(self.zone_id)  # type: ignore[attr-defined]


def _zone_choices(_shape) -> QuerySet:
    """The zone filter's choices: (id, label), the label being the zone's code (its str), in
    the catalog's order."""
    return Zone.objects.values_list("pk", "code")


class CatalogFilterForm(ListFilterForm):
    """The filters of every list of catalog resources (clusters, VMs): a name, a status (of
    ``STATUSES``, the subclass's choices) and a zone."""

    STATUSES: list[tuple[str, Any]] = []

    q = forms.CharField(label=_("이름 검색"), required=False, max_length=NAME_MAX)
    status = forms.ChoiceField(label=_("상태"), required=False)
    zone = forms.ModelChoiceField(
        label=_("가용 영역"),
        required=False,
        queryset=Zone.objects.all(),
        empty_label=_("모든 영역"),
    )

    # Catalog choices drawn as (id, label) rows by a compiled statement
    # (``portal.templatetags.console.filter_fields``), not as models.
    listed_choices: ClassVar[dict[str, Callable[..., QuerySet]]] = {"zone": _zone_choices}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        status = cast(forms.ChoiceField, self.fields["status"])
        status.choices = [("", _("모든 상태")), *self.STATUSES]

    def listed(self, name: str) -> tuple:
        """The (id, label) rows of a field in ``listed_choices``."""
        return tuple(statements.rows(self.listed_choices[name], ()))


class OfferedIds(forms.MultipleChoiceField):
    """Offers its choices, and takes any value sent: whether an id names something the user
    may choose is the service's to say, with its own error (a key of another project is not
    found, and the refusal is audited), never the form's "not a valid choice"."""

    def valid_value(self, value: Any) -> bool:
        return True


class VmCreateForm(CatalogChoiceForm):
    name = forms.CharField(label=_("이름"), max_length=NAME_MAX)
    billing_type = forms.ChoiceField(
        label=_("과금 유형"), choices=BillingType.choices, initial=BillingType.ON_DEMAND
    )
    disaster_recovery = forms.BooleanField(label=_("재해 복구(DR)"), required=False)
    count = forms.IntegerField(
        label=_("개수"),
        required=False,  # absent (an older form, the API's shape) means one
        min_value=1,
        max_value=MAX_CREATE,
        initial=1,
        help_text=_("2대 이상이면 이름 뒤에 -01, -02 … 가 붙습니다 (최대 64대)."),
    )
    cluster: forms.ModelChoiceField = forms.ModelChoiceField(
        label=_("생성 후 클러스터에 연결"),
        queryset=None,
        required=False,
        empty_label=_("연결하지 않음"),
    )

    ssh_keys = OfferedIds(
        label=_("SSH 키"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("선택한 키는 가상머신의 로그인 사용자(vc)의 authorized_keys에 들어갑니다."),
    )

    def clean_count(self) -> int:
        return self.cleaned_data["count"] or 1

    def __init__(self, *args, clusters=None, ssh_keys=(), **kwargs):
        """``clusters``: the clusters the user may attach the new VMs to (none if omitted).

        The form offers them narrowed to the chosen zone and instance type
        (``cluster_choices``, like the instance types by zone), but accepts any of them: a
        cluster of another zone or type is refused by the attach rule's own message
        (``operations.create_vms``), never by "not a valid choice". ``ssh_keys``: the
        project's keys the user may choose, offered the same way."""
        super().__init__(*args, **kwargs)
        self.fields["ssh_keys"].choices = [  # type: ignore[attr-defined]
            (str(key.pk), f"{key.name} ({key.fingerprint})") for key in ssh_keys
        ]
        clusters = clusters if clusters is not None else VirtualCluster.objects.none()
        self.fields["cluster"].queryset = clusters  # type: ignore[attr-defined]
        shown = clusters.select_related("zone", "instance_type")
        if self.zone_id:
            shown = shown.filter(zone_id=self.zone_id)
        if self.type_id:
            shown = shown.filter(instance_type_id=self.type_id)
        shown_list = list(shown)
        # The cluster chosen stays chosen when the zone or type changes: still listed, and
        # refused beside the field with the attach rule's own words (never dropped, so a VM
        # is never created unattached by surprise).
        chosen_id = parse_id(self.chosen.get("cluster"))
        self.chosen_cluster = (
            clusters.select_related("zone", "instance_type").filter(pk=chosen_id).first()
            if chosen_id
            else None
        )
        if self.chosen_cluster is not None and self.chosen_cluster not in shown_list:
            shown_list.append(self.chosen_cluster)
        self.cluster_choices = [
            (cluster.pk, f"{cluster.name} ({cluster.zone.code} · {cluster.instance_type.code})")
            for cluster in shown_list
        ]
        self.cluster_refusal = self._cluster_refusal()
        # Which clusters are listed is said once a zone and a type are chosen.
        self.cluster_hint = self._cluster_hint()

    def _cluster_refusal(self) -> str:
        """What the attach rule says of the chosen cluster for the VM as chosen so far (an
        unsaved probe, as ``operations.create_vms`` asks before it makes one)."""
        cluster = self.chosen_cluster
        zone = Zone.objects.filter(pk=self.zone_id).first() if self.zone_id else None
        itype = InstanceType.objects.filter(pk=self.type_id).first() if self.type_id else None
        if cluster is None or zone is None or itype is None:
            return ""
        probe = VirtualMachine(
            project_id=cluster.project_id,
            zone=zone,
            instance_type=itype,
            billing_type=self.chosen.get("billing_type") or BillingType.ON_DEMAND,
            disaster_recovery=self.chosen.get("disaster_recovery") in ("on", "true", "1", True),
            status=VmStatus.STOPPED,
        )
        refusal = cluster_services.attach_refusal(probe, cluster)
        return refusal.message if refusal is not None else ""

    def _cluster_hint(self) -> str:
        if not (self.zone_id and self.type_id):
            return str(_("가용 영역과 인스턴스 유형을 고르면 연결할 수 있는 클러스터가 보입니다."))
        if len(self.cluster_choices) > (self.chosen_cluster is not None):
            return str(
                _(
                    "선택한 영역·인스턴스 유형의 클러스터만 보입니다. 연결 규칙에 맞지 "
                    "않으면 아무것도 생성하지 않습니다."
                )
            )
        return str(_("선택한 영역·인스턴스 유형에 연결할 수 있는 클러스터가 없습니다."))

    @property
    def billing_options(self) -> list[tuple[str, str, bool, bool]]:
        """(value, label, selected, disabled): 스팟 is not offered beside a chosen cluster
        (a cluster takes no spot VM); a spot already chosen stays, and the cluster field
        says why it is refused."""
        current = self.chosen.get("billing_type") or BillingType.ON_DEMAND
        return [
            (
                value,
                str(label),
                value == current,
                value == BillingType.SPOT
                and self.chosen_cluster is not None
                and current != BillingType.SPOT,
            )
            for value, label in BillingType.choices
        ]


class VmRenameForm(forms.Form):
    name = forms.CharField(label=_("이름"), max_length=NAME_MAX)


class VmClusterForm(forms.Form):
    """The 클러스터 section: 수행할 작업 = 클러스터에 연결 (+ which) or 클러스터에서 분리.

    Only what can apply is offered: a member may only be detached, a VM in
    no cluster only attached. The services still check every rule on submit.
    """

    ATTACH, DETACH = "attach", "detach"
    action = forms.ChoiceField(label=_("수행할 작업"), choices=())
    cluster: forms.ModelChoiceField = forms.ModelChoiceField(
        label=_("연결할 클러스터"), queryset=None, required=False, empty_label=_("클러스터 선택")
    )

    def __init__(self, *args, clusters, member: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.member = member
        offered = (
            (self.DETACH, _("클러스터에서 분리")) if member else (self.ATTACH, _("클러스터에 연결"))
        )
        self.fields["action"].choices = [("", _("작업 선택")), offered]  # type: ignore[attr-defined]
        self.fields["cluster"].queryset = clusters  # type: ignore[attr-defined]

    def clean(self):
        data = super().clean() or {}
        if data.get("action") == self.ATTACH and not data.get("cluster"):
            self.add_error("cluster", _("연결할 클러스터를 선택하세요."))
        return data

    @property
    def chooses_cluster(self) -> bool:
        """Whether the 연결할 클러스터 dropdown applies: only to an attach (hidden, not
        merely toggled by script, so an in-page re-render keeps it right)."""
        return not self.member


class VmFilterForm(CatalogFilterForm):
    """The VM list's filters and sort.

    The cluster choices are "no cluster" and the readable clusters that have a VM in the
    project, the first ``CLUSTER_CHOICES`` by name, plus the one asked for if it is further
    down: a project of 10,000 clusters made a 10,000-option select (0.4 s a page). A cluster
    the user may not read is not a choice, so asking for it is ignored.
    """

    NO_CLUSTER = "none"
    CLUSTER_CHOICES = 100
    SORTS = {
        **catalog_sorts(VmStatus.values),
        "billing": ("billing_type",),
        "cluster": (NullsAsPostgres("cluster__name"),),  # VMs in no cluster last
    }
    DEFAULT_SORT = "name"
    STATUSES = [(value, label) for value, label in VmStatus.choices if value != VmStatus.DELETED]
    HEADERS = headers(
        VirtualMachine,
        name="name",
        status="status",
        zone="zone",
        type="instance_type",
        billing="billing_type",
        dr="disaster_recovery",
        cluster="cluster",
        ip="private_ip",
        actions=(_("작업"), "visually-hidden"),
    )

    instance_type = forms.ModelChoiceField(
        label=_("인스턴스 유형"),
        required=False,
        queryset=InstanceType.objects.all(),
        empty_label=_("모든 유형"),
    )
    cluster = forms.ChoiceField(label=_("클러스터"), required=False)

    def __init__(self, data=None, *, clusters=None, can_read_clusters=True, **kwargs):
        """``clusters``: a queryset of (pk, name) rows, the clusters that may be chosen."""
        super().__init__(data, **kwargs)
        if not can_read_clusters:
            # The list hides cluster names from this user; an order by them would tell them.
            self.SORTS = {k: v for k, v in self.SORTS.items() if k != "cluster"}
        shown = list(clusters[: self.CLUSTER_CHOICES]) if clusters is not None else []
        asked = parse_id(self.query.get("cluster"))
        if asked and clusters is not None and all(pk != asked for pk, _name in shown):
            shown += list(clusters.filter(pk=asked))
        self.fields["cluster"].choices = [  # type: ignore[attr-defined]
            ("", _("모든 클러스터")),
            (self.NO_CLUSTER, _("클러스터 없음")),
        ] + [(str(pk), name) for pk, name in shown]
