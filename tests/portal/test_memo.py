"""``{% memo %}``: a block rendered once per process for each language and key, reused after.

It is safe only for blocks that depend on nothing but their keys and the language: the
templates' memo blocks are checked for per-request values (tokens, nonces, the user's data)."""

import re
from pathlib import Path

import pytest
from django.template import engines
from django.utils import translation

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
MEMO_BLOCK = re.compile(r"\{% memo\b(.*?)%\}(.*?)\{% endmemo %\}", re.S)
# What differs from one request or user to the next, which a memo block would leak.
PER_REQUEST = ("csrf", "nonce", "request.", "user.", "messages", "get_full_path", "project")


def test_a_block_is_rendered_once_per_key_and_language():
    template = engines["django"].from_string(
        '{% load console i18n %}{% memo key %}{% translate "취소" %} {{ other }}{% endmemo %}'
    )

    def render(**context):
        return template.render(context)

    with translation.override("ko"):
        first = render(key="a", other="one")
        assert render(key="a", other="two") == first == "취소 one"  # reused
        assert render(key="b", other="two") == "취소 two"  # another key
    with translation.override("en"):
        assert render(key="a", other="three") == "Cancel three"  # another language


@pytest.mark.parametrize(
    "path", sorted(p for p in TEMPLATES.rglob("*.html") if "{% memo" in p.read_text())
)
def test_memo_blocks_in_templates_hold_nothing_of_one_request(path):
    blocks = MEMO_BLOCK.findall(path.read_text())
    assert blocks, f"{path} opens a memo block it does not close"
    for keys, body in blocks:
        # The keys may name the request's route and the user's staff flag; the body may
        # name the values it is keyed by, nothing else of the request.
        leaks = [word for word in PER_REQUEST if word in body and word not in keys]
        assert not leaks, f"{path.name}: a memo block uses {leaks} without keying on it"


def test_each_block_keeps_its_own_output_across_templates_compiled_anew():
    """A block is told apart by a number it gets when compiled, not by where it lives in
    memory (a block compiled after a reload may take a freed block's address)."""
    for _ in range(50):
        first = engines["django"].from_string("{% load console %}{% memo %}first{% endmemo %}")
        assert first.render({}) == "first"
        del first
        second = engines["django"].from_string("{% load console %}{% memo %}second{% endmemo %}")
        assert second.render({}) == "second"
