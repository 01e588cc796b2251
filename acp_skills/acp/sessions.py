"""The session table: each session instance until ``session/close``, and the MCP servers the
open instances name."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc
from acp import RequestError
from acp.schema import AvailableCommand

from ..catalog import CatalogFit
from ..model import PrefixContext, SkillLookupOptions
from ..prefix import SessionPrefix
from ..quiet_log import get_logger
from ..record import SessionDescription, SessionStore, session_title
from ..session import PrefixedSession
from .consent import SessionTrust
from .wire import field as wire_field

_log = get_logger(__name__)

# How long closing, loading or resuming a session waits for the turn it cancelled to end.
CLOSE_WAIT_SECONDS = 5.0

# Recorded keys replayed on `session/load`: what the person typed; whether a tool failed; the
# `/name` skills, each {"id", "name", "is_error", "start", "end"}, content[start:end] its text.
DISPLAY_KEY = "_display"
ERROR_KEY = "_is_error"
INVOKED_KEY = "_invoked"


class ServerCloser(Protocol):
    """The servers sessions name (`McpSkillProvider`)."""

    def connect(self, server: Any) -> None: ...

    async def release(self, server: Any) -> None: ...

    def states(self, options: SkillLookupOptions) -> Sequence[Any]: ...


@dataclass(slots=True, kw_only=True)
class LiveSession:
    """One session instance and what the connection keeps beside it."""

    session: PrefixedSession
    trust: SessionTrust = field(default_factory=SessionTrust)
    catalog: CatalogFit | None = None  # what the budget did to the catalog being composed
    answered: bool = False  # its opening response went out: commands may follow
    commands: list[AvailableCommand] | None = None  # the list last sent
    turned: bool = False  # a turn has begun (the first resends the commands)
    described: bool = False  # the store has this instance's summary (`session/list`)
    turn: anyio.CancelScope | None = None  # the running turn's, which `cancel` cancels
    turn_ended: anyio.Event = field(default_factory=anyio.Event)  # set as that turn ends

    @property
    def context(self) -> PrefixContext:
        return self.session.context

    @property
    def catalog_fit(self) -> CatalogFit | None:
        return self.catalog if self.session.composed else None


class SessionTable:
    def __init__(self, prefix: SessionPrefix, store: SessionStore, mcp: ServerCloser | None):
        self._prefix, self._store, self.mcp = prefix, store, mcp
        # `AcpSkills`' task group: a request that lets a server go need not wait for its end.
        self.tasks: anyio.abc.TaskGroup | None = None
        self._live: dict[str, LiveSession] = {}
        self._closing: dict[Hashable, anyio.Event] = {}  # set once that server is closed

    def running(self) -> list[LiveSession]:
        return list(self._live.values())

    def peek(self, session_id: object) -> LiveSession | None:
        return self._live.get(session_id) if isinstance(session_id, str) else None

    def get(self, session_id: object) -> LiveSession:
        """The instance (-32602 for an unknown id)."""
        if (live := self.peek(session_id)) is None:
            unknown = {"sessionId": session_id, "reason": "unknown session"}
            raise RequestError.invalid_params(unknown)
        return live

    async def open(self, context: PrefixContext) -> LiveSession:
        """A new instance over the session's record (-32603 if it cannot be read)."""
        session_id = context.session_id
        # A live instance being replaced (`session/load`) hands over what it has not saved.
        replaced = self._live.get(session_id)
        try:
            session = await PrefixedSession.open(
                self._prefix, context, self._store, replacing=replaced.session if replaced else None
            )
        except OSError as error:
            problem = describe_os_error(error)
            _log.warning("session_record_unreadable", session_id=session_id, error=problem)
            reason = f"the session record cannot be read: {problem}"
            raise RequestError.internal_error({"sessionId": session_id, "reason": reason}) from None
        # Whichever instance is live now goes: another load may have replaced `replaced` meanwhile
        # (and let its servers go), or a `session/close` ended it.
        displaced = self._live.get(session_id)
        live = self._live[session_id] = LiveSession(session=session)
        for server in context.servers:
            # Connecting while the old connection closes would list over it, then lose it.
            while (closing := self._closing.get(server)) is not None:
                await closing.wait()
            if self.mcp is not None and self._named(server):
                self.mcp.connect(server)
        if displaced is not None:
            if displaced.turn is not None:  # begun since the load ended the turns it saw
                displaced.turn.cancel()  # `cancel` reaches only the live instance from now on
            await self._let_go(displaced.context.servers)
        return live

    async def describe(self, live: LiveSession) -> None:
        """Give the store ``live``'s summary; a failure is tried again at the next turn."""
        context = live.context
        if live.session.save_error:
            return  # a record not written yet would list nothing
        description = SessionDescription(
            session_id=context.session_id,
            cwd=context.cwd,
            additional_directories=context.additional_directories,
            title=session_title(_first_prompt(live.session.history)),
        )
        try:
            await self._store.describe_session(description)
            live.described = True
        except OSError as error:
            why = describe_os_error(error)
            _log.warning("session_summary_not_written", session_id=context.session_id, error=why)

    async def end_turn(self, session_id: str) -> None:
        """Cancel the session's running turn and wait for it to record its last results, so
        an instance opened next starts from them (a model's API refuses a dangling tool call)."""
        if (live := self.peek(session_id)) is not None and live.turn is not None:
            live.turn.cancel()
            with anyio.move_on_after(CLOSE_WAIT_SECONDS):
                await live.turn_ended.wait()

    async def close(self, session_id: str) -> bool:
        """End the session's instance and its turn (``session/close``); whether it was open."""
        if (live := self.peek(session_id)) is None:
            return False
        await self.end_turn(session_id)
        if self._live.get(session_id) is live:  # not replaced meanwhile (`session/load`)
            del self._live[session_id]
            await self._let_go(live.context.servers)
        await _flush(live)
        return True

    async def flush_all(self) -> None:
        """One last try at every unsaved entry."""
        for live in self.running():
            await _flush(live)

    def _named(self, server: Hashable) -> bool:
        return any(server in live.context.servers for live in self._live.values())

    async def _let_go(self, servers: Iterable[Hashable]) -> None:
        for server in servers:
            if self.mcp is None or self._named(server) or server in self._closing:
                continue
            closed = self._closing[server] = anyio.Event()
            if self.tasks is not None:
                self.tasks.start_soon(self._close, self.mcp, server, closed)
            else:
                await self._close(self.mcp, server, closed)

    async def _close(self, mcp: ServerCloser, server: Hashable, closed: anyio.Event) -> None:
        try:
            # Ended, not abandoned, when the agent stops: its process group goes with it.
            with anyio.CancelScope(shield=True):
                await mcp.release(server)
        except Exception as error:
            _log.warning("mcp_server_close_failed", server=str(server), error=repr(error))
        finally:
            del self._closing[server]
            closed.set()


