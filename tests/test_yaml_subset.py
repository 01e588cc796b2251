"""The direct parser for common frontmatter: identical to the PyYAML path, or it declines."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_skills._yaml12 import NotAMapping, YamlError, load_mapping
from acp_skills._yaml_subset import load_common_subset
from acp_skills.frontmatter import ParsedSkill, parse_skill_file

# --- comparing values exactly ----------------------------------------------------------------


def same_value(fast: object, reference: object) -> bool:
    """Equal in value, type and key order, all the way down (NaN equals NaN)."""
    if type(fast) is not type(reference):
        return False
    if isinstance(fast, MappingProxyType):
        assert isinstance(reference, MappingProxyType)
        return list(fast) == list(reference) and all(
            same_value(fast[key], reference[key]) for key in fast
        )
    if isinstance(fast, tuple):
        assert isinstance(reference, tuple)
        return len(fast) == len(reference) and all(
            same_value(a, b) for a, b in zip(fast, reference, strict=True)
        )
    if isinstance(fast, float) and isinstance(reference, float):
        return fast == reference or (math.isnan(fast) and math.isnan(reference))
    return fast == reference


def reference(source: str) -> Mapping[object, object] | NotAMapping | YamlError:
    try:
        return load_mapping(source)
    except YamlError as exc:
        return exc


def assert_agrees_or_declines(source: str) -> Mapping[object, object] | None:
    fast = load_common_subset(source)
    if fast is not None:
        expected = reference(source)
        assert isinstance(expected, MappingProxyType), (source, expected)
        assert same_value(fast, expected), (source, fast, expected)
    return fast


# --- examples ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "name: demo\ndescription: Does demo things.\n",
            {"name": "demo", "description": "Does demo things."},
        ),
        (
            "a: yes\nb: on\nc: 2024-01-31\nd: '12'\n",
            {"a": "yes", "b": "on", "c": "2024-01-31", "d": "12"},
        ),
        (
            "a: 12\nb: 0x1F\nc: 1.5\nd: TRUE\ne: ~\nf:\n",
            {"a": 12, "b": 31, "c": 1.5, "d": True, "e": None, "f": None},
        ),
        ("a: \"x: y#z\"\nb: 'it''s'\n", {"a": "x: y#z", "b": "it's"}),
        ("tags: [review, git, 1]\nnone: []\n", {"tags": ("review", "git", 1), "none": ()}),
        ("a: >-\n  one\n  two\n\n  three\nb: x\n", {"a": "one two\nthree", "b": "x"}),
        ("a: |\n  one\n    two\n\n", {"a": "one\n  two\n"}),
        ("a: |+\n  one\n\n\nb: x\n", {"a": "one\n\n\n", "b": "x"}),
        (
            'metadata:\n  owner: me\n  version: "1.2"\n  tags: [a]\nname: x\n',
            {"metadata": {"owner": "me", "version": "1.2", "tags": ("a",)}, "name": "x"},
        ),
    ],
    ids=[
        "plain",
        "yaml-1.1-lookalikes",
        "core-schema",
        "quoted",
        "flow-lists",
        "folded",
        "literal",
        "keep",
        "nested",
    ],
)
def test_common_frontmatter_is_read_like_the_reference(source: str, expected: object) -> None:
    """Typical frontmatter is parsed directly, to exactly the values PyYAML's path gives."""
    fast = assert_agrees_or_declines(source)
    assert fast == expected


@pytest.mark.parametrize(
    "source",
    [
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: 1\na: 2\n",
        "a: 1 # comment\n",
        "# comment\na: 1\n",
        "a: 1\r\nb: 2\r\n",
        "\ufeffa: 1\n",
        'a: "caf\\u00e9"\n',
        "a: 1\n b: 2\n",
        "a:\n  b:\n    c: 1\n",
        "a: x\n  continued\n",
        "a: 'multi\n  line'\n",
        "a: {b: 1}\n",
        "- a\n- b\n",
        "a: b: c\n",
        "null: x\n",
        "a: 1",
        "a:\tb\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: |2\n   x\n",
        "a: >\n  x\n    more\n  y\n",
        "",
    ],
    ids=[
        "anchor",
        "tag",
        "duplicate",
        "comment",
        "comment-line",
        "crlf",
        "bom",
        "escape",
        "odd-indent",
        "two-levels",
        "multi-line-plain",
        "multi-line-quoted",
        "flow-mapping",
        "sequence",
        "colon-in-plain",
        "null-key",
        "no-final-newline",
        "tab",
        "directive",
        "indentation-indicator",
        "more-indented-folded",
        "empty",
    ],
)
def test_everything_else_is_declined(source: str) -> None:
    """Outside the subset the direct parser says no, and PyYAML's path decides."""
    assert load_common_subset(source) is None


