"""A skill file's text (``---``, YAML 1.2 core-schema frontmatter, ``---``, Markdown body) to a
`ParsedSkill` or a `Problem`; `read_fields`, for a local file's and an MCP listing's fields."""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

import yaml
from yaml.constructor import BaseConstructor, ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import Problem, ReadError
from .model import (
    DirectoryResource,
    ResourceBase,
    SkillCandidate,
    SkillDefinition,
    is_skill_name,
    kind_of_value,
)

if TYPE_CHECKING or not yaml.__with_libyaml__:
    from yaml import SafeLoader as _Loader
else:
    from yaml import CSafeLoader as _Loader

_Skill = TypeVar("_Skill", SkillCandidate, SkillDefinition)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedSkill:
    """The fields of a well-formed skill file."""

    name: str
    description: str
    when_to_use: str | None = None
    disable_model_invocation: bool = False
    user_invocable: bool = True
    argument_hint: str | None = None
    metadata: Mapping[str, object] | None = None
    body: str
    notes: tuple[Problem, ...] = ()
    fields: Mapping[object, object] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )


# Refused before YAML sees it: the costliest 64 KiB of YAML takes tens of milliseconds.
MAX_FRONTMATTER_BYTES: Final = 64 * 1024

# A line that is exactly `---` (CRLF tolerated), searched from the end of the first line.
_CLOSING_LINE: Final = re.compile(r"\n---\r?(?:\n|\Z)")


def parse_skill_file(text: str, *, with_body: bool = True) -> ParsedSkill | Problem:
    """Parse a skill file's text, or say why it is unusable (contract §5)."""
    text = text.removeprefix("\ufeff")
    first_line_end = text.find("\n")
    if (text if first_line_end < 0 else text[:first_line_end]) not in ("---", "---\r"):
        return Problem(FRONTMATTER_MISSING, "missing frontmatter: the first line must be '---'")
    closing = _CLOSING_LINE.search(text, first_line_end) if first_line_end >= 0 else None
    if closing is None:
        return Problem(FRONTMATTER_MISSING, "unterminated frontmatter: no closing '---' line")
    frontmatter = text[first_line_end + 1 : closing.start() + 1]
    if (too_large := _too_large(frontmatter)) is not None:
        return too_large
    fields = load_frontmatter(frontmatter, first_line=2)  # it starts on the file's second line
    if isinstance(fields, Problem):
        return fields
    return read_fields(fields, body=text[closing.end() :].strip() if with_body else "")


def parse_skill_bytes(
    content: bytes | ReadError, *, with_body: bool = False
) -> ParsedSkill | Problem | ReadError:
    """A skill file as read (bytes, or why there are none), parsed as `parse_skill_file` does."""
    if isinstance(content, ReadError):
        return content
    try:
        text = content.decode("utf-8")  # strict; the parser drops a byte order mark
    except UnicodeDecodeError as exc:
        return Problem("not-utf8", f"not valid UTF-8 text (byte {exc.start})")
    return parse_skill_file(text, with_body=with_body)


def build_skill(
    kind: type[_Skill],
    provider: str,
    parsed: ParsedSkill,
    source: str,
    base: ResourceBase | str | None,
    path: str | None,
    **extra: Any,
) -> _Skill:
    """A candidate or a definition of one parsed skill (``base``: a directory path or a base)."""
    fields = {name: getattr(parsed, name) for name in _SKILL_FIELDS}
    resource_base = DirectoryResource(path=base) if isinstance(base, str) else base
    return kind(
        **fields, source=source, provider=provider, resource_base=resource_base, path=path, **extra
    )


def read_fields(fields: Mapping[object, object], *, body: str = "") -> ParsedSkill | Problem:
    """The skill ``fields`` describe (a file's or `listed_fields`'), or why it is skipped."""
    try:
        name = _required_text(fields, "name")
        if not is_skill_name(name):
            raise _Invalid(
                "name-invalid",
                f"field 'name' is not a valid skill name: {name!r} "
                "(use lowercase letters, digits and single hyphens, e.g. 'pdf-tools')",
            )
        description = _required_text(fields, "description")
        notes: list[Problem] = []
        optional: dict[str, Any] = {}
        for attribute, (first, second) in _OPTIONAL.items():
            if first in fields and second in fields:
                problem = f"fields {first!r} and {second!r} are the same field; give only one"
                raise _Invalid("field-conflict", problem)
            key = second if second in fields else first
            if (value := fields.get(key, _ABSENT)) is not _ABSENT:
                read = _flag if attribute in _FLAGS else _optional_text
                optional[attribute] = read(key, value, notes)
        return ParsedSkill(
            name=name,
            description=description,
            **optional,
            metadata=_metadata(fields, notes),
            body=body,
            notes=tuple(notes),
            fields=fields,
        )
    except _Invalid as exc:
        return exc.problem


