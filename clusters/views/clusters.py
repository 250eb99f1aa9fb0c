"""컴퓨트 > 가상 클러스터: list, create, detail tabs and the start/stop/delete actions.

Every lookup goes through ``restrict(user, permission)``: outside it is a 404. Every change
is a ``clusters.operations`` call, as on the API, so it leaves the same Operation; a refusal
(``RuleViolation``) is shown in place by ``portal.web.middleware.RuleViolationMiddleware`` or,
for forms, as a field error.
"""

from collections.abc import Sequence

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from clusters import operations, outcome, services
from clusters.forms import ClusterCreateForm, ClusterFilterForm, ClusterSshKeysForm
from clusters.launch import FABRIC_GUIDES, RANK_ORDER, hostfile_text
from clusters.launch import fabric_usage as _fabric_usage
from clusters.models import (
    DELETABLE,
    STARTABLE,
    STOPPABLE,
    ClusterStatus,
    OperationItem,
    VirtualCluster,
)
from clusters.services import MemberStates
from clusters.views import members as views_members
from clusters.views.listing import LIST_FIELDS, listed_clusters, listed_total, shown_clusters
from clusters.views.members import disabled_reason, readable_cluster
from portal.compute.backends import get_backend
from portal.foundation.errors import (
    FabricNotOffered,
    InvalidInput,
    NameTaken,
    PermissionRequired,
)
from portal.foundation.errors.ssh_keys import SshKeyNotFound
from portal.foundation.kernel import parse_id
from portal.iam.permissions import Perm
from portal.models import AuditEvent, SshKey, instances_of, permitted_projects, shown_to
from portal.speed.statements import statements
from portal.web.listing import Rows, list_page, render_list
from portal.web.rendering import create_offer, create_view, delete_and_list, go_to, render_form
from vms.models import VirtualMachine

PAGE_SIZE = 50
# What the Info and Connected VMs tabs show of a member (no timestamps to parse, no catalog).
MEMBER_FIELDS = (
    "id",
    "project_id",
    "cluster_id",
    "name",
    "status",
    "billing_type",
    "private_ip",
    "fabric_guid",
    "fabric_lid",
    "fabric_ip",
    "fabric_gid_index",
    # Its health and the evidence that set it (the members tab's badge).
    "health",
    "health_code",
    "health_params",
)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def cluster_list(request):
    project = request.project
    filters = ClusterFilterForm(request.GET)
    clusters: QuerySet | Rows = VirtualCluster.objects.none()
    if project is not None:
        allowed = permitted_projects(request.user, Perm.CLUSTER_READ)
        zone = filters.value("zone")
        clusters = Rows(
            VirtualCluster,
            listed_clusters,
            {
                "projects": None if allowed is None else tuple(sorted(allowed)),
                "project": project.pk,
                "status": filters.value("status"),
                "zone": zone.pk if zone else None,
                "q": filters.value("q"),
            },
            total=listed_total,
        )
    page = list_page(
        clusters, filters.ordering(), request.GET.get("page"), shown_clusters, PAGE_SIZE,
        fields=LIST_FIELDS,
    )  # fmt: skip
    return render_list(
        request,
        "clusters/list.html",
        "cluster-table",
        page,
        filters,
        **create_offer(request.user, project, Perm.CLUSTER_CREATE),
        any_transitional=any(c.is_transitional for c in page.object_list),
    )


# The create form and its fields' re-render: who may not create clusters there is refused.
creates_clusters = create_view(
    Perm.CLUSTER_CREATE, "clusters:cluster_list", operations.require_create_cluster
)


