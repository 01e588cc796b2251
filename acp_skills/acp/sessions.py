"""The session table: every session instance of one connection, bounded in memory."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import anyio
from acp import RequestError
from acp.schema import AvailableCommand

from ..catalog import CatalogFit
from ..model import PrefixContext
from ..prefix import SessionPrefix
from ..quiet_log import get_logger
from ..record import SessionDescription, SessionStore, session_title
from ..session import PrefixedSession
from .consent import SessionTrust
from .servers import SessionServers

_log = get_logger(__name__)

# An idle instance let go keeps only its opening and `InstanceState` (its prefix stays in its
# record's last header): 256 live sessions remember 4,096 such.
IDLE_PER_LIVE = 16
# How long closing, loading or resuming a session waits for the turn it cancelled to end.
CLOSE_WAIT_SECONDS = 5.0

# Recorded keys replayed on `session/load`: what the person typed; whether a tool failed; the
# `/name` skills, each {"id", "name", "is_error", "start", "end"}, content[start:end] its text.
DISPLAY_KEY = "_display"
ERROR_KEY = "_is_error"
INVOKED_KEY = "_invoked"


@dataclass(slots=True, kw_only=True)
class InstanceState:
    """What a session instance holds besides its history, also while it is let go idle: from
    the editor's side nothing was closed, so its answers and commands hold (contract §9, §13)."""

    # Its slash commands (`CommandsAnnouncer`): whether the opening response went out, the list
    # last sent, whether that went out before any turn (the first resends it), a turn begun.
    answered: bool = False
    commands: list[AvailableCommand] | None = None
    resend_due: bool = False
    turned: bool = False
    trust: SessionTrust = field(default_factory=SessionTrust)  # this instance's answers
    catalog: CatalogFit | None = None  # what the budget did to the catalog being composed
    described: bool = False  # the store has this instance's summary (`session/list`)
    describe_failed: bool = False  # writing it failed (said once)
    first_prompt: str | None = None  # the record's first prompt as typed, its title


@dataclass(slots=True, kw_only=True)
class IdleSession(InstanceState):
    """An instance let go while idle: reopened, it takes its frozen prefix back from its
    record's last header (``composed``: that header is its own)."""

    context: PrefixContext
    composed: bool

    @property
    def catalog_fit(self) -> CatalogFit | None:
        return self.catalog if self.composed else None


@dataclass(slots=True, kw_only=True)
class LiveSession(InstanceState):
    session: PrefixedSession
    turn: anyio.CancelScope | None = None  # the running turn's, which `cancel` cancels
    turn_ended: anyio.Event = field(default_factory=anyio.Event)  # set as that turn ends

    @property
    def context(self) -> PrefixContext:
        return self.session.context

    @property
    def catalog_fit(self) -> CatalogFit | None:
        """What the catalog budget did to the frozen catalog (``None`` until composed)."""
        return self.catalog if self.session.composed else None


class _Overtaken(Exception):
    """A reopen that a `session/load` or `session/close` overtook."""


