"""The small image's ``vc-nocloud`` writes the seed's files with their mode from the start:
``/etc/vc-metrics.env`` (the agent's token) is never readable by others, not for a moment,
whatever the umask and whatever file an earlier boot left there."""

import importlib.machinery
import importlib.util
import os
import pwd
import stat
from pathlib import Path

import pytest

from portal.compute.backends.libvirt.guest import boot as guest

SCRIPT = Path(guest.__file__).with_name("files") / "vc-nocloud"
ENV = "METRICS_AGENT_TOKEN=vcm_secret\n"


@pytest.fixture(scope="module")
def nocloud():
    loader = importlib.machinery.SourceFileLoader("vc_nocloud", str(SCRIPT))
    spec = importlib.util.spec_from_loader("vc_nocloud", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture
def open_umask():
    """The widest umask: a file made without an explicit mode would be 0666."""
    old = os.umask(0)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_env_file_is_made_0600_and_never_wider(nocloud, open_umask, tmp_path, monkeypatch):
    target = tmp_path / "etc" / "vc-metrics.env"
    made, seen_at_rename = [], []
    real_open, real_replace = os.open, os.replace

    def spy_open(path, flags, mode=0o777, *args, **kwargs):
        if flags & os.O_CREAT:
            made.append((Path(path), flags, mode))
        return real_open(path, flags, mode, *args, **kwargs)

    def spy_replace(src, dst, *args, **kwargs):
        seen_at_rename.append(
            (Path(dst), stat.S_IMODE(os.stat(src).st_mode), Path(src).read_text())
        )
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "replace", spy_replace)
    nocloud.write_files([{"path": str(target), "permissions": "0600", "content": ENV}])
    monkeypatch.undo()
    # Made new (never an existing file reused), with no bit beyond 0600 even under umask 0 …
    ((partial, flags, created_mode),) = made
    assert partial.parent == target.parent and partial != target
    assert flags & os.O_EXCL and flags & os.O_NOFOLLOW
    assert created_mode & ~0o600 == 0
    # … holding the token only once it is 0600, then given its name.
    assert seen_at_rename == [(target, 0o600, ENV)]
    assert mode(target) == 0o600 and target.read_text() == ENV
    assert sorted(p.name for p in target.parent.iterdir()) == ["vc-metrics.env"]


def test_a_file_an_older_image_left_at_0644_never_gets_the_token(nocloud, open_umask, tmp_path):
    target = tmp_path / "vc-metrics.env"
    target.write_text("METRICS_AGENT_TOKEN=vcm_old\n")
    target.chmod(0o644)
    with open(target) as old:  # what a reader who opened the 0644 file sees
        nocloud.write_files([{"path": str(target), "permissions": "0600", "content": ENV}])
        assert old.read() == "METRICS_AGENT_TOKEN=vcm_old\n"
    assert mode(target) == 0o600 and target.read_text() == ENV


def test_other_files_get_their_mode_and_base64_content(nocloud, open_umask, tmp_path):
    unit = tmp_path / "systemd" / "vc-metrics-agent.service"
    blob = tmp_path / "blob"
    (tmp_path / ".blob.vc-nocloud").write_text("left by a boot that stopped halfway")
    nocloud.write_files(
        [
            {"path": str(unit), "permissions": "0644", "content": "[Unit]\n"},
            {"path": str(blob), "permissions": "0640", "encoding": "b64", "content": "aGk="},
            {"path": str(tmp_path / "default"), "content": "x"},
        ]
    )
    assert mode(unit) == 0o644 and unit.read_text() == "[Unit]\n"
    assert mode(blob) == 0o640 and blob.read_bytes() == b"hi"
    assert mode(tmp_path / "default") == 0o644
    assert not (tmp_path / ".blob.vc-nocloud").exists()


# ---------------------------------------------------------------------------------------------
# SSH keys: meta-data's public-keys for the login user vc


@pytest.fixture
def login_home(nocloud, tmp_path, monkeypatch):
    """The login user as ``pwd`` would give it: a home under ``tmp_path``, this process's
    uid and gid (the chown is real, to the user running the test)."""
    home = tmp_path / "home" / "vc"
    home.mkdir(parents=True)
    user = pwd.struct_passwd(("vc", "x", os.getuid(), os.getgid(), "", str(home), "/bin/sh"))
    monkeypatch.setattr(nocloud, "login_user", lambda: user)
    return home


def test_the_seeds_keys_go_to_the_login_users_authorized_keys(nocloud, open_umask, login_home):
    keys = ["ssh-ed25519 AAAAone me@laptop", "ssh-rsa AAAAtwo"]
    nocloud.install_ssh_keys(keys)
    ssh = login_home / ".ssh"
    authorized = ssh / "authorized_keys"
    assert mode(ssh) == 0o700 and mode(authorized) == 0o600
    assert os.stat(authorized).st_uid == os.getuid()
    lines = authorized.read_text().splitlines()
    assert lines == [nocloud.KEYS_BEGIN, *keys, nocloud.KEYS_END]


def test_each_boot_rewrites_only_the_seeds_lines(nocloud, open_umask, login_home):
    ssh = login_home / ".ssh"
    ssh.mkdir(mode=0o755)
    authorized = ssh / "authorized_keys"
    authorized.write_text("ssh-ed25519 AAAAmine added-by-hand\n")
    authorized.chmod(0o644)
    nocloud.install_ssh_keys(["ssh-ed25519 AAAAold"])
    # The next start: the key was deleted in the portal, another chosen; one a hand-made
    # seed split over two lines is skipped.
    nocloud.install_ssh_keys(["ssh-ed25519 AAAAnew", "ssh-ed25519 AAAAx\ncommand=sh"])
    assert authorized.read_text().splitlines() == [
        "ssh-ed25519 AAAAmine added-by-hand",
        nocloud.KEYS_BEGIN,
        "ssh-ed25519 AAAAnew",
        nocloud.KEYS_END,
    ]
    assert mode(ssh) == 0o700 and mode(authorized) == 0o600
    nocloud.install_ssh_keys(None)  # no keys any more: the block goes, the user's line stays
    assert authorized.read_text() == "ssh-ed25519 AAAAmine added-by-hand\n"