@login_required
@require_http_methods(["GET", "POST"])
@creates_clusters
def cluster_create(request):
    """GET: the form (HTMX panel or a page). POST: create, then go to the new cluster."""
    keys = choosable_keys(request.user, request.project)
    if request.method == "GET":
        form = ClusterCreateForm(initial=request.GET.dict() if request.htmx else None)
        return _render_create(request, form, ClusterSshKeysForm(ssh_keys=keys))
    form = ClusterCreateForm(request.POST)
    keys_form = ClusterSshKeysForm(request.POST, ssh_keys=keys)
    if form.is_valid() and keys_form.is_valid():
        data = form.cleaned_data
        try:
            _operation, cluster = operations.create_cluster_op(
                actor=request.user,
                project=request.project,
                name=data["name"],
                zone_id=data["zone"].pk,
                instance_type_id=data["instance_type"].pk,
                fabric_type=data["fabric_type"],
                ssh_key_ids=keys_form.cleaned_data["ssh_keys"],
            )
        except InvalidInput as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except NameTaken as exc:
            form.add_error("name", exc.message)
        except FabricNotOffered as exc:
            form.add_error("fabric_type", exc.message)
        except SshKeyNotFound as exc:
            keys_form.add_error("ssh_keys", exc.message)
        else:
            messages.success(
                request, _("%(name)s 클러스터를 생성했습니다.") % {"name": cluster.name}
            )
            return go_to(request, reverse("clusters:cluster_detail", args=[cluster.pk]))
    return _render_create(request, form, keys_form, status=422)


def choosable_keys(user, project) -> QuerySet:
    """The SSH 키 choices of a cluster: its project's keys the user may read."""
    if project is None:
        return SshKey.objects.none()
    return SshKey.objects.restrict(user, Perm.SSH_KEY_READ).filter(project=project)


def _render_create(request, form, keys_form, status=200):
    context = {"form": form, "keys_form": keys_form}
    return render_form(request, "clusters/create.html", "create-form", context, status)


@login_required
@require_GET
@creates_clusters
def cluster_form_options(request):
    """The choices that depend on the zone and the type, as the user picks them (swapped
    into the form's selects: what was typed is never redrawn)."""
    form = ClusterCreateForm(initial=request.GET.dict())
    return render(request, "clusters/create.html#create-options", {"form": form})


def _visible_members(user, cluster):
    return VirtualMachine.objects.restrict(user, Perm.VM_READ).filter(cluster=cluster)


def _members_and_states(user, cluster) -> tuple[list, MemberStates]:
    """The members ``user`` may read, in rank order, and the states of all of them (what the
    header's rules count), from one read of the cluster's members: each row is kept by
    ``shown_to`` (``readable(...).shown``), the same rule ``restrict`` applies in SQL."""
    rows = statements.rows(_member_rows, MEMBER_FIELDS, cluster=cluster.pk)
    every = instances_of(VirtualMachine, VirtualMachine.objects.db, MEMBER_FIELDS, rows)
    states = MemberStates.of_members(every)
    return shown_to(user, Perm.VM_READ, VirtualMachine, every), states


def _member_rows(fields, cluster) -> QuerySet:
    return VirtualMachine.objects.filter(cluster=cluster).order_by(*RANK_ORDER).values_list(*fields)


def detail_context(request, cluster, tab):
    user = request.user
    members, states = (
        _members_and_states(user, cluster) if tab in ("info", "members") else ([], None)
    )
    context = _header_context(user, cluster, states, request.session.get(DISMISSED, ()))
    context.update(
        tab=tab,
        members=members,
        fabric=_fabric_usage(cluster, members)
        if tab == "info" and cluster.status == ClusterStatus.RUNNING
        else None,
        can_update_vm=user.has_perm(Perm.VM_UPDATE, cluster),
    )
    if tab == "members":
        context["controls"] = views_members.member_controls(user, cluster, members)
        busy = context["busy"] = context["header"]["busy"]
        # Rows a running bulk start or stop has not reached yet say so beside their status.
        context["controls"]["queued"] = (
            set(
                busy.items.filter(status=OperationItem.Status.PENDING, started_at__isnull=True)
                .exclude(vm=None)
                .values_list("vm_id", flat=True)
            )
            if busy is not None
            else set()
        )
    if tab == "info":  # 이름 변경 is offered where the rename would be taken, else says why
        refusal = services.preflight_rename(user, cluster, cluster.name)
        context["can_rename"] = refusal is None
        context["rename_reason"] = disabled_reason(refusal)
        context["fabric_guide"] = FABRIC_GUIDES[cluster.fabric_type]
        context.update(keys_context(user, cluster))
        # On hosts without HCAs the fabric is emulated RoCE, whatever type the cluster asked.
        context["soft_fabric"] = bool(members) and get_backend().soft_fabric(
            [vm.pk for vm in members]
        )
    return context


