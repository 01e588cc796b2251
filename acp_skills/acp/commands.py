"""Slash commands: the announcer that keeps each session's command list current, and the
library's own ``/skills`` and the note for a ``/word`` that is no command.

A session's commands go out once its ``session/new`` / ``session/load`` response has been
written (`CommandsAnnouncer.observe`), again on its first prompt turn (some editors drop the
first), and whenever a registry change alters its set (`CommandsAnnouncer.follow`). ``/skills``
is advertised after the skills' own commands unless a user-invocable skill takes its name.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Final

import structlog
from acp.connection import StreamDirection, StreamEvent
from acp.helpers import update_available_commands
from acp.schema import AvailableCommand
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from ..catalog import CatalogFit, describe_catalog_fit
from ..diagnostics import Diagnostic
from ..model import SkillLookupOptions, SkillSnapshot, SkillSummary
from ..registry import SkillRegistry
from ..text import remove_unsafe_characters, shorten_description
from .sessions import LiveSession, SessionTable
from .wire import ClientLink, available_commands

_log = structlog.get_logger(__name__)

SKILLS_COMMAND: Final = "skills"
SKILLS_COMMAND_DESCRIPTION: Final = "Show the skills available here and any problems with them"

# The requests whose response a session's first commands update must follow.
_SESSION_OPENERS: Final = ("session/new", "session/load")

# How many problems `/skills` lists before pointing at `acp-skills doctor`: a chat message is
# no place for a hundred lines.
_MAX_PROBLEMS_SHOWN: Final = 20
_DESCRIPTION_SHOWN: Final = 120

# A slash word opening the prompt: `/word` followed by whitespace or the end. Wider than the
# skill-name grammar on purpose, so `/Deploy` or `/run_tests` get a "no such command" note (and
# a suggestion) rather than silently reaching the model; `/usr/bin` and `5/8` are no words.
_LEADING_SLASH_WORD: Final = re.compile(r"\s*/([A-Za-z0-9][A-Za-z0-9_-]*)(?!\S)")

_SEVERITY_ORDER: Final = {"error": 0, "warning": 1, "info": 2}
# Paths and messages can quote what is on disk: no control characters in the editor.
_clean = remove_unsafe_characters
_SEVERITY_LABEL: Final = {"error": "error", "warning": "warning", "info": "note"}


class CommandsAnnouncer:
    """Keeps every live session's ``available_commands_update`` current."""

    def __init__(self, registry: SkillRegistry, sessions: SessionTable, link: ClientLink) -> None:
        self._registry = registry
        self._sessions = sessions
        self._link = link
        # Request ids of `session/new` / `session/load` whose response has not gone out yet,
        # with the session id a `session/load` names (a `session/new` response carries it).
        self._awaiting: dict[str | int, str | None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    async def refresh(
        self, session_id: str, live: LiveSession, snapshot: SkillSnapshot, *, force: bool
    ) -> None:
        """Send the session's commands for ``snapshot``, unless unchanged and not ``force``."""
        commands = [*available_commands(snapshot.skills), *builtin_commands(snapshot.skills)]
        key = tuple(
            (c.name, c.description, c.input.root.hint if c.input is not None else "")
            for c in commands
        )
        if not force and key == live.commands_sent:
            return
        live.commands_sent = key
        await self._link.send(session_id, update_available_commands(commands))

    def observe(self, event: StreamEvent) -> Awaitable[None] | None:
        """An SDK stream observer: announce a session once its opening response is out.

        The SDK calls observers after writing a frame, and runs the returned coroutine as a
        task of the connection (cancelled if the connection closes first).
        """
        message = event.message
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return None
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") in _SESSION_OPENERS:
                params = message.get("params")
                named = params.get("sessionId") if isinstance(params, Mapping) else None
                self._awaiting[request_id] = named if isinstance(named, str) else None
            return None
        if "method" in message or request_id not in self._awaiting:
            return None
        session_id = self._awaiting.pop(request_id)
        result = message.get("result")
        if session_id is None and isinstance(result, Mapping):
            session_id = result.get("sessionId")
        if "error" in message or not isinstance(session_id, str):
            return None
        return self._announce(session_id)

    async def _announce(self, session_id: str) -> None:
        live = self._sessions.peek(session_id)
        if live is None:
            return
        options = SkillLookupOptions(cwd=live.session.context.cwd)
        snapshot = await self._registry.snapshot(options)
        try:
            await self.refresh(session_id, live, snapshot, force=True)
        except ConnectionError:
            # The client left while the skills were being discovered (end of input right after
            # `session/new`). The SDK's close() would re-raise this from the connection's task
            # and turn a clean exit into a failed one; there is simply nobody to tell.
            _log.debug(
                "skills_commands_not_sent", session_id=session_id, reason="connection closed"
            )

    def on_registry_change(self) -> None:
        """The registry's change listener. May run on any thread: it only wakes `follow`."""
        loop, changed = self._loop, self._changed
        if loop is None or changed is None or loop.is_closed():
            return  # not following: each session notices at its next turn
        loop.call_soon_threadsafe(changed.set)

    async def follow(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        """Re-send each live session's commands whenever a registry change alters them.

        Start it with ``await group.start(announcer.follow)``: a change made once that returns
        is not missed.
        """
        self._loop, self._changed = asyncio.get_running_loop(), asyncio.Event()
        changed = self._changed
        task_status.started()
        try:
            while True:
                await changed.wait()
                # Cleared before refreshing: a change during the refresh triggers one more
                # round, and a burst of changes collapses into one.
                changed.clear()
                # Catalogs are cached per cwd: one discovery per distinct working directory.
                for session_id, live in self._sessions.running():
                    try:
                        options = SkillLookupOptions(cwd=live.session.context.cwd)
                        snapshot = await self._registry.snapshot(options)
                        await self.refresh(session_id, live, snapshot, force=False)
                    except Exception as error:
                        log = _log.warning
                        log(
                            "skills_commands_refresh_failed",
                            session_id=session_id,
                            error=repr(error),
                        )
        finally:
            self._loop = self._changed = None


def user_commands(skills: Iterable[SkillSummary]) -> list[str]:
    """The names a person can type as ``/name``: user-invocable skills, then the built-ins."""
    names = [skill.name for skill in skills if skill.user_invocable]
    if SKILLS_COMMAND not in names:
        names.append(SKILLS_COMMAND)
    return names


def builtin_commands(skills: Iterable[SkillSummary]) -> list[AvailableCommand]:
    """``/skills``, advertised after the skills' own unless a user-invocable skill takes it."""
    if any(skill.user_invocable and skill.name == SKILLS_COMMAND for skill in skills):
        return []
    return [AvailableCommand(name=SKILLS_COMMAND, description=SKILLS_COMMAND_DESCRIPTION)]


def leading_slash_word(text: str) -> str | None:
    """The ``word`` of a prompt that starts with ``/word`` (leading whitespace allowed)."""
    match = _LEADING_SLASH_WORD.match(text)
    return match.group(1) if match else None


def no_such_command(word: str, snapshot: SkillSnapshot) -> str:
    """The note answering ``/word`` when it is no command, naming the commands that exist."""
    commands = user_commands(snapshot.skills)
    model_only = any(skill.name == word and not skill.user_invocable for skill in snapshot.skills)
    if model_only:
        opening = (
            f"`/{word}` is not a command: the skill `{word}` is for the model only "
            "(its `user-invocable` is false)."
        )
    else:
        opening = f"`/{word}` is not a command here."
        close = difflib.get_close_matches(word.lower(), commands, n=1, cutoff=0.6)
        if close:
            opening += f" Did you mean `/{close[0]}`?"
    listed = ", ".join(f"`/{name}`" for name in commands)
    return f"{opening}\n\nCommands: {listed}.\n\nNothing was sent to the model."


def skills_report(
    cwd: str,
    snapshot: SkillSnapshot,
    diagnostics: Sequence[Diagnostic] | None,
    fit: CatalogFit | None = None,
) -> str:
    """What ``/skills`` answers, as Markdown: the skills ``cwd`` resolves to now, the problems
    (``None``: they could not be gathered) and what the budget did to the session's catalog."""
    lines = [f"**Skills for `{_clean(cwd)}`** ({len(snapshot.skills)})", ""]
    if not snapshot.skills:
        lines.append("No skills found.")
    for skill in snapshot.skills:
        lines.append(_skill_line(skill))
    lines.append("")
    if fit is not None:
        lines.extend(_clean(line) for line in describe_catalog_fit(fit).splitlines())
        lines.append("")
    if diagnostics is None:
        lines.append("The problems could not be gathered (see the agent's log).")
    elif not diagnostics:
        lines.append("No problems found.")
    else:
        ordered = sorted(diagnostics, key=lambda d: _SEVERITY_ORDER.get(d.severity, 3))
        lines.append(f"**Problems** ({_tally(ordered)})")
        lines.append("")
        lines.extend(_diagnostic_line(d) for d in ordered[:_MAX_PROBLEMS_SHOWN])
        hidden = len(ordered) - _MAX_PROBLEMS_SHOWN
        if hidden > 0:
            lines.append(f"- ... and {hidden} more")
        lines.append("")
        lines.append(f"Run `acp-skills doctor --cwd {_clean(cwd)}` in a terminal for details.")
    if not snapshot.complete:
        lines.append("")
        lines.append("A skill provider did not answer in time: this list may be incomplete.")
    return "\n".join(lines).rstrip("\n")


def _skill_line(skill: SkillSummary) -> str:
    notes = [_clean(skill.source)]
    if not skill.user_invocable:
        notes.append("model only")
    if skill.disable_model_invocation:
        notes.append("hidden from the model")
    shown = f"/{skill.name}" if skill.user_invocable else skill.name
    description = shorten_description(skill.description, _DESCRIPTION_SHOWN)
    return f"- `{shown}` — {description} ({', '.join(notes)})"


def _diagnostic_line(diagnostic: Diagnostic) -> str:
    where = _clean(diagnostic.path) if diagnostic.path is not None else ""
    if where and diagnostic.line is not None:
        where += f":{diagnostic.line}"
    label = _SEVERITY_LABEL.get(diagnostic.severity, diagnostic.severity)
    located = f" `{where}`:" if where else ":"
    return f"- {label} `{diagnostic.code}`{located} {_clean(diagnostic.message)}"


def _tally(diagnostics: Sequence[Diagnostic]) -> str:
    parts = []
    for severity in ("error", "warning", "info"):
        count = sum(1 for d in diagnostics if d.severity == severity)
        if count:
            label = _SEVERITY_LABEL[severity]
            parts.append(f"{count} {label}{'' if count == 1 else 's'}")
    return ", ".join(parts)
