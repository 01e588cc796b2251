"""`AcpSkills`: skills on one ACP connection of an agent built on the official SDK.

It owns everything about skills that a session needs, so the agent keeps only its model and its
own tools:

* the per-session instances (`PrefixedSession`: history, frozen prefix, request headers), with
  idle ones released beyond a bound and brought back from their record on the next request;
* prompt turns (`turn`): ``/name`` expansion, the ``skill`` tool with its ``tool_call`` /
  ``tool_call_update`` reports, cancellation, and the turns the library answers itself without
  the model (the built-in ``/skills``, and a note for a ``/word`` that is no command);
* slash commands: ``available_commands_update`` once the ``session/new`` / ``session/load``
  response has been written (an observer on the connection sees it go out), again at the
  session's first prompt turn (some editors drop the first one), and whenever the registry's
  changes alter a session's set;
* the ``_skills/list`` (with the problems discovery met), ``_skills/prefix`` and
  ``_skills/reload`` extension methods and the capability entry advertising them;
* ``session/load`` replay of the stored conversation.

Background work has owners: the commands update that follows a response is a task of the
connection that sends it (the SDK cancels it when the connection closes); following the
registry is a task in this object's task group, which lives from ``async with skills`` (or
`serve`) to its end.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Protocol, TypeGuard, cast

import anyio
import structlog
from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.core import AgentSideConnection
from acp.helpers import (
    update_agent_message_text,
    update_available_commands,
    update_user_message_text,
)

from ..catalog import CatalogFit, SkillCatalogContributor, check_catalog_budget
from ..diagnostics import Diagnostic
from ..local import LocalSkillProvider
from ..model import (
    PrefixContext,
    SkillLookupOptions,
    SkillSnapshot,
    is_skill_name,
    require_positive_int,
)
from ..prefix import SessionPrefix
from ..provider import ProviderHandle
from ..record import InMemorySessionStore, SessionStore
from ..registry import SkillRegistry
from ..session import PrefixedSession
from ..text import (
    DEFAULT_MAX_DESCRIPTION_LENGTH,
    remove_unsafe_characters,
    replace_lone_surrogates,
    replace_lone_surrogates_in_json,
)
from ..tool import DEFAULT_MAX_RESOURCE_BYTES, SkillTool, ToolResult
from ..transport import GuardedTransport, open_stdio
from .commands import (
    SKILLS_COMMAND,
    builtin_commands,
    leading_slash_word,
    no_such_command,
    skills_report,
)
from .turn import (
    DISPLAY_KEY,
    ERROR_KEY,
    INVOKED_KEY,
    AgentToolRunner,
    InvokedSkill,
    PromptTurn,
)
from .updates import (
    available_commands,
    check_cwd,
    decode_tool_arguments,
    find_invocations_with_arguments,
    prompt_context,
    prompt_text,
    skill_tool_call_start,
    tool_call_finished,
    tool_call_started,
)

__all__ = [
    "DEFAULT_MAX_LIVE_SESSIONS",
    "DEFAULT_MAX_REQUESTS_PER_TURN",
    "EXTENSION_METHODS",
    "EXTENSION_NAME",
    "AcpClient",
    "AcpSkills",
]

_log = structlog.get_logger(__name__)

EXTENSION_NAME = "acp-skills"
EXTENSION_VERSION = "1"
# Wire names. The Python SDK hands `ext_method` the name without its leading underscore.
EXTENSION_METHODS = ("_skills/list", "_skills/prefix", "_skills/reload")

# The task that follows the registry while `AcpSkills` is entered (named for diagnostics).
FOLLOWER_TASK_NAME = "acp-skills registry follower"

DEFAULT_MAX_LIVE_SESSIONS = 256
DEFAULT_MAX_REQUESTS_PER_TURN = 8

# The requests whose response a session's first commands update must follow.
_SESSION_OPENERS = ("session/new", "session/load")


class AcpClient(Protocol):
    """The part of the SDK's client proxy (`acp.core.AgentSideConnection`) this module uses."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any: ...