def test_frontmatter_parsing_uses_the_reference_for_declined_text() -> None:
    """A declined frontmatter still parses, through PyYAML, with the same field rules."""
    result = parse_skill_file("---\nname: demo # the id\ndescription: &d Demo.\n---\nBody\n")
    assert isinstance(result, ParsedSkill)
    assert (result.name, result.description) == ("demo", "Demo.")


# --- the differential property test -------------------------------------------------------------
#
# Drawing every character through Hypothesis costs milliseconds per document, too slow for
# tens of thousands of them. So the building blocks (scalars, lists, block scalars) are made
# once, from a fixed seed, into pools ordered simplest first; Hypothesis draws the document's
# structure from the pools (and shrinks it), plus a seed for the random edits that take each
# document out of the subset.

# A plain scalar's first word cannot start with an indicator, and no word may make `: ` or
# ` #` appear; within those rules, everything YAML 1.1 and 1.2 disagree on is here.
_FIRST_WORDS = (
    "review", "Fill", "yes", "No", "on", "OFF", "y", "n", "~", "null", "Null", "NULL", "nul",
    "true", "False", "tRuE", "12", "012", "+5", "0o17", "0x1F", "0b101", "1_000", "1.5", "1.",
    ".5", "1e3", "-1", "-.inf", ".inf", ".NaN", "2024-01-31", "12:30", "a:b", "C#", "=", "<<",
    "é", "日本語", "http://example.com/x?y=1", "it's", 'say"hi"', "x,y", "a]b", "a}b", "~x",
    ".hidden", "0", "\u00a0nbsp", "emoji😀", "2001-12-14t21:59:43.10-05:00",
)  # fmt: skip
_LATER_WORDS = (
    *_FIRST_WORDS, "-", "--", "?", "!x", "&x", "*x", "|", ">", "'q'", "[a]", "{b}", "@a", "`t`",
    "%", ":x", "a::b",
)  # fmt: skip
_FLOW_ITEMS = (
    "review", "git", "yes", "1", "0x1F", "1.5", "~", "null", "true", "FALSE", "2024-01-31",
    "a b", "a  b", "é", ".inf", "x.y", "a=b", "under_score", "+3", "~x", "-1",
)  # fmt: skip
_KEYS = (
    "name", "description", "whenToUse", "when_to_use", "argument-hint", "argumentHint",
    "disableModelInvocation", "user-invocable", "metadata", "license", "version", "yes", "on",
    "No", "y", "n", "nope", "trueish", "a.b", "_private", "x1", "Tags", "owner",
)  # fmt: skip
_QUOTED_CHARACTERS = "abc XYZ09:#-'\"[]{}!&*|>%@`,.?é日😀\u00a0~=\\"


@dataclass(frozen=True)
class Block:
    """A block scalar: header, content lines (extra indentation, text; None is blank), and
    how many blank lines follow it."""

    header: str
    lines: tuple[tuple[int, str] | None, ...]
    trailing_blanks: int


def _plain(rng: random.Random) -> str:
    words = [rng.choice(_FIRST_WORDS), *rng.choices(_LATER_WORDS, k=rng.randint(0, 4))]
    return rng.choice([" ", "  "]).join(words)


def _quoted(rng: random.Random) -> str:
    text = "".join(rng.choices(_QUOTED_CHARACTERS, k=rng.randint(0, 12)))
    while " #" in text:  # a comment marker, which the subset declines wherever it appears
        text = text.replace(" #", " ")
    if rng.random() < 0.5:
        return "'" + text.replace("'", "''") + "'"
    return '"' + text.replace('"', "").replace("\\", "") + '"'


def _flow(rng: random.Random) -> str:
    items = rng.choices(_FLOW_ITEMS, k=rng.randint(0, 4))
    return "[" + rng.choice([", ", ",", " , "]).join(items) + "]"


def _block(rng: random.Random) -> Block:
    style = rng.choice("|>")
    lines: list[tuple[int, str] | None] = [(0, _plain(rng))]
    for _ in range(rng.randint(0, 4)):
        roll = rng.random()
        if roll < 0.25:
            lines.append(None)
        elif roll < 0.5 and style == "|":
            lines.append((rng.randint(1, 3), _plain(rng)))
        else:
            lines.append((0, _plain(rng)))
    while lines[-1] is None:
        lines.pop()
    return Block(style + rng.choice(["", "-", "+"]), tuple(lines), rng.randint(0, 2))


def _pool(make: Callable[[random.Random], Any], size: int) -> list[Any]:
    rng = random.Random(size)
    made = {repr(value): value for value in (make(rng) for _ in range(size))}
    return sorted(made.values(), key=lambda value: (len(repr(value)), repr(value)))


