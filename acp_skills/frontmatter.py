"""Parse a skill file: YAML frontmatter plus a Markdown body. Pure: text in, values out.

    decode_skill_bytes(data)   bytes -> str, or a Problem (strict UTF-8)
    parse_skill_file(text)     str -> ParsedSkill, or a Problem saying why not

A skill file looks like this::

    ---
    name: pdf-tools
    description: Fill in and merge PDF forms.
    ---
    The instructions (the body), in Markdown.

Why not ``yaml.safe_load``? PyYAML implements YAML 1.1, where ``yes``, ``no``, ``on`` and ``off``
are booleans, ``2024-01-01`` is a date and a repeated key silently overwrites the earlier one;
skill authors expect YAML 1.2, and a flag read the wrong way can expose a skill to the model. So
PyYAML only *composes* the text into nodes (in C, with LibYAML, when it is installed), tagged by
YAML 1.2 core-schema resolvers, and this module builds the values itself: deeply read-only
(``MappingProxyType``, tuples), duplicate keys refused, aliases and tags bounded. That is also
about twice as fast as a full load, which matters when a thousand skills are discovered.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, cast

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import Problem
from .model import is_skill_name, kind_of_value

__all__ = ["MAX_FRONTMATTER_BYTES", "ParsedSkill", "decode_skill_bytes", "parse_skill_file"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedSkill:
    """The fields of a well-formed skill file.

    Attributes:
        name: The skill's identity (matches the skill-name grammar).
        description: What the skill does, as written (never empty or blank).
        when_to_use: Extra guidance on when the skill applies, or ``None``.
        disable_model_invocation: When true, the model may not load the skill by itself.
        user_invocable: When false, the user cannot invoke it as a slash command.
        argument_hint: A hint for the slash command's input, or ``None``.
        metadata: The ``metadata`` mapping, deeply read-only, or ``None``.
        body: Everything after the closing ``---`` line, surrounding whitespace stripped.
        notes: One ``field-ignored`` problem per optional field dropped because of its type
            (the skill is still valid; the caller may tell the author).
        fields: Every top-level frontmatter field as written (read-only).
    """

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
        default_factory=lambda: _NO_FIELDS, compare=False, repr=False
    )


_NO_FIELDS: Final[Mapping[object, object]] = MappingProxyType({})


def decode_skill_bytes(data: bytes) -> str | Problem:
    """Decode a skill file's bytes as strict UTF-8 (a byte order mark is kept).

    Returns:
        The text, or a ``not-utf8`` problem naming the offset (from 0) of the first bad byte.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Problem("not-utf8", f"not valid UTF-8 text (byte {exc.start})")


# Frontmatter past this size is refused before YAML sees it. Real frontmatter is a few hundred
# bytes, so 64 KiB is a hundredfold margin, while the costliest YAML of that size (a flow list of
# 20,000 items) takes tens of milliseconds; a 900 KB frontmatter had cost seconds and hundreds
# of MB.
MAX_FRONTMATTER_BYTES: Final = 64 * 1024

# The frontmatter starts on the second line of the file; YAML marks count from 0.
_FIRST_LINE: Final = 2
_MISSING: Final = "frontmatter-missing"
_UNTERMINATED: Final = Problem(_MISSING, "unterminated frontmatter: no closing '---' line")


