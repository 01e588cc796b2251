"""`AcpSkills`: the facade an ACP agent mounts; it starts nothing before ``async with``/`serve`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypedDict, Unpack, cast

import anyio
from acp import RequestError
from acp.connection import StreamEvent
from acp.core import AgentSideConnection
from acp.schema import (
    ListSessionsResponse,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

from ..catalog import CatalogFit, SkillCatalogContributor
from ..diagnostics import diagnostic_json, server_json
from ..local import LocalSkillProvider
from ..model import PrefixContext, SkillLookupOptions, is_skill_name, require_positive_int
from ..prefix import SessionPrefix
from ..record import InMemorySessionStore, SessionStore
from ..registry import SkillRegistry
from ..session import PrefixedSession
from ..session_index import InvalidCursor, ListedSessionStore
from ..text import DEFAULT_MAX_DESCRIPTION_LENGTH, for_editor
from ..tool import DEFAULT_MAX_RESOURCE_BYTES, SkillTool
from ..trust import TrustMode, TrustStore, trust_mode
from .calls import AgentToolRunner
from .commands import CommandsAnnouncer
from .consent import TrustGate
from .replay import replay
from .servers import ServerCloser, SessionServers, shadowed_json
from .sessions import LiveSession, SessionTable, describe_os_error
from .stdio import open_stdio
from .transport import GuardedTransport
from .turn import PromptTurn, TurnKit, open_turn
from .wire import AcpClient, ClientLink, check_additional_directories, check_cwd, field

# The Python SDK hands `ext_method` these without their leading underscore.
EXTENSION_METHODS = ("_skills/list", "_skills/prefix", "_skills/reload")
FOLLOWER_TASK_NAME = "acp-skills registry follower"


class SessionOpening(TypedDict, total=False):
    """What opening a session instance takes besides its id and ``cwd`` (docs/integration.md)."""

    tool_names: Iterable[str] | None
    mcp_servers: Sequence[object] | None
    additional_directories: Sequence[str] | None


class AcpSkills:
    """Skills for one ACP connection (options: docs/integration.md). `ValueError` on a bound
    that is not a positive integer, or a pinned or hidden name that is not a skill name."""

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
        max_live_sessions: int = 256,
        max_requests_per_turn: int = 8,
        expand_arguments: bool = False,
        mcp: ServerCloser | None = None,
        trust: TrustMode = "ask",
        trust_store: TrustStore | None = None,
    ) -> None:
        mode = trust_mode(trust)
        pinned = _skill_names("pinned_skills", pinned_skills)
        hidden = _skill_names("hidden_skills", hidden_skills)
        max_live = require_positive_int("max_live_sessions", max_live_sessions)
        max_requests = require_positive_int("max_requests_per_turn", max_requests_per_turn)
        self._own_provider: LocalSkillProvider | None = None
        if registry is None:
            registry = SkillRegistry()
            self._own_provider = LocalSkillProvider()
            registry.register_provider(self._own_provider)
        self.registry = registry
        gate = TrustGate(registry, mode, trust_store or TrustStore())
        self.tool = SkillTool(registry, max_resource_bytes=max_resource_bytes, hidden_skills=hidden)
        self.store: SessionStore = store if store is not None else InMemorySessionStore()
        self.prefix = SessionPrefix()
        servers = SessionServers(mcp)  # `mcp`: the `McpSkillProvider` the session servers use
        self._sessions = SessionTable(self.prefix, self.store, max_live=max_live, servers=servers)
        # No registry: it lists only what a turn hands down (`PrefixContext.skills`).
        catalog = SkillCatalogContributor(
            None,
            max_length=catalog_max_length,
            tool_name=self.tool.name,
            budget=catalog_budget,
            pinned=pinned,
            hidden=hidden,
        )
        self.prefix.add(catalog)
        self._link = link = ClientLink()
        self._announcer = announcer = CommandsAnnouncer(gate, self._sessions, link)
        kit = (self._sessions, self.tool, link, announcer, max_requests, expand_arguments)
        self._kit = TurnKit(*kit, gate, catalog)
        self._unsubscribe = registry.on_change(announcer.on_registry_change)
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> AcpSkills:
        """Follow the registry: a change reaches every live session's commands."""
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        await self._group.start(self._announcer.follow, name=FOLLOWER_TASK_NAME)
        self._sessions.servers.tasks = self._group
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        group, self._group = self._group, None
        if group is None:
            return None
        self._sessions.servers.tasks = None
        group.cancel_scope.cancel()
        try:
            return await group.__aexit__(*exc_info)
        finally:
            if self._own_provider is not None:
                self._own_provider.close()

    async def aclose(self) -> None:
        """Stop following the registry for good, and close a provider made here."""
        self._unsubscribe()
        if self._own_provider is not None:
            self._own_provider.close()
        if self._group is not None:
            self._group.cancel_scope.cancel()

    async def serve(self, agent: object, transport: Any | None = None) -> None:
        """Serve ``agent`` (the SDK's handlers) until the client leaves; stdio by default."""
        if transport is None:
            transport = GuardedTransport(*await open_stdio())
        async with self:
            # The 0.12 SDK routes `session/resume` and `session/close` only with its unstable
            # protocol on (1.x routes them anyway).
            connection = AgentSideConnection(
                cast(Any, agent),
                transport,
                listening=False,
                observers=[self.observe],
                use_unstable_protocol=True,
            )
            self.attach(connection)
            try:
                await connection.listen()
            finally:
                await asyncio.shield(connection.close())
                await asyncio.shield(self._sessions.flush_all())

    def attach(self, client: AcpClient) -> None:
        """Reach the editor through ``client`` (the SDK's `AgentSideConnection`)."""
        self._link.client = client

    @property
    def observe(self) -> Callable[[StreamEvent], Awaitable[None] | None]:
        """The SDK stream observer: a session's commands follow its opening response."""
        return self._link.observe

    def initialize(self, client_capabilities: object) -> dict[str, Any]:
        """Note what the client can do; return the ``agentCapabilities._meta`` entries to add."""
        fs = field(client_capabilities, "fs")
        self._link.reads_files = field(fs, "read_text_file", "readTextFile") is True
        # The MCP SDK is not needed to answer: it loads off the event loop from now on.
        load_sdk = getattr(self._sessions.servers.provider, "load_sdk", None)
        if load_sdk is not None and self._group is not None:
            self._group.start_soon(load_sdk)
        return self.capability_meta()

    @staticmethod
    def capability_meta() -> dict[str, Any]:
        """``{"acp-skills": {"version", "methods"}}`` for ``agentCapabilities._meta``."""
        return {"acp-skills": {"version": "1", "methods": list(EXTENSION_METHODS)}}

    @property
    def session_capabilities(self) -> SessionCapabilities:
        """``agentCapabilities.sessionCapabilities``: ``list`` when the store lists its
        sessions; ``additionalDirectories`` always (editors send it only when told)."""
        listed = SessionListCapabilities() if isinstance(self.store, ListedSessionStore) else None
        return SessionCapabilities(
            list=listed,
            resume=SessionResumeCapabilities(),
            close=SessionCloseCapabilities(),
            additional_directories=SessionAdditionalDirectoriesCapabilities(),
        )

    @property
    def reads_mcp_servers(self) -> bool:
        """Whether sessions' ``mcpServers`` bring skills: advertise ``mcpCapabilities.http``."""
        return self._sessions.servers.provider is not None

    async def catalog_fit(self, session_id: str) -> CatalogFit | None:
        """What the catalog budget did to the session's catalog (-32602 for an unknown id)."""
        return self._sessions.known(session_id).catalog_fit

    async def open_session(
        self, session_id: str, cwd: str, **opening: Unpack[SessionOpening]
    ) -> PrefixedSession:
        """Start a session instance for ``session/new`` (-32602 for a relative ``cwd`` or
        additional directory)."""
        check_cwd(cwd)
        additional = check_additional_directories(opening.get("additional_directories"))
        tool_names = opening.get("tool_names")
        names = (self.tool.name,) if tool_names is None else tool_names
        context = PrefixContext(
            session_id=session_id,
            cwd=cwd,
            tool_names=frozenset(names),
            servers=self._sessions.servers.from_request(opening.get("mcp_servers")),
            additional_directories=additional,
        )
        return (await self._sessions.open(context)).session

    async def load_session(
        self, session_id: str, cwd: str, **opening: Unpack[SessionOpening]
    ) -> PrefixedSession:
        """Start a new instance of a stored session for ``session/load``, and replay it."""
        session = await self.resume_session(session_id, cwd, **opening)
        await replay(self._link, session, self.tool.name)
        return session

    async def resume_session(
        self, session_id: str, cwd: str, **opening: Unpack[SessionOpening]
    ) -> PrefixedSession:
        """Start a new instance of a stored session for ``session/resume``, without replaying
        it; a turn still running on the old one is cancelled and waited for."""
        check_cwd(cwd)
        await self._require_known(session_id)
        await self._sessions.end_turn(session_id)
        return await self.open_session(session_id, cwd, **opening)

    async def close_session(self, session_id: str) -> None:
        """``session/close``: end the session's turn and instance and the MCP servers only it
        used; its record stays (-32602 for an unknown id)."""
        if not await self._sessions.close(session_id):
            await self._require_known(session_id)  # stored, not open here: nothing to release

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None
    ) -> ListSessionsResponse:
        """``session/list``: one page of the recorded sessions, newest first (docs/sessions.md);
        invalid params for a relative ``cwd`` or an unknown cursor."""
        directory, store = check_cwd(cwd) if cwd is not None else None, self.store
        if not isinstance(store, ListedSessionStore):
            return ListSessionsResponse(sessions=[])
        try:
            page = await store.list_sessions(cwd=directory, cursor=cursor)
        except InvalidCursor as error:
            raise RequestError.invalid_params({"cursor": cursor, "reason": str(error)}) from None
        except OSError as error:
            reason = f"the session records cannot be listed: {describe_os_error(error)}"
            raise RequestError.internal_error({"reason": reason}) from None
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=summary.session_id,
                    cwd=summary.cwd,
                    title=summary.title,
                    updated_at=summary.updated_at_text,
                    additional_directories=list(summary.additional_directories) or None,
                )
                for summary in page.sessions
            ],
            next_cursor=page.next_cursor,
        )

    async def _require_known(self, session_id: str) -> None:
        if session_id not in self._sessions and not await self.store.exists(session_id):
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )

    async def session(self, session_id: str) -> PrefixedSession:
        """The session instance (-32602 for an unknown id)."""
        return (await self._sessions.get(session_id)).session

    def cancel(self, session_id: str) -> None:
        """Cancel the session's running turn (``session/cancel``); nothing if none runs."""
        if (live := self._sessions.peek(session_id)) is not None and live.turn is not None:
            live.turn.cancel()

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
        """Run one ``session/prompt`` turn: ``async with skills.turn(...) as turn:``."""
        return open_turn(self._kit, session_id, prompt, system, config or {}, tools, run_tool)

    def handles(self, method: str) -> bool:
        """Whether ``method`` (as the SDK passes it to ``ext_method``, without ``_``) is ours."""
        return f"_{method}" in EXTENSION_METHODS or method in EXTENSION_METHODS

    async def ext_method(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer ``_skills/list``, ``_skills/prefix`` or ``_skills/reload`` (else -32601)."""
        name, params = method.removeprefix("_"), params if isinstance(params, Mapping) else {}
        if name == "skills/list":  # what the editor shows of skills on disk: cleaned here, once
            return for_editor(await self._list_skills(params))
        if name == "skills/prefix":
            return await self._describe_prefix(params)
        if name == "skills/reload":
            self.registry.invalidate()
            return {"revision": self.registry.revision}
        raise RequestError.method_not_found(f"_{name}")

    async def _list_skills(self, params: Mapping[str, Any]) -> dict[str, Any]:
        answers = None
        if "sessionId" in params:
            known = self._sessions.known(params["sessionId"])  # a read opens nothing
            options, answers = known.context.lookup_options, known.trust
        elif "cwd" in params:
            options = SkillLookupOptions(cwd=check_cwd(params["cwd"]))
        else:
            raise RequestError.invalid_params({"reason": "pass sessionId or cwd"})
        view, mcp = await self._kit.gate.view(options, answers), self._sessions.servers.provider
        problems = await self.registry.diagnose(options)
        return {
            "skills": [
                {
                    "name": skill.name,
                    "description": skill.description,
                    "source": skill.source,
                    "provider": skill.provider,
                    "userInvocable": skill.user_invocable,
                    "disableModelInvocation": skill.disable_model_invocation,
                    "trust": view.state(skill),
                }
                for skill in view.found.skills
            ],
            "problems": [diagnostic_json(problem) for problem in problems],
            "shadowed": shadowed_json(view.found),
            "mcpServers": [server_json(state) for state in mcp.states(options)] if mcp else [],
        }

    async def _describe_prefix(self, params: Mapping[str, Any]) -> dict[str, Any]:
        known = self._sessions.known(params.get("sessionId"))
        if isinstance(known, LiveSession):
            session = known.session
        else:  # let go while idle: read from its record, not opened again
            session = await self._sessions.read(known.context, composed=known.composed)
        fit, header = known.catalog_fit, session.last_header
        budget: dict[str, Any] | None = None
        if fit is not None:
            budget = {"limit": fit.limit, "used": fit.used, "shortened": fit.shortened}
            budget["omitted"] = list(fit.omitted)
        return {
            "composed": session.composed,
            "messages": [{"role": m.role, "text": m.text} for m in session.messages],
            "header": header.to_json() if header is not None else None,
            "budget": budget,
        }


def _skill_names(option: str, names: Iterable[str]) -> tuple[str, ...]:
    # A lone string is iterable too, and would pin or hide its letters one by one.
    if isinstance(names, str):
        raise ValueError(f"{option} must be a collection of skill names, not a string")
    checked = tuple(names)
    for name in checked:
        if not is_skill_name(name):
            raise ValueError(f"{option} holds {name!r}, which is not a skill name")
    return checked
