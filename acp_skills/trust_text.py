"""What a person reads of the skills a session withholds (contract §13, §14): the question, the
tool's error, the `/NAME` note, a report's parts, and the one wording of how to admit them."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from .diagnostics import Markup, plural
from .text import one_line, shorten_description, terminal_safe
from .trust import ProjectSource, ServerSource, TrustSource, TrustState, Withheld

# The four answers, by option id (the id is the kind); WHOM: "this project", "this server"...
OPTIONS: Final = (
    ("allow_once", "Trust for this session"),
    ("allow_always", "Trust {whom}"),
    ("reject_once", "Not now"),
    ("reject_always", "Never for {whom}"),
)
_WAITS: Final[Mapping[TrustState, str]] = {
    "pending": "is waiting for trust",
    "refused": "is not trusted",
}


def whom_asked(pending: Sequence[Withheld]) -> str:
    """The labels of the projects and servers a question about ``pending`` names."""
    return ", ".join(sorted({one_line(w.source.label) for w in pending}))


def question_title(pending: Sequence[Withheld]) -> str:
    """``Trust N skills from PROJECT?`` (the project's directory name or the server labels)."""
    return f"Trust {plural(len(pending), 'skill')} from {whom_asked(pending)}?"


def question_text(pending: Sequence[Withheld]) -> str:
    """A line per pending skill, every value `one_line` so that none can forge another line."""
    lines = []
    for withheld in sorted(pending, key=lambda w: w.skill.name):
        skill, source, notes = withheld.skill, withheld.source, _changed(withheld)
        where = one_line(skill.path or "")
        if isinstance(source, ServerSource):
            where = f"MCP server {one_line(source.label)}, {one_line(source.uri)}"
            if (source.uri, "dynamic") in source.items:  # served with `"resources": "dynamic"`
                notes += " — its files are not listed, so they are unverified"
        said = shorten_description(skill.description, 200)
        lines.append(f"- {one_line(skill.name)}: {said} ({where}){notes}")
    return "\n".join(lines)


def _changed(withheld: Withheld) -> str:
    return f" — {withheld.change} on the server since you trusted it" if withheld.change else ""


def question_options(pending: Sequence[Withheld]) -> list[tuple[str, str]]:
    """The four answers (option id, label), the lasting ones naming what they are about."""
    servers = {w.source.key for w in pending if isinstance(w.source, ServerSource)}
    counts = ((len({w.source.key for w in pending} - servers), "project"), (len(servers), "server"))
    whom = [f"these {n} {noun}s" if n > 1 else f"this {noun}" for n, noun in counts if n]
    return [(kind, label.format(whom=" and ".join(whom))) for kind, label in OPTIONS]


def how_to_admit(withheld: Sequence[Withheld]) -> str:
    """How to admit ``withheld``: a new session's question, or for a project ``acp-skills trust
    PATH`` (a server is trusted only through its question); for a refusal, how to undo it."""
    said = []
    if pending := [w for w in withheld if w.state == "pending"]:
        run = _commands([w.source for w in pending if isinstance(w.source, ProjectSource)])
        how = f"To admit {'them' if pending[1:] else 'it'}, start a new session and answer its"
        said.append(f"{how} question, or run {run}." if run else f"{how} question.")
    if refused := [w.source for w in withheld if w.state == "refused"]:
        said.append(f"To undo a refusal, run {_commands(refused)}.")
    return " ".join(said)


def _commands(sources: Sequence[TrustSource]) -> str:
    # A project is trusted by path, a server's refusal forgotten by its key. Quoted first:
    # cleaning after keeps every space of the path.
    commands = set()
    for source in sources:
        forget = "--forget " if isinstance(source, ServerSource) else ""
        commands.add(f"`acp-skills trust {forget}{terminal_safe(shlex.quote(source.key))}`")
    return " and ".join(sorted(commands))


def _from(source: TrustSource) -> str:
    if isinstance(source, ServerSource):
        return f'MCP server "{one_line(source.label)}"'
    return f"project `{one_line(source.label)}`"


def why_withheld(name: str, withheld: Withheld) -> str:
    """```NAME` comes from PLACE, which is waiting for trust`` (or ``is not trusted``)."""
    return f"`{one_line(name)}` comes from {_from(withheld.source)}, which {_WAITS[withheld.state]}"


def trust_error(name: str, withheld: Withheld) -> str:
    """The `skill` tool's answer for a withheld skill, by exact name."""
    if isinstance(source := withheld.source, ServerSource):
        return f'Error: skill "{one_line(name)}" from {_from(source)} {_WAITS[withheld.state]}'
    return f'Error: skill "{one_line(name)}" {_WAITS[withheld.state]} in this project'


def command_note(name: str, withheld: Withheld) -> str:
    """The note for a `/NAME` of a withheld skill, put after the session's one question."""
    again = ", and this session will not ask again" if withheld.state == "pending" else ""
    how = how_to_admit([withheld])
    return f"{why_withheld('/' + name, withheld)}: it was not run{again}. {how}"


def waiting_note(pending: Sequence[Withheld]) -> str | None:
    """How many skills wait from each place (the projects first), and how to admit them;
    ``None`` when none waits."""
    if not pending:
        return None
    counts = Counter((isinstance(w.source, ServerSource), _from(w.source)) for w in pending)
    parts = [f"{plural(n, 'skill')} from {place}" for (_, place), n in sorted(counts.items())]
    places = ", ".join(parts[:-1]) + (" and " if parts[1:] else "") + parts[-1]
    waits = f"{places} {'wait' if pending[1:] else 'waits'} for trust"
    return f"{waits}, and this session will not ask again. {how_to_admit(pending)}"


def withheld_parts(
    withheld: Collection[Withheld], markup: Markup
) -> list[tuple[str, list[str], str]]:
    """A report's "Waiting for trust" and "Refused" parts: title, a line per skill, how to
    admit them."""
    parts = []
    for state, title in (("pending", "Waiting for trust"), ("refused", "Refused")):
        if group := sorted((w for w in withheld if w.state == state), key=lambda w: w.skill.name):
            lines = [
                f"- `{one_line(w.skill.name)}` — "
                f"{markup.text(shorten_description(w.skill.description, 120))} "
                f"({_from(w.source)}){_changed(w)}"
                for w in group
            ]
            parts.append((title, lines, how_to_admit(group)))
    return parts
