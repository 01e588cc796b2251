"""Parse a skill file: YAML frontmatter plus a Markdown body. Pure: text in, values out.

    decode_skill_bytes(data)   bytes -> str, or a SkillFileProblem (strict UTF-8)
    parse_skill_file(text)     str -> ParsedSkill, or a SkillFileProblem saying why not

A skill file looks like this::

    ---
    name: pdf-tools
    description: Fill in and merge PDF forms.
    ---
    The instructions (the body), in Markdown.

Nothing here touches the disk or logs: a problem is returned as a value, so the caller (the
local provider) decides how to report it, and the parser is easy to test exhaustively.

Why not ``yaml.safe_load``? PyYAML implements YAML 1.1, where ``yes``, ``no``, ``on`` and ``off``
are booleans and ``2024-01-01`` is a date, and where a repeated key silently overwrites the
earlier one. Skill authors write YAML expecting 1.2 behaviour, and a flag read the wrong way can
expose a skill to the model. So PyYAML only *composes* the text into a node graph (with the
LibYAML C parser when it is installed), tagged by our own YAML 1.2 core-schema resolvers, and this
module turns the nodes into Python values itself. That is also about twice as fast as a full
load, which matters when a thousand skills are discovered per catalog.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, cast

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .model import is_skill_name

__all__ = [
    "MAX_FRONTMATTER_BYTES",
    "ParsedSkill",
    "SkillFileProblem",
    "decode_skill_bytes",
    "parse_skill_file",
]


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
        metadata: The ``metadata`` mapping, deeply read-only (nested mappings are
            ``MappingProxyType`` and sequences are tuples), or ``None``.
        body: Everything after the closing ``---`` line, surrounding whitespace stripped.
        notes: One reason per optional field that was present but ignored because of its
            type (the skill is still valid; the caller may tell the author).
        fields: Every top-level frontmatter field as written (read-only), for checks beyond
            what the runtime needs (unknown keys, the specification's limits).
    """

    name: str
    description: str
    when_to_use: str | None = None
    disable_model_invocation: bool = False
    user_invocable: bool = True
    argument_hint: str | None = None
    metadata: Mapping[str, object] | None = None
    body: str
    notes: tuple[str, ...] = ()
    fields: Mapping[object, object] = field(
        default_factory=lambda: _NO_FIELDS, compare=False, repr=False
    )


