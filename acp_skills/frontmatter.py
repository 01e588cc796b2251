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

The YAML itself is loaded by ``_yaml12`` (YAML 1.2 core schema, duplicate keys refused);
this module splits the file and reads the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import Final, cast

from ._yaml12 import NotAMapping, YamlError, load_mapping
from ._yaml_subset import load_common_subset
from .model import is_skill_name, kind_of_value

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
    closing = _closing_line(text, start)
    if closing is None:
        return SkillFileProblem(reason="unterminated frontmatter: no closing '---' line")
    closing_start, closing_end = closing

    frontmatter = text[start:closing_start]
    size = len(frontmatter.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONTMATTER_BYTES:
        return SkillFileProblem(
            reason=f"frontmatter too large: {size} bytes, over the "
            f"{MAX_FRONTMATTER_BYTES}-byte limit"
        )
    fields = _load_frontmatter(frontmatter)
    if isinstance(fields, SkillFileProblem):
        return fields
    return _read_fields(fields, body=text[closing_end:].strip() if with_body else "")


def _closing_line(text: str, start: int) -> tuple[int, int] | None:
    """Find the first line from ``start`` that is exactly ``---`` (maybe ending in ``\\r``).

    Whole lines, not ``split("---")``: a ``---`` inside a value, ``----``, or ``--- `` (with a
    trailing blank) must not end the frontmatter.

    Returns:
        Where that line starts and where it ends (before its line break), or ``None``.
    """
    # Every line from `start` on begins right after a `\n`, the first one included. A plain
    # string search finds candidates several times faster than a MULTILINE regex would.
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


# --- YAML --------------------------------------------------------------------------------------


class _Invalid(Exception):
    """Raised while reading fields; becomes a SkillFileProblem at the top."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _load_frontmatter(source: str) -> Mapping[object, object] | SkillFileProblem:
    """Load the frontmatter text as a read-only mapping, or say why it is not one."""
    # Most frontmatter is in the subset the direct parser reads; it declines (None) the rest.
    common = load_common_subset(source)
    if common is not None:
        return common
    try:
        loaded = load_mapping(source, first_line=_FRONTMATTER_FIRST_LINE)
    except YamlError as exc:
        return SkillFileProblem(reason=f"invalid YAML: {exc.reason}", line=exc.line)
    if isinstance(loaded, NotAMapping):
        if loaded.found == "nothing":
            return SkillFileProblem(reason="missing frontmatter: the frontmatter block is empty")
        return SkillFileProblem(
            reason=f"missing frontmatter: expected a mapping of fields, got {loaded.found}"
        )
    return loaded


# --- fields ---------------------------------------------------------------------------------

# Accepted spellings of each optional field, as (canonical key, other spelling). The two
# spellings of a field are the same field, so giving both is treated like a duplicate key.
_WHEN_TO_USE: Final = ("whenToUse", "when_to_use")
_DISABLE_MODEL_INVOCATION: Final = ("disableModelInvocation", "disable-model-invocation")
_USER_INVOCABLE: Final = ("user-invocable", "userInvocable")
_ARGUMENT_HINT: Final = ("argument-hint", "argumentHint")
_OPTIONAL_SPELLINGS: Final = frozenset(
    (*_WHEN_TO_USE, *_DISABLE_MODEL_INVOCATION, *_USER_INVOCABLE, *_ARGUMENT_HINT)
)


# Marks a field that is not there at all (as opposed to present with the value null).
_ABSENT: Final = object()


def _kind_of(value: object) -> str:
    return kind_of_value(value, words="yaml")


def _lookup(fields: Mapping[object, object], spellings: tuple[str, str]) -> tuple[str, object]:
    """Return (the key used, its value), or (the canonical key, ``_ABSENT``)."""
    first, second = spellings
    if first in fields and second in fields:
        raise _Invalid(f"fields {first!r} and {second!r} are the same field; give only one")
    if second in fields:
        return second, fields[second]
    return first, fields.get(first, _ABSENT)


def _required_text(fields: Mapping[object, object], key: str) -> str:
    value = fields.get(key, _ABSENT)
    if type(value) is str and value.strip():
        return value  # the usual case, checked first: discovery reads thousands of these
    if value is _ABSENT:
        raise _Invalid(f"missing required field {key!r}")
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
    if not all(map(isinstance, value, repeat(str))):
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
        if _OPTIONAL_SPELLINGS.isdisjoint(fields):
            # Most skills give none of these: their defaults, without looking each one up.
            disable_model_invocation, user_invocable = False, True
            when_to_use = argument_hint = None
        else:
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
