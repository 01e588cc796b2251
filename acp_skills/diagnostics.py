"""Diagnostics: every problem skill discovery meets, as one kind of record.

    Diagnostic           the record: a stable code, a severity, the path, the line, a message
    CODES                every code, with its default severity and the log event it becomes
    diagnostic           the record of a `Problem` at a path
    file_diagnostics     what one skill file's read-and-parse outcome says about it
    root_missing, shadow_diagnostic, provider_failed   the other records
    log_diagnostic       the structured log event of a record

Discovery produces these records once (`LocalSkillProvider.discover`, `SkillRegistry.diagnose`)
and everything that reports a problem reads them: the provider's warnings in the log, the
``acp-skills`` command line, and the agent's ``/skills`` command and ``_skills/list`` result. The
codes are part of the public surface and documented in ``docs/diagnostics.md``; a code is never
renamed or reused for something else. Every code comes from where the problem arose (a `Problem`,
a ``FileReadError``): nothing here reads a message to find one.

Pure: nothing here touches the disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from .errors import Problem
from .frontmatter import ParsedSkill
from .fs import FileReadError
from .model import SKILL_FILE_NAME, ShadowedSkill

__all__ = [
    "CODES",
    "KNOWN_FRONTMATTER_KEYS",
    "CodeSpec",
    "Diagnostic",
    "Severity",
    "counts_as_problem",
    "diagnostic",
    "file_diagnostics",
    "log_diagnostic",
    "provider_failed",
    "root_missing",
    "shadow_diagnostic",
    "skipped",
]

Severity: TypeAlias = Literal["error", "warning", "info"]
"""``error``: a skill is lost (or, in strict validation, breaks the specification);
``warning``: the skill works but probably not as its author meant; ``info``: worth knowing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One problem found with a skill file, a skill root or a provider.

    Attributes:
        code: A stable identifier from `CODES` (``yaml-invalid``, ``name-mismatch``, ...).
        severity: ``error``, ``warning`` or ``info``.
        path: The file or directory concerned, or ``None`` when there is none (a runtime
            skill, a provider).
        line: The line of the file (from 1) the problem is on, when known.
        message: What is wrong, for a person.
        skill: The skill's name when the file was read far enough to have one. Logs carry it;
            the JSON form does not (the message names the skill where it matters).
    """

    code: str
    severity: Severity
    path: str | None
    line: int | None = None
    message: str
    skill: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"code", "severity", "path", "line", "message"}``, the stable wire and CLI shape."""
        return {key: getattr(self, key) for key in ("code", "severity", "path", "line", "message")}


def counts_as_problem(diagnostic: Diagnostic) -> bool:
    """Whether ``diagnostic`` is an error or a warning (an ``info`` is not a problem)."""
    return diagnostic.severity != "info"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeSpec:
    """What a code means by default: its records' severity (strict validation raises some),
    the structured log event the local provider emits for it and that event's level, and
    whether the file or directory concerned is left out of discovery."""

    severity: Severity
    event: str
    level: Literal["debug", "info", "warning"]
    skipped: bool = False


def _code(
    severity: Severity,
    event: str = "skill_file_skipped",
    level: Literal["debug", "info", "warning"] = "warning",
    *,
    skipped: bool = False,
) -> CodeSpec:
    return CodeSpec(severity=severity, event=event, level=level, skipped=skipped)


