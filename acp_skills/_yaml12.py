"""YAML 1.2 core-schema loading: frontmatter text in, immutable Python values out.

    load_mapping(source)       the reference loader (PyYAML composes, this module builds values)
    plain_scalar_value(text)   what an untagged plain scalar means under the core schema

Why not ``yaml.safe_load``? PyYAML implements YAML 1.1, where ``yes``, ``no``, ``on`` and ``off``
are booleans and ``2024-01-01`` is a date, and where a repeated key silently overwrites the
earlier one. Skill authors write YAML expecting 1.2 behaviour, and a flag read the wrong way can
expose a skill to the model. So PyYAML only *composes* the text into a node graph (with the
LibYAML C parser when it is installed), tagged by our own YAML 1.2 core-schema resolvers, and this
module turns the nodes into Python values itself. That is also about twice as fast as a full
load, which matters when a thousand skills are discovered per catalog.

Values are deeply read-only: mappings are ``MappingProxyType``, sequences are tuples.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, cast

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "NON_STRING_INITIALS",
    "NotAMapping",
    "YamlError",
    "load_mapping",
    "plain_scalar_value",
]


class YamlError(ValueError):
    """The text is not YAML this loader accepts.

    Attributes:
        reason: One line saying what is wrong and, when known, on which line.
        line: That line of the file (counted from 1), when known.
    """

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True, slots=True)
class NotAMapping:
    """The document is well-formed YAML, but its top level is not a mapping.

    Attributes:
        found: What is there instead.
    """

    found: Literal["nothing", "a list", "a single value"]


_TAG_PREFIX: Final = "tag:yaml.org,2002:"
_STR: Final = _TAG_PREFIX + "str"
_NULL: Final = _TAG_PREFIX + "null"
_BOOL: Final = _TAG_PREFIX + "bool"
_INT: Final = _TAG_PREFIX + "int"
_FLOAT: Final = _TAG_PREFIX + "float"
_SEQ: Final = _TAG_PREFIX + "seq"
_MAP: Final = _TAG_PREFIX + "map"

# The YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), except that
# booleans accept any letter case, as the contract asks. re.ASCII keeps IGNORECASE from
# matching look-alikes such as U+017F LATIN SMALL LETTER LONG S for "s". PyYAML calls
# `pattern.match`, so every pattern is anchored at the end with `\Z`.
_NULL_PATTERN: Final = re.compile(r"(?:~|null|Null|NULL|)\Z")
_BOOL_PATTERN: Final = re.compile(r"(?:true|false)\Z", re.IGNORECASE | re.ASCII)
_INT_PATTERN: Final = re.compile(
    r"(?:(?P<dec>[-+]?[0-9]+)|0o(?P<oct>[0-7]+)|0x(?P<hex>[0-9a-fA-F]+))\Z", re.ASCII
)
_FLOAT_PATTERN: Final = re.compile(
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?(?:\.inf|\.Inf|\.INF)"
    r"|\.nan|\.NaN|\.NAN)\Z",
    re.ASCII,
)


def _core_schema_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """Build PyYAML's resolver table (first character -> [(tag, pattern)]) for the core schema.

    There is deliberately no timestamp resolver (dates stay strings), no merge resolver (``<<``
    is a plain key) and no ``=`` value resolver. Integers are listed before floats because the
    float pattern also matches ``12``.
    """
    table: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    digits = "0123456789"
    for tag, pattern, first_chars in (
        (_NULL, _NULL_PATTERN, ["~", "n", "N", ""]),
        (_BOOL, _BOOL_PATTERN, list("tTfF")),
        (_INT, _INT_PATTERN, list("-+" + digits)),
        (_FLOAT, _FLOAT_PATTERN, list("-+." + digits)),
    ):
        for first in first_chars:
            table.setdefault(first, []).append((tag, pattern))
    return table


_RESOLVERS: Final = _core_schema_resolvers()

NON_STRING_INITIALS: Final = frozenset(first for first in _RESOLVERS if first)
"""The first characters of every plain scalar that may resolve to something other than a
string; a plain scalar starting with any other character is its own text."""


def _resolve_plain(text: str) -> str:
    """The tag of an untagged plain scalar: the first core-schema pattern it matches, else str."""
    for tag, pattern in _RESOLVERS.get(text[:1], ()):
        if pattern.match(text):
            return tag
    return _STR


if TYPE_CHECKING:
    _BaseLoader = yaml.SafeLoader
else:
    # The LibYAML-backed loader scans and parses in C; it still calls the Python resolver below.
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _CoreSchemaLoader(_BaseLoader):
    """A loader used only to compose: its resolvers follow the YAML 1.2 core schema.

    Assigning a fresh table here (rather than calling ``add_implicit_resolver``) leaves
    PyYAML's own loaders untouched for everybody else in the process.
    """

    yaml_implicit_resolvers = _RESOLVERS

    # The composer calls these three for every node. PyYAML's versions also serve path
    # resolvers, which we never register; these leaner ones only do what the table above
    # says. Together they save about a tenth of the parse time of a typical file.

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        """Tag a node that carries no explicit tag, by the core-schema table."""
        if kind is ScalarNode:
            # implicit[0] is true for plain scalars only; a quoted scalar is always a string.
            return _resolve_plain(value) if implicit[0] else _STR
        return _SEQ if kind is SequenceNode else _MAP

    def descend_resolver(self, current_node: Node | None, current_index: object) -> None:
        """Nothing to track: there are no path resolvers."""

    def ascend_resolver(self) -> None:
        """Nothing to track: there are no path resolvers."""


# Limits that turn hostile or broken input into a problem instead of a RecursionError or an
# exponential blow-up ("billion laughs": aliases of aliases). Real frontmatter is a handful of
# levels deep and a few dozen values large.
_MAX_DEPTH: Final = 100
_MAX_EXPANDED_VALUES: Final = 100_000


def load_mapping(source: str, *, first_line: int = 1) -> Mapping[object, object] | NotAMapping:
    """Load a YAML document whose top level should be a mapping.

    Args:
        source: The YAML text.
        first_line: The line number the first line of ``source`` has in its file, so that
            reasons point into the file rather than into ``source``.

    Returns:
        The mapping (deeply read-only), or what the document holds instead of one.

    Raises:
        YamlError: The text is not well-formed YAML, uses a tag outside the core schema,
            repeats a key, or is nested or aliased beyond the limits.
    """
    try:
        root = yaml.compose(source, Loader=_CoreSchemaLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + first_line
        raise YamlError(_describe_yaml_error(exc, first_line), line) from None
    except yaml.YAMLError as exc:
        raise YamlError(str(exc).splitlines()[0]) from None
    except RecursionError:
        # Only the pure-Python fallback composer recurses; LibYAML has its own depth limit.
        raise YamlError("nested too deeply") from None
    except UnicodeEncodeError:
        # LibYAML encodes the text as UTF-8 first, which lone surrogates cannot survive.
        raise YamlError("the text contains unpaired surrogates") from None
    if root is None:
        return NotAMapping("nothing")
    if not isinstance(root, MappingNode):
        return NotAMapping("a list" if isinstance(root, SequenceNode) else "a single value")
    value, _ = _NodeWalker(first_line).build(root, depth=0)
    # The walker turns a `!!map` node into a mapping and refuses any other tag on it.
    return cast("Mapping[object, object]", value)


def plain_scalar_value(text: str) -> object:
    """Return what an untagged plain scalar means under the core schema.

    Args:
        text: The scalar's text, as the YAML scanner delivers it.

    Returns:
        ``None``, a ``bool``, an ``int``, a ``float`` or the text itself.

    Raises:
        YamlError: An integer too long for Python to convert.
    """
    return _convert(_resolve_plain(text), text, "")


def _describe_yaml_error(exc: yaml.MarkedYAMLError, first_line: int) -> str:
    """One line: what went wrong and where, in the file's own line numbers."""
    what = exc.problem or exc.context or "malformed YAML"
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return what
    return f"{what} (line {mark.line + first_line}, column {mark.column + 1})"


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG_PREFIX) if tag.startswith(_TAG_PREFIX) else tag


