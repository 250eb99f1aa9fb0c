"""The guest image is cached by its inputs: asked again it is not rebuilt; a change to the
agent's sources (or the guest's files) makes a new key, so the next build makes a new image."""

import shutil

from portal.compute.backends.libvirt.guest import image as guest_image


def test_the_image_is_built_once_and_keyed_by_its_inputs(built_image, tmp_path, monkeypatch):
    image, built = guest_image.build(out=None)
    assert not built and image.directory == built_image.directory
    assert guest_image.current().directory == built_image.directory
    key = guest_image.input_key()
    assert built_image.directory.name == f"image-{key}"
    agent = tmp_path / "vm_agent"
    shutil.copytree(guest_image.AGENT_SOURCE, agent, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(guest_image, "AGENT_SOURCE", agent)
    assert guest_image.input_key() == key
    (agent / "main.py").write_text((agent / "main.py").read_text() + "\n# changed\n")
    assert guest_image.input_key() != key
