"""Text hygiene (`acp_skills.text`): characters that never reach a model or an editor (contract
§6), in the cleaning functions and the catalog built from runtime skills whatever their
descriptions hold; and lone surrogates made well-formed. The same through the demo agent, for
random descriptions on disk: tests/test_well_formed_text.py."""

from __future__ import annotations

import html
import json

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_skills import SkillDefinition, SkillLookupOptions, SkillRegistry, render_catalog
from acp_skills.text import (
    for_editor,
    for_model,
    normalize_description,
    quote,
    shorten_description,
    terminal_safe,
    well_formed,
)
from tests.strategies import (
    BIDI_OVERRIDES_AND_ISOLATES,
    descriptions,
    expected_catalog_description,
    forbidden_in,
)

# -- the cleaning functions ------------------------------------------------------------------

REMOVE_CASES: list[tuple[str, str, str]] = [
    ("plain", "Deploy the app", "Deploy the app"),
    ("c0", "a\x00b\x07c\x1bd", "abcd"),
    ("information-separators", "a\x1cb\x1fc", "abc"),
    ("whitespace-kept", "a\tb\nc\x0bd\x0ce\rf", "a\tb\nc\x0bd\x0ce\rf"),
    ("next-line-becomes-a-line-feed", "a\x85b", "a\nb"),
    ("del", "a\x7fb", "ab"),
    ("c1", "a\x80b\x9bc\x9fd", "abcd"),
    ("bidi-overrides", "a\u202ab\u202bc\u202cd\u202de\u202ef", "abcdef"),
    ("bidi-isolates", "a\u2066b\u2067c\u2068d\u2069e", "abcde"),
    ("bidi-marks-kept", "a\u200eb\u200fc\u061cd", "a\u200eb\u200fc\u061cd"),
    ("lone-surrogates", "a\ud800b\udfffc", "a\ufffdb\ufffdc"),
    (
        "astral-kept",
        "\U0001f600 \U0001f469\u200d\U0001f4bb",
        "\U0001f600 \U0001f469\u200d\U0001f4bb",
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [case[1:] for case in REMOVE_CASES],
    ids=[case[0] for case in REMOVE_CASES],
)
def test_the_editor_and_the_model_get_no_unsafe_characters(text: str, expected: str) -> None:
    """Non-whitespace controls and bidi overrides go; lone surrogates become U+FFFD; the model
    reads the catalog's markup, so it gets ``&<>`` escaped too."""
    assert for_editor({"k": [text]}) == {"k": [expected]}
    assert for_model(text + "<&>") == html.escape(expected + "<&>", quote=False)


def test_a_quoted_value_spells_its_unsafe_characters_out() -> None:
    """Quoting keeps every character visible as ``\\uXXXX`` and leaves the rest alone."""
    assert quote("a\x07b\u202ec\ud800d\te\u200ef") == ('"a\\u0007b\\u202ec\\ud800d\\te\u200ef"')


NORMALIZE_CASES: list[tuple[str, str, int, str]] = [
    ("c0-removed-not-spaced", "Deploy\x00 the\x1b[31m app", 500, "Deploy the[31m app"),
    ("del-and-c1", "a\x7fb\x9bc", 500, "abc"),
    ("nel-is-a-line-break", "line one\x85line two", 500, "line one line two"),
    ("bidi-trojan", "safe \u202eevil\u202c text \u2066x\u2069", 500, "safe evil text x"),
    ("lone-surrogate", "broken \ud83d emoji", 500, "broken \ufffd emoji"),
    ("controls-do-not-count-toward-the-bound", "\x00" * 20 + "abc<", 4, "abc<"),
    ("only-controls", "\x00\x1b\u202e", 500, ""),
]


@pytest.mark.parametrize(
    ("text", "max_length", "expected"),
    [case[1:] for case in NORMALIZE_CASES],
    ids=[case[0] for case in NORMALIZE_CASES],
)
def test_normalize_and_shorten_remove_unsafe_characters_first(
    text: str, max_length: int, expected: str
) -> None:
    """Catalog and command descriptions lose the unsafe characters before anything else."""
    assert shorten_description(text, max_length) == expected
    assert normalize_description(text, max_length) == html.escape(expected, quote=False)


# -- properties ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(descriptions, st.integers(3, 60))
def test_normalize_description_matches_the_contract(text: str, limit: int) -> None:
    """Whatever the text, the result is §6's, forbidden-free, and encodable as UTF-8."""
    normalized = normalize_description(text, limit)
    assert normalized == expected_catalog_description(text, limit)
    assert forbidden_in(normalized) == []
    normalized.encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(st.lists(descriptions, min_size=1, max_size=5))
def test_runtime_skills_render_a_clean_catalog(texts: list[str]) -> None:
    """Runtime skills (where lone surrogates can enter) give a catalog that is free of
    forbidden characters and encodes as JSON and UTF-8 (their commands: tests/test_wire.py)."""

    async def render() -> None:
        registry = SkillRegistry()
        for index, text in enumerate(texts):
            # "d " keeps every description non-empty, as registration requires.
            registry.register(
                SkillDefinition(name=f"skill-{index}", description=f"d {text}", content="body")
            )
        options = SkillLookupOptions(cwd="/work")
        catalog = render_catalog(await registry.list(options))
        assert catalog is not None
        for index, text in enumerate(texts):
            line = f"- `skill-{index}`: {expected_catalog_description('d ' + text, 500)}"
            assert line in catalog.split("\n")
        assert forbidden_in(catalog) == []
        json.dumps({"catalog": catalog}, ensure_ascii=False).encode("utf-8")

    anyio.run(render)


# -- well-formed text: lone surrogates become U+FFFD, everything else is left alone ------

# Any code point, lone surrogates often (st.characters() alone draws them rarely).
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
    assert well_formed(text) == expected


def test_well_formed_text_is_returned_as_it_is() -> None:
    """No copy is made of text that needs no repair."""
    text = "nothing to repair here " * 100
    assert well_formed(text) is text


@given(st.text(alphabet=ANY_CHARACTER))
def test_the_result_is_always_encodable_and_otherwise_unchanged(text: str) -> None:
    """The result encodes as strict UTF-8; text without surrogates comes back equal."""
    repaired = well_formed(text)
    repaired.encode("utf-8")
    assert len(repaired) <= len(text)
    if all(not 0xD800 <= ord(char) <= 0xDFFF for char in text):
        assert repaired == text


def test_json_values_are_copied_with_keys_and_strings_repaired() -> None:
    """Objects and arrays are copied; keys and strings are repaired; other values are kept."""
    value = {"na\ud800me": ["x\udfff", 1, 2.5, None, True, ("t\ud800",)], "ok": {"k": "v"}}
    assert well_formed(value) == {
        "na\ufffdme": ["x\ufffd", 1, 2.5, None, True, ["t\ufffd"]],
        "ok": {"k": "v"},
    }
    assert list(well_formed({"b": 1, "a": 2})) == ["b", "a"]


def test_json_values_nested_beyond_the_recursion_limit_are_copied() -> None:
    """The walk needs no recursion, so a 100 000-deep value is no problem."""
    deep: object = "bottom \ud800"
    for _ in range(100_000):
        deep = [deep]
    copied = well_formed(deep)
    for _ in range(100_000):
        assert isinstance(copied, list)
        copied = copied[0]
    assert copied == "bottom \ufffd"


def test_terminal_safe_spells_out_every_control_but_tab() -> None:
    """C0 (but tab), DEL, C1 and the bidi overrides are spelt out; line feeds only on request."""
    spelt = {chr(c) for c in [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0)]}
    spelt |= {chr(c) for c in BIDI_OVERRIDES_AND_ISOLATES}
    text = "".join(sorted(spelt)) + "\tplain é"
    safe = terminal_safe(text)
    assert not spelt & set(safe)
    assert safe.endswith("\tplain é")
    assert terminal_safe("\x1b]0;title\x07\u202e") == "\\x1b]0;title\\x07\\u202e"
    assert terminal_safe("a\r\nb", keep_newlines=True) == "a\\x0d\nb"
    assert terminal_safe("\ud800") == "\ufffd"


def test_a_value_shown_in_a_line_has_its_controls_spelt_out() -> None:
    """A line feed or bidi override inside a report's line is spelt, so it cannot start one."""
    assert terminal_safe("a\nb\u202e") == "a\\x0ab\\u202e"
    assert terminal_safe("\ud800") == "\ufffd"  # the one substitution: surrogates repaired as well
