"""Slash commands: the announcer keeping each session's commands current, and ``/skills``."""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import Any, Final

from acp.schema import AvailableCommand, AvailableCommandsUpdate
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from ..catalog import CatalogFit, catalog_changes
from ..diagnostics import (
    Diagnostic,
    Markdown,
    by_severity,
    code_span,
    describe_catalog_changes,
    describe_catalog_fit,
    diagnostic_line,
    server_line,
    tally,
)
from ..model import SkillSnapshot, SkillSummary, is_skill_name
from ..quiet_log import get_logger
from ..text import shorten_description, terminal_safe
from .consent import TrustGate
from .sessions import LiveSession, SessionTable
from .wire import ClientLink, available_commands

_log = get_logger(__name__)

SKILLS_COMMAND: Final = "skills"
SKILLS_COMMAND_DESCRIPTION: Final = "Show the skills available here and any problems with them"
# The library's own commands, always offered (after the skills' own).
BUILTIN_COMMANDS: Final = (
    AvailableCommand(name=SKILLS_COMMAND, description=SKILLS_COMMAND_DESCRIPTION),
)

_MAX_PROBLEMS_SHOWN: Final = 20
_DESCRIPTION_SHOWN: Final = 120

# Wider than the skill-name grammar on purpose: `/Deploy` or `/run_tests` get a "no such
# command" note rather than silently reaching the model; `/usr/bin` and `5/8` are no words.
_LEADING_SLASH_WORD: Final = re.compile(r"\s*/([A-Za-z0-9][A-Za-z0-9_-]*)(?!\S)")


class CommandsAnnouncer:
    """Keeps each session's slash commands current in its editor (contract §9)."""

    def __init__(self, gate: TrustGate, sessions: SessionTable, link: ClientLink) -> None:
        self._gate, self._sessions, self._link = gate, sessions, link
        self._loop: asyncio.AbstractEventLoop | None = None
        self._registry_changed = False

    async def refresh(
        self, live: LiveSession, snapshot: SkillSnapshot | None = None, *, resend: bool = False
    ) -> None:
        # Not before the opening response: an editor drops updates for a session it does not know.
        if not live.answered and live.turn is None:
            return
        if snapshot is None:
            options = live.session.context.lookup_options
            snapshot = (await self._gate.view(options, live.trust)).offered
        commands = [*available_commands(invocable(snapshot.skills)), *BUILTIN_COMMANDS]
        if commands == live.commands and not resend:
            return
        live.commands = commands  # before the send awaits: a refresh meanwhile sees it sent
        update = AvailableCommandsUpdate(
            session_update="available_commands_update", available_commands=commands
        )
        await self._link.send(live.session.context.session_id, update)

    def on_registry_change(self) -> None:
        # May run on any thread: it only wakes `follow`.
        self._registry_changed = True
        loop, wake = self._loop, self._link.wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake)

    async def follow(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """Announce each session whose opening response went out, and all after a change."""
        self._loop, changed = asyncio.get_running_loop(), asyncio.Event()
        self._link.wake = changed.set
        task_status.started()
        try:
            while True:
                await changed.wait()
                # Cleared first: a change during the refresh makes one more round, a burst one.
                changed.clear()
                answered, self._link.answered = set(self._link.answered), []
                every, self._registry_changed = self._registry_changed, False
                for live in self._sessions.running():
                    session_id = live.session.context.session_id
                    live.answered = live.answered or session_id in answered
                    if session_id not in answered and not every:
                        continue
                    try:
                        await self.refresh(live)
                    except Exception as error:
                        event = "skills_commands_refresh_failed"
                        _log.warning(event, session_id=session_id, error=repr(error))
        finally:
            self._loop = self._link.wake = None


def invocable(skills: Iterable[SkillSummary]) -> list[SkillSummary]:
    """The skills a person runs as ``/NAME`` (never one named ``skills``: that is the report)."""
    return [
        s for s in skills if s.user_invocable and is_skill_name(s.name) and s.name != SKILLS_COMMAND
    ]


def leading_slash_word(text: str) -> str | None:
    return match[1] if (match := _LEADING_SLASH_WORD.match(text)) else None


def no_such_command(word: str, snapshot: SkillSnapshot) -> str:
    names = [s.name for s in invocable(snapshot.skills)] + [c.name for c in BUILTIN_COMMANDS]
    listed = ", ".join(f"`/{name}`" for name in names)
    return (
        f"`/{word}` is not a command here.\n\nCommands: {listed}.\n\nNothing was sent to the model."
    )


def skills_report(
    cwd: str,
    snapshot: SkillSnapshot,
    diagnostics: Sequence[Diagnostic],
    fit: CatalogFit | None = None,
    withheld: Sequence[tuple[str, list[str], str]] = (),
    servers: Sequence[Any] = (),
) -> str:
    """The ``/skills`` report; what it quotes from disk is made terminal-safe."""
    lines = [f"**Skills for {code_span(terminal_safe(cwd))}** ({len(snapshot.skills)})", ""]
    if not snapshot.skills:
        lines.append("No skills found.")
    lines += [*(_skill_line(skill) for skill in snapshot.skills), ""]
    for title, items, how in withheld:
        lines += [f"**{title}** ({len(items)})", "", *items, "", how, ""]
    if fit is not None:
        lines += [*(terminal_safe(line) for line in describe_catalog_fit(fit).splitlines()), ""]
        # The list above is a lookup made now; the model's catalog was frozen earlier.
        if (stale := describe_catalog_changes(catalog_changes(fit, snapshot))) is not None:
            lines += [stale, ""]
    if not diagnostics:
        lines.append("No problems found.")
    else:
        ordered = by_severity(diagnostics)
        lines += [f"**Problems** ({tally(ordered)})", ""]
        lines.extend(f"- {diagnostic_line(d, Markdown())}" for d in ordered[:_MAX_PROBLEMS_SHOWN])
        if (hidden := len(ordered) - _MAX_PROBLEMS_SHOWN) > 0:
            lines.append(f"- ... and {hidden} more")
        # With the servers this report covers: without them, doctor would not see their problems.
        named = "".join(f" --mcp-server {shlex.quote(state.server.identity)}" for state in servers)
        doctor = code_span(terminal_safe(f"acp-skills doctor --cwd {shlex.quote(cwd)}{named}"))
        lines += ["", f"Run {doctor} in a terminal for details."]
    if not snapshot.complete:
        lines += ["", "A skill provider did not answer in time: this list may be incomplete."]
    if servers:
        lines += ["", f"**MCP servers** ({len(servers)})", ""]
        lines.extend(f"- {server_line(state, Markdown())}" for state in servers)
    return "\n".join(lines).rstrip("\n")


def _skill_line(skill: SkillSummary) -> str:
    notes = [Markdown().text(terminal_safe(skill.source))]
    if not skill.user_invocable:
        notes.append("model only")
    elif skill.name == SKILLS_COMMAND:
        notes.append(f"not a command: `/{SKILLS_COMMAND}` is this report")
    if skill.disable_model_invocation:
        notes.append("hidden from the model")
    shown = f"/{skill.name}" if invocable([skill]) else skill.name
    description = Markdown().text(shorten_description(skill.description, _DESCRIPTION_SHOWN))
    return f"- `{shown}` — {description} ({', '.join(notes)})"