class _NodeWalker:
    """Turns a composed node graph into immutable Python values.

    The graph is not always a tree: an alias makes a node appear in several places, and an
    anchor may even be referenced from inside itself (``&a [*a]``). Each collection is built
    once and reused (so aliases cost nothing), a collection met again while still being built
    is reported as a cycle, and the size the value would have if every alias were written out
    is tracked so that a tiny file cannot stand for an enormous document.
    """

    __slots__ = ("_built", "_first_line", "_in_progress")

    def __init__(self, first_line: int) -> None:
        # id(node) -> (value, expanded size). The root keeps every node alive while we walk,
        # so ids cannot be recycled underneath us.
        self._built: dict[int, tuple[object, int]] = {}
        self._in_progress: set[int] = set()
        self._first_line = first_line

    def build(self, node: Node, depth: int) -> tuple[object, int]:
        """Return the value of ``node`` and its expanded size (number of values)."""
        if isinstance(node, ScalarNode):
            return self._scalar(node), 1
        key = id(node)
        built = self._built.get(key)
        if built is not None:
            return built
        if key in self._in_progress:
            raise YamlError(f"an alias refers to the collection that contains it{self._at(node)}")
        if depth >= _MAX_DEPTH:
            raise YamlError(f"nested more than {_MAX_DEPTH} levels deep{self._at(node)}")
        self._in_progress.add(key)
        try:
            if isinstance(node, SequenceNode) and node.tag == _SEQ:
                result = self._sequence(node, depth)
            elif isinstance(node, MappingNode) and node.tag == _MAP:
                result = self._mapping(node, depth)
            else:
                raise YamlError(f"unsupported YAML tag {_short_tag(node.tag)}{self._at(node)}")
        finally:
            self._in_progress.discard(key)
        if result[1] > _MAX_EXPANDED_VALUES:
            raise YamlError(
                f"aliases expand to more than {_MAX_EXPANDED_VALUES} values{self._at(node)}"
            )
        self._built[key] = result
        return result

    def _sequence(self, node: SequenceNode, depth: int) -> tuple[object, int]:
        items: list[object] = []
        size = 1
        for child in node.value:
            # Scalars are inlined: they are most nodes, and a call per node shows in profiles.
            if isinstance(child, ScalarNode):
                items.append(self._scalar(child))
                size += 1
            else:
                value, child_size = self.build(child, depth + 1)
                items.append(value)
                size += child_size
        return tuple(items), size

    def _mapping(self, node: MappingNode, depth: int) -> tuple[object, int]:
        result: dict[object, object] = {}
        size = 1
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise YamlError(f"a mapping key must be a single value{self._at(key_node)}")
            key = self._scalar(key_node)
            # Python equality decides: `1`, `1.0` and `true` are the same dict key, so they
            # count as duplicates here although YAML would call them different.
            if key in result:
                raise YamlError(f"duplicate key {key!r}{self._at(key_node)}")
            if isinstance(value_node, ScalarNode):
                result[key] = self._scalar(value_node)
                size += 2
            else:
                value, value_size = self.build(value_node, depth + 1)
                result[key] = value
                size += 1 + value_size
        return MappingProxyType(result), size

    def _scalar(self, node: ScalarNode) -> object:
        tag = node.tag
        if tag == _STR:
            return node.value
        return _convert(tag, node.value, self._at(node))

    def _at(self, node: Node) -> str:
        mark = node.start_mark
        return "" if mark is None else f" (line {mark.line + self._first_line})"