_NO_FIELDS: Final[Mapping[object, object]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillFileProblem:
    """Why a skill file cannot be used.

    Attributes:
        reason: A human-readable explanation, naming the offending field or line.
        line: The line of the file (counted from 1) where the problem is, when known.
    """

    reason: str
    line: int | None = None


def decode_skill_bytes(data: bytes) -> str | SkillFileProblem:
    """Decode a skill file's bytes as strict UTF-8.

    A byte order mark is kept (``parse_skill_file`` ignores it).

    Args:
        data: The raw file contents.

    Returns:
        The text, or a problem naming the offset (counted from 0) of the first bad byte.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return SkillFileProblem(reason=f"not valid UTF-8 text (byte {exc.start})")


# --- splitting the frontmatter from the body ------------------------------------------------

_BOM: Final = "\ufeff"

# A delimiter is a whole line that is exactly `---`, tolerating the `\r` of a CRLF file. Whole
# lines, not `split("---")`: a `---` inside a value, `----`, or `--- ` (trailing blank) must
# not end the frontmatter. In MULTILINE mode `^` matches right after a `\n` and `$` right before
# one (or at the end of the text).
_CLOSING_LINE: Final = re.compile(r"^---\r?$", re.MULTILINE)

# The frontmatter starts on the second line of the file; YAML marks count from 0.
_FRONTMATTER_FIRST_LINE: Final = 2

# Frontmatter past this size is refused before YAML sees it. Real frontmatter is a few hundred
# bytes (a name, a description of a sentence or two, a small metadata mapping), so 64 KiB is a
# hundredfold margin, while the costliest YAML of that size (a flow list of 20,000 items)
# takes tens of milliseconds; a 900 KB frontmatter had cost seconds and hundreds of MB.
MAX_FRONTMATTER_BYTES: Final = 64 * 1024


def parse_skill_file(text: str, *, with_body: bool = True) -> ParsedSkill | SkillFileProblem:
    """Parse the text of a ``SKILL.md`` (or flat ``<name>.md``) file.

    The first line must be exactly ``---``; the frontmatter runs to the next line that is
    exactly ``---`` (both may end in ``\\r``). A leading byte order mark is ignored. The
    frontmatter must be at most `MAX_FRONTMATTER_BYTES` of UTF-8 (checked before it is parsed)
    and a YAML mapping with a valid ``name`` and a non-blank ``description``.

    Accepted optional fields (either spelling; giving both spellings is an error, like any
    duplicate key): ``whenToUse``/``when_to_use``, ``disableModelInvocation``/
    ``disable-model-invocation``, ``user-invocable``/``userInvocable``,
    ``argument-hint``/``argumentHint`` and ``metadata``. An invocation flag that is present
    but not ``true``/``false`` makes the whole file a problem (fail closed); the other optional
    fields are dropped when mistyped. Unknown fields are ignored.

    Args:
        text: The decoded file contents.
        with_body: ``False`` leaves ``body`` empty, for discovery, which needs only the
            frontmatter and should not keep a copy of every body.

    Returns:
        The parsed skill, or a problem whose ``reason`` says what is wrong.
    """
    if text.startswith(_BOM):
        text = text[1:]
    first_line_end = text.find("\n")
    first_line = text if first_line_end < 0 else text[:first_line_end]
    if first_line not in ("---", "---\r"):
        return SkillFileProblem(reason="missing frontmatter: the first line must be '---'")
    if first_line_end < 0:
        return SkillFileProblem(reason="unterminated frontmatter: no closing '---' line")
    start = first_line_end + 1
    closing = _CLOSING_LINE.search(text, start)
    if closing is None:
        return SkillFileProblem(reason="unterminated frontmatter: no closing '---' line")

    frontmatter = text[start : closing.start()]
    size = len(frontmatter.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONTMATTER_BYTES:
        return SkillFileProblem(
            reason=f"frontmatter too large: {size} bytes, over the "
            f"{MAX_FRONTMATTER_BYTES}-byte limit"
        )
    fields = _load_frontmatter(frontmatter)
    if isinstance(fields, SkillFileProblem):
        return fields
    return _read_fields(fields, body=text[closing.end() :].strip() if with_body else "")


# --- YAML: composing with YAML 1.2 core-schema resolvers ------------------------------------

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

    yaml_implicit_resolvers = _core_schema_resolvers()

    # The composer calls these three for every node. PyYAML's versions also serve path
    # resolvers, which we never register; these leaner ones only do what the table above
    # says. Together they save about a tenth of the parse time of a typical file.

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        """Tag a node that carries no explicit tag, by the core-schema table."""
        if kind is ScalarNode:
            # implicit[0] is true for plain scalars only; a quoted scalar is always a string.
            if implicit[0]:
                for tag, pattern in self.yaml_implicit_resolvers.get(value[:1], ()):
                    if pattern.match(value):
                        return tag
            return _STR
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


class _Invalid(Exception):
    """Raised while walking nodes or reading fields; becomes a SkillFileProblem at the top."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _load_frontmatter(source: str) -> Mapping[object, object] | SkillFileProblem:
    """Compose the frontmatter text and convert it into a read-only mapping."""
    try:
        root = yaml.compose(source, Loader=_CoreSchemaLoader)
    except yaml.MarkedYAMLError as exc:
        return SkillFileProblem(
            reason=f"invalid YAML: {_describe_yaml_error(exc)}", line=_error_line(exc)
        )
    except yaml.YAMLError as exc:
        return SkillFileProblem(reason=f"invalid YAML: {str(exc).splitlines()[0]}")
    except RecursionError:
        # Only the pure-Python fallback composer recurses; LibYAML has its own depth limit.
        return SkillFileProblem(reason="invalid YAML: nested too deeply")
    except UnicodeEncodeError:
        # LibYAML encodes the text as UTF-8 first, which lone surrogates cannot survive.
        # (Text from decode_skill_bytes never contains them; a caller's own str might.)
        return SkillFileProblem(reason="invalid YAML: the text contains unpaired surrogates")
    if root is None:
        return SkillFileProblem(reason="missing frontmatter: the frontmatter block is empty")
    if not isinstance(root, MappingNode):
        kind = "a list" if isinstance(root, SequenceNode) else "a single value"
        return SkillFileProblem(
            reason=f"missing frontmatter: expected a mapping of fields, got {kind}"
        )
    try:
        value, _ = _NodeWalker().build(root, depth=0)
    except _Invalid as exc:
        return SkillFileProblem(reason=f"invalid YAML: {exc.reason}")
    # The walker turns a `!!map` node into a mapping and refuses any other tag on it.
    return cast("Mapping[object, object]", value)


def _describe_yaml_error(exc: yaml.MarkedYAMLError) -> str:
    """One line: what went wrong and where, in the file's own line numbers."""
    what = exc.problem or exc.context or "malformed YAML"
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return what
    return f"{what} (line {mark.line + _FRONTMATTER_FIRST_LINE}, column {mark.column + 1})"


def _error_line(exc: yaml.MarkedYAMLError) -> int | None:
    mark = exc.problem_mark or exc.context_mark
    return None if mark is None else mark.line + _FRONTMATTER_FIRST_LINE


def _where(node: Node) -> str:
    mark = node.start_mark
    return "" if mark is None else f" (line {mark.line + _FRONTMATTER_FIRST_LINE})"


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

    __slots__ = ("_built", "_in_progress")

    def __init__(self) -> None:
        # id(node) -> (value, expanded size). The root keeps every node alive while we walk,
        # so ids cannot be recycled underneath us.
        self._built: dict[int, tuple[object, int]] = {}
        self._in_progress: set[int] = set()

    def build(self, node: Node, depth: int) -> tuple[object, int]:
        """Return the value of ``node`` and its expanded size (number of values)."""
        if isinstance(node, ScalarNode):
            return _scalar_value(node), 1
        key = id(node)
        built = self._built.get(key)
        if built is not None:
            return built
        if key in self._in_progress:
            raise _Invalid(f"an alias refers to the collection that contains it{_where(node)}")
        if depth >= _MAX_DEPTH:
            raise _Invalid(f"nested more than {_MAX_DEPTH} levels deep{_where(node)}")
        self._in_progress.add(key)
        try:
            if isinstance(node, SequenceNode) and node.tag == _SEQ:
                result = self._sequence(node, depth)
            elif isinstance(node, MappingNode) and node.tag == _MAP:
                result = self._mapping(node, depth)
            else:
                raise _Invalid(f"unsupported YAML tag {_short_tag(node.tag)}{_where(node)}")
        finally:
            self._in_progress.discard(key)
        if result[1] > _MAX_EXPANDED_VALUES:
            raise _Invalid(
                f"aliases expand to more than {_MAX_EXPANDED_VALUES} values{_where(node)}"
            )
        self._built[key] = result
        return result

    def _sequence(self, node: SequenceNode, depth: int) -> tuple[object, int]:
        items: list[object] = []
        size = 1
        for child in node.value:
            # Scalars are inlined: they are most nodes, and a call per node shows in profiles.
            if isinstance(child, ScalarNode):
                items.append(_scalar_value(child))
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
                raise _Invalid(f"a mapping key must be a single value{_where(key_node)}")
            key = _scalar_value(key_node)
            # Python equality decides: `1`, `1.0` and `true` are the same dict key, so they
            # count as duplicates here although YAML would call them different.
            if key in result:
                raise _Invalid(f"duplicate key {key!r}{_where(key_node)}")
            if isinstance(value_node, ScalarNode):
                result[key] = _scalar_value(value_node)
                size += 2
            else:
                value, value_size = self.build(value_node, depth + 1)
                result[key] = value
                size += 1 + value_size
        return MappingProxyType(result), size


def _scalar_value(node: ScalarNode) -> object:
    """Convert one scalar by its (resolved or explicit) tag, per the YAML 1.2 core schema."""
    tag = node.tag
    text: str = node.value
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
                raise _Invalid(f"integer too long{_where(node)}") from None
    elif tag == _FLOAT:
        if _FLOAT_PATTERN.match(text):
            special = text.lstrip("+-").lower()
            if special == ".inf":
                return -math.inf if text.startswith("-") else math.inf
            if special == ".nan":
                return math.nan
            return float(text)
    else:
        raise _Invalid(f"unsupported YAML tag {_short_tag(tag)}{_where(node)}")
    # Only an explicit tag can get here, e.g. `!!bool yes` or `!!int 1_000`.
    raise _Invalid(f"{text!r} is not a valid {_short_tag(tag)} value{_where(node)}")


# --- fields ---------------------------------------------------------------------------------

# Accepted spellings of each optional field, as (canonical key, other spelling). The two
# spellings of a field are the same field, so giving both is treated like a duplicate key.
_WHEN_TO_USE: Final = ("whenToUse", "when_to_use")
_DISABLE_MODEL_INVOCATION: Final = ("disableModelInvocation", "disable-model-invocation")
_USER_INVOCABLE: Final = ("user-invocable", "userInvocable")
_ARGUMENT_HINT: Final = ("argument-hint", "argumentHint")


# Marks a field that is not there at all (as opposed to present with the value null).
_ABSENT: Final = object()


def _kind_of(value: object) -> str:
    """Name a YAML value's type the way a skill author would."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, tuple):
        return "a list"
    return "a mapping"


def _lookup(fields: Mapping[object, object], spellings: tuple[str, str]) -> tuple[str, object]:
    """Return (the key used, its value), or (the canonical key, ``_ABSENT``)."""
    first, second = spellings
    if first in fields and second in fields:
        raise _Invalid(f"fields {first!r} and {second!r} are the same field; give only one")
    if second in fields:
        return second, fields[second]
    return first, fields.get(first, _ABSENT)


def _required_text(fields: Mapping[object, object], key: str) -> str:
    if key not in fields:
        raise _Invalid(f"missing required field {key!r}")
    value = fields[key]
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _Invalid(f"field {key!r} is empty")
    if isinstance(value, bool | int | float):
        # `name: 404` or `description: true` read as a number or boolean, which surprises
        # authors; say how to get the string they meant.
        raise _Invalid(f"field {key!r} must be a string, got {_kind_of(value)} (quote it)")
    if not isinstance(value, str):
        raise _Invalid(f"field {key!r} must be a string, got {_kind_of(value)}")
    return value


def _flag(fields: Mapping[object, object], spellings: tuple[str, str], default: bool) -> bool:
    key, value = _lookup(fields, spellings)
    if value is _ABSENT:
        return default
    if not isinstance(value, bool):
        # Fail closed: a typo such as `disableModelInvocation: yes` must not silently leave
        # the skill visible to the model.
        shown = f": {value!r}" if isinstance(value, str | int | float) else ""
        raise _Invalid(f"field {key!r} must be true or false, got {_kind_of(value)}{shown}")
    return value


def _optional_text(
    fields: Mapping[object, object], spellings: tuple[str, str], notes: list[str]
) -> str | None:
    key, value = _lookup(fields, spellings)
    if value is _ABSENT or value is None:
        return None
    if not isinstance(value, str):
        notes.append(f"field {key!r} ignored: expected a string, got {_kind_of(value)}")
        return None
    # A blank hint or guidance would only add noise downstream.
    return value if value.strip() else None


def _metadata(fields: Mapping[object, object], notes: list[str]) -> Mapping[str, object] | None:
    value = fields.get("metadata")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        notes.append(f"field 'metadata' ignored: expected a mapping, got {_kind_of(value)}")
        return None
    if not all(isinstance(key, str) for key in value):
        notes.append("field 'metadata' ignored: its keys must be strings")
        return None
    # Already a read-only MappingProxyType (the walker built it), and its keys were checked.
    return cast("Mapping[str, object]", value)


def _read_fields(fields: Mapping[object, object], *, body: str) -> ParsedSkill | SkillFileProblem:
    notes: list[str] = []
    try:
        name = _required_text(fields, "name")
        if not is_skill_name(name):
            raise _Invalid(
                f"field 'name' is not a valid skill name: {name!r} "
                "(use lowercase letters, digits and single hyphens, e.g. 'pdf-tools')"
            )
        description = _required_text(fields, "description")
        disable_model_invocation = _flag(fields, _DISABLE_MODEL_INVOCATION, default=False)
        user_invocable = _flag(fields, _USER_INVOCABLE, default=True)
        when_to_use = _optional_text(fields, _WHEN_TO_USE, notes)
        argument_hint = _optional_text(fields, _ARGUMENT_HINT, notes)
    except _Invalid as exc:
        return SkillFileProblem(reason=exc.reason)
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