def request_servers(
    mcp: ServerCloser | None, entries: Sequence[object] | None
) -> tuple[Hashable, ...]:
    """A request's ``mcpServers`` as `McpServer` values, in order, each once; others warned of."""
    if not entries:
        return ()
    if mcp is None:
        labels = [str(wire_field(entry, "name")) for entry in entries]
        _log.warning("mcp_servers_ignored", servers=labels, reason="no MCP client")
        return ()
    server_type = importlib.import_module("acp_skills.mcp").McpServer  # the SDK only if used
    found: dict[Hashable, None] = {}
    for entry in entries:
        try:
            found[server_type.from_acp(entry)] = None
        except ValueError as error:
            name = wire_field(entry, "name")
            _log.warning("mcp_server_unusable", server=name, reason=str(error))
    return tuple(found)


async def _flush(live: LiveSession) -> None:
    if live.session.unsaved and (error := await live.session.flush()) is not None:
        _log.warning(
            "session_record_entries_lost",
            session_id=live.context.session_id,
            missing=live.session.unsaved,
            error=describe_os_error(error),
        )


def _first_prompt(history: Iterable[Mapping[str, object]]) -> str:
    for message in history:
        if message.get("role") == "user":
            shown = message.get(DISPLAY_KEY, message.get("content"))
            return shown if isinstance(shown, str) else ""
    return ""


def describe_os_error(error: OSError) -> str:
    return f"{error.strerror}: {error.filename}" if error.filename else str(error)
