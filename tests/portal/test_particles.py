"""Korean particles after a name (portal.web.particles): 을/를 by how the name ends when read
aloud, so a confirmation never says "을(를)"."""

import pytest

from portal.web.particles import josa, with_particles


@pytest.mark.parametrize(
    ("word", "eul", "ro"),
    [
        ("ib-demo", "를", "로"),  # 데모: a vowel
        ("gpu-node-01", "을", "로"),  # 일: ㄹ takes 을 and 로
        ("gpu-node-02", "를", "로"),  # 이
        ("gpu-node-03", "을", "으로"),  # 삼
        ("gpu-node-10", "을", "으로"),  # 영
        ("gpu.l40sx4", "를", "로"),  # 사
        ("train", "을", "으로"),  # 트레인
        ("team", "을", "으로"),  # 팀
        ("model", "을", "로"),  # 모델: ㄹ
        ("ring", "을", "으로"),  # 링
        ("cluster", "를", "로"),  # 클러스터: an r inside a word is not said
        ("vm-r", "을", "로"),  # the letter alone: 알
        ("vm-b", "를", "로"),  # 비
        ("학습", "을", "으로"),
        ("노드", "를", "로"),
        ("서울", "을", "로"),
        ("노드(1)", "을", "로"),  # what closes the name is skipped
        ("", "를", "로"),
    ],
)
def test_the_particle_follows_the_final_sound(word, eul, ro):
    assert josa(word, "을/를") == eul
    assert josa(word, "으로/로") == ro


def test_other_pairs():
    assert josa("ib-demo", "이/가") == "가" and josa("gpu-node-01", "이/가") == "이"
    assert josa("ib-demo", "은/는") == "는" and josa("학습", "은/는") == "은"
    assert josa("ib-demo", "과/와") == "와" and josa("학습", "과/와") == "과"


def test_markers_in_a_sentence_are_resolved_by_the_word_before_each():
    text = (
        "gpu-node-01을(를) ib-demo에서 분리하고 gpu-spare-02(으)로 교체합니다. "
        "ib-demo이(가) 멈춥니다"
    )
    assert with_particles(text) == (
        "gpu-node-01을 ib-demo에서 분리하고 gpu-spare-02로 교체합니다. ib-demo가 멈춥니다"
    )
    assert with_particles("ib-demo을(를) 중지합니다") == "ib-demo를 중지합니다"
    assert with_particles("Stop ib-demo") == "Stop ib-demo"  # a translation has no marker
    assert "을(를)" not in with_particles("train을(를) 시작합니다")


def test_every_sentence_written_with_a_marker_goes_through_the_helper():
    """A message may be written "%(name)s을(를) …" only where ``with_particles`` (or the
    ``particles`` filter) resolves it before anyone reads it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    markers = ("을(를)", "를(을)", "이(가)", "은(는)", "과(와)", "(으)로")
    unresolved = []
    for path in sorted((root / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if any(m in line for m in markers) and "|particles" not in line:
                unresolved.append(f"{path.relative_to(root)}:{number}")
    for app in ("clusters", "vms", "portal", "metrics"):
        for path in sorted((root / app).rglob("*.py")):
            text = path.read_text()
            if path.name == "particles.py" or not any(m in text for m in markers):
                continue
            if "with_particles" not in text:
                unresolved.append(str(path.relative_to(root)))
    assert unresolved == []
