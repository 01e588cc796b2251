"""The trust question (contract §13): what it shows of each skill that waits, the answers it
offers, and the decisions a lasting answer stores. A session puts it as a card
(`acp_skills.acp.consent`); ``acp-skills trust --mcp-server`` puts it on a terminal. Both read
it here, so a server pre-trusted from the command line stores exactly what the card's
"Trust this server" would."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from .model import SkillCandidate
from .text import one_line, shorten_description
from .trust import ServerChange, ServerSource, TrustSource, TrustState

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
_UNVERIFIED: Final = " — its files are not listed, so they are unverified"


@dataclass(frozen=True, slots=True)
class Withheld:
    """A skill a session does not offer, and why (``change``: new or changed on the server)."""

    skill: SkillCandidate
    state: TrustState
    source: TrustSource
    change: ServerChange | None = None


def served_dynamic(skill: SkillCandidate) -> bool:
    """Whether an MCP skill's files are served without a manifest (``"resources": "dynamic"``):
    its locator says so with a ``dynamic`` attribute (anything else: listed files)."""
    return getattr(skill.locator, "dynamic", False) is True


# The question is the one place a person decides on text a project or server chose: every
# value in it goes through `one_line` (descriptions through `shorten_description`, which
# uses it), so no name, description, path, uri or label can start a line of its own.


def question_title(pending: Sequence[Withheld]) -> str:
    """``Trust N skills from PROJECT?`` (the project's directory name or the server labels)."""
    labels = ", ".join(sorted({one_line(w.source.label) for w in pending}))
    return f"Trust {len(pending)} skill{'' if len(pending) == 1 else 's'} from {labels}?"


def question_text(pending: Sequence[Withheld]) -> str:
    """Every pending skill on a line: name, description and path (or server and uri)."""
    lines = []
    for withheld in sorted(pending, key=lambda w: w.skill.name):
        skill, source = withheld.skill, withheld.source
        description = shorten_description(skill.description, 200)
        where = one_line(skill.path or "")
        notes = CHANGES.get(withheld.change, "")
        if isinstance(source, ServerSource):
            where = f"MCP server {one_line(source.label)}, {one_line(source.uri)}"
            notes += _UNVERIFIED if served_dynamic(skill) else ""
        lines.append(f"- {one_line(skill.name)}: {description} ({where}){notes}")
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


def lasting_sources(pending: Sequence[Withheld]) -> dict[str, TrustSource]:
    """What a lasting answer about ``pending`` decides, one source per key: a server's holds
    the ``{uri, digest}`` pairs (`acp_skills.trust.shown_items`) of every one of its skills the
    question named, for `acp_skills.trust.TrustStore.decide`."""
    sources: dict[str, TrustSource] = {}
    for withheld in pending:
        source, key = withheld.source, withheld.source.key
        known = sources.get(key)
        if isinstance(source, ServerSource) and isinstance(known, ServerSource):
            source = ServerSource(source.label, source.endpoint, known.items | source.items)
        sources[key] = source
    return sources


def admitting_command(source: TrustSource, state: TrustState) -> str | None:
    """The command that admits a withheld skill of ``source``, for every surface that says
    how (a session's notes, ``/skills``, the command line's reports). A project is trusted by
    path; a pending server has none: it is trusted for the digests it lists, and the command
    that lists them (``acp-skills trust --mcp-server``) runs it without the editor entry's env
    or headers, which a new session's question always has. A refusal is forgotten by its key."""
    key = shlex.quote(one_line(source.key))
    if not isinstance(source, ServerSource):
        return f"acp-skills trust {key}"
    return None if state == "pending" else f"acp-skills trust --forget {key}"
