"""Project staff learn nothing of other projects in the admin, not even who acted in theirs.

An account outside the staff user's projects that acted in one of them (a platform admin, a
member since removed) is named on every admin page by its role (플랫폼 관리자, 외부 사용자),
never by its username: the lists, the change pages, the history pages; and no search finds a
row by that username. A list answers only the lookups it offers: one typed into the URL
(``?role_bindings__project=2`` and its variants, any lookup through a project or an account)
is refused with one Korean 400, the same whether or not it would have found something, and
the filters the list offers keep working. Superusers still see usernames. Driven from
``admin.site._registry``, so a new admin is covered.
"""

import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Operation, VirtualCluster
from metrics.models import MetricsToken
from portal.compute.models import SimulatorAllocation
from portal.models import ApiToken, AuditEvent, Project, RoleBinding
from tests.conftest import builtin_role
from vms.models import VirtualMachine

SECRET = "zeta"  # in the username of each outsider, nowhere else
MEMBER = "mina-member"  # a member of demo who acted too: staff see her name
PLATFORM_ADMIN = "플랫폼 관리자"
OUTSIDER = "외부 사용자"
REFUSAL = "이 목록에서 쓸 수 없는 필터입니다."


def url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def acted(world):
    """demo, where three accounts acted: a platform admin (who made a cluster), an account of
    no project of the staff user's (a former member: a VM) and a member (a VM); each has an
    audit event, an operation, an API token and an agent token there, and the platform admin
    changed demo, its cluster and a member's account in the admin (their history pages)."""
    User = get_user_model()
    root = User.objects.create_superuser(f"{SECRET}-root", password="x")
    former = User.objects.create_user(f"{SECRET}-former")
    member = User.objects.create_user(MEMBER)
    RoleBinding.objects.create(user=member, project=world.demo, role=builtin_role("viewer"))
    cluster = world.cluster("mine-cluster", created_by=root)
    vms = [world.vm(f"mine-vm-{n}", created_by=actor) for n, actor in enumerate((former, member))]
    for n, actor in enumerate((root, former, member)):
        AuditEvent.objects.create(
            project=world.demo, actor=actor, action="cluster.start", target_type="cluster",
            target_name=cluster.name, outcome=AuditEvent.Outcome.SUCCEEDED,
        )  # fmt: skip
        Operation.objects.create(
            project=world.demo, cluster=cluster, actor=actor, kind=Operation.Kind.START_CLUSTER
        )
        ApiToken.objects.create(
            user=actor, project=world.demo, name=f"mine-token-{n}", token_hash=f"{n}" * 64,
            prefix=f"vcp_{n}", expires_at=timezone.now() + timedelta(days=30),
        )  # fmt: skip
        vm = world.vm(f"mine-agent-{n}")
        MetricsToken.objects.create(
            vm=vm, token_hash=f"a{n}" * 32, prefix=f"agent{n}", created_by=actor,
            created_at=timezone.now(),
        )  # fmt: skip
    for obj in (world.demo, cluster, world.users["viewer"]):
        LogEntry.objects.create(
            user=root, content_type=ContentType.objects.get_for_model(obj), object_id=obj.pk,
            object_repr=str(obj), action_flag=CHANGE, change_message="",
        )  # fmt: skip
    world.acted = {"root": root, "former": former, "cluster": cluster, "vms": vms}
    return world


def staff_client(world, codenames="") -> Client:
    """Project staff: ``is_staff``, the admin role in demo, the model permissions whose
    codename starts with ``codenames`` (every one by default)."""
    user = get_user_model().objects.create_user("ops", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith=codenames))
    RoleBinding.objects.create(user=user, project=world.demo, role=builtin_role("admin"))
    client = Client()
    client.force_login(user)
    return client


def viewer_is_admin_of_other(world):
    """demo's viewer also holds the admin role in ``other``: what staff must not learn."""
    RoleBinding.objects.create(
        user=world.users["viewer"], project=world.other, role=builtin_role("admin")
    )


def root_client(world) -> Client:
    client = Client()
    client.force_login(world.acted["root"])
    return client


@pytest.fixture(params=["view_", ""], ids=["view-permissions", "all-permissions"])
def staff(acted, request):
    """Staff who may only look (every page read-only) and staff who may change."""
    return staff_client(acted, request.param)


