"""Slash commands: the announcer keeping each session's commands current, and ``/skills``."""

from __future__ import annotations

import asyncio
import difflib
import re
import shlex
from collections.abc import Awaitable, Iterable, Sequence
from typing import Final

from acp.connection import StreamDirection, StreamEvent
from acp.schema import AvailableCommand
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from ..catalog import CatalogFit, catalog_changes
from ..diagnostics import Diagnostic
from ..model import SkillSnapshot, SkillSummary, is_skill_name
from ..quiet_log import get_logger
from ..report import (
    Markdown,
    by_severity,
    code_span,
    describe_catalog_changes,
    describe_catalog_fit,
    diagnostic_line,
    tally,
)
from ..text import shorten_description, spelt
from .consent import TrustGate
from .sessions import LiveSession, SessionTable
from .wire import ClientLink, available_commands, commands_update, field

_log = get_logger(__name__)

SKILLS_COMMAND: Final = "skills"
SKILLS_COMMAND_DESCRIPTION: Final = "Show the skills available here and any problems with them"

_SESSION_OPENERS: Final = ("session/new", "session/load", "session/resume")

_MAX_PROBLEMS_SHOWN: Final = 20
_DESCRIPTION_SHOWN: Final = 120

# Wider than the skill-name grammar on purpose: `/Deploy` or `/run_tests` get a "no such
# command" note rather than silently reaching the model; `/usr/bin` and `5/8` are no words.
_LEADING_SLASH_WORD: Final = re.compile(r"\s*/([A-Za-z0-9][A-Za-z0-9_-]*)(?!\S)")

# A working directory or a source may quote what is on disk: a line feed must not forge a line.
_clean = spelt