def _convert(tag: str, text: str, where: str) -> object:
    """Convert one scalar by its (resolved or explicit) tag, per the YAML 1.2 core schema."""
    if tag == _STR:
        return text
    if tag == _NULL:
        if _NULL_PATTERN.match(text):
            return None
    elif tag == _BOOL:
        if _BOOL_PATTERN.match(text):
            return text[0] in "tT"
    elif tag == _INT:
        match = _INT_PATTERN.match(text)
        if match:
            try:
                if match["oct"] is not None:
                    return int(match["oct"], 8)
                if match["hex"] is not None:
                    return int(match["hex"], 16)
                return int(match["dec"], 10)
            except ValueError:
                # Python refuses to convert more than 4300 decimal digits (CVE-2020-10735).
                raise YamlError(f"integer too long{where}") from None
    elif tag == _FLOAT:
        if _FLOAT_PATTERN.match(text):
            special = text.lstrip("+-").lower()
            if special == ".inf":
                return -math.inf if text.startswith("-") else math.inf
            if special == ".nan":
                return math.nan
            return float(text)
    else:
        raise YamlError(f"unsupported YAML tag {_short_tag(tag)}{where}")
    # Only an explicit tag can get here, e.g. `!!bool yes` or `!!int 1_000`.
    raise YamlError(f"{text!r} is not a valid {_short_tag(tag)} value{where}")