def keys_context(user, cluster, keys_form=None) -> dict:
    """The 정보 tab's SSH 키: the cluster's keys to whom may read keys (else None: not
    shown), and SSH 키 변경's form where the change would be taken (``keys_form``: one
    sent back with its error)."""
    if not user.has_perm(Perm.SSH_KEY_READ, cluster):
        return {"cluster_keys": None, "keys_form": None}
    chosen = list(SshKey.objects.filter(clusters=cluster).order_by("name"))
    if keys_form is None and services.preflight_ssh_keys(user, cluster) is None:
        keys_form = ClusterSshKeysForm(
            initial={"ssh_keys": [str(key.pk) for key in chosen]},
            ssh_keys=choosable_keys(user, cluster.project_id),
        )
    return {"cluster_keys": chosen, "keys_form": keys_form}


DISMISSED = "dismissed_outcomes"  # the session's dismissed header outcomes (operation ids)
DISMISSED_KEPT = 50


def _header_context(user, cluster, members: MemberStates | None = None, dismissed=()):
    """The header: status, member count, and what its buttons may do and why not, all
    asked of the services' preflights on one read of the members' statuses (``members``,
    if the page has read them already).

    While an operation runs on the cluster (``outcome.open_operation``) the header names it
    and offers no start, stop, delete or 멤버 모두 시작: nothing that contradicts it."""
    members = members if members is not None else MemberStates.read(cluster)
    stop_refusal = services.preflight_stop(user, cluster, members)
    busy = outcome.open_operation(cluster)
    idle = busy is None
    failed = outcome.header_outcome(cluster, user, dismissed) if idle else None
    summary = views_members.member_summary(user, cluster, members, stop_refusal)
    summary["offer_start_all"] = idle and summary.get("offer_start_all", False)
    offer_with_members = idle and summary.get("offer_stop_members", False)
    return {
        "cluster": cluster,
        "member_count": members.count,
        "summary": summary,
        "fingerprint": _fingerprint(user, cluster, members, busy),
        "header": {
            "show_start": idle and cluster.status in STARTABLE,
            "show_stop": idle and cluster.status in STOPPABLE,
            "show_delete": idle and cluster.status in DELETABLE,
            # Shown to everyone who reads the cluster: disabled, each says why (a missing
            # permission by name).
            "start_reason": disabled_reason(services.preflight_start(user, cluster, members)),
            # The seed's sentence (members still run) is said where it applies: beside a
            # stop that stays refused, or in the stop dialog whose option lifts it.
            "stop_reason": disabled_reason(stop_refusal),
            "stop_reason_in_dialog": offer_with_members,
            "stop_members": _stopping_members(members) if offer_with_members else None,
            "delete_reason": _delete_reason(services.preflight_delete(user, cluster, members)),
            # What a delete detaches, named to whom may read the VMs (counted to the rest).
            "delete_members": _named(
                members.names if user.has_perm(Perm.VM_READ, cluster) else (), members.count
            ),
            "busy": busy,
            "doing": outcome.doing(busy, cluster=cluster) if busy is not None else "",
            "failed": failed,
            "polling": cluster.is_transitional or members.transitional > 0 or not idle,
        },
    }


NAMES_SHOWN = 5


def _delete_reason(refusal) -> str:
    """Why 삭제 is disabled, as a sentence that names the action (the rule's message alone,
    "먼저 모든 가상머신을 종료해야 합니다", would not say what it refuses)."""
    reason = disabled_reason(refusal)
    if not reason or isinstance(refusal, PermissionRequired):
        return reason
    return _("클러스터를 삭제할 수 없습니다. %(reason)s") % {"reason": reason}


def _stopping_members(members: MemberStates) -> dict:
    """The members 클러스터 중지 with 멤버 가상머신도 함께 중지 stops (every one not 중지됨, as
    ``operations.stop_cluster_with_members`` picks them): how many, and the first names."""
    return _named(members.unstopped, len(members.unstopped))


def _named(names: Sequence[str], count: int) -> dict:
    """``count`` members for a confirmation: the first ``NAMES_SHOWN`` of ``names`` and how
    many more there are (all of them, where no name may be shown)."""
    text = ", ".join(names[:NAMES_SHOWN])
    if text and len(names) > NAMES_SHOWN:
        text = _("%(names)s 외 %(n)s대") % {"names": text, "n": len(names) - NAMES_SHOWN}
    return {"count": count, "names": text}


