"""YAML 1.2 core-schema frontmatter: text in, a read-only mapping or a Problem out.

PyYAML is YAML 1.1 (``yes`` is a boolean, a repeated key wins), and a flag read the wrong way can
expose a skill. So PyYAML (LibYAML when installed) only composes nodes, leaving each untagged
node's implicit flags as its tag; the values are built here by the core schema, read-only,
duplicate keys refused, aliases and depth bounded.
"""

from __future__ import annotations

import math
import operator
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
# The pattern of each typed scalar, implicit or with an explicit tag (`!!int 1_000` is refused).
_PATTERNS: Final = {
    _NULL: re.compile(r"(?:~|null|Null|NULL|)\Z"),
    _BOOL: re.compile(r"(?:true|false)\Z", re.IGNORECASE | re.ASCII),
    _INT: re.compile(r"(?:([-+]?[0-9]+)|0o([0-7]+)|0x([0-9a-fA-F]+))\Z", re.ASCII),
    _FLOAT: re.compile(
        r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?(?:\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN)\Z",
        re.ASCII,
    ),
}
# An untagged plain scalar is tried against them in this order (int before float, which also
# matches `12`). No timestamps (dates stay strings), no merge key, no `=` value.
# Whether a plain scalar may be other than a string: it starts as a boolean or a number can, or
# it is a null. One C call rules out most scalars (`name`, `skill-1`, `Apache-2.0`).
_MAYBE_TYPED: Final = re.compile(r"[~tTfF+\-.0-9]|(?:null|Null|NULL)?\Z")

if TYPE_CHECKING:
    _Parser = yaml.SafeLoader
elif yaml.__with_libyaml__:
    # LibYAML's parser and composer alone: the constructor and resolver CSafeLoader adds would
    # be set up for every file and never used (a tenth of the cost of a small file).
    from yaml.cyaml import CParser as _Parser
else:
    _Parser = yaml.SafeLoader


class _CoreSchemaLoader(_Parser):
    # The composer calls these hooks for every node; here they do no work. The tag of a node
    # without one is what `resolve` returns, its implicit flags (a tuple for a scalar, a bool
    # for a collection), and `_Walker` resolves each untagged plain scalar once, as it builds
    # the value. There are no path resolvers: the other two hooks are C no-ops.
    def resolve(self, kind: type[Node], value: str | None, implicit: object) -> str:
        return implicit  # type: ignore[return-value]

    descend_resolver = operator.is_  # type: ignore[assignment]
    ascend_resolver = tuple  # type: ignore[assignment]


# Hostile input becomes a problem, not a RecursionError or a "billion laughs" blow-up.
MAX_DEPTH: Final = 100
_MAX_EXPANDED_VALUES: Final = 100_000
FRONTMATTER_MISSING: Final = "frontmatter-missing"


class _Refused(Exception):  # while building values: a `yaml-invalid` problem at ``node``
    def __init__(self, reason: str, node: Node) -> None:
        super().__init__(reason)
        self.reason, self.node = reason, node


def load_frontmatter(source: str, *, first_line: int) -> Mapping[object, object] | Problem:
    """The frontmatter as a deeply read-only mapping, or why it is not one."""
    try:
        loader = _CoreSchemaLoader(source)
        root = loader.get_single_node()
        loader.dispose()  # after a failure, the garbage collector breaks the cycles instead
        if isinstance(root, MappingNode):
            return _Walker().build(root, 0)[0]  # type: ignore[return-value]
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
        if (mark := exc.node.start_mark) is None:
            return _invalid(exc.reason)
        line = mark.line + first_line
        return _invalid(f"{exc.reason} (line {line})", line)
    if root is None:
        return Problem(FRONTMATTER_MISSING, "missing frontmatter: the frontmatter block is empty")
    return not_a_mapping(isinstance(root, SequenceNode))


def not_a_mapping(is_list: bool) -> Problem:
    """Frontmatter that is a list or a single value: missing, as the contract counts it."""
    found = "a list" if is_list else "a single value"
    message = f"missing frontmatter: expected a mapping of fields, got {found}"
    return Problem(FRONTMATTER_MISSING, message)