_INLINE_VALUES = [
    "",
    *_FIRST_WORDS,
    *_pool(_plain, 300),
    *_pool(_quoted, 200),
    *_pool(_flow, 80),
]
_BLOCKS: list[Block] = _pool(_block, 200)

_leaf_values = st.one_of(st.sampled_from(_INLINE_VALUES), st.sampled_from(_BLOCKS))
_nested_mappings = st.tuples(
    st.integers(1, 4),
    st.lists(st.tuples(st.sampled_from(_KEYS), _leaf_values), min_size=1, max_size=4,
             unique_by=lambda entry: entry[0]),
)  # fmt: skip
_documents = st.lists(
    st.tuples(st.sampled_from(_KEYS), st.one_of(_leaf_values, _nested_mappings), st.booleans()),
    min_size=1,
    max_size=6,
    unique_by=lambda entry: entry[0],
)


def render_entry(key: str, value: object, indent: int) -> list[str]:
    prefix = " " * indent + key + ":"
    if isinstance(value, str):
        return [f"{prefix} {value}" if value else prefix]
    if isinstance(value, Block):
        content_indent = indent + 1 + len(key) % 3
        lines = [f"{prefix} {value.header}"]
        for line in value.lines:
            lines.append("" if line is None else " " * (content_indent + line[0]) + line[1])
        return lines + [""] * value.trailing_blanks
    nested_indent, nested = cast("tuple[int, list[tuple[str, object]]]", value)
    lines = [prefix]
    for nested_key, nested_value in nested:
        lines.extend(render_entry(nested_key, nested_value, indent + nested_indent))
    return lines


def render(document: list[tuple[str, object, bool]]) -> list[str]:
    lines: list[str] = []
    for key, value, blank_after in document:
        lines.extend(render_entry(key, value, 0))
        if blank_after:
            lines.append("")
    return lines


# What random edits insert: YAML features outside the subset, characters it declines, and
# pieces that break the YAML altogether.
_INSERTIONS = (
    "&anchor ", "*alias", "!!str ", "!!int ", "!tag ", "? ", "- ", "{a: 1}", "[a, [b]]", " # c",
    "#", "\t", "\r", "\ufeff", "\x85", "\u2028", "\x00", "\x7f", "\ud800", "\\u00e9", "\\n",
    '"', "'", "''", ": ", ":", "|", ">", "|2", "...", "---", "%YAML 1.2", "9" * 5000, "null",
    "true", "1", " ", "  ", "\n", "\n ", "\n  x", "\n- x", "é", "{", "}", "[", "]", ",", "@", "`",
    "yes", "2001-12-14", "-",
)  # fmt: skip
_COMMENT_OR_MARKER_LINES = ("# comment", "  # indented", "", " ", "---", "...", "%TAG ! x")


def edit(lines: list[str], rng: random.Random) -> str:
    """Apply one to three random edits to a document's lines; return the resulting text."""
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        row = rng.randrange(len(lines))
        line = lines[row]
        roll = rng.randrange(10)
        if roll <= 3:
            column = rng.randint(0, len(line))
            piece = rng.choice(_INSERTIONS) if roll else chr(rng.randrange(0x110000))
            lines[row] = line[:column] + piece + line[column:]
        elif roll == 4 and line:
            column = rng.randrange(len(line))
            lines[row] = line[:column] + line[column + 1 :]
        elif roll == 5:
            lines.insert(row, line)  # a duplicate key, or a repeated content line
        elif roll == 6:
            lines[row] = " " * rng.randint(1, 3) + line
        elif roll == 7:
            lines.insert(row, rng.choice(_COMMENT_OR_MARKER_LINES))
        elif roll == 8:
            return "\ufeff" * rng.randint(0, 1) + "\r\n".join(lines) + "\r\n"
        elif roll == 9:
            return "\n".join(lines)  # no final line break
    return "\n".join(lines) + "\n"


_EDITED_VARIANTS = 4
_DOCUMENTS = 4_000  # each checked as written and in _EDITED_VARIANTS edited forms: 20,000 in all


@settings(max_examples=_DOCUMENTS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents, st.integers(0, 2**32 - 1))
def test_fast_path_returns_what_pyyaml_returns_or_declines(
    document: list[tuple[str, object, bool]], seed: int
) -> None:
    """Over generated frontmatter, in the subset or edited out of it, the two paths agree."""
    lines = render(document)
    source = "\n".join(lines) + "\n"
    # Untouched, the document is in the subset: the direct parser must take it.
    assert assert_agrees_or_declines(source) is not None, source
    rng = random.Random(seed)
    for _ in range(_EDITED_VARIANTS):
        assert_agrees_or_declines(edit(lines, rng))
