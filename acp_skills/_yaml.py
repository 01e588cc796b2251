"""YAML 1.2 core-schema frontmatter (not PyYAML's 1.1, where ``yes`` is a boolean and a flag read
the wrong way exposes a skill): text in, a read-only mapping or a Problem out."""

from __future__ import annotations

import operator
import re
from collections.abc import Collection, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

import yaml
from yaml.constructor import BaseConstructor, ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import Problem

if TYPE_CHECKING or not yaml.__with_libyaml__:
    from yaml import SafeLoader as _Loader
else:
    from yaml import CSafeLoader as _Loader

_TAG: Final = "tag:yaml.org,2002:"
_STR: Final = _TAG + "str"
# https://yaml.org/spec/1.2.2/#1032-tag-resolution, except that booleans accept any letter case,
# as the contract asks. re.ASCII keeps IGNORECASE from matching look-alikes (U+017F for "s").
# Tried on a plain scalar by its first character, in this order (int before float, which also
# matches `12`), and on an explicitly tagged one. No timestamps, merge key or `=` value.
_FLOAT: Final = (
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?(?:\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN)\Z"
)
_CORE: Final = {
    "null": (re.compile(r"(?:~|null|Null|NULL|)\Z"), ("~", "n", "N", "")),
    "bool": (re.compile(r"(?:true|false)\Z", re.IGNORECASE | re.ASCII), "tTfF"),
    "int": (re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z", re.ASCII), "-+0123456789"),
    "float": (re.compile(_FLOAT, re.ASCII), "-+.0123456789"),
}
# Hostile input becomes a problem, not a RecursionError or a "billion laughs" blow-up.
MAX_DEPTH: Final = 100
_MAX_EXPANDED_VALUES: Final = 100_000
FRONTMATTER_MISSING: Final = "frontmatter-missing"
_SCALARS: Final = frozenset({str, bool, int, float, type(None)})


_RESOLVERS: Final[dict[str, list[tuple[str, re.Pattern[str]]]]] = {}
for _kind, (_pattern, _first) in _CORE.items():
    for _char in _first:
        _RESOLVERS.setdefault(_char, []).append((_TAG + _kind, _pattern))


class _CoreSchemaLoader(_Loader):
    def resolve(self, kind: type[Node], value: Any, implicit: Any) -> str:
        if kind is ScalarNode:
            if implicit[0]:  # plain, untagged
                for tag, pattern in _RESOLVERS.get(value[:1], ()):
                    if pattern.match(value):
                        return tag
            return _STR
        return _TAG + ("seq" if kind is SequenceNode else "map")

    # The composer calls these for every collection: without path resolvers, C no-ops.
    descend_resolver = operator.is_  # type: ignore[assignment]
    ascend_resolver = tuple  # type: ignore[assignment]

    def core_scalar(self, node: Node) -> object:
        # The pattern first: an explicit tag gets here too (`!!bool yes`, `!!int 1_000`).
        text = self.construct_scalar(node)  # type: ignore[arg-type]
        kind = node.tag.removeprefix(_TAG)
        if not _CORE[kind][0].match(text):
            problem = f"{text!r} is not a valid !!{kind} value"
            raise ConstructorError(None, None, problem, node.start_mark)
        if kind != "int":  # what PyYAML makes of these patterns is the core schema's value
            return getattr(SafeConstructor, f"construct_yaml_{kind}")(self, node)
        try:  # not PyYAML's: a leading 0 is not octal in YAML 1.2
            return int(text, 0) if text[:2] in ("0o", "0x") else int(text)
        except ValueError:  # over 4300 decimal digits (CVE-2020-10735)
            raise ConstructorError(None, None, "integer too long", node.start_mark) from None

    def core_mapping(self, node: Node) -> Iterator[dict[object, object]]:
        if not isinstance(node, MappingNode):  # `!!map x`
            raise ConstructorError(None, None, "expected a mapping", node.start_mark)
        mapping: dict[object, object] = {}
        yield mapping  # first, so that an alias inside it finds it (a cycle, refused later)
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                problem = "a mapping key must be a single value"
                raise ConstructorError(None, None, problem, key_node.start_mark)
            key = self._value(key_node)
            # Python equality decides: `1`, `1.0` and `true` are one key, duplicates here.
            if key in mapping:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            mapping[key] = self._value(value_node)

    def _value(self, node: Node) -> object:
        # A string, most often: taken as it is, a third of the cost of a file saved.
        if node.tag == _STR and type(node) is ScalarNode:
            return node.value
        return self.construct_object(node)

    def foreign(self, node: Node) -> object:
        tag = "!!" + node.tag.removeprefix(_TAG) if node.tag.startswith(_TAG) else node.tag
        raise ConstructorError(None, None, f"unsupported YAML tag {tag}", node.start_mark)

    yaml_constructors: ClassVar[dict[Any, Any]] = dict.fromkeys(
        [_TAG + kind for kind in _CORE], core_scalar
    )
    yaml_constructors |= {
        _STR: BaseConstructor.construct_scalar,
        _TAG + "seq": _Loader.construct_yaml_seq,
        _TAG + "map": core_mapping,
        None: foreign,  # any other tag
    }


def load_frontmatter(source: str, *, first_line: int) -> Mapping[object, object] | Problem:
    """The frontmatter as a deeply read-only mapping, or why it is not one."""
    try:
        loader = _CoreSchemaLoader(source)
        root = loader.get_single_node()
        value = loader.construct_document(root) if isinstance(root, MappingNode) else None
        loader.dispose()  # after a failure, the garbage collector breaks the cycles instead
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
    if value is not None:
        try:
            return read_only(value)  # type: ignore[return-value]
        except ValueError as exc:
            return _invalid(str(exc))
    if root is None:
        return Problem(FRONTMATTER_MISSING, "missing frontmatter: the frontmatter block is empty")
    return not_a_mapping(isinstance(root, SequenceNode))


def read_only(value: object) -> object:
    """``value`` with mappings read-only and lists as tuples; ``ValueError`` past `MAX_DEPTH`
    levels or `_MAX_EXPANDED_VALUES` values (aliases expanded)."""
    return _frozen(value, 0, [_MAX_EXPANDED_VALUES])


def _frozen(collection: object, depth: int, budget: list[int]) -> object:
    # One call per collection, not per value: discovery reads thousands of these.
    if depth >= MAX_DEPTH:  # or an alias refers to the collection that contains it
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(collection, dict | MappingProxyType):
        items: Collection[object] = collection.values()
    elif isinstance(collection, list | tuple):
        items = collection
    else:
        raise ValueError(f"unsupported value of type {type(collection).__name__}")
    budget[0] -= len(items)
    if budget[0] < 0:
        raise ValueError(f"aliases expand to more than {_MAX_EXPANDED_VALUES} values")
    built = [v if type(v) in _SCALARS else _frozen(v, depth + 1, budget) for v in items]
    if isinstance(collection, dict | MappingProxyType):
        return MappingProxyType(dict(zip(collection, built, strict=True)))
    return tuple(built)


def not_a_mapping(is_list: bool) -> Problem:
    """Frontmatter that is a list or a single value: missing, as the contract counts it."""
    found = "a list" if is_list else "a single value"
    message = f"missing frontmatter: expected a mapping of fields, got {found}"
    return Problem(FRONTMATTER_MISSING, message)


def _invalid(reason: str, line: int | None = None) -> Problem:
    return Problem("yaml-invalid", f"invalid YAML: {reason}", line)
