"""The frontmatter's YAML (`acp_skills.frontmatter`): a golden table of inputs and what they give
(values, key order and types, or the problem), plus generated frontmatter checked against
PyYAML's own safe loader wherever YAML 1.1 and the core schema agree."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_skills.errors import Problem
from acp_skills.frontmatter import load_frontmatter
from tests.hypothesis_profiles import examples

INF, NAN = math.inf, math.nan


def load(source: str) -> Mapping[object, object] | Problem:
    return load_frontmatter(source, first_line=2)


def shape(value: object) -> object:
    """A comparable picture of a value: exact kinds (a read-only mapping is not a dict, a list
    not a tuple), key order, and NaN equal to itself."""
    if isinstance(value, MappingProxyType | dict):
        kind = type(value).__name__
        return (kind, [(shape(k), shape(v)) for k, v in value.items()])
    if isinstance(value, tuple):
        return ("seq", [shape(item) for item in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    return (type(value).__name__, value)


QUOTE_IT = "; a value holding ': ' must be quoted (description: \"Use it: always\")"


def invalid(reason: str, line: int | None = None) -> Problem:
    return Problem("yaml-invalid", f"invalid YAML: {reason}", line)


def at(reason: str, line: int, column: int) -> Problem:
    return invalid(f"{reason} (line {line}, column {column})", line)


def missing(what: str) -> Problem:
    return Problem("frontmatter-missing", f"missing frontmatter: {what}")


_BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{this}: &{this} [{', '.join([f'*{prev}'] * 10)}]\n"
    for prev, this in zip("abcd", "bcde", strict=True)
)

GOLDEN: list[tuple[str, str, object]] = [
    ("plain", "name: demo\ndescription: Does demo things.\n",
     {"name": "demo", "description": "Does demo things."}),
    ("yaml-1.1-lookalikes", "a: yes\nb: on\nc: 2024-01-31\nd: '12'\ne: No\nf: OFF\ng: y\nh: n\n",
     {"a": "yes", "b": "on", "c": "2024-01-31", "d": "12", "e": "No", "f": "OFF", "g": "y",
      "h": "n"}),
    ("booleans-any-case", "a: TRUE\nb: tRuE\nc: False\n", {"a": True, "b": True, "c": False}),
    ("nulls", "a: ~\nb:\nc: null\nd: Null\ne: NULL\nf: nul\n",
     {"a": None, "b": None, "c": None, "d": None, "e": None, "f": "nul"}),
    ("integers", "a: 12\nb: 0x1F\nc: 012\nd: +5\ne: 0o17\nf: 0b101\ng: 1_000\nh: -1\ni: 0x\n",
     {"a": 12, "b": 31, "c": 12, "d": 5, "e": 15, "f": "0b101", "g": "1_000", "h": -1, "i": "0x"}),
    ("floats",
     "a: 1.5\nb: 1.\nc: .5\nd: 1e3\ne: -.inf\nf: .inf\ng: +.inf\nh: .NaN\ni: -.NAN\nj: 1e\n",
     {"a": 1.5, "b": 1.0, "c": 0.5, "d": 1000.0, "e": -INF, "f": INF, "g": INF, "h": NAN,
      "i": "-.NAN", "j": "1e"}),
    ("not-core", "a: 12:30\nb: =\n<<: {a: 1}\n2001-12-14t21:59:43.10-05:00: x\n",
     {"a": "12:30", "b": "=", "<<": {"a": 1}, "2001-12-14t21:59:43.10-05:00": "x"}),
    # A plain string is told apart from a typed scalar by a quick check; each other kind of scalar
    # takes the full path, in either place.
    ("typed-keys", "2: a\ntrue: b\n~: c\n!!str 12: d\nname: e\n",
     {2: "a", True: "b", None: "c", "12": "d", "name": "e"}),
    ("explicit-and-non-specific-tags",
     "a: !!str 12\nb: ! 12\nc: !\nd:\ne: [~, 1, \"2\", true, skill-1]\n",
     {"a": "12", "b": 12, "c": "", "d": None, "e": (None, 1, "2", True, "skill-1")}),
    ("quoted", "a: \"x: y#z\"\nb: 'it''s'\nc: \"caf\\u00e9\"\n",
     {"a": "x: y#z", "b": "it's", "c": "café"}),
    ("flow", "tags: [review, git, 1]\nnone: []\nmap: {b: 1}\n",
     {"tags": ("review", "git", 1), "none": (), "map": {"b": 1}}),
    ("folded", "a: >-\n  one\n  two\n\n  three\nb: x\n", {"a": "one two\nthree", "b": "x"}),
    ("literal", "a: |\n  one\n    two\n\n", {"a": "one\n  two\n"}),
    ("keep", "a: |+\n  one\n\n\nb: x\n", {"a": "one\n\n\n", "b": "x"}),
    ("indentation-indicator", "a: |2\n   x\n", {"a": " x\n"}),
    ("more-indented-folded", "a: >\n  x\n    more\n  y\n", {"a": "x\n  more\ny\n"}),
    ("nested", 'metadata:\n  owner: me\n  version: "1.2"\n  tags: [a]\nname: x\n',
     {"metadata": {"owner": "me", "version": "1.2", "tags": ("a",)}, "name": "x"}),
    ("two-levels", "a:\n  b:\n    c: 1\n", {"a": {"b": {"c": 1}}}),
    ("anchor", "a: &x 1\nb: *x\n", {"a": 1, "b": 1}),
    ("core-tags", "a: !!str 1\nb: !!float 1\n", {"a": "1", "b": 1.0}),
    ("comments", "# comment\na: 1 # comment\n", {"a": 1}),
    ("crlf", "a: 1\r\nb: 2\r\n", {"a": 1, "b": 2}),
    ("multi-line", "a: x\n  continued\nb: 'multi\n  line'\n",
     {"a": "x continued", "b": "multi line"}),
    ("null-key", "null: x\n", {None: "x"}),
    ("no-final-newline", "a: 1", {"a": 1}),
    ("tab", "a:\tb\n", {"a": "b"}),
    ("directive", "%YAML 1.2\n---\na: 1\n", {"a": 1}),
    ("next-line", "a: \x85\n", {"a": None}),
    ("bom-inside", "a: \ufeffb\n", {"a": "\ufeffb"}),
    ("unicode", "é: 日本語\nemoji: 😀\n", {"é": "日本語", "emoji": "😀"}),
    # Problems.
    ("duplicate", "a: 1\na: 2\n", at("duplicate key 'a'", 3, 1)),
    ("duplicate-by-value", "1: a\n1.0: b\n", at("duplicate key 1.0", 3, 1)),
    ("duplicate-boolean", "true: a\nTrue: b\n", at("duplicate key True", 3, 1)),
    ("bad-bool", "a: !!bool yes\n", at("'yes' is not a valid !!bool value", 2, 4)),
    ("bad-int", "a: !!int 1_000\n", at("'1_000' is not a valid !!int value", 2, 4)),
    ("bad-null", "a: !!null x\n", at("'x' is not a valid !!null value", 2, 4)),
    ("set", "a: !!set {b}\n", at("unsupported YAML tag !!set", 2, 4)),
    ("custom-tag", "a: !custom x\n", at("unsupported YAML tag !custom", 2, 4)),
    ("binary", "a: !!binary aGk=\n", at("unsupported YAML tag !!binary", 2, 4)),
    ("timestamp", "a: !!timestamp 2024-01-01\n", at("unsupported YAML tag !!timestamp", 2, 4)),
    # An alias inside the collection it names is a collection nested without end.
    ("cycle", "a: &a [*a]\n", invalid("nested more than 100 levels deep")),
    ("cycle-map", "a: &a {b: *a}\n", invalid("nested more than 100 levels deep")),
    ("complex-key", "? [a]\n: b\n", at("a mapping key must be a single value", 2, 3)),
    ("long-integer", "a: " + "9" * 5000 + "\n", at("integer too long", 2, 4)),
    ("billion-laughs", _BILLION_LAUGHS, invalid("aliases expand to more than 100000 values")),
    ("deep", "a: " + "[" * 101 + "]" * 101 + "\n", invalid("nested more than 100 levels deep")),
    ("undefined-alias", "a: *nothing\n", invalid("found undefined alias (line 2, column 4)", 2)),
    ("colon-in-plain", "a: b: c\n",
     invalid("mapping values are not allowed in this context" + QUOTE_IT + " (line 2, column 5)",
             2)),
    ("open-flow", "a: [b\n", invalid("did not find expected ',' or ']' (line 3, column 1)", 3)),
    ("open-quote", "a: 'b\n", invalid("found unexpected end of stream (line 3, column 1)", 3)),
    ("key-then-item", "a: b\n- c\n", invalid("did not find expected key (line 3, column 1)", 3)),
    ("two-documents", "---\na: 1\n---\nb: 2\n",
     invalid("but found another document (line 4, column 1)", 4)),
    ("bad-escape", 'a: "\\ud800"\n',
     invalid("found invalid Unicode character escape code (line 2, column 7)", 2)),
    ("surrogate", "a: \ud800\n", invalid("the text contains unpaired surrogates")),
    ("empty", "", missing("the frontmatter block is empty")),
    ("comment-only", "# nothing\n", missing("the frontmatter block is empty")),
    ("sequence", "- a\n- b\n", missing("expected a mapping of fields, got a list")),
    ("scalar", "x\n", missing("expected a mapping of fields, got a single value")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("source", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN]
)
def test_frontmatter_yaml_gives_the_golden_value_or_problem(source: str, expected: object) -> None:
    """Each input gives exactly its value (types, key order, read-only) or its problem."""
    result = load(source)
    if isinstance(expected, Problem):
        assert result == expected
    else:
        assert shape(result) == shape(frozen(expected))


def test_values_are_deeply_read_only() -> None:
    """Mappings are read-only proxies and sequences tuples, all the way down."""
    result = load("a: {b: [1, {c: 2}]}\n")
    assert isinstance(result, MappingProxyType)
    inner = cast("Mapping[str, Any]", result["a"])
    assert isinstance(inner, MappingProxyType)
    assert isinstance(inner["b"], tuple)
    assert isinstance(inner["b"][1], MappingProxyType)


# --- generated frontmatter against PyYAML's safe loader -------------------------------------
#
# Building blocks are made once from a fixed seed into pools, simplest first; Hypothesis draws
# the structure from them. Only words on which YAML 1.1 (PyYAML) and the core schema agree are
# used, so that `yaml.safe_load` (its pure-Python scanner, parser and constructor: nothing in
# common with the path under test but the library's name) is an oracle.

_FIRST_WORDS = (
    "review", "Fill", "~", "null", "Null", "NULL", "nul", "true", "False", "12", "+5", "0x1F",
    "1.5", "1.", ".5", "-1", "-.inf", ".inf", ".NaN", "a:b", "C#", "é", "日本語",
    "http://example.com/x?y=1", "it's", 'say"hi"', "x,y", "a]b", "a}b", "~x", ".hidden", "0",
    "emoji😀",
)  # fmt: skip
_LATER_WORDS = (
    *_FIRST_WORDS, "-", "--", "?", "!x", "&x", "*x", "|", ">", "'q'", "[a]", "{b}", "@a", "`t`",
    "%", ":x", "a::b", "yes", "2024-01-31",
)  # fmt: skip
_FLOW_ITEMS = (
    "review", "git", "1", "0x1F", "1.5", "~", "null", "true", "FALSE", "a b", "a  b", "é",
    ".inf", "x.y", "a=b", "under_score", "+3", "~x", "-1",
)  # fmt: skip
_KEYS = (
    "name", "description", "whenToUse", "when_to_use", "argument-hint", "argumentHint",
    "disableModelInvocation", "user-invocable", "metadata", "license", "version", "nope",
    "trueish", "a.b", "_private", "x1", "Tags", "owner",
)  # fmt: skip
_QUOTED_CHARACTERS = "abc XYZ09:#-'\"[]{}!&*|>%@`,.?é日😀~=\\"


@dataclass(frozen=True)
class Block:
    """A block scalar: header, content lines (extra indentation, text; None is blank), and
    how many blank lines follow it."""

    header: str
    lines: tuple[tuple[int, str] | None, ...]
    trailing_blanks: int


def _plain(rng: random.Random) -> str:
    words = [rng.choice(_FIRST_WORDS), *rng.choices(_LATER_WORDS, k=rng.randint(0, 4))]
    text = rng.choice([" ", "  "]).join(words)
    return text.replace(" #", " ")  # a comment would end the scalar


def _quoted(rng: random.Random) -> str:
    text = "".join(rng.choices(_QUOTED_CHARACTERS, k=rng.randint(0, 12)))
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


_INLINE_VALUES = ["", *_FIRST_WORDS, *_pool(_plain, 300), *_pool(_quoted, 200), *_pool(_flow, 80)]
_BLOCKS: list[Block] = _pool(_block, 200)


def _drawn_from(pool: list[Any]) -> st.SearchStrategy[Any]:
    """Like ``sampled_from`` (simplest first), with a short repr: the pools are large."""

    def pick(index: int) -> Any:
        return pool[index]

    return st.integers(0, len(pool) - 1).map(pick)


_leaf_values = st.one_of(_drawn_from(_INLINE_VALUES), _drawn_from(_BLOCKS))
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


def frozen(value: object) -> object:
    """What safe_load gives, in this loader's read-only forms."""
    if isinstance(value, dict):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(frozen(item) for item in value)
    return value


