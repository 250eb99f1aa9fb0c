"""The gates only tighten: the modules under strict mypy (``pyproject.toml``) never leave the
list, each keeps every strict flag and names a module that exists, and mypy and ruff keep the
checks they run today. Add a module to ``STRICT_AT_LEAST`` when it joins the strict list."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What `strict = true` turns on, per module (it is a global-only flag).
STRICT_FLAGS = {
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
}
STRICT_AT_LEAST = {
    "portal.foundation.kernel",
    "portal.foundation.errors.*",
    "portal.iam.permissions",
    "portal.foundation.event_text",
    "portal.web.particles",
    "portal.processes.heartbeat",
    "clusters.locking",
    "clusters.holds",
    "vms.services",
    "clusters.operations.*",
    "clusters.services",
    "portal.compute.hosts",
    "clusters.validation.rules",
    "clusters.validation.errors",
    "metrics.errors",
}
RUFF_AT_LEAST = {"E", "F", "W", "I", "B", "UP", "DJ", "C90", "PLR0915", "S", "INT", "G", "LOG"}
RUFF_AT_LEAST |= {"PT", "RUF100"}
MAX_COMPLEXITY = 15


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def strict_overrides() -> list[dict]:
    overrides = pyproject()["tool"]["mypy"].get("overrides", [])
    return [o for o in overrides if o.get("disallow_untyped_defs")]


def strict_modules() -> set[str]:
    found = set()
    for override in strict_overrides():
        module = override["module"]
        found |= {module} if isinstance(module, str) else set(module)
    return found


def test_no_module_leaves_the_strict_list():
    assert sorted(STRICT_AT_LEAST - strict_modules()) == []


def test_each_strict_module_keeps_every_strict_flag():
    for override in strict_overrides():
        off = sorted(flag for flag in STRICT_FLAGS if override.get(flag) is not True)
        assert off == [], f"{override['module']}: {off}"


def test_each_strict_module_names_a_module_that_exists():
    """A module renamed or moved would leave the list without a word from mypy."""
    missing = []
    for module in sorted(strict_modules()):
        path = ROOT / module.removesuffix(".*").replace(".", "/")
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            missing.append(module)
    assert missing == []


def test_mypy_checks_the_bodies_of_functions_without_hints():
    assert pyproject()["tool"]["mypy"].get("check_untyped_defs") is True


def test_ruff_keeps_its_rule_families_and_the_complexity_cap():
    lint = pyproject()["tool"]["ruff"]["lint"]
    assert sorted(RUFF_AT_LEAST - set(lint["select"])) == []
    assert lint["mccabe"]["max-complexity"] <= MAX_COMPLEXITY
