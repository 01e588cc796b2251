"""Every problem met, as one record with a stable code (docs/diagnostics.md), and the one
renderer of problems, MCP servers and the catalog's fit on every surface (`Markup` apart)."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol, TypeAlias

from .errors import Problem, ReadError
from .frontmatter import FIELD_SPELLINGS, ParsedSkill
from .model import SKILL_FILE_NAME, ShadowedSkill, rank_text
from .text import terminal_safe as spelt

if TYPE_CHECKING:
    from .catalog import CatalogChanges, CatalogFit

Severity: TypeAlias = Literal["error", "warning", "info"]  # docs/diagnostics.md says which is which
_Level: TypeAlias = Literal["debug", "info", "warning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One problem with a skill file, a root or a provider (``skill`` is for logs only)."""

    code: str
    severity: Severity
    path: str | None
    line: int | None = None
    message: str
    skill: str | None = None


class CodeSpec(NamedTuple):
    """A code's severity, log event and level, and whether discovery leaves the thing out."""

    severity: Severity
    event: str
    level: _Level = "warning"
    skipped: bool = False


_SKIPPED_CODES: Final = (
    "root-unreadable broken-link file-unreadable file-too-large not-utf8 frontmatter-missing "
    "frontmatter-too-large yaml-invalid name-invalid description-invalid flag-invalid "
    "field-conflict file-invalid"
)
_SPEC_CODES: Final = (
    "name-too-long description-too-long compatibility-invalid metadata-invalid "
    "allowed-tools-invalid"
)
# What each code means: docs/diagnostics.md's table, row for row.
CODES: Final[Mapping[str, CodeSpec]] = {
    "root-missing": CodeSpec("warning", "skill_root_missing", "debug"),
    **dict.fromkeys(_SKIPPED_CODES.split(), CodeSpec("error", "skill_file_skipped", skipped=True)),
    "skill-file-absent": CodeSpec("info", "skill_file_absent", "debug"),
    "markdown-ignored": CodeSpec("info", "skill_markdown_ignored", "debug"),
    "skill-file-lowercase": CodeSpec("warning", "skill_file_misnamed"),
    "skill-nested-too-deep": CodeSpec("warning", "skill_nested_too_deep"),
    "field-ignored": CodeSpec("warning", "skill_field_ignored"),
    "name-mismatch": CodeSpec("warning", "skill_name_mismatch"),
    "unknown-key": CodeSpec("info", "skill_key_unknown", "info"),
    "skill-shadowed": CodeSpec("info", "skill_shadowed"),
    "skill-duplicate": CodeSpec("warning", "skill_shadowed"),
    "provider-failed": CodeSpec("error", "skill_provider_skipped"),
    "mcp-server-unavailable": CodeSpec("warning", "mcp_server_skipped"),
    "mcp-skill-invalid": CodeSpec("error", "mcp_skill_skipped", skipped=True),
    "trust-file-unreadable": CodeSpec("error", "trust_file_unreadable"),
    **dict.fromkeys(_SPEC_CODES.split(), CodeSpec("error", "skill_spec_violation")),
    "flat-skill": CodeSpec("info", "skill_spec_note", "info"),
    "not-found": CodeSpec("error", "skill_path_invalid"),
    "not-a-skill": CodeSpec("error", "skill_path_invalid"),
    "no-skills": CodeSpec("warning", "skill_path_invalid"),
}
# The Agent Skills specification's keys and every spelling this runtime reads: no other is known.
_SPECIFICATION_KEYS: Final = ("name", "description", "license", "compatibility", "metadata")
_KNOWN_KEYS: Final = frozenset((*_SPECIFICATION_KEYS, "allowed-tools", *FIELD_SPELLINGS))


def diagnostic(problem: Problem, path: str | None, *, skill: str | None = None) -> Diagnostic:
    """The record of ``problem`` (its code, message and line) at ``path``."""
    severity = CODES[problem.code].severity
    return Diagnostic(**asdict(problem), severity=severity, path=path, skill=skill)


def file_diagnostics(
    path: str, outcome: ParsedSkill | Problem | ReadError, *, expected_name: str | None = None
) -> tuple[Diagnostic, ...]:
    """What reading and parsing one skill file found (nothing for a clean skill)."""
    if isinstance(outcome, ReadError):
        if outcome.failure == "not_found":
            absent = f"no {os.path.basename(path)} here, so this is not a skill (ignored)"
            return (diagnostic(Problem("skill-file-absent", absent), path),)
        return (diagnostic(Problem(outcome.code, outcome.reason), path),)
    if isinstance(outcome, Problem):
        return (diagnostic(outcome, path),)
    name, found = outcome.name, list(outcome.notes)
    if expected_name is not None and name != expected_name:
        where = f"its file name {os.path.basename(path)!r}"
        if os.path.basename(path) == SKILL_FILE_NAME:
            where = f"its directory {os.path.basename(os.path.dirname(path))!r}"
        message = (
            f"name {name!r} differs from {where}; the skill is known as {name!r} "
            "(the Agent Skills specification wants them equal)"
        )
        found.append(Problem("name-mismatch", message))
    for key in (key for key in outcome.fields if key not in _KNOWN_KEYS):
        said = f"unknown frontmatter key {key!r} (ignored by this runtime)"
        found.append(Problem("unknown-key", said))
    return tuple(diagnostic(problem, path, skill=name) for problem in found)


