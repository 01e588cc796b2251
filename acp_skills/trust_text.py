"""What a person reads about skills that wait for trust (contract §13), one wording for every
surface: the question (its card), the `skill` tool's
error, the ``/NAME`` note, ``/skills`` and the command line's reports. It is handed values and
calls nothing of `acp_skills.trust`. `how_to_admit` alone says how to admit a withheld skill.
Every value a project or server chose goes through `one_line` (descriptions through
`shorten_description`), so it cannot start a line.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from .diagnostics import Markup, plural
from .text import one_line, shorten_description, spelt
from .trust import ServerChange, ServerSource, TrustSource, TrustState, Withheld

# The four answers of the question, by option id (the id is the kind: one of each); WHOM is
# what the question is about ("this project", "this server", ...).
OPTIONS: Final = (
    ("allow_once", "Trust for this session"),
    ("allow_always", "Trust {whom}"),
    ("reject_once", "Not now"),
    ("reject_always", "Never for {whom}"),
)
# What a skill of a trusted server that waits again is marked with, by how it differs.
CHANGES: Final[Mapping[ServerChange | None, str]] = {
    "new": " — new on the server since you trusted it",
    "changed": " — changed on the server since you trusted it",
}
_HEADINGS: Final[Mapping[TrustState, str]] = {"pending": "Waiting for trust", "refused": "Refused"}


def question_title(pending: Sequence[Withheld]) -> str:
    """``Trust N skills from PROJECT?`` (the project's directory name or the server labels)."""
    count = len(pending)
    return f"Trust {count} skill{'' if count == 1 else 's'} from {whom_asked(pending)}?"


def whom_asked(pending: Sequence[Withheld]) -> str:
    """The labels of the projects and servers a question about ``pending`` names, in order."""
    return ", ".join(sorted({one_line(w.source.label) for w in pending}))


def question_text(pending: Sequence[Withheld]) -> str:
    """Every pending skill on a line: name, description and path (or server and uri)."""
    lines = []
    for withheld in sorted(pending, key=lambda w: w.skill.name):
        skill, source = withheld.skill, withheld.source
        where, notes = one_line(skill.path or ""), CHANGES.get(withheld.change, "")
        if isinstance(source, ServerSource):
            where = f"MCP server {one_line(source.label)}, {one_line(source.uri)}"
            # A skill served with `"resources": "dynamic"`: its locator says so.
            if getattr(skill.locator, "dynamic", False) is True:
                notes += " — its files are not listed, so they are unverified"
        said = shorten_description(skill.description, 200)
        lines.append(f"- {one_line(skill.name)}: {said} ({where}){notes}")
    return "\n".join(lines)


def question_options(pending: Sequence[Withheld]) -> list[tuple[str, str]]:
    """The four answers (option id, label), the lasting ones naming what they are about."""
    projects = len({w.source.key for w in pending if not isinstance(w.source, ServerSource)})
    servers = len({w.source.key for w in pending if isinstance(w.source, ServerSource)})
    whom = [
        ("this " + noun) if count == 1 else f"these {count} {noun}s"
        for count, noun in ((projects, "project"), (servers, "server"))
        if count
    ]
    return [(kind, label.format(whom=" and ".join(whom))) for kind, label in OPTIONS]


def _admitting_command(source: TrustSource, state: TrustState) -> str | None:
    # A project is trusted by path; a pending server has none: it is trusted for the digests it
    # lists, which only a new session's question shows. A refusal is forgotten by its key.
    # Quoted first: cleaning after keeps every space of the path.
    key = spelt(shlex.quote(source.key))
    if not isinstance(source, ServerSource):
        return f"acp-skills trust {key}"
    return None if state == "pending" else f"acp-skills trust --forget {key}"


def how_to_admit(withheld: Sequence[Withheld]) -> str:
    """How to admit the ``withheld`` skills: a new session's question, or the commands that fit;
    for a refusal, the command that undoes it."""
    said = []
    for state in _HEADINGS:
        if not (group := [w for w in withheld if w.state == state]):
            continue
        commands = sorted({c for w in group if (c := _admitting_command(w.source, state))})
        run = " and ".join(f"`{command}`" for command in commands)
        if state == "refused":
            said.append(f"To undo a refusal, run {run}.")
            continue
        them = "it" if len(group) == 1 else "them"
        how = f"To admit {them}, start a new session and answer its question"
        said.append(f"{how}, or run {run}." if run else f"{how}.")
    return " ".join(said)


def source_label(source: TrustSource) -> str:
    """``project `NAME``` or ``MCP server "LABEL"``."""
    if isinstance(source, ServerSource):
        return f'MCP server "{one_line(source.label)}"'
    return f"project `{one_line(source.label)}`"


def _waits(withheld: Withheld) -> str:
    return "is waiting for trust" if withheld.state == "pending" else "is not trusted"


def why_withheld(name: str, withheld: Withheld) -> str:
    """```NAME` comes from PLACE, which is waiting for trust`` (or ``is not trusted``)."""
    return (
        f"`{one_line(name)}` comes from {source_label(withheld.source)}, which {_waits(withheld)}"
    )


def trust_error(name: str, withheld: Withheld) -> str:
    """The `skill` tool's answer for a withheld skill, by exact name."""
    if isinstance(withheld.source, ServerSource):
        server = one_line(withheld.source.label)
        return f'Error: skill "{one_line(name)}" from MCP server "{server}" {_waits(withheld)}'
    return f'Error: skill "{one_line(name)}" {_waits(withheld)} in this project'


def command_note(name: str, withheld: Withheld) -> str:
    """The one line a person gets for a `/NAME` of a withheld skill. It comes after the
    session's one question (or instead of it), so it never says "when asked"."""
    ran = "it was not run"
    if withheld.state == "pending":
        ran += ", and this session will not ask again"
    return f"{why_withheld('/' + name, withheld)}: {ran}. {how_to_admit([withheld])}"


def waiting_note(pending: Sequence[Withheld]) -> str | None:
    """How many of a session's ``pending`` skills wait, from where, and how to admit them, once
    its question has been put; ``None`` when nothing waits. No text of a withheld skill."""
    if not pending:
        return None
    by_source: dict[str, list[Withheld]] = {}
    for withheld in pending:
        by_source.setdefault(withheld.source.key, []).append(withheld)
    # The projects first, then the servers, each by label.
    groups = sorted(
        by_source.values(), key=lambda g: (isinstance(g[0].source, ServerSource), g[0].source.label)
    )
    parts = [f"{plural(len(g), 'skill')} from {source_label(g[0].source)}" for g in groups]
    joined = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    waits = "waits" if len(pending) == 1 else "wait"
    return f"{joined} {waits} for trust, and this session will not ask again. " + how_to_admit(
        pending
    )


def withheld_parts(
    withheld: Collection[Withheld], markup: Markup
) -> list[tuple[str, list[str], str]]:
    """The "Waiting for trust" and "Refused" parts of a report (``/skills``, ``doctor``,
    ``catalog``): each part's title, a line per skill (its name, description and place, as
    ``markup`` shows free text), and how to admit them."""
    parts = []
    for state, title in _HEADINGS.items():
        group = sorted((w for w in withheld if w.state == state), key=lambda w: w.skill.name)
        lines = [
            f"- `{one_line(w.skill.name)}` — "
            f"{markup.text(shorten_description(w.skill.description, 120))} "
            f"({source_label(w.source)}){CHANGES.get(w.change, '')}"
            for w in group
        ]
        if group:
            parts.append((title, lines, how_to_admit(group)))
    return parts