def parse_skill_file(text: str, *, with_body: bool = True) -> ParsedSkill | Problem:
    """Parse the text of a ``SKILL.md`` (or flat ``<name>.md``) file.

    The first line must be exactly ``---``; the frontmatter runs to the next line that is
    exactly ``---`` (both may end in ``\\r``). A leading byte order mark is ignored. The
    frontmatter must be at most `MAX_FRONTMATTER_BYTES` of UTF-8 and a YAML mapping with a
    valid ``name`` and a non-blank ``description``.

    Accepted optional fields (either spelling; giving both is an error, like any duplicate
    key): ``whenToUse``/``when_to_use``, ``disableModelInvocation``/
    ``disable-model-invocation``, ``user-invocable``/``userInvocable``,
    ``argument-hint``/``argumentHint`` and ``metadata``. An invocation flag that is not
    ``true``/``false`` makes the whole file a problem (fail closed); the other optional fields
    are dropped when mistyped. Unknown fields are ignored.

    Args:
        text: The decoded file contents.
        with_body: ``False`` leaves ``body`` empty, for discovery, which keeps no bodies.

    Returns:
        The parsed skill, or the problem that makes it unusable.
    """
    text = text.removeprefix("\ufeff")
    first_line_end = text.find("\n")
    if (text if first_line_end < 0 else text[:first_line_end]) not in ("---", "---\r"):
        return Problem(_MISSING, "missing frontmatter: the first line must be '---'")
    if first_line_end < 0:
        return _UNTERMINATED
    closing = _closing_line(text, first_line_end + 1)
    if closing is None:
        return _UNTERMINATED
    frontmatter = text[first_line_end + 1 : closing[0]]
    size = len(frontmatter.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONTMATTER_BYTES:
        return Problem(
            "frontmatter-too-large",
            f"frontmatter too large: {size} bytes, over the {MAX_FRONTMATTER_BYTES}-byte limit",
        )
    try:
        fields = _load_mapping(frontmatter)
        return _read_fields(fields, body=text[closing[1] :].strip() if with_body else "")
    except _Invalid as exc:
        return exc.problem


def _closing_line(text: str, start: int) -> tuple[int, int] | None:
    """Where the first line from ``start`` that is exactly ``---`` (maybe with ``\\r``) starts
    and ends (before its line break), or ``None``. Whole lines: a ``---`` inside a value,
    ``----`` or ``--- `` does not end the frontmatter."""
    # Every line from `start` on begins right after a `\n`; a string search finds candidates
    # several times faster than a MULTILINE regex.
    search_from = start - 1
    while True:
        found = text.find("\n---", search_from)
        if found < 0:
            return None
        line_start = found + 1
        line_end = line_start + 3
        if text.startswith("\r", line_end):
            line_end += 1
        if line_end == len(text) or text[line_end] == "\n":
            return line_start, line_end
        search_from = line_start


class _Invalid(Exception):
    """Raised while loading or reading fields; its problem is what `parse_skill_file` returns."""

    def __init__(self, code: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.problem = Problem(code, message, line)


def _yaml_invalid(reason: str, line: int | None = None) -> _Invalid:
    return _Invalid("yaml-invalid", f"invalid YAML: {reason}", line)


# --- YAML 1.2 core schema -----------------------------------------------------------------

_TAG: Final = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT, _SEQ, _MAP = (
    _TAG + kind for kind in ("str", "null", "bool", "int", "float", "seq", "map")
)

# https://yaml.org/spec/1.2.2/#1032-tag-resolution, except that booleans accept any letter case,
# as the contract asks. re.ASCII keeps IGNORECASE from matching look-alikes (U+017F for "s").
_NULL_PATTERN: Final = re.compile(r"(?:~|null|Null|NULL|)\Z")
_BOOL_PATTERN: Final = re.compile(r"(?:true|false)\Z", re.IGNORECASE | re.ASCII)
_INT_PATTERN: Final = re.compile(
    r"(?:(?P<dec>[-+]?[0-9]+)|0o(?P<oct>[0-7]+)|0x(?P<hex>[0-9a-fA-F]+))\Z", re.ASCII
)
_FLOAT_PATTERN: Final = re.compile(
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?(?:\.inf|\.Inf|\.INF)|\.nan|\.NaN|\.NAN)\Z",
    re.ASCII,
)

# First character of a plain scalar -> the patterns it may match, in order (int before float,
# which also matches `12`). No timestamps (dates stay strings), no merge key, no `=` value.
_RESOLVERS: Final[dict[str, tuple[tuple[str, re.Pattern[str]], ...]]] = {}
for _tag, _pattern, _initials in (
    (_NULL, _NULL_PATTERN, ("~", "n", "N", "")),
    (_BOOL, _BOOL_PATTERN, tuple("tTfF")),
    (_INT, _INT_PATTERN, tuple("-+0123456789")),
    (_FLOAT, _FLOAT_PATTERN, tuple("-+.0123456789")),
):
    for _initial in _initials:
        _RESOLVERS[_initial] = (*_RESOLVERS.get(_initial, ()), (_tag, _pattern))

if TYPE_CHECKING:
    _Parser = yaml.SafeLoader
elif yaml.__with_libyaml__:
    # Only LibYAML's parser and composer: the constructor and resolver that CSafeLoader adds
    # would be set up for every file and never used (a tenth of the cost of a small file).
    from yaml.cyaml import CParser as _Parser
else:
    _Parser = yaml.SafeLoader


class _CoreSchemaLoader(_Parser):
    """Composes only, tagging plain scalars by the core schema (PyYAML's loaders untouched)."""

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        """The tag of a node without an explicit one: a quoted scalar is always a string."""
        if kind is ScalarNode:
            if implicit[0]:
                for tag, pattern in _RESOLVERS.get(value[:1], ()):
                    if pattern.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    # There are no path resolvers to track.
    def descend_resolver(self, current_node: Node | None, current_index: object) -> None:
        """Nothing to do."""

    def ascend_resolver(self) -> None:
        """Nothing to do."""


# Hostile or broken input becomes a problem, not a RecursionError or an exponential blow-up
# ("billion laughs"). Real frontmatter is a handful of levels deep and a few dozen values large.
_MAX_DEPTH: Final = 100
_MAX_EXPANDED_VALUES: Final = 100_000


def _load_mapping(source: str) -> Mapping[object, object]:
    """The frontmatter as a read-only mapping; raises `_Invalid` when it is not one."""
    try:
        loader = _CoreSchemaLoader(source)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "malformed YAML"
        if mark is None:
            raise _yaml_invalid(what) from None
        line = mark.line + _FIRST_LINE
        raise _yaml_invalid(f"{what} (line {line}, column {mark.column + 1})", line) from None
    except yaml.YAMLError as exc:
        raise _yaml_invalid(str(exc).splitlines()[0]) from None
    except RecursionError:  # only the pure-Python composer recurses
        raise _yaml_invalid("nested too deeply") from None
    except UnicodeEncodeError:  # LibYAML encodes to UTF-8 first; lone surrogates cannot be
        raise _yaml_invalid("the text contains unpaired surrogates") from None
    if isinstance(root, MappingNode):
        # The walker turns a `!!map` node into a mapping and refuses any other tag on it.
        return cast("Mapping[object, object]", _Walker().build(root, 0)[0])
    if root is None:
        raise _Invalid(_MISSING, "missing frontmatter: the frontmatter block is empty")
    found = "a list" if isinstance(root, SequenceNode) else "a single value"
    raise _Invalid(_MISSING, f"missing frontmatter: expected a mapping of fields, got {found}")


def _at(node: Node) -> str:
    mark = node.start_mark
    return "" if mark is None else f" (line {mark.line + _FIRST_LINE})"


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


class _Walker:
    """Turns a node graph into values. An alias makes one node appear in several places (or
    inside itself: ``&a [*a]``): each collection is built once and reused, one met again while
    being built is a cycle, and the size with every alias written out is bounded."""

    __slots__ = ("_built", "_in_progress")

    def __init__(self) -> None:
        # id(node) -> (value, expanded size); the root keeps every node alive meanwhile.
        self._built: dict[int, tuple[object, int]] = {}
        self._in_progress: set[int] = set()

    def build(self, node: Node, depth: int) -> tuple[object, int]:
        """The value of a collection ``node`` and its expanded size (number of values)."""
        key = id(node)
        built = self._built.get(key)
        if built is not None:
            return built
        if key in self._in_progress:
            raise _yaml_invalid(f"an alias refers to the collection that contains it{_at(node)}")
        if depth >= _MAX_DEPTH:
            raise _yaml_invalid(f"nested more than {_MAX_DEPTH} levels deep{_at(node)}")
        self._in_progress.add(key)
        try:
            if isinstance(node, SequenceNode) and node.tag == _SEQ:
                result = self._sequence(node, depth)
            elif isinstance(node, MappingNode) and node.tag == _MAP:
                result = self._mapping(node, depth)
            else:
                raise _yaml_invalid(f"unsupported YAML tag {_short(node.tag)}{_at(node)}")
        finally:
            self._in_progress.discard(key)
        if result[1] > _MAX_EXPANDED_VALUES:
            raise _yaml_invalid(
                f"aliases expand to more than {_MAX_EXPANDED_VALUES} values{_at(node)}"
            )
        self._built[key] = result
        return result

    def _value(self, node: Node, depth: int) -> tuple[object, int]:
        if type(node) is ScalarNode:
            return (node.value if node.tag == _STR else _scalar(node)), 1
        return self.build(node, depth + 1)

    def _sequence(self, node: SequenceNode, depth: int) -> tuple[object, int]:
        items: list[object] = []
        size = 1
        for child in node.value:
            value, child_size = self._value(child, depth)
            items.append(value)
            size += child_size
        return tuple(items), size

    def _mapping(self, node: MappingNode, depth: int) -> tuple[object, int]:
        result: dict[object, object] = {}
        size = 1
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode:
                raise _yaml_invalid(f"a mapping key must be a single value{_at(key_node)}")
            key = key_node.value if key_node.tag == _STR else _scalar(key_node)
            # Python equality decides: `1`, `1.0` and `true` are one dict key, so they count as
            # duplicates here although YAML would call them different.
            if key in result:
                raise _yaml_invalid(f"duplicate key {key!r}{_at(key_node)}")
            result[key], value_size = self._value(value_node, depth)
            size += 1 + value_size
        return MappingProxyType(result), size


def _scalar(node: ScalarNode) -> object:
    """A scalar by its (resolved or explicit) tag, per the core schema."""
    tag, text = node.tag, node.value
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
            digits, base = next((match[g], b) for g, b in _BASES if match[g] is not None)
            try:
                return int(digits, base)
            except ValueError:  # over 4300 decimal digits (CVE-2020-10735)
                raise _yaml_invalid(f"integer too long{_at(node)}") from None
    elif tag == _FLOAT:
        if _FLOAT_PATTERN.match(text):
            special = text.lstrip("+-").lower()
            if special == ".inf":
                return -math.inf if text.startswith("-") else math.inf
            return math.nan if special == ".nan" else float(text)
    else:
        raise _yaml_invalid(f"unsupported YAML tag {_short(tag)}{_at(node)}")
    # Only an explicit tag gets here, e.g. `!!bool yes` or `!!int 1_000`.
    raise _yaml_invalid(f"{text!r} is not a valid {_short(tag)} value{_at(node)}")


_BASES: Final = (("oct", 8), ("hex", 16), ("dec", 10))


# --- fields ---------------------------------------------------------------------------------

# Accepted spellings of each optional field, (canonical, other); both at once is a conflict.
_WHEN_TO_USE: Final = ("whenToUse", "when_to_use")
_DISABLE_MODEL_INVOCATION: Final = ("disableModelInvocation", "disable-model-invocation")
_USER_INVOCABLE: Final = ("user-invocable", "userInvocable")
_ARGUMENT_HINT: Final = ("argument-hint", "argumentHint")
_OPTIONAL_SPELLINGS: Final = frozenset(
    (*_WHEN_TO_USE, *_DISABLE_MODEL_INVOCATION, *_USER_INVOCABLE, *_ARGUMENT_HINT)
)
_ABSENT: Final = object()  # not there at all (unlike present with the value null)


def _kind_of(value: object) -> str:
    return kind_of_value(value, words="yaml")


def _lookup(fields: Mapping[object, object], spellings: tuple[str, str]) -> tuple[str, object]:
    """(The key used, its value), or (the canonical key, ``_ABSENT``)."""
    first, second = spellings
    if first in fields and second in fields:
        raise _Invalid(
            "field-conflict", f"fields {first!r} and {second!r} are the same field; give only one"
        )
    if second in fields:
        return second, fields[second]
    return first, fields.get(first, _ABSENT)


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
    raise _Invalid(code, f"field {key!r} must be a string, got {_kind_of(value)}{hint}")


def _flag(fields: Mapping[object, object], spellings: tuple[str, str], default: bool) -> bool:
    key, value = _lookup(fields, spellings)
    if value is _ABSENT:
        return default
    if not isinstance(value, bool):
        # Fail closed: `disableModelInvocation: yes` must not leave the skill visible.
        shown = f": {value!r}" if isinstance(value, str | int | float) else ""
        raise _Invalid(
            "flag-invalid", f"field {key!r} must be true or false, got {_kind_of(value)}{shown}"
        )
    return value


def _ignored(key: str, why: str) -> Problem:
    return Problem("field-ignored", f"field {key!r} ignored: {why}")


def _optional_text(
    fields: Mapping[object, object], spellings: tuple[str, str], notes: list[Problem]
) -> str | None:
    key, value = _lookup(fields, spellings)
    if value is _ABSENT or value is None:
        return None
    if not isinstance(value, str):
        notes.append(_ignored(key, f"expected a string, got {_kind_of(value)}"))
        return None
    return value if value.strip() else None  # a blank hint would only add noise


def _metadata(fields: Mapping[object, object], notes: list[Problem]) -> Mapping[str, object] | None:
    value = fields.get("metadata")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        notes.append(_ignored("metadata", f"expected a mapping, got {_kind_of(value)}"))
        return None
    if not all(map(isinstance, value, repeat(str))):
        notes.append(_ignored("metadata", "its keys must be strings"))
        return None
    return cast("Mapping[str, object]", value)  # already read-only, keys checked


def _read_fields(fields: Mapping[object, object], *, body: str) -> ParsedSkill:
    name = _required_text(fields, "name")
    if not is_skill_name(name):
        raise _Invalid(
            "name-invalid",
            f"field 'name' is not a valid skill name: {name!r} "
            "(use lowercase letters, digits and single hyphens, e.g. 'pdf-tools')",
        )
    description = _required_text(fields, "description")
    notes: list[Problem] = []
    if _OPTIONAL_SPELLINGS.isdisjoint(fields):  # most skills give none of these
        disable_model_invocation, user_invocable = False, True
        when_to_use = argument_hint = None
    else:
        disable_model_invocation = _flag(fields, _DISABLE_MODEL_INVOCATION, default=False)
        user_invocable = _flag(fields, _USER_INVOCABLE, default=True)
        when_to_use = _optional_text(fields, _WHEN_TO_USE, notes)
        argument_hint = _optional_text(fields, _ARGUMENT_HINT, notes)
    return ParsedSkill(
        name=name,
        description=description,
        when_to_use=when_to_use,
        disable_model_invocation=disable_model_invocation,
        user_invocable=user_invocable,
        argument_hint=argument_hint,
        metadata=_metadata(fields, notes),
        body=body,
        notes=tuple(notes),
        fields=fields,
    )
