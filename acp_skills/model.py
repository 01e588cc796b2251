"""The values that flow through the skill system, and the skill-name grammar."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias

from .text import well_formed

# ASCII only; `fullmatch`, as `$` also matches before a trailing newline.
_SKILL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# A uri with a scheme, no spaces, of a sane length: what may name a served skill's SKILL.md.
_SKILL_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S{1,2048}")
SKILL_FILE_NAME = "SKILL.md"


def is_skill_name(value: object) -> bool:
    """Whether ``value`` is a valid skill name (kebab-case, lowercase ASCII)."""
    return isinstance(value, str) and _SKILL_NAME.fullmatch(value) is not None


def is_skill_uri(value: object) -> bool:
    """Whether ``value`` is a uri (``skill://deploy-app/SKILL.md``) naming a served skill."""
    return isinstance(value, str) and _SKILL_URI.fullmatch(value) is not None


def require_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectoryResource:
    """Resources of the skill live in a local directory (an absolute path)."""

    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UrlResource:
    """Resources of the skill live under a URL."""

    url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OpaqueResource:
    """Resources are managed by the provider; ``description`` tells the model how to reach them."""

    description: str


ResourceBase: TypeAlias = DirectoryResource | UrlResource | OpaqueResource


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSummary:
    """The model-facing identity of a skill: everything but its body."""

    name: str
    description: str
    source: str = "runtime"
    provider: str = "runtime"
    when_to_use: str | None = None
    disable_model_invocation: bool = False
    user_invocable: bool = True
    resource_base: ResourceBase | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillCandidate(SkillSummary):
    """A provider's offer of a skill: lower ``rank`` wins a name clash; ``locator`` is opaque."""

    rank: int | float
    locator: object = None
    path: str | None = None
    metadata: Mapping[str, object] | None = field(default=None, compare=False)
    argument_hint: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillDefinition(SkillSummary):
    """A complete skill: its summary plus the Markdown body in ``content``."""

    content: str
    path: str | None = None
    metadata: Mapping[str, object] | None = field(default=None, compare=False)
    argument_hint: str | None = None


def shared_fields(skill: SkillSummary, kind: type[SkillSummary]) -> dict[str, Any]:
    """The fields of ``skill`` that ``kind`` has too, by name."""
    return {
        item.name: getattr(skill, item.name) for item in fields(kind) if hasattr(skill, item.name)
    }


def summary_of(skill: SkillSummary) -> SkillSummary:
    """The plain `SkillSummary` of any summary, candidate or definition."""
    return SkillSummary(**shared_fields(skill, SkillSummary))


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLookupOptions:
    """A lookup's ``cwd`` (``None``: no project), MCP ``servers`` and ``additional_directories``."""

    cwd: str | None = None
    servers: tuple[Hashable, ...] = ()
    additional_directories: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShadowedSkill:
    """A skill that lost a name clash: ``skill`` is hidden by ``winner`` (of the same name)."""

    skill: SkillCandidate
    winner: SkillCandidate


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSnapshot:
    """Every resolved skill, sorted by name; ``complete``: no provider skipped, the set steady."""

    skills: tuple[SkillCandidate, ...]
    complete: bool
    shadowed: tuple[ShadowedSkill, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixMessage:
    """One message of a session prefix; lone surrogates become U+FFFD (it is frozen)."""

    role: str
    text: str

    def __post_init__(self) -> None:
        # A custom contributor's bad field would otherwise be frozen into every request.
        if not isinstance(self.role, str) or not self.role:
            raise TypeError(f"a prefix message needs a non-empty string role, got {self.role!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"a prefix message's text must be a string, got {self.text!r}")
        object.__setattr__(self, "role", well_formed(self.role))
        object.__setattr__(self, "text", well_formed(self.text))


# What a contributor awaits to get the messages of every contributor registered after it.
PrefixNext: TypeAlias = Callable[[], Awaitable[Sequence[PrefixMessage]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixContext:
    """What a session-prefix contributor knows of its session; ``skills``: what it offers."""

    session_id: str
    cwd: str
    tool_names: frozenset[str] = frozenset()
    servers: tuple[Hashable, ...] = ()
    additional_directories: tuple[str, ...] = ()
    skills: SkillSnapshot | None = field(default=None, compare=False, repr=False)

    @property
    def lookup_options(self) -> SkillLookupOptions:
        """The options every lookup for this session uses."""
        return SkillLookupOptions(
            cwd=self.cwd, servers=self.servers, additional_directories=self.additional_directories
        )


PrefixContributor: TypeAlias = Callable[
    [PrefixContext, PrefixNext], Awaitable[Sequence[PrefixMessage]]
]


def kind_of_value(value: object, *, words: Literal["yaml", "json"]) -> str:
    """The type of a decoded value in YAML's words (``a list``) or JSON's (``an array``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list" if words == "yaml" else "an array"
    if isinstance(value, Mapping):
        return "a mapping" if words == "yaml" else "an object"
    return f"a {type(value).__name__}"


def rank_text(rank: int | float) -> str:
    """A rank as a person writes it: ``300``, not ``300.0``; ``250.5`` as it is."""
    return str(int(rank)) if float(rank).is_integer() else str(rank)
