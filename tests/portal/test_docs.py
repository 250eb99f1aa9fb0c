"""The docs match the repository: every path README.md, CONTRIBUTING.md and docs/*.md name
exists, every link to a section finds it, the error catalogue of docs/rules.md is the error
classes of the code (code, class, HTTP status, Korean message), no file points at a
document outside the repository, and no comment of the apps carries a measured time.

What counts as a path (``named_paths``): outside fenced code blocks, an inline code span of
one word that contains a ``/`` or ends in one of ``EXTENSIONS``, and every link's target.
Then, in this order:

- a URL or URI (``scheme://…``) and a media type (``application/json``) are not paths;
- an absolute path (``/…``, ``~/…``) names something outside the repository — a URL path of
  the portal, a file on a guest or a host — and must be one of ``OUTSIDE``;
- a path under ``RUNTIME`` (``var/``, ``.venv/``) is made at run time, never kept in git;
- ``#section`` is cut off (``test_every_section_link_finds_its_section`` checks sections);
- ``<name>``, ``{name}``, ``*`` and ``…`` stand for any part: the pattern must match a file
  or folder;
- anything else is a path from the repository's root and must exist, but for a name of one
  part that ``GENERIC`` lists: what every app may have (``tasks.py``, ``views/``). Any other
  module is named by its whole path, so a module that moves is a path that no longer exists.
"""

import ast
import importlib
import io
import os
import re
import tokenize
from pathlib import Path

import pytest
from django.utils import translation

from portal.foundation.errors import RuleViolation

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
RULES = ROOT / "docs" / "rules.md"
ERROR_MODULES = (
    "portal.foundation.errors",
    "portal.foundation.errors.api",
    "portal.foundation.errors.hosts",
    "portal.foundation.errors.ssh_keys",
    "portal.foundation.errors.webhooks",
    "metrics.errors",
    "clusters.validation.errors",
)
EXTENSIONS = (".py", ".md", ".html", ".toml", ".txt", ".json", ".po", ".yaml", ".js", ".css")
# What the docs name outside the repository: a name, or a prefix when it ends with "/".
OUTSIDE = (
    "/api/",  # the portal's URL paths: the API, the agents' endpoints
    "/admin/",
    "/healthz",
    "/metrics/",
    "/system",  # a libvirt URI's path
    "/session",
    "/etc/vc-metrics.env",  # on a guest
    "/etc/hosts",
    "/etc/vc/",
    "/etc/ssh/",
    "~/.ssh/",
    "/opt/vc-metrics/",
    "/dev/kvm",  # on a host
    "/root",
    "/sys/",
    "/var/lib/libvirt/",
    "~/.config/vc/",  # the vc client's configuration
)
RUNTIME = ("var/", ".venv/")
# The names of one part a doc may use alone: a kind of module every app may have.
GENERIC = {
    "tasks.py",
    "views.py",
    "views/",
    "forms.py",
    "admin.py",
    "admin/",
    "urls.py",
    "models.py",
    "templatetags/",
    "management/",
}
NOT_PATHS = ("application/", "Asia/")  # media types, time zone names
# Folders that are tools' output or someone's environment, not the repository's files.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "var",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "node_modules",
    "build",
    "staticfiles",
    "test-results",
}
# Built so that this file does not contain them.
FORBIDDEN = ("SPEC " + "\u00a7", "FIELD" + "-NOTES")