def _invalid(reason: str, line: int | None = None) -> Problem:
    return Problem("yaml-invalid", f"invalid YAML: {reason}", line)


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


class _Walker:
    # An alias shows one node in several places (or inside itself: `&a [*a]`): each collection
    # is built once, one met again while being built is a cycle, and the expanded size bounded.

    __slots__ = ("_built", "_in_progress")

    def __init__(self) -> None:
        self._built: dict[int, tuple[object, int]] = {}
        self._in_progress: set[int] = set()

    def build(self, node: Node, depth: int) -> tuple[object, int]:
        # A collection's value and expanded size; a failure ends the walk (nothing to undo).
        key = id(node)
        if (built := self._built.get(key)) is not None:
            return built
        if key in self._in_progress:
            raise _Refused("an alias refers to the collection that contains it", node)
        if depth >= MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep", node)
        self._in_progress.add(key)
        size = 1
        result: object
        # `tag` may be a tuple or a bool here (see `_CoreSchemaLoader`), whatever the stubs say.
        tag: object = node.tag
        if type(node) is MappingNode and (type(tag) is not str or tag == _MAP):
            mapping: dict[object, object] = {}
            for key_node, value_node in node.value:
                if type(key_node) is not ScalarNode:
                    raise _Refused("a mapping key must be a single value", key_node)
                name = self.scalar(key_node)
                # Python equality decides: `1`, `1.0` and `true` are one dict key, so they count
                # as duplicates here although YAML would call them different.
                if name in mapping:
                    raise _Refused(f"duplicate key {name!r}", key_node)
                if type(value_node) is ScalarNode:
                    mapping[name] = self.scalar(value_node)
                    size += 2
                else:
                    mapping[name], value_size = self.build(value_node, depth + 1)
                    size += 1 + value_size
            result = MappingProxyType(mapping)
        elif type(node) is SequenceNode and (type(tag) is not str or tag == _SEQ):
            items: list[object] = []
            for child in node.value:
                if type(child) is ScalarNode:
                    items.append(self.scalar(child))
                    size += 1
                else:
                    value, child_size = self.build(child, depth + 1)
                    items.append(value)
                    size += child_size
            result = tuple(items)
        else:
            raise _Refused(f"unsupported YAML tag {_short(node.tag)}", node)
        self._in_progress.discard(key)
        if size > _MAX_EXPANDED_VALUES:
            raise _Refused(f"aliases expand to more than {_MAX_EXPANDED_VALUES} values", node)
        self._built[key] = result, size
        return result, size

    def scalar(self, node: ScalarNode) -> object:
        # A scalar's value; a plain string, the usual case, is told apart by one C call.
        tag: object = node.tag
        text: str = node.value
        if type(tag) is tuple:  # untagged: (plain implicit, quoted implicit)
            if not tag[0] or not _MAYBE_TYPED.match(text):
                return text  # quoted, a block scalar, or plain text
            for kind, implicit_pattern in _PATTERNS.items():
                if match := implicit_pattern.match(text):
                    return self._typed(node, kind, text, match)
            return text
        if tag == _STR:
            return text
        if (pattern := _PATTERNS.get(node.tag)) is None:
            raise _Refused(f"unsupported YAML tag {_short(node.tag)}", node)
        # Only an explicit tag gets here, e.g. `!!bool yes` or `!!int 1_000`.
        if match := pattern.match(text):
            return self._typed(node, tag, text, match)
        raise _Refused(f"{text!r} is not a valid {_short(node.tag)} value", node)

    def _typed(self, node: ScalarNode, kind: object, text: str, match: re.Match[str]) -> object:
        # The value of a scalar that matched the pattern of ``kind``.
        if kind == _NULL:
            return None
        if kind == _BOOL:
            return text[0] in "tT"
        if kind == _INT:
            decimal, octal, hexadecimal = match.groups()
            try:
                if decimal is not None:
                    return int(decimal)
                return int(octal, 8) if octal is not None else int(hexadecimal, 16)
            except ValueError:  # over 4300 decimal digits (CVE-2020-10735)
                raise _Refused("integer too long", node) from None
        special = text.lstrip("+-").lower()
        if special == ".inf":
            return -math.inf if text.startswith("-") else math.inf
        return math.nan if special == ".nan" else float(text)
