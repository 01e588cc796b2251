"""What a person reads of problems, MCP servers and the catalog's fit, in one wording for every
surface (``/skills``, ``doctor``, ``validate``, ``list``, ``catalog``, and their JSON); only the
`Markup` differs. Text from disk or a server is made terminal-safe where it becomes a line."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, Protocol

from .catalog import CatalogChanges, CatalogFit
from .diagnostics import Diagnostic, Severity
from .text import spelt

# Each severity, most severe first (the order reports list them in): how it is said, and its
# colour at a terminal (ANSI codes).
SEVERITIES: Final[dict[Severity, tuple[str, tuple[str, ...]]]] = {
    "error": ("error", ("1", "31")),
    "warning": ("warning", ("1", "33")),
    "info": ("note", ("36",)),
}

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

    def severity(self, severity: Severity) -> str:
        return SEVERITIES[severity][0]

    def text(self, text: str) -> str:
        # Shown as written, never as markup: an image link the editor would fetch, a link, an
        # HTML tag or a code span a server's text opens are spelt with backslashes.
        return _MARKDOWN_ACTIVE.sub(r"\\\g<0>", text)


def plural(count: int, noun: str) -> str:
    """``1 skill``, ``2 skills``, ``1,000 skills``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def tally(diagnostics: Iterable[Diagnostic]) -> str:
    """``1 error, 2 warnings, 3 notes`` (a severity with none is left out), or ``no problems``."""
    counts = dict.fromkeys(SEVERITIES, 0)
    for d in diagnostics:
        counts[d.severity] += 1
    said = [plural(n, SEVERITIES[severity][0]) for severity, n in counts.items() if n]
    return ", ".join(said) or "no problems"


def by_severity(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The records, most severe first; in their own order within a severity."""
    order = list(SEVERITIES)
    return sorted(diagnostics, key=lambda d: order.index(d.severity))


def diagnostic_line(d: Diagnostic, markup: Markup) -> str:
    """``PATH:LINE: SEVERITY CODE: MESSAGE``; without a path, from the severity on."""
    message = markup.text(spelt(d.message))
    said = f"{markup.severity(d.severity)} {markup.code(d.code)}: {message}"
    if d.path is None:
        return said
    where = spelt(d.path) + (f":{d.line}" if d.line is not None else "")
    return f"{markup.place(where)}: {said}"


def diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    """``{"code", "severity", "path", "line", "message"}`` (the skill name stays out), the stable
    shape of every JSON."""
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
    if fit.text is None:
        first = "Catalog: empty, no skill to list"
    elif fit.limit is None:
        first = f"Catalog: {fit.used:,} characters (no budget)"
    else:
        first = f"Catalog: {fit.used:,} of {fit.limit:,} characters"
    details = [] if fit.text is None else [f"{plural(len(fit.listed), 'skill')} listed"]
    if fit.shortened:
        cap = fit.description_cap
        details.append(
            f"{plural(fit.shortened, 'description')} shortened to at most {cap} characters"
        )
    if fit.truncated:
        longest = f"{fit.max_length:,}"
        details.append(
            f"{plural(fit.truncated, 'description')} cut at {longest} characters (the longest "
            "a catalog description may be)"
        )
    if fit.text is not None and not (fit.shortened or fit.truncated or fit.omitted):
        details.append("every description in full")
    if fit.hidden:
        details.append(f"{len(fit.hidden):,} hidden")
    line = f"{first}; {', '.join(details)}." if details else f"{first}."
    if not fit.within_budget:
        line += " Over budget: the catalog's own text and the pinned skills take more room."
    if not fit.omitted:
        return line
    names = ", ".join(fit.omitted[:5]) + (", ..." if len(fit.omitted) > 5 else "")
    verb = "is" if len(fit.omitted) == 1 else "are"
    found = f"not listed (the skill tool's query finds them): {names}"
    return f"{line}\n{plural(len(fit.omitted), 'skill')} {verb} {found}"


def describe_catalog_changes(changes: CatalogChanges) -> str | None:
    """For a person: that a session's frozen catalog predates ``changes`` (``None`` if none)."""
    if not changes.count:
        return None

    def named(names: tuple[str, ...]) -> str:
        shown = ", ".join(f"`{name}`" for name in names[:5])
        return shown + (", ..." if len(names) > 5 else "")

    parts = [
        f"{len(names):,} {what} ({named(names)})"
        for names, what in (
            (changes.added, "added"),
            (changes.removed, "removed"),
            (changes.changed, "with a new description"),
        )
        if names
    ]
    return (
        f"This session's catalog predates {plural(changes.count, 'change')} to the skills "
        f"above: {'; '.join(parts)}. The model here keeps the catalog the session began with; "
        "a new session has them."
    )