def _fingerprint(user, cluster, members, busy=None):
    """An opaque token of what the page shows, sent back by the header poll (``?seen=``).

    Member statuses count only for a user who may read the VMs; and it is a keyed hash, so
    not even they can read statuses out of it. The running operation counts too: when it
    ends, the tabs offer their bulk actions again.
    """
    shown = [cluster.status, str(members.count), str(busy.pk if busy is not None else "")]
    if user.has_perm(Perm.VM_READ, cluster):
        shown.append(members.digest)
    return salted_hmac("cluster-fingerprint", ":".join(shown)).hexdigest()[:20]


def _render_tab(request, pk, tab):
    cluster = readable_cluster(request, pk)
    context = detail_context(request, cluster, tab)
    if tab == "activity":
        events = AuditEvent.objects.filter(cluster_id=cluster.pk)
        if not request.user.has_perm(Perm.VM_READ, cluster):
            events = events.filter(target_type="cluster")  # member events name VMs
        shown = list(events.select_related("actor").order_by("-at", "-id")[:100])
        finals = outcome.start_finals(shown, cluster)
        for event in shown:
            event.final = finals.get(event.pk)  # type: ignore[attr-defined]
        context["events"] = shown
        context["operations"] = views_members.cluster_operations(request.user, cluster)
    if request.htmx and not request.htmx.boosted and not request.htmx.history_restore_request:
        return render(request, f"clusters/detail.html#tab-{tab}", context)
    return render(request, "clusters/detail.html", context)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def cluster_tab(request, pk, tab):
    """정보 / 연결된 가상머신 / 메트릭 / 활동: each tab its own URL (``tab`` comes from urls.py)."""
    return _render_tab(request, pk, tab)


@login_required
@require_GET
def cluster_header(request, pk):
    """The header (status, buttons), polled while something is transitional.

    ``?seen=`` is the fingerprint the page shows; when it differs, the tabs are told to refresh.
    """
    return _render_header(request, readable_cluster(request, pk), changed=None)


def _render_header(request, cluster, changed):
    context = _header_context(request.user, cluster, None, request.session.get(DISMISSED, ()))
    response = render(request, "clusters/detail.html#header", context)
    if changed or request.GET.get("seen") != context["fingerprint"]:
        trigger_client_event(response, "cluster-changed")
    return response


@login_required
@require_GET
def cluster_hostfile(request, pk):
    cluster = readable_cluster(request, pk)
    members = list(_visible_members(request.user, cluster).order_by(*RANK_ORDER))
    response = HttpResponse(
        hostfile_text(cluster, members), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="hostfile-{cluster.pk}"'
    return response


def _action(request, pk, operation, done):
    cluster = readable_cluster(request, pk)
    _operation, cluster = operation(cluster.pk, actor=request.user)
    if request.htmx:
        response = _render_header(request, readable_cluster(request, cluster.pk), changed=True)
        trigger_client_event(response, "toast", {"message": done})
        return response
    messages.success(request, done)
    return redirect("clusters:cluster_detail", pk=cluster.pk)


@login_required
@require_POST
def cluster_start(request, pk):
    return _action(request, pk, operations.start_cluster_op, _("클러스터 시작을 요청했습니다."))


@login_required
@require_POST
def cluster_dismiss(request, pk):
    """닫기 on the header's outcome (``?operation=``): this session no longer shows it;
    answered with the header."""
    cluster = readable_cluster(request, pk)
    operation_id = parse_id(request.POST.get("operation"))
    if operation_id is not None:
        kept = [i for i in request.session.get(DISMISSED, []) if i != operation_id]
        request.session[DISMISSED] = [*kept, operation_id][-DISMISSED_KEPT:]
    if request.htmx:
        return _render_header(request, cluster, changed=False)
    return redirect("clusters:cluster_detail", pk=cluster.pk)


@login_required
@require_POST
def cluster_stop(request, pk):
    """클러스터 중지; with 멤버 가상머신도 함께 중지, the members first (one Operation)."""
    if request.POST.get("with_members"):
        return views_members.stop_with_members(request, pk)
    return _action(request, pk, operations.stop_cluster_op, _("클러스터를 중지했습니다."))


@login_required
@require_POST
def cluster_delete(request, pk):
    cluster = readable_cluster(request, pk)
    done = _("%(name)s 클러스터를 삭제했습니다.")
    return delete_and_list(
        request, cluster, operations.delete_cluster_op, done, "clusters:cluster_list"
    )
