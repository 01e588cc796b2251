"""A skill file's text (``---``, YAML frontmatter, ``---``, Markdown body) to a `ParsedSkill` or a
`Problem`; `read_fields`, for a local file's fields and an MCP listing's alike."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import Any, Final, TypeVar

from ._yaml import FRONTMATTER_MISSING, load_frontmatter, not_a_mapping, read_only
from .errors import Problem, ReadError
from .model import (
    DirectoryResource,
    ResourceBase,
    SkillCandidate,
    SkillDefinition,
    is_skill_name,
    kind_of_value,
)

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


# What a parsed skill gives a candidate or a definition: its fields of the same names.
_SKILL_FIELDS: Final = tuple(
    f.name for f in dataclasses.fields(ParsedSkill) if f.name not in ("body", "notes", "fields")
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
    """An MCP listing's frontmatter (decoded JSON) in the shape `acp_skills._yaml` gives a
    file's: mappings read-only, lists as tuples; bounded like a file's frontmatter."""
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
    if not isinstance(value, MappingProxyType):  # what `_yaml` makes of every mapping
        notes.append(_ignored("metadata", f"expected a mapping, got {_kind(value)}"))
        return None
    if not all(map(isinstance, value, repeat(str))):
        notes.append(_ignored("metadata", "its keys must be strings"))
        return None
    return value  # already read-only, keys checked