@dataclass(slots=True, kw_only=True)
class _LiveSession:
    session: PrefixedSession
    # The running turn's cancel scope; `cancel` cancels it.
    turn: anyio.CancelScope | None = None
    # Whether a prompt turn has re-sent the commands (the first one always does).
    announced_in_turn: bool = False
    commands_sent: tuple[tuple[str, str, str], ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _ReleasedSession:
    """What is kept of an idle session released from memory: enough to reopen its record."""

    context: PrefixContext
    requested: bool
    announced_in_turn: bool
    commands_sent: tuple[tuple[str, str, str], ...] | None


class AcpSkills:
    """Skills for one ACP connection: sessions, turns, the tool, commands and extensions.

    Args:
        registry: where skills come from; by default a registry with a `LocalSkillProvider`
            (the project's, custom and the user's skill directories).
        store: where each session's durable record lives; in memory unless given
            (`JsonlSessionStore` keeps sessions across restarts).
        catalog_max_length: the catalog's description bound.
        catalog_budget: the most characters a session's catalog message may have; ``None``
            (the default) for no limit. A session whose catalog had to leave skills out gets
            the ``skill`` tool's ``query`` to search for them.
        pinned_skills: names of skills every catalog lists in full, first.
        hidden_skills: names of skills no catalog lists and no ``query`` returns; they still
            load by exact name.
        max_resource_bytes: the ``skill`` tool's cap on resource reads.
        max_live_sessions: how many session instances stay in memory; beyond it, the least
            recently used idle ones are released and reopened from their record when needed.
        max_requests_per_turn: model requests a turn may make before it stops with
            ``max_turn_requests``.
        expand_arguments: fill ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` in the body of a
            skill a person invokes as ``/name`` with what they typed after it, as Claude Code
            does (`acp_skills.arguments`). Off by default: bodies reach the model verbatim.

    Raises:
        ValueError: on a bound that is not a positive integer, or a pinned or hidden name that
            is not a skill name.
    """

    def __init__(
        self,
        registry: SkillRegistry | None = None,
        *,
        store: SessionStore | None = None,
        catalog_max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH,
        catalog_budget: int | None = None,
        pinned_skills: Iterable[str] = (),
        hidden_skills: Iterable[str] = (),
        max_resource_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
        max_live_sessions: int = DEFAULT_MAX_LIVE_SESSIONS,
        max_requests_per_turn: int = DEFAULT_MAX_REQUESTS_PER_TURN,
        expand_arguments: bool = False,
    ) -> None:
        check_catalog_budget(catalog_budget)
        pinned = _skill_names("pinned_skills", pinned_skills)
        hidden = _skill_names("hidden_skills", hidden_skills)
        # The provider this object made itself, and so must release (its watcher) in `aclose`.
        self._own_provider: ProviderHandle | None = None
        if registry is None:
            registry = SkillRegistry()
            self._own_provider = registry.register_provider(LocalSkillProvider())
        self.registry = registry
        self.tool = SkillTool(registry, max_resource_bytes=max_resource_bytes, hidden_skills=hidden)
        self.prefix = SessionPrefix()
        self.prefix.add(
            SkillCatalogContributor(
                registry,
                max_length=catalog_max_length,
                tool_name=self.tool.name,
                budget=catalog_budget,
                pinned_skills=pinned,
                hidden_skills=hidden,
                on_fit=self._note_fit,
            )
        )
        # Each session's catalog outcome, with the context of the instance it was composed
        # for: an entry from an earlier instance of the same session id does not count.
        self._fits: dict[str, tuple[PrefixContext, CatalogFit]] = {}
        self.store: SessionStore = store if store is not None else InMemorySessionStore()
        self._max_live = require_positive_int("max_live_sessions", max_live_sessions)
        self._max_requests = require_positive_int("max_requests_per_turn", max_requests_per_turn)
        self._expand_arguments = expand_arguments
        self._client: AcpClient | None = None
        self._client_reads_files = False
        self._sessions: OrderedDict[str, _LiveSession] = OrderedDict()
        self._released: dict[str, _ReleasedSession] = {}
        # Request ids of `session/new` / `session/load` whose response has not gone out yet,
        # with the session id a `session/load` names (a `session/new` response carries it).
        self._awaiting_response: dict[str | int, str | None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._registry_changed: asyncio.Event | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._unsubscribe = registry.on_change(self._on_registry_change)

    # -- lifetime ------------------------------------------------------------------------------

    async def __aenter__(self) -> AcpSkills:
        """Start following the registry: a change reaches every live session's commands."""
        self._loop = asyncio.get_running_loop()
        self._registry_changed = asyncio.Event()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._follow_registry, name=FOLLOWER_TASK_NAME)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        """Stop following the registry and wait for that to end."""
        group, self._group = self._group, None
        self._loop = None
        if group is None:
            return None
        group.cancel_scope.cancel()
        return await group.__aexit__(exc_type, exc, traceback)

    async def aclose(self) -> None:
        """Stop following the registry for good (the object is then finished).

        The default registry's local provider, made here, is disposed too (its file watcher
        stops); a registry passed in stays as it is.
        """
        self._unsubscribe()
        if self._own_provider is not None:
            self._own_provider.dispose()
        if self._group is not None:
            self._group.cancel_scope.cancel()

    async def serve(self, agent: object, transport: Any | None = None) -> None:
        """Serve ``agent`` over ACP until the client closes the connection.

        The agent is a plain class with the SDK's handler methods (see docs/integration.md);
        this attaches the connection, follows the registry while serving, and closes everything
        at the end.

        Args:
            agent: the agent's handlers. Its own ``on_connect(conn)``, if any, is called too.
            transport: a message-level transport; by default stdin/stdout through
                `GuardedTransport`, with the protocol moved off file descriptor 1 so nothing
                else printed can corrupt it (`open_stdio`).
        """
        if transport is None:
            reader, writer = await open_stdio()
            transport = GuardedTransport(reader, writer)
        async with self:
            # The agent implements the handlers it supports (the SDK answers the others with
            # "method not found"), so it is not a full `acp.Agent` to the type checker.
            connection = AgentSideConnection(cast(Any, agent), transport, listening=False)
            self.attach(connection)
            try:
                await connection.listen()
            finally:
                await asyncio.shield(connection.close())

    def attach(self, client: AcpClient) -> None:
        """Use ``client`` (the SDK's `AgentSideConnection`) to reach the editor.

        `serve` does this; an agent that builds its own connection calls it from its
        ``on_connect``. On the SDK's connection, an observer is added so that a session's
        commands follow its ``session/new`` / ``session/load`` response on the wire.
        """
        self._client = client
        connection = getattr(client, "_conn", None)
        add_observer = getattr(connection, "add_observer", None)
        if callable(add_observer):
            add_observer(self._observe)
        else:
            _log.debug("skills_commands_wait_for_first_turn", reason="no connection observer")

    def initialize(self, client_capabilities: object) -> dict[str, Any]:
        """Note what the client can do; return the ``agentCapabilities._meta`` entries to add."""
        fs = _field(client_capabilities, "fs", "fs")
        self._client_reads_files = _field(fs, "read_text_file", "readTextFile") is True
        return self.capability_meta()

    @staticmethod
    def capability_meta() -> dict[str, Any]:
        """``{"acp-skills": {"version", "methods"}}`` for ``agentCapabilities._meta``."""
        return {EXTENSION_NAME: {"version": EXTENSION_VERSION, "methods": list(EXTENSION_METHODS)}}

    @property
    def skill_tool_spec(self) -> dict[str, Any]:
        """The ``skill`` tool in the OpenAI function format (``{"type": "function", ...}``).

        This is the plain schema (``name`` required). A session whose catalog left skills out
        has the schema with ``query``; `PromptTurn.tools` always holds the session's own.
        """
        return self._tool_spec(searchable=False)

    def _tool_spec(self, *, searchable: bool) -> dict[str, Any]:
        if not searchable:
            description, parameters = self.tool.description, self.tool.parameters
        else:
            description = self.tool.description_for(searchable=True)
            parameters = self.tool.parameters_for(searchable=True)
        return {
            "type": "function",
            "function": {
                "name": self.tool.name,
                "description": description,
                "parameters": parameters,
            },
        }

    # -- catalog budget ------------------------------------------------------------------------

    def _note_fit(self, context: PrefixContext, fit: CatalogFit) -> None:
        self._fits[context.session_id] = (context, fit)

    def _session_fit(self, session: PrefixedSession) -> CatalogFit | None:
        noted = self._fits.get(session.context.session_id)
        if not session.composed or noted is None or noted[0] is not session.context:
            return None
        return noted[1]

    async def catalog_fit(self, session_id: str) -> CatalogFit | None:
        """What the catalog budget did to the session's frozen catalog.

        ``None`` until the session instance has composed its prefix (on its first prompt
        turn). The outcome is frozen with the prefix: an instance released while idle and
        brought back keeps it; ``session/load`` starts an instance that composes afresh.

        Raises:
            acp.RequestError: invalid params (-32602) for an unknown session id.
        """
        return self._session_fit(await self.session(session_id))

    # -- sessions ------------------------------------------------------------------------------

    async def open_session(
        self, session_id: str, cwd: str, *, tool_names: Iterable[str] | None = None
    ) -> PrefixedSession:
        """Start a session instance for ``session/new``.

        Its slash commands go out once the handler's response has been written.

        Args:
            session_id: the id the agent answers ``session/new`` with.
            cwd: the session's working directory (absolute).
            tool_names: the tools the session's model can call; the catalog is only composed
                when the ``skill`` tool is among them (by default it is the only one).

        Raises:
            acp.RequestError: invalid params (-32602) for a ``cwd`` that is not absolute.
        """
        check_cwd(cwd)
        return await self._open(session_id, cwd, tool_names)

    async def load_session(
        self, session_id: str, cwd: str, *, tool_names: Iterable[str] | None = None
    ) -> PrefixedSession:
        """Start a new instance of a stored session for ``session/load`` and replay it.

        The stored conversation is sent as ``session/update`` notifications (the person's
        messages, the agent's, and every tool call with its result); a turn still running on
        the previous instance is cancelled. The new instance composes its prefix afresh.

        Raises:
            acp.RequestError: invalid params (-32602) for a relative ``cwd`` or a session that
                is neither live nor stored.
        """
        check_cwd(cwd)
        if not self.has_session(session_id) and not await self.store.exists(session_id):
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        running = self._sessions.get(session_id)
        if running is not None and running.turn is not None:
            running.turn.cancel()
        session = await self._open(session_id, cwd, tool_names)
        await self._replay(session_id, session)
        return session

    async def _open(
        self, session_id: str, cwd: str, tool_names: Iterable[str] | None
    ) -> PrefixedSession:
        names = frozenset(tool_names) if tool_names is not None else frozenset({self.tool.name})
        context = PrefixContext(session_id=session_id, cwd=cwd, tool_names=names)
        try:
            record = await self.store.open(session_id)
            session = await PrefixedSession.open(self.prefix, context, record)
        except OSError as error:
            # Told to the client, not thrown at it: no traceback, and a message a person can
            # act on (the record's path and what is wrong with it).
            problem = _describe_os_error(error)
            _log.warning("session_record_unreadable", session_id=session_id, error=problem)
            raise RequestError.internal_error(
                {"sessionId": session_id, "reason": f"the session record cannot be read: {problem}"}
            ) from None
        self._released.pop(session_id, None)
        self._sessions[session_id] = _LiveSession(session=session)
        self._sessions.move_to_end(session_id)
        self._release_idle()
        return session

    def has_session(self, session_id: str) -> bool:
        """Whether ``session_id`` is a session instance of this connection (live or released)."""
        return session_id in self._sessions or session_id in self._released

    async def session(self, session_id: str) -> PrefixedSession:
        """The session instance, reopened from its record if it was released while idle.

        Raises:
            acp.RequestError: invalid params (-32602) for an unknown session id.
        """
        return (await self._live(session_id)).session

    async def _live(self, session_id: str) -> _LiveSession:
        live = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if live is not None:
            self._sessions.move_to_end(session_id)
            return live
        released = self._released.get(session_id) if isinstance(session_id, str) else None
        if released is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        record = await self.store.open(session_id)
        session = await PrefixedSession.reopen(
            self.prefix, released.context, record, requested=released.requested
        )
        if self._released.get(session_id) is not released:
            # Opened or reopened by someone else while we read the record: theirs stands.
            return await self._live(session_id)
        del self._released[session_id]
        live = _LiveSession(
            session=session,
            announced_in_turn=released.announced_in_turn,
            commands_sent=released.commands_sent,
        )
        self._sessions[session_id] = live
        self._release_idle()
        return live

    def _release_idle(self) -> None:
        """Release the least recently used idle instances beyond the bound."""
        excess = len(self._sessions) - self._max_live
        for session_id, live in list(self._sessions.items()):
            if excess <= 0:
                break
            if live.turn is not None or live.session.save_error is not None:
                # Busy, or holding entries its record has not taken yet: releasing it would
                # lose them.
                continue
            del self._sessions[session_id]
            self._released[session_id] = _ReleasedSession(
                context=live.session.context,
                requested=live.session.requested,
                announced_in_turn=live.announced_in_turn,
                commands_sent=live.commands_sent,
            )
            excess -= 1

    # -- prompt turns --------------------------------------------------------------------------

    def turn(
        self,
        session_id: str,
        prompt: Sequence[object],
        *,
        system: str = "",
        config: Mapping[str, object] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        run_tool: AgentToolRunner | None = None,
    ) -> AbstractAsyncContextManager[PromptTurn]:
        """Run one ``session/prompt`` turn: ``async with skills.turn(...) as turn:``.

        Entering it re-advertises the commands (always on the session's first turn, later when
        they changed), composes the session's prefix once, loads each skill the prompt invokes
        as ``/name`` (reported as a tool call) and records the person's message with them.

        A prompt that opens with ``/skills`` (the built-in, unless a user-invocable skill takes
        that name) or with a ``/word`` that is no command is answered by the library itself:
        the answer is shown, nothing is recorded, and the turn is already over when the block
        starts (`PromptTurn.finished`; `PromptTurn.requests` yields nothing and the response
        is ``end_turn``). An agent driving its own loop checks ``turn.finished`` first.
        `cancel` ends the turn: the ``async with`` block is cancelled, what completed stays
        recorded, a prefix no request used is discarded, and `PromptTurn.response` says
        ``cancelled``.

        Args:
            session_id: the session of the ``session/prompt`` request.
            prompt: its content blocks.
            system: the system prompt (recorded in the request header).
            config: the model configuration (recorded in the request header).
            tools: the agent's own tool specs (OpenAI function format), after ``skill``.
            run_tool: runs the agent's own tools by name.

        Raises:
            acp.RequestError: invalid params (-32602) for an unknown session; invalid request
                (-32600) when a turn of that session is already running.
        """
        return self._run_turn(session_id, prompt, system, config or {}, tools, run_tool)

    @asynccontextmanager
    async def _run_turn(
        self,
        session_id: str,
        prompt: Sequence[object],
        system: str,
        config: Mapping[str, object],
        tools: Sequence[Mapping[str, Any]],
        run_tool: AgentToolRunner | None,
    ) -> AsyncIterator[PromptTurn]:
        live = await self._live(session_id)
        if live.turn is not None:
            raise RequestError.invalid_request(
                {"sessionId": session_id, "reason": "a prompt turn is already running"}
            )
        turn = PromptTurn(
            session=live.session,
            send=lambda update: self._send(session_id, update),
            call_skill=lambda call_id, arguments: self._call_skill(
                session_id, live.session, call_id, arguments
            ),
            skill_tool_spec=self.skill_tool_spec,
            system=system,
            config=config,
            tools=tools,
            run_tool=run_tool,
            max_requests=self._max_requests,
        )
        scope = anyio.CancelScope()
        # Set before anything awaits: a `session/cancel` read right after the prompt finds it.
        live.turn = scope
        began = False
        try:
            with scope:
                snapshot = await self._prepare_turn(session_id, live)
                answer = await self._answer_without_model(live, prompt, snapshot)
                if answer is None:
                    turn.invoked = tuple(await self._begin_turn(session_id, live, prompt, snapshot))
                    # The prefix is composed now, and with it whether the schema has `query`.
                    fit = self._session_fit(live.session)
                    turn._use_skill_tool_spec(self._tool_spec(searchable=_omits(fit)))
                else:
                    # Nothing reaches the model or the record: a prefix composed for this turn
                    # is left for the first turn that makes a request.
                    live.session.discard_unused_prefix()
                    await self._send(
                        session_id, update_agent_message_text(replace_lone_surrogates(answer))
                    )
                    turn.stop("end_turn")
                began = True
                yield turn
            if scope.cancelled_caught:
                _log.info("turn_cancelled", session_id=session_id)
                live.session.discard_unused_prefix()
                turn.stop("cancelled")
            if not began:
                # Cancelled while the turn began: the block still runs, with nothing to do.
                yield turn
            if live.session.save_error is not None:
                # The reply is out; the person also needs to know it will not survive a restart.
                notice = f"\n\n{_not_saved_notice(live.session.save_error)}"
                await self._send(session_id, update_agent_message_text(notice))
        finally:
            live.turn = None

    async def _prepare_turn(self, session_id: str, live: _LiveSession) -> SkillSnapshot:
        """Compose the prefix (once) and re-advertise the commands; return the skills now."""
        session = live.session
        snapshot: SkillSnapshot | None = None

        async def take_snapshot() -> None:
            nonlocal snapshot
            snapshot = await self.registry.snapshot(SkillLookupOptions(cwd=session.context.cwd))

        # Together, the snapshot and the prefix's catalog share one discovery, so a slow
        # provider is waited for once rather than twice.
        async with anyio.create_task_group() as group:
            group.start_soon(take_snapshot)
            await session.prefix()
        assert snapshot is not None
        await self._send_commands(session_id, live, snapshot, force=not live.announced_in_turn)
        live.announced_in_turn = True
        return snapshot

    async def _answer_without_model(
        self, live: _LiveSession, prompt: Sequence[object], snapshot: SkillSnapshot
    ) -> str | None:
        """The library's own answer to a prompt opening with ``/skills`` or a ``/word`` that is
        no command, or ``None`` when the prompt is for the model."""
        cwd = live.session.context.cwd
        word = leading_slash_word(prompt_text(prompt))
        if word is None:
            return None
        if any(skill.user_invocable and skill.name == word for skill in snapshot.skills):
            return None  # a skill invocation, expanded for the model
        if word == SKILLS_COMMAND:
            fit = self._session_fit(live.session)
            return skills_report(cwd, snapshot, await self._problems(cwd), fit)
        # "/tmp is full" is about a path, not a command.
        if await anyio.to_thread.run_sync(os.path.lexists, f"/{word}"):
            return None
        return no_such_command(word, snapshot)

    async def _problems(self, cwd: str | None) -> tuple[Diagnostic, ...] | None:
        try:
            return await self.registry.diagnose(SkillLookupOptions(cwd=cwd))
        except Exception as error:
            _log.warning("skills_problems_unavailable", cwd=cwd, error=repr(error))
            return None

    async def _begin_turn(
        self,
        session_id: str,
        live: _LiveSession,
        prompt: Sequence[object],
        snapshot: SkillSnapshot,
    ) -> list[InvokedSkill]:
        session = live.session
        invocations = await self._invoke(session_id, session.context.cwd, prompt, snapshot)
        typed = prompt_text(prompt)
        content = "\n\n".join(part for part in (typed, *prompt_context(prompt)) if part)
        # Where each skill's text sits in the content, so `session/load` can replay the tool
        # calls the person saw without storing the texts twice.
        calls: list[dict[str, Any]] = []
        for call_id, skill in invocations:
            if content and skill.text:
                content += "\n\n"
            start = len(content)
            content += skill.text
            calls.append(
                {
                    "id": call_id,
                    "name": skill.name,
                    "is_error": skill.is_error,
                    "start": start,
                    "end": len(content),
                }
            )
        message: dict[str, Any] = {"role": "user", "content": content, DISPLAY_KEY: typed}
        if calls:
            message[INVOKED_KEY] = calls
        await session.append_history(message)
        return [skill for _call_id, skill in invocations]

    async def _invoke(
        self, session_id: str, cwd: str, prompt: Sequence[object], snapshot: SkillSnapshot
    ) -> list[tuple[str, InvokedSkill]]:
        """Load every skill invoked as ``/name``, reporting each as a tool call.

        Returns:
            ``(tool call id, invoked skill)`` pairs, in the order of the prompt.
        """
        names = [skill.name for skill in snapshot.skills if skill.user_invocable]
        invoked = []
        for name, arguments in find_invocations_with_arguments(prompt_text(prompt), names):
            # ACP wants tool call ids unique within the session, across turns and instances.
            call_id = f"slash-{name}-{uuid.uuid4().hex}"
            await self._send(session_id, skill_tool_call_start(call_id, {"name": name}))
            result = _well_formed(
                await self.tool.invoke_for_user(
                    name,
                    cwd=cwd,
                    snapshot=snapshot,
                    arguments=arguments if self._expand_arguments else None,
                )
            )
            await self._send(session_id, tool_call_finished(call_id, result))
            invoked.append(
                (call_id, InvokedSkill(name=name, text=result.text, is_error=result.is_error))
            )
        return invoked

    async def _call_skill(
        self, session_id: str, session: PrefixedSession, call_id: str, arguments: object
    ) -> ToolResult:
        await self._send(session_id, skill_tool_call_start(call_id, arguments))
        read_text = None
        if self._client_reads_files and self._client is not None:
            client = self._client

            async def read_text(path: str) -> str:
                response = await client.read_text_file(session_id=session_id, path=path)
                return replace_lone_surrogates(str(response.content))

        # Lone surrogates in the arguments, the client's file text and the result become
        # U+FFFD, so neither the client nor the model ever gets text it cannot encode.
        result = _well_formed(
            await self.tool.call(
                replace_lone_surrogates_in_json(arguments),
                cwd=session.context.cwd,
                read_text=read_text,
                searchable=_omits(self._session_fit(session)),
            )
        )
        await self._send(session_id, tool_call_finished(call_id, result))
        return result

    def cancel(self, session_id: str) -> None:
        """Cancel the session's running turn (``session/cancel``); nothing if none runs."""
        live = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if live is not None and live.turn is not None:
            live.turn.cancel()

    # -- slash commands ------------------------------------------------------------------------

    async def _send_commands(
        self, session_id: str, live: _LiveSession, snapshot: SkillSnapshot, *, force: bool
    ) -> None:
        commands = [
            *available_commands(snapshot.skills),
            *builtin_commands(snapshot.skills),
        ]
        key = tuple(
            (c.name, c.description, c.input.root.hint if c.input is not None else "")
            for c in commands
        )
        if not force and key == live.commands_sent:
            return
        live.commands_sent = key
        await self._send(session_id, update_available_commands(commands))

    async def _announce(self, session_id: str) -> None:
        live = self._sessions.get(session_id)
        if live is None:
            return
        snapshot = await self.registry.snapshot(SkillLookupOptions(cwd=live.session.context.cwd))
        try:
            await self._send_commands(session_id, live, snapshot, force=True)
        except ConnectionError:
            # The client left while the skills were being discovered (end of input right after
            # `session/new`). The SDK's close() would re-raise this from the connection's task
            # and turn a clean exit into a failed one; there is simply nobody to tell.
            _log.debug(
                "skills_commands_not_sent", session_id=session_id, reason="connection closed"
            )

    def _observe(self, event: StreamEvent) -> Awaitable[None] | None:
        """Send a session's first commands once its ``session/new`` / ``load`` answer is out.

        The SDK calls observers after a frame has been written, so an update started here can
        only follow the response on the wire. The returned coroutine becomes a task of the
        connection, which cancels it if the connection closes first.
        """
        message = event.message
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return None
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") in _SESSION_OPENERS:
                params = message.get("params")
                named = params.get("sessionId") if isinstance(params, Mapping) else None
                self._awaiting_response[request_id] = named if isinstance(named, str) else None
            return None
        if "method" in message or request_id not in self._awaiting_response:
            return None
        session_id = self._awaiting_response.pop(request_id)
        result = message.get("result")
        if session_id is None and isinstance(result, Mapping):
            session_id = result.get("sessionId")
        if "error" in message or not isinstance(session_id, str):
            return None
        return self._announce(session_id)

    def _on_registry_change(self) -> None:
        # May run on any thread (a file watcher's, say): only hand the news to the loop.
        loop, changed = self._loop, self._registry_changed
        if loop is None or changed is None or loop.is_closed():
            return  # not serving: each session notices at its next turn
        loop.call_soon_threadsafe(changed.set)

    async def _follow_registry(self) -> None:
        changed = self._registry_changed
        assert changed is not None
        while True:
            await changed.wait()
            # Cleared before refreshing: a change during the refresh triggers one more round,
            # and a burst of changes collapses into one.
            changed.clear()
            # Catalogs are cached per cwd, so this costs one discovery per distinct working
            # directory, however many sessions share it.
            for session_id, live in list(self._sessions.items()):
                try:
                    snapshot = await self.registry.snapshot(
                        SkillLookupOptions(cwd=live.session.context.cwd)
                    )
                    await self._send_commands(session_id, live, snapshot, force=False)
                except Exception as error:
                    _log.warning(
                        "skills_commands_refresh_failed", session_id=session_id, error=repr(error)
                    )

    async def _send(self, session_id: str, update: Any) -> None:
        if self._client is None:
            return
        await self._client.session_update(session_id=session_id, update=update)

    # -- replay --------------------------------------------------------------------------------

    async def _replay(self, session_id: str, session: PrefixedSession) -> None:
        """Send the stored conversation as ``session/update`` notifications."""
        for message in session.history:
            role = message.get("role")
            content = message.get("content")
            if role == "user":
                shown = message.get(DISPLAY_KEY, content)
                if isinstance(shown, str):
                    await self._send(session_id, update_user_message_text(shown))
                if isinstance(content, str):
                    for call_id, name, result in _invoked_calls(message, content):
                        await self._send(session_id, skill_tool_call_start(call_id, {"name": name}))
                        await self._send(session_id, tool_call_finished(call_id, result))
            elif role == "assistant":
                if isinstance(content, str) and content:
                    await self._send(session_id, update_agent_message_text(content))
                for call in _sequence(message.get("tool_calls")):
                    await self._send(session_id, self._replayed_call(call))
            elif role == "tool" and isinstance(content, str):
                result = ToolResult(text=content, is_error=message.get(ERROR_KEY) is True)
                call_id = str(message.get("tool_call_id"))
                await self._send(session_id, tool_call_finished(call_id, result))

    def _replayed_call(self, call: object) -> Any:
        call = call if isinstance(call, Mapping) else {}
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        call_id = str(call.get("id"))
        name = str(function.get("name", ""))
        arguments = decode_tool_arguments(function.get("arguments", ""))
        if name == self.tool.name:
            return skill_tool_call_start(call_id, arguments)
        return tool_call_started(call_id, name, arguments)

    # -- extension methods ---------------------------------------------------------------------

    def handles(self, method: str) -> bool:
        """Whether ``method`` (as the SDK passes it to ``ext_method``, without ``_``) is ours."""
        return f"_{method}" in EXTENSION_METHODS or method in EXTENSION_METHODS

    async def ext_method(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer ``_skills/list``, ``_skills/prefix`` or ``_skills/reload``.

        Raises:
            acp.RequestError: method not found (-32601) for any other method; invalid params
                (-32602) for a missing or unknown session id or a relative ``cwd``.
        """
        name = method.removeprefix("_")
        params = params if isinstance(params, Mapping) else {}
        if name == "skills/list":
            return await self._list_skills(params)
        if name == "skills/prefix":
            return await self._describe_prefix(params)
        if name == "skills/reload":
            self.registry.invalidate()
            return {"revision": self.registry.revision}
        raise RequestError.method_not_found(f"_{name}")

    async def _list_skills(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if "sessionId" in params:
            cwd: str | None = (await self.session(params["sessionId"])).context.cwd
        elif "cwd" in params:
            cwd = check_cwd(params["cwd"])
        else:
            raise RequestError.invalid_params({"reason": "pass sessionId or cwd"})
        snapshot = await self.registry.snapshot(SkillLookupOptions(cwd=cwd))
        problems = await self.registry.diagnose(SkillLookupOptions(cwd=cwd))
        return {
            "skills": [
                {
                    "name": skill.name,
                    # The editor shows these: no control characters, whitespace kept.
                    "description": remove_unsafe_characters(skill.description),
                    "source": remove_unsafe_characters(skill.source),
                    "provider": remove_unsafe_characters(skill.provider),
                    "userInvocable": skill.user_invocable,
                    "disableModelInvocation": skill.disable_model_invocation,
                }
                for skill in snapshot.skills
            ],
            # The same records as `/skills` and `acp-skills doctor`, paths and messages clean.
            "problems": [_clean_problem(problem) for problem in problems],
        }

    async def _describe_prefix(self, params: Mapping[str, Any]) -> dict[str, Any]:
        session = await self.session(params.get("sessionId"))  # type: ignore[arg-type]
        header = session.last_header
        fit = self._session_fit(session)
        budget = None
        if fit is not None:
            budget = {
                "limit": fit.limit,
                "used": fit.used,
                "shortened": fit.shortened,
                "omitted": list(fit.omitted),
            }
        return {
            "composed": session.composed,
            "messages": [{"role": m.role, "text": m.text} for m in session.messages],
            "header": header.to_json() if header is not None else None,
            "budget": budget,
        }


def _clean_problem(problem: Diagnostic) -> dict[str, Any]:
    shown = problem.to_json()
    shown["message"] = remove_unsafe_characters(problem.message)
    if problem.path is not None:
        shown["path"] = replace_lone_surrogates(problem.path)
    return shown


def _omits(fit: CatalogFit | None) -> bool:
    return fit is not None and bool(fit.omitted)


def _skill_names(option: str, names: Iterable[str]) -> tuple[str, ...]:
    # A lone string is iterable too, and would pin or hide its letters one by one.
    if isinstance(names, str):
        raise ValueError(f"{option} must be a collection of skill names, not a string")
    checked = tuple(names)
    for name in checked:
        if not is_skill_name(name):
            raise ValueError(f"{option} holds {name!r}, which is not a skill name")
    return checked


def _well_formed(result: ToolResult) -> ToolResult:
    # A result may quote what came in (a path the model asked for) or what the disk holds (a
    # directory whose undecodable name Python spells with lone surrogates).
    return replace(result, text=replace_lone_surrogates(result.text))


def _describe_os_error(error: OSError) -> str:
    return f"{error.strerror}: {error.filename}" if error.filename else str(error)


def _not_saved_notice(error: OSError) -> str:
    return (
        f"Note: this conversation could not be saved ({_describe_os_error(error)}). It goes on "
        "here, and what is missing is saved as soon as writing works again; if the agent stops "
        "first, reopening the session will not show it."
    )


def _field(value: object, attribute: str, key: str) -> object:
    # The SDK's lenient parsing can leave a raw dict where a model was expected.
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, attribute, None)


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def _invoked_calls(message: Mapping[str, Any], content: str) -> list[tuple[str, str, ToolResult]]:
    """The ``/name`` tool calls recorded with a user message, as ``(id, name, result)``.

    A record is a file a person can edit: an entry that does not fit the message's content
    is left out rather than replayed wrong.
    """
    calls = []
    for entry in _sequence(message.get(INVOKED_KEY)):
        if not isinstance(entry, Mapping):
            continue
        call_id, name = entry.get("id"), entry.get("name")
        start, end = entry.get("start"), entry.get("end")
        if not (isinstance(call_id, str) and isinstance(name, str)):
            continue
        if not (_is_int(start) and _is_int(end) and 0 <= start <= end <= len(content)):
            continue
        result = ToolResult(text=content[start:end], is_error=entry.get("is_error") is True)
        calls.append((call_id, name, result))
    return calls


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