class SessionTable:
    def __init__(
        self,
        prefix: SessionPrefix,
        store: SessionStore,
        *,
        max_live: int,
        servers: SessionServers,
    ) -> None:
        self._prefix, self._store, self._max_live = prefix, store, max_live
        # Which live instance uses which MCP server: one let go lets its servers go.
        self.servers = servers
        self._live: OrderedDict[str, LiveSession] = OrderedDict()
        # Idle instances let go beyond `max_live`: each opens again where it was.
        self._idle: OrderedDict[str, IdleSession] = OrderedDict()
        self._reopening: dict[str, anyio.Event] = {}  # one reopen at a time per session

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._live or session_id in self._idle

    def running(self) -> Iterator[tuple[str, LiveSession]]:
        """The live instances, least recently used first (a copy: safe across awaits)."""
        return iter(list(self._live.items()))

    def peek(self, session_id: object) -> LiveSession | None:
        return self._live.get(session_id) if isinstance(session_id, str) else None

    async def open(self, context: PrefixContext, idle: IdleSession | None = None) -> LiveSession:
        """Start a new instance over the session's record (-32603 if it cannot be read), or
        open ``idle`` again as it was."""
        session_id = context.session_id
        # A live instance being replaced (`session/load`) hands over what it has not saved.
        replaced = live.session if (live := self._live.get(session_id)) else None
        session = await self.read(context, replaced, composed=idle is not None and idle.composed)
        if idle is not None and self._idle.get(session_id) is not idle:
            raise _Overtaken  # loaded or closed meanwhile: that holds (`get` asks again)
        self._idle.pop(session_id, None)
        if idle is not None:
            live = LiveSession(session=session, **_state_of(idle))
        else:
            live = LiveSession(session=session, first_prompt=_first_prompt(session.history))
        self._live[session_id] = live
        self._live.move_to_end(session_id)
        await self.servers.bind(session_id, context.servers)
        await self._let_go_idle()
        return live

    async def read(
        self, context: PrefixContext, replacing: PrefixedSession | None = None, *, composed: bool
    ) -> PrefixedSession:
        """An instance over the session's record, not kept in the table (-32603 if the record
        cannot be read); ``composed``: the record's last header holds its frozen prefix."""
        session_id = context.session_id
        try:
            return await PrefixedSession.open(
                self._prefix, context, self._store, replacing=replacing, composed=composed
            )
        except OSError as error:
            problem = describe_os_error(error)
            _log.warning("session_record_unreadable", session_id=session_id, error=problem)
            reason = f"the session record cannot be read: {problem}"
            raise RequestError.internal_error({"sessionId": session_id, "reason": reason}) from None

    def known(self, session_id: object) -> LiveSession | IdleSession:
        """The instance, live or let go while idle, never opened here (-32602 for an unknown
        id): what read-only requests answer from."""
        if (live := self.peek(session_id)) is not None:
            return live
        if not isinstance(session_id, str) or (idle := self._idle.get(session_id)) is None:
            unknown = {"sessionId": session_id, "reason": "unknown session"}
            raise RequestError.invalid_params(unknown)
        return idle

    async def get(self, session_id: object) -> LiveSession:
        """The instance; one let go while idle opens again (-32602 for an unknown id)."""
        while isinstance(instance := self.known(session_id), IdleSession):
            context = instance.context
            # Two requests for one idle session share its one reopened instance.
            if (reopening := self._reopening.get(context.session_id)) is not None:
                await reopening.wait()
                continue
            self._reopening[context.session_id] = reopened = anyio.Event()
            try:
                return await self.open(context, instance)
            except _Overtaken:
                continue
            finally:
                del self._reopening[context.session_id]
                reopened.set()
        self._live.move_to_end(instance.context.session_id)
        return instance

    async def describe(self, live: LiveSession) -> None:
        """Give the store ``live``'s summary once per instance, after a recorded prompt;
        never fails the turn (one not written is tried again at the next)."""
        store, session = self._store, live.session
        # A record not written yet would list nothing.
        if live.described or session.save_error:
            return
        context = session.context
        description = SessionDescription(
            session_id=context.session_id,
            cwd=context.cwd,
            additional_directories=context.additional_directories,
            title=session_title(live.first_prompt or ""),
        )
        try:
            await store.describe_session(description)
        except OSError as error:
            # Once per instance: the next turns try again quietly.
            log = _log.debug if live.describe_failed else _log.warning
            log(
                "session_summary_not_written",
                session_id=context.session_id,
                error=describe_os_error(error),
            )
            live.describe_failed = True
            return
        live.described = True

    async def end_turn(self, session_id: str) -> None:
        """Cancel the session's running turn and wait for it to record its last results, so
        an instance opened next (``session/load``, ``session/resume``) starts from them."""
        # The cancelled turn answers its open tool calls as it ends: without those results the
        # history would end in tool calls, which a model's API refuses on every later request.
        if (live := self.peek(session_id)) is not None and live.turn is not None:
            live.turn.cancel()
            with anyio.move_on_after(CLOSE_WAIT_SECONDS):
                await live.turn_ended.wait()

    async def close(self, session_id: str) -> bool:
        """End the session's instance (``session/close``): its turn cancelled and waited for, the
        servers only it used let go, what its record has not taken yet tried once more. The
        record stays. Whether the session was open here (live or let go while idle)."""
        if (live := self.peek(session_id)) is None:
            return self._idle.pop(session_id, None) is not None  # holds no server
        await self.end_turn(session_id)
        if self._live.get(session_id) is live:  # not replaced meanwhile (`session/load`)
            del self._live[session_id]
            await self.servers.unbind(session_id)
        await _flush(session_id, live)
        return True

    async def flush_all(self) -> None:
        """One last try at every unsaved entry; a warning names each session still missing some."""
        for session_id, live in self.running():
            await _flush(session_id, live)

    async def _let_go_idle(self) -> None:
        excess = len(self._live) - self._max_live
        # The most recent one is the session being opened: never let go on its way in.
        for session_id, live in list(self._live.items())[:-1]:
            if excess <= 0:
                break
            if self._live.get(session_id) is not live:
                continue  # changed while an earlier one's server closed
            session = live.session
            # Busy, or holding entries (or a frozen prefix) its record has not taken yet:
            # letting go would lose them.
            behind = session.save_error is not None or session.unsaved
            if live.turn is not None or behind or session.composed != session.header_recorded:
                continue
            del self._live[session_id]
            live.trust.view = None  # computed again when needed: a snapshot is not kept idle
            self._idle[session_id] = IdleSession(
                context=session.context, composed=session.composed, **_state_of(live)
            )
            excess -= 1
            await self.servers.unbind(session_id)  # opening it again binds them again
        while len(self._idle) > IDLE_PER_LIVE * self._max_live:
            forgotten, _ = self._idle.popitem(last=False)
            _log.debug("session_forgotten", session_id=forgotten, reason="too many idle")


def _state_of(instance: InstanceState) -> dict[str, Any]:
    # What goes over when an instance is let go idle or opened again.
    return {state.name: getattr(instance, state.name) for state in fields(InstanceState)}


async def _flush(session_id: str, live: LiveSession) -> None:
    if live.session.unsaved and (error := await live.session.flush()) is not None:
        _log.warning(
            "session_record_entries_lost",
            session_id=session_id,
            missing=live.session.unsaved,
            error=describe_os_error(error),
        )


def _first_prompt(history: Iterable[Mapping[str, object]]) -> str | None:
    # A session's title is its first recorded prompt as the person typed it (also for a record
    # older than session summaries, or one whose summary could not be written until now).
    for message in history:
        if message.get("role") == "user":
            shown = message.get(DISPLAY_KEY, message.get("content"))
            return shown if isinstance(shown, str) else ""
    return None


def describe_os_error(error: OSError) -> str:
    return f"{error.strerror}: {error.filename}" if error.filename else str(error)