CODES: Final[Mapping[str, CodeSpec]] = {
    # Roots.
    "root-missing": _code("warning", "skill_root_missing", "debug"),
    "root-unreadable": _code("error", skipped=True),
    # A file (or a directory entry) left out of discovery.
    "broken-link": _code("error", skipped=True),
    "file-unreadable": _code("error", skipped=True),
    "file-too-large": _code("error", skipped=True),
    "not-utf8": _code("error", skipped=True),
    "frontmatter-missing": _code("error", skipped=True),
    "frontmatter-too-large": _code("error", skipped=True),
    "yaml-invalid": _code("error", skipped=True),
    "name-invalid": _code("error", skipped=True),
    "description-invalid": _code("error", skipped=True),
    "flag-invalid": _code("error", skipped=True),
    "field-conflict": _code("error", skipped=True),
    "file-invalid": _code("error", skipped=True),
    # A directory of a root without SKILL.md: shared helpers, or a skill nested too deep.
    "skill-file-absent": _code("info", "skill_file_absent", "debug"),
    # A skill that is discovered, with something its author should know.
    "field-ignored": _code("warning", "skill_field_ignored"),
    "name-mismatch": _code("warning", "skill_name_mismatch"),
    "unknown-key": _code("info", "skill_key_unknown", "info"),
    # Resolution (reported by the registry, which logs `skill_shadowed` itself).
    "skill-shadowed": _code("info", "skill_shadowed"),
    "skill-duplicate": _code("warning", "skill_shadowed"),
    "provider-failed": _code("error", "skill_provider_skipped"),
    # Strict validation against the Agent Skills specification (`acp-skills validate --strict`).
    "name-too-long": _code("error", "skill_spec_violation"),
    "description-too-long": _code("error", "skill_spec_violation"),
    "compatibility-invalid": _code("error", "skill_spec_violation"),
    "metadata-invalid": _code("error", "skill_spec_violation"),
    "allowed-tools-invalid": _code("error", "skill_spec_violation"),
    "flat-skill": _code("error", "skill_spec_violation"),
    # What `acp-skills validate` is pointed at.
    "not-found": _code("error", "skill_path_invalid"),
    "not-a-skill": _code("error", "skill_path_invalid"),
    "no-skills": _code("warning", "skill_path_invalid"),
}
"""Every diagnostic code. Stable: documented in ``docs/diagnostics.md``."""


# The frontmatter keys that are not "unknown": the Agent Skills specification's own, then the
# ones this runtime reads (both spellings it accepts).
KNOWN_FRONTMATTER_KEYS: Final = frozenset(
    [
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
        "whenToUse",
        "when_to_use",
        "disableModelInvocation",
        "disable-model-invocation",
        "user-invocable",
        "userInvocable",
        "argument-hint",
        "argumentHint",
    ]
)


def diagnostic(problem: Problem, path: str | None, *, skill: str | None = None) -> Diagnostic:
    """The record of ``problem`` (its code, message and line) at ``path``."""
    return Diagnostic(
        code=problem.code,
        severity=CODES[problem.code].severity,
        path=path,
        line=problem.line,
        message=problem.message,
        skill=skill,
    )


def _record(code: str, path: str | None, message: str, *, skill: str | None = None) -> Diagnostic:
    return diagnostic(Problem(code, message), path, skill=skill)


# -- what a skill file's outcome says ----------------------------------------------------------


def file_diagnostics(
    path: str,
    outcome: ParsedSkill | Problem | FileReadError,
    *,
    expected_name: str | None = None,
) -> tuple[Diagnostic, ...]:
    """What reading and parsing one skill file found, as the runtime sees it.

    Args:
        path: The skill file (``<dir>/SKILL.md`` or a flat ``<name>.md``).
        outcome: The parsed skill, the parser's problem, or why the file could not be read.
        expected_name: The name the file's location suggests (its directory's, or a flat
            file's name without ``.md``); a different ``name`` is a ``name-mismatch``.

    Returns:
        Nothing for a clean skill; otherwise one record per problem, in a stable order.
    """
    if isinstance(outcome, FileReadError):
        if outcome.not_found:
            absent = f"no {os.path.basename(path)} here, so this is not a skill (ignored)"
            return (_record("skill-file-absent", path, absent),)
        return (_record(outcome.code, path, outcome.reason),)
    if isinstance(outcome, Problem):
        return (diagnostic(outcome, path),)
    name = outcome.name
    found = [diagnostic(note, path, skill=name) for note in outcome.notes]
    if expected_name is not None and name != expected_name:
        found.append(_record("name-mismatch", path, _mismatch(path, name), skill=name))
    unknown = [key for key in outcome.fields if key not in KNOWN_FRONTMATTER_KEYS]
    for key in unknown:
        message = f"unknown frontmatter key {key!r} (ignored by this runtime)"
        found.append(_record("unknown-key", path, message, skill=name))
    return tuple(found)