def repository_paths() -> list[Path]:
    """Every file and folder of the checkout, less ``SKIPPED_DIRS`` and egg-info."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        base = Path(folder)
        found += [base / d for d in dirs] + [base / f for f in files]
    return found


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside its fenced code blocks."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return kept


def named_paths(text: str) -> list[tuple[str, bool]]:
    """(token, is it a link's target) for the code spans that look like paths and the link
    targets of a Markdown text. Its prose is read as one line: a code span may wrap."""
    body = " ".join(prose_lines(text))
    spans = [
        (span.strip(), False)
        for span in re.findall(r"`([^`]+)`", body)
        if " " not in span.strip() and ("/" in span or span.strip().endswith(EXTENSIONS))
    ]
    return spans + [(link, True) for link in re.findall(r"\]\(([^)\s]+)\)", body)]


def path_problem(token: str, base: Path) -> str | None:
    """Why ``token`` is not a path that exists from ``base`` (the module's rules), or None."""
    if "://" in token or token.startswith(NOT_PATHS):
        return None
    if token.startswith(("/", "~")):
        allowed = any(
            token == name or token.startswith(name if name.endswith("/") else name + "/")
            for name in OUTSIDE
        )
        return None if allowed else "outside the repository and not in OUTSIDE"
    if token.startswith(RUNTIME):
        return None
    token = token.split("#", 1)[0]
    if not token:
        return None  # a section of the same page
    if token in GENERIC:
        return None
    pattern = re.sub(r"<[^>]*>|\{[^}]*\}|…", "*", token).rstrip("/")
    if "*" in pattern:
        return None if any(base.glob(pattern)) else "matches nothing"
    return None if (base / pattern).exists() else "does not exist"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_a_doc_names_exists(doc):
    problems = [
        f"{token}: {problem}"
        for token, link in named_paths(doc.read_text())
        # A link is relative to its page; a code span names a path from the root.
        if (problem := path_problem(token, doc.parent if link else ROOT))
    ]
    assert problems == []


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(doc: Path) -> set[str]:
    """The anchors of ``doc``'s headings."""
    lines = prose_lines(doc.read_text())
    return {slug(line.lstrip("#")) for line in lines if re.match(r"#{1,6} ", line)}


def test_every_section_link_finds_its_section():
    """A doc's ``(#section)`` and ``(other.md#section)`` links, and ``docs/<name>.md#section``
    written anywhere in the repository (a comment pointing at a rule), name a heading."""
    missing = []
    for doc in DOCS:
        body = " ".join(prose_lines(doc.read_text()))
        for target in re.findall(r"\]\(([^)\s]*#[^)\s]+)\)", body):
            page, _sep, anchor = target.partition("#")
            linked = (doc.parent / page) if page else doc
            if not linked.is_file() or anchor not in sections(linked):
                missing.append(f"{doc.name}: {target}")
    reference = re.compile(rb"docs/([\w-]+\.md)#([\w-]+)")
    for path in repository_paths():
        if path.is_file() and path.suffix in {".py", ".html", ".md", ".txt"}:
            for page, anchor in reference.findall(path.read_bytes()):
                linked = ROOT / "docs" / page.decode()
                if not linked.is_file() or anchor.decode() not in sections(linked):
                    where = path.relative_to(ROOT)
                    missing.append(f"{where}: docs/{page.decode()}#{anchor.decode()}")
    assert missing == []


def test_no_file_points_at_a_document_outside_the_repository():
    """The rules are in docs/rules.md and the figures in docs/performance.md: a comment or a
    doc points there, or names the error class."""
    offenders = [
        f"{path.relative_to(ROOT)}: {word}"
        for path in repository_paths()
        if path.is_file()
        for word in FORBIDDEN
        if word.encode() in path.read_bytes()
    ]
    assert offenders == []


# ---------------------------------------------------------------------------------------------
# The error catalogue


def error_classes() -> list[type[RuleViolation]]:
    """Every error class of the portal's code (a test's own subclass is not one)."""
    for module in ERROR_MODULES:
        importlib.import_module(module)
    found, todo = [], [RuleViolation]
    while todo:
        cls = todo.pop()
        if cls.__module__.split(".")[0] in {"portal", "clusters", "vms", "metrics"}:
            found.append(cls)
        todo += cls.__subclasses__()
    return found


def catalogue() -> dict[tuple[str, str], tuple[str, str]]:
    """(code, class path) -> (HTTP cell, message cell) of each row of the error catalogue."""
    text = RULES.read_text().split("\n## Error catalogue", 1)[1]
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`") and cells[1].startswith("`"):
            key = (cells[0].strip("`"), cells[1].strip("`"))
            assert key not in rows, f"{key} is listed twice"
            rows[key] = (cells[2], cells[3])
    return rows


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def own_message(cls: type[RuleViolation]) -> str:
    """The Korean message a class has of its own or from a parent below ``RuleViolation``,
    else "—" (its words are given where it is raised)."""
    owners = [c for c in cls.__mro__ if "default_message" in vars(c)]
    owner = owners[0] if owners else RuleViolation
    if owner is RuleViolation and cls is not RuleViolation:
        return "—"
    with translation.override("ko"):
        return str(owner.default_message)


def test_the_error_catalogue_lists_every_error_class_and_nothing_else():
    listed = set(catalogue())
    classes = {(cls.code, class_path(cls)) for cls in error_classes()}
    assert sorted(classes - listed) == [], "add these to docs/rules.md's error catalogue"
    assert sorted(listed - classes) == [], "docs/rules.md lists these, the code has no such class"


def test_every_registered_code_is_in_the_error_catalogue():
    error_classes()
    codes = {code for code, _path in catalogue()}
    registered = {
        code
        for code, cls in RuleViolation.registry.items()
        if cls.__module__.split(".")[0] in {"portal", "clusters", "vms", "metrics"}
    }
    assert sorted(registered - codes) == []


def test_the_error_catalogue_gives_each_class_its_status_and_message():
    rows = catalogue()
    wrong = []
    for cls in error_classes():
        status, message = rows.get((cls.code, class_path(cls)), ("", ""))
        if str(cls.status) not in status.split():
            wrong.append(f"{class_path(cls)}: HTTP {status!r}, the class says {cls.status}")
        if message != own_message(cls):
            wrong.append(f"{class_path(cls)}: {message!r}, the class says {own_message(cls)!r}")
    assert wrong == []


# ---------------------------------------------------------------------------------------------
# Figures


TIMING = re.compile(r"\d\s?(µs|us|ms)\b")


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python module."""
    source = path.read_text()
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                found.append((getattr(node, "lineno", 1), docstring))
    return found


def test_no_comment_of_the_apps_carries_a_timing():
    """A measured time is dated in docs/performance.md; a comment says what the code does."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {TIMING.search(text).group(0)}"
        for app in ("portal", "clusters", "vms", "metrics")
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for line, text in comments_and_docstrings(path)
        if TIMING.search(text)
    ]
    assert offenders == []