def root_missing(path: str) -> Diagnostic:
    """A skill directory that was asked for explicitly does not exist (or is not a directory)."""
    said = "skill directory does not exist or is not a directory"
    return diagnostic(Problem("root-missing", said), path)


SHADOW_CODES: Final = frozenset({"skill-shadowed", "skill-duplicate"})  # `shadow_diagnostic`'s


def shadow_diagnostic(shadowed: ShadowedSkill) -> Diagnostic:
    """A skill that lost a name clash (``skill-duplicate`` when only the order decided)."""
    loser, winner = shadowed.skill, shadowed.winner
    same_rank = loser.rank == winner.rank and loser.provider == winner.provider
    # Where each comes from: its file, or its provider and source (an MCP server's, say).
    at = [s.path or f'the {s.provider} provider (source "{s.source}")' for s in (winner, loser)]
    lost = "" if loser.path else f" of {at[1]}"  # a loser's file is the diagnostic's path
    message = f"skill {loser.name!r}{lost} is shadowed by {at[0]}"
    message += f" ({winner.source}, rank {rank_text(winner.rank)})"
    if same_rank:
        message += "; both have the same rank, so the order of discovery decided"
    problem = Problem("skill-duplicate" if same_rank else "skill-shadowed", message)
    return diagnostic(problem, loser.path, skill=loser.name)


def provider_failed(provider: str, reason: str) -> Diagnostic:
    """A provider could not say what is wrong with its skills (its ``diagnose`` failed)."""
    said = f"skill provider {provider!r} failed: {reason}"
    return diagnostic(Problem("provider-failed", said), None)


def mcp_server_unavailable(server: str, reason: str) -> Diagnostic:
    """The MCP server labelled ``server`` was skipped by a lookup, and why."""
    said = f"MCP server {server!r} skipped: {reason}"
    return diagnostic(Problem("mcp-server-unavailable", said), None)


def mcp_skill_invalid(server: str, uri: str | None, reason: str) -> Diagnostic:
    """A skill the MCP server labelled ``server`` listed at ``uri`` was left out, and why."""
    what = f"skill {uri!r}" if uri is not None else "an entry"
    said = f"MCP server {server!r} lists {what} that is skipped: {reason}"
    return diagnostic(Problem("mcp-skill-invalid", said), uri)


def trust_file_unreadable(reason: str) -> Diagnostic:
    """The trust file cannot be read as decisions (``reason`` names it): nothing is trusted."""
    said = f"{reason}; until it is mended or removed, no project or MCP server counts as trusted"
    return diagnostic(Problem("trust-file-unreadable", said), None)


def log_diagnostic(
    logger: Any, diagnostic: Diagnostic, *, level: _Level | None = None, **context: object
) -> None:
    """Emit ``diagnostic`` as its structlog event (``level`` overrides the code's)."""
    d, spec = diagnostic, CODES[diagnostic.code]
    fields = {"skill": d.skill, "reason": d.message, "code": d.code, "line": d.line}
    known = {key: value for key, value in fields.items() if value is not None}
    getattr(logger, level or spec.level)(spec.event, **context, path=d.path, **known)


