"""Characters that never reach a model or an editor (contract §6): the cleaning functions, and
the catalog and slash commands built from runtime skills whatever their descriptions hold."""

from __future__ import annotations

import html
import json

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_skills import SkillDefinition, SkillLookupOptions, SkillRegistry
from acp_skills.acp import available_commands
from acp_skills.catalog import normalize_description, render_catalog, shorten_description
from acp_skills.safe_text import escape_unsafe_characters, remove_unsafe_characters

# The contract's list, written out independently of the implementation.
BIDI_OVERRIDES_AND_ISOLATES = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
KEPT_CONTROLS = frozenset("\t\n\x0b\x0c\r")  # ASCII whitespace; NEL becomes a line feed


def is_forbidden(character: str) -> bool:
    """C0 and C1 controls but whitespace, DEL, bidi overrides and isolates, surrogates."""
    point = ord(character)
    if character in KEPT_CONTROLS:
        return False
    return (
        point < 0x20
        or 0x7F <= point <= 0x9F
        or point in BIDI_OVERRIDES_AND_ISOLATES
        or 0xD800 <= point <= 0xDFFF
    )


def forbidden_in(text: str) -> list[str]:
    return [character for character in text if is_forbidden(character)]


# Characters a hostile or careless description may hold, drawn often on purpose.
SPECIAL_CHARACTERS = [
    *map(chr, range(0x00, 0x20)),
    *map(chr, range(0x7F, 0xA0)),
    *map(chr, sorted(BIDI_OVERRIDES_AND_ISOLATES)),
    "\u200e",  # left-to-right mark: kept
    "\ufeff",
    "\u2028",
    "\u00a0",
    "<",
    "&",
]

any_character = st.one_of(
    st.characters(),
    st.sampled_from(SPECIAL_CHARACTERS),
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates: st.characters() never draws them
)
descriptions = st.lists(any_character, max_size=120).map("".join)


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
def test_remove_unsafe_characters(text: str, expected: str) -> None:
    """Non-whitespace controls and bidi overrides go; lone surrogates become U+FFFD."""
    assert remove_unsafe_characters(text) == expected


def test_escape_unsafe_characters_spells_them_out() -> None:
    """Escaping keeps every character visible as ``\\uXXXX`` and leaves the rest alone."""
    assert escape_unsafe_characters("a\x07b\u202ec\ud800d\te\u200ef") == (
        "a\\u0007b\\u202ec\\ud800d\te\u200ef"
    )


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


def expected_catalog_description(text: str, limit: int) -> str:
    """§6 spelled out: remove, collapse whitespace (and U+FEFF), truncate, escape."""
    kept = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    kept = kept.replace("\x85", "\n")
    kept = "".join(c for c in kept if not is_forbidden(c))
    collapsed = " ".join(kept.replace("\ufeff", " ").split())
    if len(collapsed) > limit:
        collapsed = collapsed[: limit - 3] + "..."
    return html.escape(collapsed, quote=False)


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
def test_runtime_skills_render_a_clean_catalog_and_commands(texts: list[str]) -> None:
    """Runtime skills (where lone surrogates can enter) give a catalog and commands that are
    free of forbidden characters and encode as JSON and UTF-8."""

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
        commands = available_commands((await registry.snapshot(options)).skills)
        assert [command.name for command in commands] == [f"skill-{i}" for i in range(len(texts))]
        for command in commands:
            assert forbidden_in(command.description) == []
            assert "\n" not in command.description
        assert forbidden_in(catalog) == []
        frame = json.dumps(
            {
                "catalog": catalog,
                "commands": [command.model_dump(mode="json") for command in commands],
            },
            ensure_ascii=False,
        )
        frame.encode("utf-8")

    anyio.run(render)
