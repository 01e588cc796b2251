"""`AcpSkills`: the facade an ACP agent mounts; it starts nothing before ``async with``/`serve`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypedDict, Unpack, cast

import anyio
from acp import RequestError, schema
from acp.connection import StreamEvent
from acp.core import AgentSideConnection

from ..catalog import CatalogFit, SkillCatalogContributor
from ..content import DEFAULT_MAX_RESOURCE_BYTES
from ..diagnostics import diagnostic_json, server_json
from ..local import LocalSkillProvider
from ..model import PrefixContext, SkillLookupOptions, is_skill_name, require_positive_int
from ..prefix import SessionPrefix
from ..record import InMemorySessionStore, InvalidCursor, SessionStore
from ..registry import SkillRegistry
from ..session import PrefixedSession
from ..text import DEFAULT_MAX_DESCRIPTION_LENGTH, for_editor
from ..tool import SkillTool
from ..trust import TrustMode, TrustStore, trust_mode
from .commands import CommandsAnnouncer
from .consent import TrustGate
from .replay import replay
from .sessions import ServerCloser, SessionTable, describe_os_error, request_servers
from .stdio import open_stdio
from .transport import GuardedTransport
from .turn import AgentToolRunner, PromptTurn, TurnKit, open_turn
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
    """Skills for one ACP connection (options and `ValueError`s: docs/integration.md)."""

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
        max_requests_per_turn: int = 8,
        expand_arguments: bool = False,
        mcp: ServerCloser | None = None,
        trust: TrustMode = "ask",
        trust_store: TrustStore | None = None,
    ) -> None:
        mode = trust_mode(trust)
        pinned = _skill_names("pinned_skills", pinned_skills)
        hidden = _skill_names("hidden_skills", hidden_skills)
        max_requests = require_positive_int("max_requests_per_turn", max_requests_per_turn)
        self._own_provider: LocalSkillProvider | None = None
        if registry is None:
            registry = SkillRegistry()
            self._own_provider = LocalSkillProvider()
            registry.register_provider(self._own_provider)
        self.registry = registry
        self.tool = SkillTool(registry, max_resource_bytes=max_resource_bytes, hidden_skills=hidden)
        self.store: SessionStore = store if store is not None else InMemorySessionStore()
        prefix = SessionPrefix()
        self._sessions = sessions = SessionTable(prefix, self.store, mcp)
        # No registry: it lists only what a turn hands down (`PrefixContext.skills`).
        catalog = SkillCatalogContributor(
            None,
            max_length=catalog_max_length,
            tool_name=self.tool.name,
            budget=catalog_budget,
            pinned=pinned,
            hidden=hidden,
        )
        prefix.add(catalog)
        gate = TrustGate(registry, mode, trust_store or TrustStore())
        self._link = link = ClientLink()
        self._announcer = announcer = CommandsAnnouncer(gate, sessions, link)
        kit = (sessions, self.tool, link, announcer, max_requests, expand_arguments)
        self._kit = TurnKit(*kit, gate, catalog)
        self._unsubscribe = registry.on_change(announcer.on_registry_change)
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> AcpSkills:
        """Follow the registry: a change reaches every open session's commands."""
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        await self._group.start(self._announcer.follow, name=FOLLOWER_TASK_NAME)
        self._sessions.tasks = self._group
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        group, self._group = self._group, None
        if group is None:
            return None
        self._sessions.tasks = None
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
        # Not needed to answer: the MCP SDK loads off the event loop from now on.
        load_sdk = getattr(self._sessions.mcp, "load_sdk", None)
        if load_sdk is not None and self._group is not None:
            self._group.start_soon(load_sdk)
        return self.capability_meta()

    @staticmethod
    def capability_meta() -> dict[str, Any]:
        """The ``agentCapabilities._meta`` entry."""
        return {"acp-skills": {"version": "1", "methods": list(EXTENSION_METHODS)}}

    @property
    def session_capabilities(self) -> schema.SessionCapabilities:
        """``agentCapabilities.sessionCapabilities``."""
        return schema.SessionCapabilities(
            list=schema.SessionListCapabilities(),
            resume=schema.SessionResumeCapabilities(),
            close=schema.SessionCloseCapabilities(),
            additional_directories=schema.SessionAdditionalDirectoriesCapabilities(),
        )

    @property
    def reads_mcp_servers(self) -> bool:
        """Whether sessions' ``mcpServers`` bring skills (advertise ``mcpCapabilities.http``)."""
        return self._sessions.mcp is not None

    async def catalog_fit(self, session_id: str) -> CatalogFit | None:
        """What the catalog budget did to the session's catalog (-32602 for an unknown id)."""
        return self._sessions.get(session_id).catalog_fit

    async def open_session(
        self, session_id: str, cwd: str, **opening: Unpack[SessionOpening]
    ) -> PrefixedSession:
        """Start a session instance for ``session/new`` (-32602 for a relative directory)."""
        check_cwd(cwd)
        additional = check_additional_directories(opening.get("additional_directories"))
        tool_names = opening.get("tool_names")
        names = (self.tool.name,) if tool_names is None else tool_names
        context = PrefixContext(
            session_id=session_id,
            cwd=cwd,
            tool_names=frozenset(names),
            servers=request_servers(self._sessions.mcp, opening.get("mcp_servers")),
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
        """A new instance of a stored session for ``session/resume``, without replaying it."""
        check_cwd(cwd)
        await self._require_known(session_id)
        await self._sessions.end_turn(session_id)
        return await self.open_session(session_id, cwd, **opening)

    async def close_session(self, session_id: str) -> None:
        """``session/close``: end the instance and its turn; the record stays."""
        if not await self._sessions.close(session_id):
            await self._require_known(session_id)  # stored, not open here: nothing to release

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None
    ) -> schema.ListSessionsResponse:
        """``session/list``: one page of the recorded sessions, newest first (docs/sessions.md)."""
        directory = check_cwd(cwd) if cwd is not None else None
        try:
            page = await self.store.list_sessions(cwd=directory, cursor=cursor)
        except InvalidCursor as error:
            raise RequestError.invalid_params({"cursor": cursor, "reason": str(error)}) from None
        except OSError as error:  # told, not thrown (a store's listing may fail so)
            reason = f"the session records cannot be listed: {describe_os_error(error)}"
            raise RequestError.internal_error({"reason": reason}) from None
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(
                    session_id=summary.session_id,
                    cwd=summary.cwd,
                    title=summary.title,
                    updated_at=summary.updated_at,
                    additional_directories=list(summary.additional_directories) or None,
                )
                for summary in page.sessions
            ],
            next_cursor=page.next_cursor,
        )

    async def _require_known(self, session_id: str) -> None:
        if self._sessions.peek(session_id) is None and not await self.store.exists(session_id):
            self._sessions.get(session_id)  # -32602, as for any unknown id

    async def session(self, session_id: str) -> PrefixedSession:
        """The session instance (-32602 for an unknown id)."""
        return self._sessions.get(session_id).session

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
        request = {"config": config or {}, "system": system, "tools": [dict(t) for t in tools]}
        return open_turn(self._kit, session_id, prompt, request, run_tool)

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
            live = self._sessions.get(params["sessionId"])
            options, answers = live.context.lookup_options, live.trust
        elif "cwd" in params:
            options = SkillLookupOptions(cwd=check_cwd(params["cwd"]))
        else:
            raise RequestError.invalid_params({"reason": "pass sessionId or cwd"})
        view, mcp = await self._kit.gate.view(options, answers), self._sessions.mcp
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
            "problems": [diagnostic_json(problem) for problem in (*problems, *view.problems)],
            "shadowed": [
                {
                    "name": lost.skill.name,
                    "winner": {"source": lost.winner.source, "provider": lost.winner.provider},
                    "loser": {"source": lost.skill.source, "provider": lost.skill.provider},
                }
                for lost in view.found.shadowed
            ],
            "mcpServers": [server_json(state) for state in mcp.states(options)] if mcp else [],
        }

    async def _describe_prefix(self, params: Mapping[str, Any]) -> dict[str, Any]:
        live = self._sessions.get(params.get("sessionId"))
        fit, session, header = live.catalog_fit, live.session, live.session.last_header
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