def pages_of(client):
    """Every changelist the client may open, with the change and history page of each row."""
    for model in admin.site._registry:
        listed = client.get(url(model, "changelist"))
        if listed.status_code != 200:
            continue
        yield url(model, "changelist")
        for obj in listed.context["cl"].result_list:
            yield url(model, "change", quote(obj.pk))
            yield url(model, "history", quote(obj.pk))


@pytest.mark.slow
def test_no_admin_page_names_an_outsider(staff, acted):
    pages = list(pages_of(staff))
    assert len(pages) > 90
    shown = [page for page in pages if SECRET in staff.get(page).content.decode()]
    assert shown == []


def test_an_outsider_is_named_by_role_and_a_member_by_name(staff, acted):
    """Where an outsider acted, the staff user reads their role; a superuser reads the
    username on the same pages (so the walk above looked where the names are)."""
    root = root_client(acted)
    cluster, (former_vm, member_vm) = acted.acted["cluster"], acted.acted["vms"]
    User = get_user_model()
    named = {
        url(AuditEvent, "changelist"): ("root", "former", "member"),
        url(Operation, "changelist"): ("root", "former", "member"),
        url(ApiToken, "changelist"): ("root", "former", "member"),
        url(MetricsToken, "changelist"): ("root", "former", "member"),
        url(VirtualCluster, "change", cluster.pk): ("root",),
        url(VirtualMachine, "change", former_vm.pk): ("former",),
        url(VirtualMachine, "change", member_vm.pk): ("member",),
        url(Project, "history", acted.demo.pk): ("root",),
        url(VirtualCluster, "history", cluster.pk): ("root",),
        url(User, "history", acted.users["viewer"].pk): ("root",),
    }
    for model, actor_field in (
        (AuditEvent, "actor"), (Operation, "actor"), (ApiToken, "user"),
        (MetricsToken, "created_by"),
    ):  # fmt: skip
        for obj in model.objects.all():
            actor = getattr(obj, actor_field)
            who = {acted.acted["root"]: "root", acted.acted["former"]: "former"}.get(actor)
            named[url(model, "change", obj.pk)] = (who or "member",)
    expected = {"root": PLATFORM_ADMIN, "former": OUTSIDER, "member": MEMBER}
    usernames = {"root": f"{SECRET}-root", "former": f"{SECRET}-former", "member": MEMBER}
    for page, actors in named.items():
        as_staff, as_root = staff.get(page), root.get(page)
        assert as_staff.status_code == as_root.status_code == 200, page
        for actor in actors:
            assert expected[actor] in as_staff.content.decode(), (page, actor)
            assert usernames[actor] in as_root.content.decode(), (page, actor)
    # Named once: the account's field is shown, not also kept as a form field.
    cluster_page = staff.get(url(VirtualCluster, "change", cluster.pk)).content.decode()
    assert cluster_page.count(PLATFORM_ADMIN) == 1


FORBIDDEN = {
    # model: (the path to its project, lookups through an account)
    get_user_model(): ("role_bindings__project", ("role_bindings__user__username",)),
    VirtualCluster: ("project", ("created_by__username__startswith",)),
    VirtualMachine: ("project", ("created_by__username",)),
    AuditEvent: ("project", ("actor__username__startswith", "actor__is_superuser")),
    Operation: ("project", ("actor__username",)),
    ApiToken: ("project", ("user__username__contains", "user")),
    MetricsToken: ("vm__project", ("created_by__username",)),
    RoleBinding: ("project", ("project__bindings__user__username",)),
    SimulatorAllocation: ("cluster__project", ("cluster__created_by__username",)),
    Project: ("bindings__project", ("bindings__user__username",)),
}


def answer(response):
    """All a list's answer tells: its status, its message and the rows it lists (the page
    around them carries a fresh CSRF token each time)."""
    alert = re.search(r'<div class="alert[^>]*>(.*?)</div>', response.content.decode(), re.S)
    cl = response.context.get("cl") if response.context else None
    listed = tuple(sorted(row.pk for row in cl.result_list)) if cl else None
    return response.status_code, alert and alert.group(0), listed