class CommandsAnnouncer:
    """Keeps each session's slash commands current in its editor (contract §9), sending a list
    only when it differs from the one the session was last sent, plus one resend: a list that
    went out before the session's first prompt turn is sent again as that turn begins, since
    editors drop updates that arrive right after the opening response. Nothing is sent before
    that response has gone out (an editor drops updates for a session it does not know)."""

    def __init__(self, gate: TrustGate, sessions: SessionTable, link: ClientLink) -> None:
        self._gate, self._sessions, self._link = gate, sessions, link
        # Ids of session openers not answered yet -> the session a load or resume names.
        self._awaiting: dict[str | int, str | None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    async def begin_turn(self, session_id: str, live: LiveSession, snapshot: SkillSnapshot) -> None:
        """A prompt turn of ``live`` begins with ``snapshot``: the first turn's resend is due
        now, and a trust answer may have changed the commands."""
        state = live.commands
        resend, state.resend_due, state.turned = state.resend_due, False, True
        await self._refresh(session_id, live, snapshot, resend=resend)

    async def _refresh(
        self,
        session_id: str,
        live: LiveSession,
        snapshot: SkillSnapshot | None = None,
        *,
        resend: bool = False,
    ) -> None:
        """Send the session's commands (of what it offers now, unless ``snapshot`` is given) if
        they differ from what it was last sent, or if ``resend``."""
        if snapshot is None:
            options = live.session.context.lookup_options
            snapshot = (await self._gate.view(options, live.trust)).offered
        state = live.commands
        # A running turn means the editor has the session; its opening response's observer
        # announces it otherwise.
        if not state.answered and live.turn is None:
            return
        commands = [*available_commands(invocable(snapshot.skills)), *builtin_commands()]
        key = tuple(
            (c.name, c.description, c.input.root.hint if c.input is not None else "")
            for c in commands
        )
        if key == state.sent and not resend:
            return
        # Set before the send awaits: a refresh resuming meanwhile sees this list as sent.
        state.sent = key
        state.resend_due = not state.turned and live.turn is None
        await self._link.send(session_id, commands_update(commands))

    def observe(self, event: StreamEvent) -> Awaitable[None] | None:
        # The SDK calls observers after writing a frame, and runs the returned coroutine as a
        # task of the connection (cancelled if the connection closes first).
        message = event.message
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return None
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") in _SESSION_OPENERS:
                named = field(message.get("params"), "sessionId")
                self._awaiting[request_id] = named if isinstance(named, str) else None
            return None
        if "method" in message or request_id not in self._awaiting:
            return None
        session_id: object = self._awaiting.pop(request_id)
        if session_id is None:
            session_id = field(message.get("result"), "sessionId")
        if "error" in message or not isinstance(session_id, str):
            return None
        if (live := self._sessions.peek(session_id)) is not None:
            live.commands.answered = True  # now, before any other refresh can resume
        return self._announce(session_id)

    async def _announce(self, session_id: str) -> None:
        if (live := self._sessions.peek(session_id)) is None:
            return
        try:
            await self._refresh(session_id, live)
        except ConnectionError:
            # The client left meanwhile: the SDK's close() would re-raise this from the
            # connection's task and turn a clean exit into a failed one. Nobody is left to tell.
            _log.debug(
                "skills_commands_not_sent", session_id=session_id, reason="connection closed"
            )

    def on_registry_change(self) -> None:
        # May run on any thread: it only wakes `follow`.
        loop, changed = self._loop, self._changed
        if loop is None or changed is None or loop.is_closed():
            return  # not following: each session notices at its next turn
        loop.call_soon_threadsafe(changed.set)

    async def follow(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        # Started with `group.start`: a change made once that returns is not missed.
        self._loop, changed = asyncio.get_running_loop(), asyncio.Event()
        self._changed = changed
        task_status.started()
        try:
            while True:
                await changed.wait()
                # Cleared first: a change during the refresh makes one more round, a burst one.
                changed.clear()
                for session_id, live in self._sessions.running():
                    try:
                        await self._refresh(session_id, live)
                    except Exception as error:
                        event = "skills_commands_refresh_failed"
                        _log.warning(event, session_id=session_id, error=repr(error))
        finally:
            self._loop = self._changed = None


def builtin_commands() -> list[AvailableCommand]:
    """The library's own commands, always offered (after the skills' own)."""
    return [AvailableCommand(name=SKILLS_COMMAND, description=SKILLS_COMMAND_DESCRIPTION)]


def invocable(skills: Iterable[SkillSummary]) -> list[SkillSummary]:
    """The skills a person runs as ``/NAME``, and the editor is told of: user-invocable ones
    whose name a slash can invoke, but for a skill named like a built-in command. ``/skills``
    is the library's report whatever a project or a person names a skill: otherwise a skill
    could hide what the session offers and withholds."""
    return [
        s for s in skills if s.user_invocable and is_skill_name(s.name) and s.name != SKILLS_COMMAND
    ]


def leading_slash_word(text: str) -> str | None:
    match = _LEADING_SLASH_WORD.match(text)
    return match.group(1) if match else None


def no_such_command(word: str, snapshot: SkillSnapshot) -> str:
    commands = [skill.name for skill in invocable(snapshot.skills)]
    commands += [command.name for command in builtin_commands()]
    if any(skill.name == word and not skill.user_invocable for skill in snapshot.skills):
        opening = (
            f"`/{word}` is not a command: the skill `{word}` is for the model only "
            "(its `user-invocable` is false)."
        )
    else:
        opening = f"`/{word}` is not a command here."
        if close := difflib.get_close_matches(word.lower(), commands, n=1, cutoff=0.6):
            opening += f" Did you mean `/{close[0]}`?"
    listed = ", ".join(f"`/{name}`" for name in commands)
    return f"{opening}\n\nCommands: {listed}.\n\nNothing was sent to the model."


def skills_report(
    cwd: str,
    snapshot: SkillSnapshot,
    diagnostics: Sequence[Diagnostic] | None,
    fit: CatalogFit | None = None,
    withheld: Sequence[tuple[str, list[str], str]] = (),
) -> str:
    lines = [f"**Skills for {code_span(_clean(cwd))}** ({len(snapshot.skills)})", ""]
    if not snapshot.skills:
        lines.append("No skills found.")
    lines += [*(_skill_line(skill) for skill in snapshot.skills), ""]
    for title, items, how in withheld:  # `acp_skills.trust_text.withheld_parts`
        lines += [f"**{title}** ({len(items)})", "", *items, "", how, ""]
    if fit is not None:
        lines += [*(_clean(line) for line in describe_catalog_fit(fit).splitlines()), ""]
        # The list above is a lookup made now; the model's catalog was frozen earlier.
        if (stale := describe_catalog_changes(catalog_changes(fit, snapshot))) is not None:
            lines += [stale, ""]
    if diagnostics is None:
        lines.append("The problems could not be gathered (see the agent's log).")
    elif not diagnostics:
        lines.append("No problems found.")
    else:
        ordered = by_severity(diagnostics)
        lines += [f"**Problems** ({tally(ordered)})", ""]
        lines.extend(f"- {diagnostic_line(d, Markdown())}" for d in ordered[:_MAX_PROBLEMS_SHOWN])
        if (hidden := len(ordered) - _MAX_PROBLEMS_SHOWN) > 0:
            lines.append(f"- ... and {hidden} more")
        # A command to paste: the path quoted for the shell (the CLI has no flag for the
        # session's additional directories: it looks from cwd alone).
        doctor = code_span(_clean(f"acp-skills doctor --cwd {shlex.quote(cwd)}"))
        lines += ["", f"Run {doctor} in a terminal for details."]
    if not snapshot.complete:
        lines += ["", "A skill provider did not answer in time: this list may be incomplete."]
    return "\n".join(lines).rstrip("\n")


def _skill_line(skill: SkillSummary) -> str:
    notes = [Markdown().text(_clean(skill.source))]
    if not skill.user_invocable:
        notes.append("model only")
    elif skill.name == SKILLS_COMMAND:
        notes.append(f"not a command: `/{SKILLS_COMMAND}` is this report")
    if skill.disable_model_invocation:
        notes.append("hidden from the model")
    shown = f"/{skill.name}" if invocable([skill]) else skill.name
    description = Markdown().text(shorten_description(skill.description, _DESCRIPTION_SHOWN))
    return f"- `{shown}` — {description} ({', '.join(notes)})"
