"""``vc`` is its own distribution (``portal/vc``, package ``vc_cli``): its wheel depends on
nothing, installs into a bare virtualenv with no Django, and runs there against a live
portal; importing it loads no Django or Celery even where they are installed; the portal's
own install keeps the ``vc`` script."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from portal.iam import tokens

ROOT = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = ("django", "celery", "kombu", "click", "portal", "clusters", "vms", "metrics")
LOADED = (
    "import json, sys, vc_cli.main, vc_cli.commands;"
    f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_PACKAGES!r})))"
)


def run(*argv, **kw):
    return subprocess.run(list(map(str, argv)), capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def client_install(tmp_path_factory):
    """(the wheel, a fresh virtualenv without pip that has only that wheel installed); built
    offline from a copy of ``portal/vc`` so the checkout gets no build/ or egg-info."""
    work = tmp_path_factory.mktemp("vc-client")
    source = work / "source"
    shutil.copytree(
        ROOT / "portal" / "vc",
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    built = run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", work / "dist", source)
    assert built.returncode == 0, built.stderr
    (wheel,) = (work / "dist").glob("vc_client-*.whl")
    venv = work / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    installed = run(*pip, "--python", venv / "bin" / "python", "install", "--no-index", wheel)
    assert installed.returncode == 0, installed.stderr
    return wheel, venv


def test_the_client_wheel_depends_on_nothing(client_install):
    wheel, venv = client_install
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        assert "Requires-Dist" not in archive.read(metadata).decode()
        packages = {name.split("/")[0] for name in archive.namelist()}
    assert packages == {"vc_cli", wheel.name.split("-py3")[0] + ".dist-info"}
    (site,) = venv.glob("lib/python*/site-packages")
    assert not any(site.glob("django*")) and not any(site.glob("celery*"))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_installed_client_runs_against_the_portal(client_install, live_server, world):
    _wheel, venv = client_install
    world.cluster("from-the-wheel")
    _token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="cli")
    env = {"VC_URL": live_server.url, "VC_TOKEN": secret, "VC_CONFIG": "/nonexistent"}
    vc = venv / "bin" / "vc"

    helped = run(vc, "--help", env=env)
    assert helped.returncode == 0 and "Exit codes" in helped.stdout
    listed = run(vc, "cluster", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "from-the-wheel" in listed.stdout.splitlines()[1]
    as_json = run(vc, "cluster", "list", "-o", "json", env=env)  # the option after the command
    assert [c["name"] for c in json.loads(as_json.stdout)] == ["from-the-wheel"]
    loaded = run(venv / "bin" / "python", "-c", LOADED, env=env)
    assert json.loads(loaded.stdout) == [], loaded.stderr


def test_importing_the_client_loads_no_server_package():
    """Where Django and Celery are installed (the portal's own virtualenv) too."""
    loaded = run(sys.executable, "-c", LOADED, cwd=ROOT)
    assert json.loads(loaded.stdout) == [], loaded.stderr


def test_the_portal_install_keeps_the_vc_script():
    script = Path(sys.executable).parent / "vc"
    helped = run(script, "--help")
    assert helped.returncode == 0 and "cluster" in helped.stdout