def skipped(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The records of files, entries and roots that discovery left out."""
    return tuple(d for d in diagnostics if CODES[d.code].skipped)


# How each severity is said, most severe first (the order reports list them in).
SEVERITIES: Final[Mapping[Severity, str]] = {"error": "error", "warning": "warning", "info": "note"}
_MARKDOWN_ACTIVE: Final = re.compile(r"[\\`*_\[\]<>]")


class Markup(Protocol):
    """How a surface sets off a place (a path, a server), a code, a severity and free text."""

    def place(self, text: str) -> str: ...
    def code(self, text: str) -> str: ...
    def severity(self, severity: Severity) -> str: ...
    def text(self, text: str) -> str: ...


def code_span(text: str) -> str:
    """``text`` as one Markdown code span, fenced by more backticks than any run inside, padded
    where a backtick or space would touch the fence (CommonMark takes one space off each side)."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    padded = text[:1] in ("`", " ") or text[-1:] in ("`", " ")
    return f"{fence} {text} {fence}" if padded else f"{fence}{text}{fence}"


class Markdown:
    """The editor's markup: places and codes as code spans, severities as words."""

    place = staticmethod(code_span)
    code = staticmethod(code_span)
    severity = staticmethod(SEVERITIES.__getitem__)

    def text(self, text: str) -> str:
        # Shown as written, never as markup: an image link the editor would fetch, a link, an
        # HTML tag or a code span a server's text opens are spelt with backslashes.
        return _MARKDOWN_ACTIVE.sub(r"\\\g<0>", text)


def plural(count: int, noun: str) -> str:
    """``1 skill``, ``2 skills``, ``1,000 skills``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def tally(diagnostics: Iterable[Diagnostic]) -> str:
    """``1 error, 2 warnings, 3 notes`` (a severity with none is left out), or ``no problems``."""
    counts = Counter(d.severity for d in diagnostics)
    said = [plural(counts[key], word) for key, word in SEVERITIES.items() if counts[key]]
    return ", ".join(said) or "no problems"


def by_severity(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The records, most severe first; in their own order within a severity."""
    return sorted(diagnostics, key=lambda d: list(SEVERITIES).index(d.severity))


def diagnostic_line(d: Diagnostic, markup: Markup) -> str:
    """``PATH:LINE: SEVERITY CODE: MESSAGE``; without a path, from the severity on."""
    said = f"{markup.severity(d.severity)} {markup.code(d.code)}: {markup.text(spelt(d.message))}"
    if d.path is None:
        return said
    return f"{markup.place(spelt(d.path) + (f':{d.line}' if d.line is not None else ''))}: {said}"


def diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    """The stable JSON shape: ``{"code", "severity", "path", "line", "message"}``."""
    return {key: getattr(d, key) for key in ("code", "severity", "path", "line", "message")}


def server_line(state: Any, markup: Markup) -> str:
    """``LABEL: STATE``: how one MCP server (an `acp_skills.mcp.provider.ServerState`) fares."""
    said = "not connected yet"
    if state.failure is not None:
        said = f"skipped: {spelt(state.failure)}"
    elif state.supports_skills is False:
        said = "connected, serves no skills (no skills extension)"
    elif state.connected:
        said = f"connected, {plural(state.skills, 'skill')}"
    return f"{markup.place(spelt(state.server.label))}: {markup.text(said)}"


def server_json(state: Any) -> dict[str, Any]:
    """One MCP server as JSON (its identity is what trust remembers)."""
    return {
        "label": state.server.label,
        "identity": state.server.identity,
        "connected": state.connected,
        "skillsExtension": state.supports_skills,
        "skills": state.skills,
        "failure": state.failure,
    }


def describe_catalog_fit(fit: CatalogFit) -> str:
    """What a catalog budget did, in one or two lines for a person."""
    details = [f"{plural(len(fit.listed), 'skill')} listed"]
    if fit.text is None:
        size, details = "empty (0 characters), no skill to list", []
    elif fit.limit is None:
        size = f"{fit.used:,} characters (no budget)"
    else:
        size = f"{fit.used:,} of {fit.limit:,} characters"
    if fit.shortened:
        cap = f"at most {fit.description_cap} characters"
        details.append(f"{plural(fit.shortened, 'description')} shortened to {cap}")
    if fit.truncated:
        longest = f"{fit.max_length:,} characters (the longest a catalog description may be)"
        details.append(f"{plural(fit.truncated, 'description')} cut at {longest}")
    if fit.text is not None and not (fit.shortened or fit.truncated or fit.omitted):
        details.append("every description in full")
    if fit.hidden:
        details.append(f"{len(fit.hidden):,} hidden")
    line = f"Catalog: {size}" + (f"; {', '.join(details)}." if details else ".")
    if not fit.within_budget and fit.omitted:  # what is listed then is pinned
        room = "and the pinned skills take" if fit.listed else "takes"
        line += f" Over budget: the catalog's own text {room} more room."
    elif not fit.within_budget:  # each listed briefly: shorter than the line leaving them out
        line += " Over budget: no shorter catalog can be made."
    if not fit.omitted:
        return line
    verb = "is" if len(fit.omitted) == 1 else "are"
    found = f"not listed (the skill tool's query finds them): {_first_five(fit.omitted)}"
    return f"{line}\n{plural(len(fit.omitted), 'skill')} {verb} {found}"


def describe_catalog_changes(changes: CatalogChanges) -> str | None:
    """For a person: that a session's frozen catalog predates ``changes`` (``None`` if none)."""
    if not changes.count:
        return None
    kinds = ((changes.added, "added"), (changes.removed, "removed"))
    parts = [
        f"{len(names):,} {what} ({_first_five([f'`{name}`' for name in names])})"
        for names, what in (*kinds, (changes.changed, "with a new description"))
        if names
    ]
    return (
        f"This session's catalog predates {plural(changes.count, 'change')} to the skills "
        f"above: {'; '.join(parts)}. The model here keeps the catalog the session began with; "
        "a new session has them."
    )


def _first_five(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
