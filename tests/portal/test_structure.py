"""The shape of the code, checked (issue 10): modules stay small, no module imports another
app's private names, module imports never form a cycle (so nothing needs an import inside a
function to dodge one), and each rule's message text lives only in its error class."""

import ast
import inspect
import re
import sys
from pathlib import Path

import pytest
from django.utils import translation

import metrics.errors  # noqa: F401 - its error classes join the registry
from portal.errors import RuleViolation

ROOT = Path(__file__).resolve().parents[2]
APPS = ("portal", "clusters", "vms", "metrics")
MAX_LINES = 400


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


def test_no_module_of_app_code_is_over_400_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in app_modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_module_imports_another_apps_private_names():
    offenders = []
    for path in app_modules():
        own_app = module_name(path).split(".")[0]
        for module, names, _nested in imports_of(path):
            app = module.split(".")[0]
            if app in APPS and app != own_app:
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
    """An import inside a function is how a cycle gets dodged instead of fixed."""
    _graph_, nested = _graph()
    across = [edge for edge in nested if edge.split(".")[0] != edge.split(" -> ")[1].split(".")[0]]
    assert across == []


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