@pytest.mark.parametrize("model", FORBIDDEN, ids=lambda m: m._meta.label)
def test_a_lookup_the_list_does_not_offer_is_refused_alike(acted, model):
    """``other`` holds a role for demo's viewer and has its own clusters, VMs, tokens…;
    ``third`` has nothing and 999999 is no project: each lookup gets one refusal for all."""
    world, staff = acted, staff_client(acted)
    viewer_is_admin_of_other(world)
    world.cluster("theirs", project=world.other, created_by=world.users["other"])
    third = Project.objects.create(slug="third", name="third")
    path, through_accounts = FORBIDDEN[model]
    changelist = url(model, "changelist")
    for lookup in (path, f"{path}__in", f"{path}__id", f"{path}__exact"):
        projects = (world.other.pk, third.pk, 999999)
        answers = {answer(staff.get(changelist, {lookup: pk})) for pk in projects}
        assert len(answers) == 1, (lookup, answers)
        status, alert, _listed = answers.pop()
        assert status == 400 and REFUSAL in alert and 'data-code="filter_not_offered"' in alert
    for lookup in through_accounts:
        for value in (SECRET, "admin", "1", world.acted["root"].pk):
            status, alert, _listed = answer(staff.get(changelist, {lookup: value}))
            assert status == 400 and REFUSAL in alert, (lookup, value)


@pytest.mark.slow
def test_the_filters_a_list_offers_keep_working(acted):
    """Every choice of every filter of every list, its counts (facets) and the audit log's
    dates answer the staff user (who is in two projects, so project filters show)."""
    staff = staff_client(acted)
    third = Project.objects.create(slug="third", name="third")
    RoleBinding.objects.create(
        user=get_user_model().objects.get(username="ops"), project=third,
        role=builtin_role("viewer"),
    )  # fmt: skip
    acted.cluster("third-cluster", project=third)
    followed = 0
    for model in admin.site._registry:
        changelist = url(model, "changelist")
        listed = staff.get(changelist, {"_facets": "1"})
        if listed.status_code == 403:
            continue
        assert listed.status_code == 200, model
        cl = listed.context["cl"]
        for spec in cl.filter_specs:
            for choice in spec.choices(cl):
                response = staff.get(changelist + choice["query_string"])
                assert response.status_code == 200, (model, choice["query_string"])
                followed += 1
    assert followed > 80
    at = timezone.localtime(AuditEvent.objects.first().at)
    events = url(AuditEvent, "changelist")
    for dates in (
        {"at__year": at.year},
        {"at__year": at.year, "at__month": at.month},
        {"at__year": at.year, "at__month": at.month, "at__day": at.day},
    ):
        assert staff.get(events, dates).context["cl"].result_count == 3, dates


def test_no_search_finds_a_row_by_an_outsiders_username(acted):
    staff, root = staff_client(acted), root_client(acted)
    for model in (AuditEvent, ApiToken):
        changelist = url(model, "changelist")
        assert staff.get(changelist, {"q": SECRET}).context["cl"].result_count == 0, model
        assert staff.get(changelist, {"q": f"{SECRET}-root"}).context["cl"].result_count == 0
        assert staff.get(changelist, {"q": MEMBER}).context["cl"].result_count == 1, model
        assert root.get(changelist, {"q": SECRET}).context["cl"].result_count == 2, model


def test_a_role_held_in_another_project_is_not_counted(acted):
    """demo's viewer is an admin of ``other``: filtering demo's accounts by the admin role,
    or counting them by role (facets), tells the staff user nothing of it."""
    world = acted
    viewer_is_admin_of_other(world)
    staff, root = staff_client(world), root_client(world)
    users = url(get_user_model(), "changelist")
    admins = {"role_bindings__role__id__exact": builtin_role("admin").pk}
    listed = staff.get(users, admins).context["cl"].result_list
    assert {user.username for user in listed} == {"admin", "ops"}
    assert world.users["viewer"] in root.get(users, admins).context["cl"].result_list
    page = staff.get(users, {"_facets": "1"}).content.decode()
    assert "admin (2)" in page and "viewer (2)" in page  # viewer and mina-member
    assert "admin (4)" in root.get(users, {"_facets": "1"}).content.decode()