def _mismatch(path: str, name: str) -> str:
    if os.path.basename(path) == SKILL_FILE_NAME:
        where = f"its directory {os.path.basename(os.path.dirname(path))!r}"
    else:
        where = f"its file name {os.path.basename(path)!r}"
    return (
        f"name {name!r} differs from {where}; the skill is known as {name!r} "
        "(the Agent Skills specification wants them equal)"
    )


# -- roots, resolution, providers ------------------------------------------------------------


def root_missing(path: str) -> Diagnostic:
    """A skill directory that was asked for explicitly does not exist (or is not a directory)."""
    return _record("root-missing", path, "skill directory does not exist or is not a directory")


def shadow_diagnostic(shadowed: ShadowedSkill) -> Diagnostic:
    """A skill that lost a name clash.

    A clash between different ranks (a project skill overriding a user one) is how precedence
    is meant to work, so it is an ``info`` (``skill-shadowed``); a clash at the same rank from
    the same provider (two files of one directory, or two custom directories, giving the same
    name) is decided only by order and is a ``warning`` (``skill-duplicate``).
    """
    loser, winner = shadowed.skill, shadowed.winner
    same_rank = loser.rank == winner.rank and loser.provider == winner.provider
    where = (
        winner.path
        if winner.path is not None
        else f'the {winner.provider} provider (source "{winner.source}")'
    )
    message = (
        f"skill {loser.name!r} is shadowed by {where} "
        f"({winner.source}, rank {_rank_text(winner.rank)})"
    )
    if same_rank:
        message += "; both have the same rank, so the order of discovery decided"
    return _record(
        "skill-duplicate" if same_rank else "skill-shadowed",
        loser.path,
        message,
        skill=loser.name,
    )


def _rank_text(rank: int | float) -> str:
    return str(int(rank)) if float(rank).is_integer() else str(rank)


def provider_failed(provider: str, error: BaseException | str) -> Diagnostic:
    """A provider could not say what is wrong with its skills (its ``diagnose`` failed)."""
    detail = error if isinstance(error, str) else repr(error)
    return _record("provider-failed", None, f"skill provider {provider!r} failed: {detail}")


# -- logging -----------------------------------------------------------------------------------


def log_diagnostic(
    logger: Any,
    diagnostic: Diagnostic,
    *,
    level: Literal["debug", "info", "warning"] | None = None,
    **context: object,
) -> None:
    """Emit ``diagnostic`` as its structured log event.

    The event carries ``path``, ``reason`` (the message), ``code``, and ``skill`` and ``line``
    when known, plus ``context`` (for example the provider's name).

    Args:
        logger: A structlog logger.
        diagnostic: The record.
        level: Overrides the code's log level.
        context: Extra fields for the event.
    """
    spec = CODES.get(diagnostic.code)
    event = spec.event if spec is not None else "skill_problem"
    method = getattr(logger, level or (spec.level if spec is not None else "warning"))
    fields: dict[str, object] = {**context, "path": diagnostic.path}
    if diagnostic.skill is not None:
        fields["skill"] = diagnostic.skill
    fields["reason"] = diagnostic.message
    fields["code"] = diagnostic.code
    if diagnostic.line is not None:
        fields["line"] = diagnostic.line
    method(event, **fields)


def skipped(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The records of files, entries and roots that discovery left out."""
    return tuple(d for d in diagnostics if (spec := CODES.get(d.code)) is not None and spec.skipped)
