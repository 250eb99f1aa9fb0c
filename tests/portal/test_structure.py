"""The shape of the code, checked: modules stay under a size budget, no module imports
another app's private names, module imports never form a cycle (so nothing needs an import
inside a function to dodge one) and go only down the layers (``LAYERS``), tasks live in tasks
modules, and each rule's message text lives only in its error class."""

import ast
import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.utils import translation

import metrics.errors  # noqa: F401 - its error classes join the registry
from portal.foundation.errors import RuleViolation

ROOT = Path(__file__).resolve().parents[2]
APPS = ("portal", "clusters", "vms", "metrics")
# A module past BUDGET_LINES is worth a look (a warning names it); past MAX_LINES it fails.
# What hurts a reader is a function's complexity, which ruff caps (C901, PLR0915).
BUDGET_LINES, MAX_LINES = 400, 700


def app_modules():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path):
    """(module imported, names imported, inside a function?) for every import statement."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(fn)
    }
    for node in ast.walk(tree):
        nested = id(node) in functions
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names], nested
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], nested


def test_no_module_of_app_code_is_over_700_lines():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in app_modules()
    }
    over_budget = {name: n for name, n in sizes.items() if n > BUDGET_LINES}
    if over_budget:
        warnings.warn(f"modules over {BUDGET_LINES} lines: {over_budget}", stacklevel=1)
    assert {name: n for name, n in over_budget.items() if n > MAX_LINES} == {}


def test_no_module_imports_another_modules_private_names():
    """What modules of a package share is public in a module that says it is internal (for
    example ``clusters.operations.internal``), never a ``_name`` reached into."""
    offenders = []
    for path in app_modules():
        for module, names, _nested in imports_of(path):
            if module.split(".")[0] in APPS:
                private = [n for n in names if n.startswith("_")]
                private += [p for p in module.split(".") if p.startswith("_")]
                if private:
                    offenders.append(f"{module_name(path)} imports {module}.{private}")
    assert offenders == []


def _graph():
    known = {module_name(path): path for path in app_modules()}
    graph = {name: set() for name in known}
    nested_imports = []
    for name, path in known.items():
        for module, names, nested in imports_of(path):
            # ``from pkg import mod`` imports the module mod; ``from pkg import name``, pkg.
            submodules = {f"{module}.{n}" for n in names} & known.keys()
            targets = submodules if submodules and len(submodules) == len(names) else {module}
            for target in (targets | submodules) & known.keys():
                if target != name:
                    graph[name].add(target)
                    if nested:
                        nested_imports.append(f"{name} -> {target}")
    return graph, nested_imports


def test_module_imports_form_no_cycle():
    graph, _nested = _graph()
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_no_app_module_imports_another_app_inside_a_function():
    """An import inside a function is how a cycle gets dodged instead of fixed. Across apps
    one may only reach down a layer, for a dependency loaded late (libvirt's bindings)."""
    _graph_, nested = _graph()
    across = []
    for edge in nested:
        source, target = edge.split(" -> ")
        if source.split(".")[0] != target.split(".")[0] or unit(source) != unit(target):
            if layer_of(target)[0] >= layer_of(source)[0]:
                across.append(edge)
    assert across == []


# ---------------------------------------------------------------------------------------------
# The layers, lowest first: a module may import its own layer and the layers below, never one
# above. A module is in the layer of the most specific pattern that names it (``*`` is any
# one name, so ``*.views`` is every app's views). CONTRIBUTING.md ("Where things go") tells
# what each holds.
LAYERS = (
    # Shipped on their own (a laptop's `vc`, a guest's agent): the standard library only.
    ("distributions", ("portal.vc", "metrics.vm_agent")),
    # What every app stands on: the kernel, errors and audit (``portal.foundation``), who may
    # do what (``portal.iam``), the worker's heartbeat and supervisor (``portal.processes``),
    # the IAM and audit models, the speed-ups every layer may use.
    ("foundation", ("portal.foundation", "portal.iam", "portal.processes", "portal.models",
                    "portal.speed",
                    "portal.tasks", "=portal.apps")),
    # The apps' models (Django loads them together: they may name each other).
    ("models", ("*.models", "portal.*.models")),
    # Below clusters and vms: the catalog's rules and version, the infrastructure (backends,
    # hosts) that runs VMs.
    ("compute", ("portal.catalog", "portal.compute")),
    # A project's webhooks: what the apps' changes are sent through (``events.emit``).
    ("webhooks", ("portal.webhooks",)),
    # The apps' services, operations, progress and tasks.
    ("apps", ("clusters", "vms", "metrics")),
    # The web layer the apps' pages share: middleware, lists, rendering, the shell's pages.
    ("web", ("portal.web",)),
    # What a person uses: pages, forms, the admin, template tags, management commands.
    ("surfaces", ("*.views", "*.forms", "*.admin", "*.urls", "*.templatetags", "*.management",
                  "portal.*.admin", "*.*.views", "*.*.management")),
    # The HTTP API, a router per resource over the apps (portal/api/main.py mounts them).
    ("api", ("portal.api",)),
    # The project's wiring: settings, the URL root, the Celery app, WSGI.
    ("project", ("=portal", "portal.settings", "portal.urls", "portal.celery", "portal.wsgi")),
)  # fmt: skip


def layer_of(module: str) -> tuple[int, str]:
    """(rank, name) of the layer ``module`` belongs to."""
    parts = module.split(".")
    best = None
    for rank, (name, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            exact = pattern.startswith("=")
            words = pattern.lstrip("=").split(".")
            if exact and words != parts or len(words) > len(parts):
                continue
            if all(w in ("*", p) for w, p in zip(words, parts, strict=False)):
                key = (exact, len(words), sum(w != "*" for w in words))
                if best is None or key > best[0]:
                    best = (key, rank, name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[1], best[2]


def unit(module: str) -> str:
    """The app a module belongs to, the apps inside portal (catalog, compute) counted apart."""
    parts = module.split(".")
    return (
        ".".join(parts[:2])
        if parts[:2] in (["portal", "catalog"], ["portal", "compute"], ["portal", "webhooks"])
        else parts[0]
    )


def test_each_layer_imports_only_downward():
    graph, _nested = _graph()
    upward = [
        f"{name} ({layer_of(name)[1]}) imports {target} ({layer_of(target)[1]})"
        for name, targets in sorted(graph.items())
        for target in sorted(targets)
        if layer_of(target)[0] > layer_of(name)[0]
    ]
    assert upward == []


def test_the_layers_name_every_module():
    assert {layer_of(module_name(path))[1] for path in app_modules()} == {
        name for name, _patterns in LAYERS
    }


def _task_decorated(fn) -> bool:
    for decorator in fn.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
        if name in {"shared_task", "task"}:
            return True
    return False


def test_every_task_is_in_a_tasks_module():
    """A Celery task is found where Django and Celery look (``app.autodiscover_tasks``): the
    app's ``tasks.py``, never a module registered only through ``CELERY_IMPORTS``."""
    offenders = [
        f"{module_name(path)}.{fn.name}"
        for path in app_modules()
        if path.stem != "tasks"
        for fn in ast.walk(ast.parse(path.read_text()))
        if isinstance(fn, ast.FunctionDef) and _task_decorated(fn)
    ]
    assert offenders == []
    assert not getattr(settings, "CELERY_IMPORTS", ())


TASK_NAME = re.compile(r"^(?:portal|clusters|vms|metrics)(?:\.\w+)*\.tasks\.\w+$")


def test_every_task_named_in_the_code_is_a_task():
    """Modules that a tasks.py wraps queue its tasks by name
    (``portal.foundation.broker.publish``), and the beat schedule names them too: each name is
    a task a worker knows."""
    from portal.celery import app

    app.loader.import_default_modules()
    named = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    for path in app_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if TASK_NAME.match(node.value):
                    named.add(node.value)
    assert named and sorted(named - set(app.tasks)) == []


def rule_messages():
    """(code, the words of its message, the file that writes them), once per message."""
    seen = set()
    with translation.override("ko"):
        for code, cls in RuleViolation.registry.items():
            owner = next(c for c in cls.__mro__ if "default_message" in vars(c))
            text = str(owner.default_message)
            # The words of the message, without its %(placeholders)s.
            fixed = max(re.split(r"%\(\w+\)[sd]", text), key=len).strip()
            home = Path(inspect.getsourcefile(owner)).relative_to(ROOT).as_posix()
            if len(fixed) >= 8 and (fixed, home) not in seen:
                seen.add((fixed, home))
                yield code, fixed, home


@pytest.mark.parametrize(("code", "text", "home"), list(rule_messages()))
def test_a_rules_message_lives_only_in_its_error_class(code, text, home):
    sources = [p for p in app_modules() if p.relative_to(ROOT).as_posix() != home]
    sources += sorted((ROOT / "templates").rglob("*.html"))
    found = [str(p.relative_to(ROOT)) for p in sources if text in p.read_text()]
    assert found == [], f"{code}: {text!r} is written again in {found}"


def test_the_vc_client_imports_only_the_standard_library_and_itself():
    """``vc`` is a distribution of its own (portal/vc): no Django, no portal module."""
    client = sorted((ROOT / "portal" / "vc" / "vc_cli").glob("*.py"))
    assert client, "the vc client package is missing"
    offenders = [
        f"{path.name} imports {module}"
        for path in client
        for module, _names, _nested in imports_of(path)
        if module.split(".")[0] not in {*sys.stdlib_module_names, "vc_cli"}
    ]
    assert offenders == []


# ---------------------------------------------------------------------------------------------
# One door per change: the surfaces (pages, API, admin) change state only through
# ``clusters.operations``, and "readable or not found" is written once (``portal.models``).

SERVICE_MODULES = ("clusters.services", "vms.services")


def surface_modules():
    """The modules a person or a program changes things through: pages, API, admin."""
    for path in app_modules():
        name = module_name(path)
        leaf = name.split(".")[-1]
        if leaf.startswith("views") or leaf == "admin" or name.startswith("portal.api."):
            yield path


def transitions():
    """{(service module, function)} of every audited change: a service function that opens
    an ``attempt``."""
    found = set()
    for module in SERVICE_MODULES:
        tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and any(
                isinstance(node, ast.Call) and getattr(node.func, "id", "") == "attempt"
                for node in ast.walk(fn)
            ):
                found.add((module, fn.name))
    return found


def direct_service_calls(path, changes):
    """``service.change`` uses and ``from service import change`` imports in ``path``."""
    tree = ast.parse(path.read_text())
    aliases = {}  # local name -> service module
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in SERVICE_MODULES:
                    aliases[alias.asname or alias.name] = full
                elif (node.module, alias.name) in changes:
                    offenders.append(f"imports {full}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module is not None and (module, node.attr) in changes:
                offenders.append(f"{module}.{node.attr} (line {node.lineno})")
    return offenders


def test_the_services_transitions_are_found():
    names = {name for _module, name in transitions()}
    assert {"start_cluster", "create_cluster", "rename_cluster", "start_vm", "attach_vm"} <= names


def test_no_page_api_or_admin_module_calls_a_transition_service_directly():
    """Every change goes through ``clusters.operations``, which leaves the Operation the
    활동 tab and ``GET /api/v1/operations`` show, whichever surface it came from."""
    changes = transitions()
    offenders = {
        module_name(path): calls
        for path in surface_modules()
        if (calls := direct_service_calls(path, changes))
    }
    assert offenders == {}


def is_view_module(module: str) -> bool:
    """Pages and endpoints: a ``views`` module or package of an app, or the HTTP API."""
    parts = module.split(".")
    return any(p.startswith("views") for p in parts[1:]) or module.startswith("portal.api")


def test_no_app_imports_another_apps_view_module():
    """Views and the API are the top of their app: another app's code never reaches into
    them, and of the API only the URL root (``portal.urls``) imports anything."""
    known = {module_name(path) for path in app_modules()}
    offenders = []
    for path in app_modules():
        name = module_name(path)
        for module, names, _nested in imports_of(path):
            targets = {module, *(f"{module}.{n}" for n in names)} & known
            for target in sorted(targets):
                if not is_view_module(target) or name.startswith("portal.api"):
                    continue
                other_app = target.split(".")[0] != name.split(".")[0]
                into_api = target.startswith("portal.api") and name != "portal.urls"
                if other_app or into_api:
                    offenders.append(f"{name} imports {target}")
    assert offenders == []


READ_PERMS = ("CLUSTER_READ", "VM_READ")
TYPED_NOT_FOUND = ("ClusterNotFound", "VmNotFound")


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _refuses_not_found(statements) -> bool:
    """The statements raise or return one of the typed not-found errors."""
    for statement in statements:
        for node in ast.walk(statement):
            value = node.exc if isinstance(node, ast.Raise) else None
            value = node.value if isinstance(node, ast.Return) else value
            if value is not None and _names(value) & set(TYPED_NOT_FOUND):
                return True
    return False


def hand_written_lookups(path):
    """Where ``path`` decides "readable or not found" itself: a test of a read permission
    or of a row fetched with ``.first()`` that refuses with a typed not-found error, or
    ``get_object_or_404`` over a ``restrict()`` of its own."""
    tree = ast.parse(path.read_text())
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        fetched = {
            target.id
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "attr", "") == "first"
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(fn):
            if isinstance(node, ast.If):
                asks = _names(node.test)
                reads = bool(asks & set(READ_PERMS)) and "has_perm" in asks
                if (reads or asks & fetched) and _refuses_not_found(node.body):
                    found.append(f"{fn.name} (line {node.lineno})")
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "get_object_or_404"
                and node.args
                and "restrict" in _names(node.args[0])
            ):
                found.append(f"{fn.name} (line {node.lineno}): get_object_or_404(restrict())")
    return found


def test_readable_or_not_found_is_written_once():
    """``readable(user, perm, Model).get_or_404(pk)`` (``portal.models``) is the one
    lookup: pages, API, operations and locks never decide it again by hand."""
    home = ROOT / "portal" / "models.py"
    offenders = {
        module_name(path): found
        for path in app_modules()
        if path != home and (found := hand_written_lookups(path))
    }
    assert offenders == {}


def hand_built_bodies(source: str) -> list[str]:
    """Where the functions of an API route module build an answer by hand: a dict written
    with string keys (a resource's fields again, beside its schema) or a JSON response made
    without the route's schema. Decorators (``openapi_extra``) are not the answer."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in (n for statement in fn.body for n in ast.walk(statement)):
            keys = getattr(node, "keys", None)
            if (
                isinstance(node, ast.Dict)
                and keys
                and all(
                    isinstance(key, ast.Constant) and isinstance(key.value, str) for key in keys
                )
            ):
                found.append(f"{fn.name} (line {node.lineno}): a dict of fields")
            elif isinstance(node, ast.Call) and "json_response" in _names(node.func):
                found.append(f"{fn.name} (line {node.lineno}): json_response")
    return sorted(set(found))


def test_api_answers_are_serialized_by_their_route_schemas():
    """Every API resource has one shape, its ``response=`` schema (``portal.api.schemas``),
    which reads the rows a handler found: no route module builds the answer by hand."""
    routes = [
        path
        for path in sorted((ROOT / "portal" / "api").glob("*.py"))
        if "Router(" in path.read_text()
    ]
    assert {path.stem for path in routes} >= {
        "catalog",
        "clusters",
        "operations",
        "validation",
        "vms",
    }
    offenders = {
        path.stem: found for path in routes if (found := hand_built_bodies(path.read_text()))
    }
    assert offenders == {}
    caught = hand_built_bodies("def get(request):\n    row = find()\n    return {'id': row.pk}\n")
    assert caught == ["get (line 3): a dict of fields"]


def test_every_model_is_found_where_its_module_says():
    """A model built by a factory (the metrics series) names the module that binds it: the
    shell, pickling and the admin look it up there."""
    for model in apps.get_models():
        module = importlib.import_module(model.__module__)
        assert getattr(module, model.__name__, None) is model, model


GETTEXT_CALLS = {"gettext", "_", "pgettext", "ngettext", "gettext_lazy", "pgettext_lazy"}


def test_no_translated_string_is_written_inside_an_f_string():
    """makemessages (xgettext) does not look inside f-strings: a ``gettext("…")`` there is
    never extracted, so its English entry is taken for obsolete and the page stays Korean."""
    found = []
    for path in app_modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.JoinedStr):
                continue
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Name)
                    and inner.func.id in GETTEXT_CALLS
                    and inner.args
                    and isinstance(inner.args[0], ast.Constant)
                ):
                    found.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert found == []