def listed_fields(value: object) -> Mapping[object, object] | Problem:
    """An MCP listing's frontmatter (decoded JSON) as `load_frontmatter` gives a file's."""
    if not isinstance(value, Mapping):
        return not_a_mapping(isinstance(value, list | tuple))
    try:
        fields: Mapping[object, object] = read_only(value)  # type: ignore[assignment]
    except ValueError as exc:
        return Problem("yaml-invalid", f"invalid frontmatter: {exc}")
    # Measured as JSON (a file's is measured as YAML): about the same text.
    return _too_large(canonical_json(fields)) or fields


def _too_large(frontmatter: str) -> Problem | None:
    if (size := len(frontmatter.encode("utf-8", "surrogatepass"))) > MAX_FRONTMATTER_BYTES:
        limit = f"over the {MAX_FRONTMATTER_BYTES}-byte limit"
        return Problem("frontmatter-too-large", f"frontmatter too large: {size} bytes, {limit}")
    return None


def canonical_json(fields: Mapping[object, object]) -> str:
    """One text for equal frontmatter (keys sorted; ``true`` is never ``1``): what a listing is
    compared with the file it lists, and what trust pins. ``""`` for keys JSON cannot hold."""
    try:
        return json.dumps(fields, sort_keys=True, ensure_ascii=False, default=dict)
    except (TypeError, ValueError):
        return ""  # e.g. `1: x` beside `a: y` (a YAML file's; a listing's keys are strings)


class _Invalid(Exception):
    def __init__(self, code: str, message: str) -> None:
        self.problem = Problem(code, message)


# Each optional field by its attribute: its spellings (canonical first; both at once conflict).
_OPTIONAL: Final = {
    "when_to_use": ("whenToUse", "when_to_use"),
    "disable_model_invocation": ("disableModelInvocation", "disable-model-invocation"),
    "user_invocable": ("user-invocable", "userInvocable"),
    "argument_hint": ("argument-hint", "argumentHint"),
}
_FLAGS: Final = ("disable_model_invocation", "user_invocable")
# Every spelling of every optional field this runtime reads.
FIELD_SPELLINGS: Final = tuple(spelling for pair in _OPTIONAL.values() for spelling in pair)
# What a parsed skill gives a candidate or a definition: its fields of the same names.
_SKILL_FIELDS: Final = ("name", "description", "metadata", *_OPTIONAL)
_ABSENT: Final = object()  # not there at all (unlike present with the value null)


def _kind(value: object) -> str:
    return kind_of_value(value, words="yaml")


def _required_text(fields: Mapping[object, object], key: str) -> str:
    value = fields.get(key, _ABSENT)
    if type(value) is str and value.strip():
        return value  # the usual case, first: discovery reads thousands of these
    code = f"{key}-invalid"
    if value is _ABSENT:
        raise _Invalid(code, f"missing required field {key!r}")
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _Invalid(code, f"field {key!r} is empty")
    # `name: 404` or `description: true` surprise authors: say how to get the string.
    hint = " (quote it)" if isinstance(value, bool | int | float) else ""
    raise _Invalid(code, f"field {key!r} must be a string, got {_kind(value)}{hint}")


def _flag(key: str, value: object, notes: list[Problem]) -> bool:
    if not isinstance(value, bool):
        # Fail closed: `disableModelInvocation: yes` must not leave the skill visible.
        shown = f": {value!r}" if isinstance(value, str | int | float) else ""
        problem = f"field {key!r} must be true or false, got {_kind(value)}{shown}"
        raise _Invalid("flag-invalid", problem)
    return value


def _ignored(key: str, why: str) -> Problem:
    return Problem("field-ignored", f"field {key!r} ignored: {why}")


def _optional_text(key: str, value: object, notes: list[Problem]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        notes.append(_ignored(key, f"expected a string, got {_kind(value)}"))
        return None
    return value if value.strip() else None  # a blank hint would only add noise


def _metadata(fields: Mapping[object, object], notes: list[Problem]) -> Mapping[str, object] | None:
    if (value := fields.get("metadata")) is None:
        return None
    if not isinstance(value, MappingProxyType):  # what `read_only` makes of every mapping
        notes.append(_ignored("metadata", f"expected a mapping, got {_kind(value)}"))
        return None
    if not all(map(isinstance, value, repeat(str))):
        notes.append(_ignored("metadata", "its keys must be strings"))
        return None
    return value  # already read-only, keys checked


# The YAML is the 1.2 core schema's, not PyYAML's 1.1, where ``yes`` is a boolean and a flag
# read the wrong way exposes a skill.
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
for _core_kind, (_pattern, _first) in _CORE.items():
    for _char in _first:
        _RESOLVERS.setdefault(_char, []).append((_TAG + _core_kind, _pattern))


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
