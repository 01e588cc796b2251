"""Well-formed text: lone surrogates become U+FFFD, everything else is left alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_skills.text import replace_lone_surrogates, replace_lone_surrogates_in_json

# Any code point, surrogates included (st.characters() alone leaves them out).
ANY_CHARACTER = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("plain ascii", "plain ascii"),
        ("日本語 🎉 \x00\x1b\u202e", "日本語 🎉 \x00\x1b\u202e"),
        ("a\ud800b", "a\ufffdb"),
        ("\udfff", "\ufffd"),
        ("\udcff\udc80", "\ufffd\ufffd"),
        ("\ud83d\ude00", "😀"),
        ("<\ude00\ud83d>", "<\ufffd\ufffd>"),
        ("\ud800\ud800\udc00", "\ufffd\U00010000"),
    ],
    ids=[
        "empty",
        "ascii",
        "astral-and-controls-kept",
        "high-alone",
        "low-alone",
        "surrogate-escapes",
        "split-pair-joined",
        "reversed-pair",
        "high-then-pair",
    ],
)
def test_lone_surrogates_become_replacement_characters(text: str, expected: str) -> None:
    """Each lone surrogate is one U+FFFD; a high-low pair is the character it stands for."""
    assert replace_lone_surrogates(text) == expected


def test_well_formed_text_is_returned_as_it_is() -> None:
    """No copy is made of text that needs no repair."""
    text = "nothing to repair here " * 100
    assert replace_lone_surrogates(text) is text


@given(st.text(alphabet=ANY_CHARACTER))
def test_the_result_is_always_encodable_and_otherwise_unchanged(text: str) -> None:
    """The result encodes as strict UTF-8; text without surrogates comes back equal."""
    repaired = replace_lone_surrogates(text)
    repaired.encode("utf-8")
    assert len(repaired) <= len(text)
    if all(not 0xD800 <= ord(char) <= 0xDFFF for char in text):
        assert repaired == text


def test_json_values_are_copied_with_keys_and_strings_repaired() -> None:
    """Objects and arrays are copied; keys and strings are repaired; other values are kept."""
    value = {"na\ud800me": ["x\udfff", 1, 2.5, None, True, ("t\ud800",)], "ok": {"k": "v"}}
    assert replace_lone_surrogates_in_json(value) == {
        "na\ufffdme": ["x\ufffd", 1, 2.5, None, True, ["t\ufffd"]],
        "ok": {"k": "v"},
    }
    assert list(replace_lone_surrogates_in_json({"b": 1, "a": 2})) == ["b", "a"]


def test_json_values_nested_beyond_the_recursion_limit_are_copied() -> None:
    """The walk needs no recursion, so a 100 000-deep value is no problem."""
    deep: object = "bottom \ud800"
    for _ in range(100_000):
        deep = [deep]
    copied = replace_lone_surrogates_in_json(deep)
    for _ in range(100_000):
        assert isinstance(copied, list)
        copied = copied[0]
    assert copied == "bottom \ufffd"
