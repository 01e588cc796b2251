"""YAML 1.2 core-schema frontmatter: text in, a read-only mapping or a Problem out.

PyYAML is YAML 1.1 (``yes`` is a boolean, a repeated key wins), and a flag read the wrong way can
expose a skill. So PyYAML (LibYAML when installed) only composes nodes, tagged by core-schema
resolvers; the values are built here, read-only, duplicate keys refused, aliases and depth bounded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import Problem

_TAG: Final = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT, _SEQ, _MAP = (
    _TAG + kind for kind in ("str", "null", "bool", "int", "float", "seq", "map")
)
# https://yaml.org/spec/1.2.2/#1032-tag-resolution, except that booleans accept any letter case,
# as the contract asks. re.ASCII keeps IGNORECASE from matching look-alikes (U+017F for "s").
_NULL_PATTERN: Final = re.compile(r"(?:~|null|Null|NULL|)\Z")
_BOOL_PATTERN: Final = re.compile(r"(?:true|false)\Z", re.IGNORECASE | re.ASCII)
_INT_PATTERN: Final = re.compile(r"(?:([-+]?[0-9]+)|0o([0-7]+)|0x([0-9a-fA-F]+))\Z", re.ASCII)
_FLOAT_PATTERN: Final = re.compile(
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?(?:\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN)\Z",
    re.ASCII,
)
# First character of a plain scalar -> the patterns it may match, in order (int before float,
# which also matches `12`). No timestamps (dates stay strings), no merge key, no `=` value.
_RESOLVERS: Final[dict[str, list[tuple[str, re.Pattern[str]]]]] = {}
for _tag, _pattern, _initials in (
    (_NULL, _NULL_PATTERN, ["~", "n", "N", ""]),
    (_BOOL, _BOOL_PATTERN, list("tTfF")),
    (_INT, _INT_PATTERN, list("-+0123456789")),
    (_FLOAT, _FLOAT_PATTERN, list("-+.0123456789")),
):
    for _initial in _initials:
        _RESOLVERS.setdefault(_initial, []).append((_tag, _pattern))

if TYPE_CHECKING:
    _Parser = yaml.SafeLoader
elif yaml.__with_libyaml__:
    # LibYAML's parser and composer alone: the constructor and resolver CSafeLoader adds would
    # be set up for every file and never used (a tenth of the cost of a small file).
    from yaml.cyaml import CParser as _Parser
else:
    _Parser = yaml.SafeLoader


class _CoreSchemaLoader(_Parser):
    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                for tag, pattern in _RESOLVERS.get(value[:1], ()):
                    if pattern.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    def descend_resolver(self, current_node: Node | None, current_index: object) -> None:
        pass  # no path resolvers, nothing to track

    def ascend_resolver(self) -> None:
        pass


# Hostile input becomes a problem, not a RecursionError or a "billion laughs" blow-up.
_MAX_DEPTH: Final = 100
_MAX_EXPANDED_VALUES: Final = 100_000
_MISSING: Final = "frontmatter-missing"


class _Refused(Exception):  # while building values: a `yaml-invalid` problem
    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line


def load_frontmatter(source: str, *, first_line: int) -> Mapping[object, object] | Problem:
    """The frontmatter as a deeply read-only mapping, or why it is not one."""
    try:
        loader = _CoreSchemaLoader(source)
        root = loader.get_single_node()
        loader.dispose()  # after a failure, the garbage collector breaks the cycles instead
        if isinstance(root, MappingNode):
            return _Walker(first_line).build(root, 0)[0]  # type: ignore[return-value]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "malformed YAML"
        if mark is None:
            return _invalid(what)
        line = mark.line + first_line
        hint = ""
        if what.startswith("mapping values are not allowed"):
            # `description: Use it: always` — the second `: ` starts a mapping YAML refuses.
            hint = "; a value holding ': ' must be quoted (description: \"Use it: always\")"
        return _invalid(f"{what}{hint} (line {line}, column {mark.column + 1})", line)
    except yaml.YAMLError as exc:
        return _invalid(str(exc).splitlines()[0])
    except RecursionError:  # only the pure-Python composer recurses
        return _invalid("nested too deeply")
    except UnicodeEncodeError:  # LibYAML encodes to UTF-8 first: lone surrogates cannot be
        return _invalid("the text contains unpaired surrogates")
    except _Refused as exc:
        return _invalid(exc.reason, exc.line)
    if root is None:
        return Problem(_MISSING, "missing frontmatter: the frontmatter block is empty")
    found = "a list" if isinstance(root, SequenceNode) else "a single value"
    return Problem(_MISSING, f"missing frontmatter: expected a mapping of fields, got {found}")


def _invalid(reason: str, line: int | None = None) -> Problem:
    return Problem("yaml-invalid", f"invalid YAML: {reason}", line)


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


class _Walker:
    # An alias shows one node in several places (or inside itself: `&a [*a]`): each collection
    # is built once, one met again while being built is a cycle, and the expanded size bounded.

    __slots__ = ("_built", "_first_line", "_in_progress")

    def __init__(self, first_line: int) -> None:
        self._built: dict[int, tuple[object, int]] = {}
        self._in_progress: set[int] = set()
        self._first_line = first_line

    def at(self, node: Node) -> str:
        mark = node.start_mark
        return "" if mark is None else f" (line {mark.line + self._first_line})"

    def build(self, node: Node, depth: int) -> tuple[object, int]:
        # A collection's value and expanded size; a failure ends the walk (nothing to undo).
        key = id(node)
        if (built := self._built.get(key)) is not None:
            return built
        if key in self._in_progress:
            raise _Refused(f"an alias refers to the collection that contains it{self.at(node)}")
        if depth >= _MAX_DEPTH:
            raise _Refused(f"nested more than {_MAX_DEPTH} levels deep{self.at(node)}")
        self._in_progress.add(key)
        size = 1
        result: object
        if isinstance(node, SequenceNode) and node.tag == _SEQ:
            items: list[object] = []
            for child in node.value:
                value, child_size = self._value(child, depth)
                items.append(value)
                size += child_size
            result = tuple(items)
        elif isinstance(node, MappingNode) and node.tag == _MAP:
            mapping: dict[object, object] = {}
            for key_node, value_node in node.value:
                if type(key_node) is not ScalarNode:
                    raise _Refused(f"a mapping key must be a single value{self.at(key_node)}")
                name = key_node.value if key_node.tag == _STR else self._scalar(key_node)
                # Python equality decides: `1`, `1.0` and `true` are one dict key, so they count
                # as duplicates here although YAML would call them different.
                if name in mapping:
                    line = None if key_node.start_mark is None else key_node.start_mark.line
                    where = None if line is None else line + self._first_line
                    raise _Refused(f"duplicate key {name!r}{self.at(key_node)}", where)
                mapping[name], value_size = self._value(value_node, depth)
                size += 1 + value_size
            result = MappingProxyType(mapping)
        else:
            raise _Refused(f"unsupported YAML tag {_short(node.tag)}{self.at(node)}")
        self._in_progress.discard(key)
        if size > _MAX_EXPANDED_VALUES:
            raise _Refused(
                f"aliases expand to more than {_MAX_EXPANDED_VALUES} values{self.at(node)}"
            )
        self._built[key] = result, size
        return result, size

    def _value(self, node: Node, depth: int) -> tuple[object, int]:
        if type(node) is ScalarNode:
            return (node.value if node.tag == _STR else self._scalar(node)), 1
        return self.build(node, depth + 1)

    def _scalar(self, node: ScalarNode) -> object:
        tag, text = node.tag, node.value
        if tag == _NULL and _NULL_PATTERN.match(text):
            return None
        if tag == _BOOL and _BOOL_PATTERN.match(text):
            return text[0] in "tT"
        if tag == _INT and (match := _INT_PATTERN.match(text)):
            decimal, octal, hexadecimal = match.groups()
            try:
                if decimal is not None:
                    return int(decimal)
                return int(octal, 8) if octal is not None else int(hexadecimal, 16)
            except ValueError:  # over 4300 decimal digits (CVE-2020-10735)
                raise _Refused(f"integer too long{self.at(node)}") from None
        if tag == _FLOAT and _FLOAT_PATTERN.match(text):
            special = text.lstrip("+-").lower()
            if special == ".inf":
                return -math.inf if text.startswith("-") else math.inf
            return math.nan if special == ".nan" else float(text)
        if tag == _STR:
            return text
        if tag not in (_NULL, _BOOL, _INT, _FLOAT):
            raise _Refused(f"unsupported YAML tag {_short(tag)}{self.at(node)}")
        # Only an explicit tag gets here, e.g. `!!bool yes` or `!!int 1_000`.
        raise _Refused(f"{text!r} is not a valid {_short(tag)} value{self.at(node)}")
