"""Korean particles after a name: 을/를, 이/가, 은/는, 과/와, (으)로, chosen by how the name
ends when read aloud, so a confirmation says "ib-demo를 중지합니다", never "ib-demo을(를)".

A message is written with the pair in parentheses after its placeholder
(``"%(name)s을(를) 중지합니다"``); ``with_particles`` resolves every such marker by the word
before it. A translation without the marker (English) is left as it is.
"""

import functools
import re

# Digits as read in Korean (영 일 이 삼 사 오 육 칠 팔 구): which end in a final consonant,
# and which of those in ㄹ (the one final consonant that still takes 로, not 으로).
_DIGIT_FINAL = {"0": "ㅇ", "1": "ㄹ", "3": "ㅁ", "6": "ㄱ", "7": "ㄹ", "8": "ㄹ"}
# A letter said alone (엘, 엠, 엔, 알); other letters end in a vowel (에이, 비, 씨 …).
_LETTER_FINAL = {"l": "ㄹ", "m": "ㅁ", "n": "ㄴ", "r": "ㄹ"}
# A word's ending as it is said in Korean: model → 모델, team → 팀, train → 트레인,
# ring → 링, rack → 랙; every other ending is read with a vowel (demo → 데모, node → 노드).
_WORD_FINAL = (("ng", "ㅇ"), ("ck", "ㄱ"), ("l", "ㄹ"), ("m", "ㅁ"), ("n", "ㄴ"))
_HANGUL_FIRST, _HANGUL_LAST = 0xAC00, 0xD7A3
_RIEUL_INDEX = 8  # ㄹ among the 28 final-consonant slots of a Hangul syllable

PAIRS = {"을/를": ("을", "를"), "이/가": ("이", "가"), "은/는": ("은", "는"), "과/와": ("과", "와")}
_MARKER = re.compile(
    r"(을\(를\)|를\(을\)|이\(가\)|가\(이\)|은\(는\)|는\(은\)|과\(와\)|와\(과\)|\(으\)로)"
)
_MARKER_PAIR = {
    "을(를)": "을/를",
    "를(을)": "을/를",
    "이(가)": "이/가",
    "가(이)": "이/가",
    "은(는)": "은/는",
    "는(은)": "은/는",
    "과(와)": "과/와",
    "와(과)": "과/와",
}


def final_consonant(word: str) -> str:
    """The final consonant the word ends in when read ("ㄹ", "ㄴ" …), or "" for a vowel.

    The last letter, digit or Hangul syllable decides; brackets, quotes and spaces after it
    are skipped ("노드(1)" ends in 일)."""
    text = word.rstrip()
    for index in range(len(text) - 1, -1, -1):
        char = text[index]
        if _HANGUL_FIRST <= ord(char) <= _HANGUL_LAST:
            slot = (ord(char) - _HANGUL_FIRST) % 28
            return "" if slot == 0 else ("ㄹ" if slot == _RIEUL_INDEX else "받침")
        if char.isdigit() and char.isascii():
            return _DIGIT_FINAL.get(char, "")
        if char.isascii() and char.isalpha():
            start = index
            while start > 0 and text[start - 1].isascii() and text[start - 1].isalpha():
                start -= 1
            letters = text[start : index + 1].lower()
            if len(letters) == 1:
                return _LETTER_FINAL.get(letters, "")
            return next((final for end, final in _WORD_FINAL if letters.endswith(end)), "")
    return ""


def josa(word: str, pair: str) -> str:
    """The particle of ``pair`` ("을/를", "이/가", "은/는", "과/와" or "으로/로") after ``word``."""
    final = final_consonant(word)
    if pair == "으로/로":
        return "로" if final in ("", "ㄹ") else "으로"
    with_final, without = PAIRS[pair]
    return with_final if final else without


def with_particles(text: str) -> str:
    """``text`` with each marker after a word ("을(를)", "이(가)", "(으)로" …) replaced by the
    particle that word takes: ``"gpu-node-01을(를)"`` → ``"gpu-node-01을"``."""
    return _with_particles(str(text))


@functools.lru_cache(maxsize=4096)
def _with_particles(text: str) -> str:
    """Kept for the texts last asked (the answer depends on nothing but the text): a page of
    256 members asks two a row, the same again each time the tab refreshes."""

    def pick(match: re.Match[str]) -> str:
        before = text[: match.start()]
        marker = match.group(1)
        pair = "으로/로" if marker == "(으)로" else _MARKER_PAIR[marker]
        return josa(before, pair)

    return _MARKER.sub(pick, text)