# What random edits insert: YAML features, characters, and pieces that break the YAML.
_INSERTIONS = (
    "&anchor ", "*alias", "!!str ", "!!int ", "!tag ", "? ", "- ", "{a: 1}", "[a, [b]]", " # c",
    "#", "\t", "\r", "\ufeff", "\x85", "\u2028", "\x00", "\x7f", "\ud800", "\\u00e9", "\\n",
    '"', "'", "''", ": ", ":", "|", ">", "|2", "...", "---", "%YAML 1.2", "9" * 5000, "null",
    "true", "1", " ", "  ", "\n", "\n ", "\n  x", "\n- x", "é", "{", "}", "[", "]", ",", "@", "`",
    "yes", "2001-12-14", "-",
)  # fmt: skip


def edit(lines: list[str], rng: random.Random) -> str:
    """One to three random edits of a document's lines."""
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        row = rng.randrange(len(lines))
        line = lines[row]
        roll = rng.randrange(6)
        if roll <= 3:
            column = rng.randint(0, len(line))
            piece = rng.choice(_INSERTIONS) if roll else chr(rng.randrange(0x110000))
            lines[row] = line[:column] + piece + line[column:]
        elif roll == 4:
            lines.insert(row, line)  # a duplicate key, or a repeated content line
        else:
            lines[row] = " " * rng.randint(1, 3) + line
    return "\n".join(lines) + "\n"


@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents, st.integers(0, 2**32 - 1))
def test_generated_frontmatter_reads_as_pyyaml_reads_it(
    document: list[tuple[str, object, bool]], seed: int
) -> None:
    """Where YAML 1.1 and 1.2 agree, the values are PyYAML's; edited, it never raises."""
    lines = render(document)
    source = "\n".join(lines) + "\n"
    assert shape(load(source)) == shape(frozen(yaml.safe_load(source))), source
    rng = random.Random(seed)
    for _ in range(3):
        result = load(edit(lines, rng))
        assert isinstance(result, MappingProxyType) or (
            isinstance(result, Problem) and result.code in ("yaml-invalid", "frontmatter-missing")
        )
