"""The demo ACP agent: skills mounted through `acp_skills.acp.AcpSkills`, and a model.

It is deliberately a plain class rather than a subclass of ``acp.Agent``: that class is a
``Protocol`` whose unimplemented methods silently answer ``null``, whereas a method that does
not exist here is answered with a proper "method not found" error.

It uses only the public surface an agent author has: `AcpSkills` owns sessions, turns,
cancellation, slash commands and replay; the agent keeps its model. One prompt turn runs at a
time per session; a second ``session/prompt`` while one runs is refused.
"""

from __future__ import annotations

import uuid
from typing import Any

import structlog
from acp import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
)

from acp_skills.acp import AcpSkills, PromptTurn

from . import __version__
from .models import ChatModel, ModelError, ModelReply, ModelRequest

__all__ = ["SYSTEM_PROMPT", "DemoAgent"]

_log = structlog.get_logger(__name__)

SYSTEM_PROMPT = (
    "You are a coding assistant working in the user's project through an editor. Be concise "
    "and concrete. Skills are instruction bundles listed in a catalog at the start of the "
    "conversation; use the `skill` tool to load one before acting on a task it covers."
)


class DemoAgent:
    """An ACP agent whose only tool is ``skill``: every skill concern is `AcpSkills`'s.

    Args:
        skills: the mounted skill system (registry, store, sessions, turns).
        model: the model that answers prompts.
        session_servers: whether the MCP servers the editor forwards with a session are
            passed on (started, their skills offered); when not, they are never started.
    """

    def __init__(
        self, skills: AcpSkills, model: ChatModel, *, session_servers: bool = True
    ) -> None:
        self.skills = skills
        self._model = model
        self._session_servers = session_servers

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        meta = self.skills.initialize(client_capabilities)
        _log.info("client_initialized", protocol_version=protocol_version)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                # Editors send HTTP servers only to an agent that says it takes them.
                mcp_capabilities=McpCapabilities(http=self._takes_session_servers, sse=False),
                session_capabilities=self.skills.session_capabilities,
                field_meta=meta,
            ),
            agent_info=Implementation(
                name="acp-skills-demo", title="acp-skills demo agent", version=__version__
            ),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        await self.skills.open_session(session_id, cwd, **self._opening(kwargs))
        _log.info("session_created", session_id=session_id, cwd=cwd)
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        session = await self.skills.load_session(session_id, cwd, **self._opening(kwargs))
        _log.info("session_loaded", session_id=session_id, messages=len(session.history))
        return LoadSessionResponse()

    async def resume_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> ResumeSessionResponse:
        await self.skills.resume_session(session_id, cwd, **self._opening(kwargs))
        _log.info("session_resumed", session_id=session_id)
        return ResumeSessionResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        await self.skills.close_session(session_id)
        _log.info("session_closed", session_id=session_id)
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        return await self.skills.list_sessions(cwd, cursor)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        config = dict(self._model.config)
        async with self.skills.turn(
            session_id, prompt, system=SYSTEM_PROMPT, config=config
        ) as turn:
            async for messages in turn.requests():
                await self._answer(session_id, turn, messages)
        return turn.response

    async def _answer(
        self, session_id: str, turn: PromptTurn, messages: list[dict[str, Any]]
    ) -> None:
        """One model request of the turn, answered with `PromptTurn.add_reply`."""
        streamed = False

        async def on_text(text: str) -> None:
            nonlocal streamed
            streamed = streamed or bool(text)
            await turn.show_text(text)

        request = ModelRequest(
            system=SYSTEM_PROMPT, tools=turn.tools, messages=messages, trust_note=turn.trust_note
        )
        try:
            reply = await self._model.complete(request, on_text)
        except ModelError as error:
            _log.warning("model_failed", session_id=session_id, error=str(error))
            message = str(error)
            # Text the model streamed before failing stays on screen: start on a new line.
            await turn.show_text(f"\n\n{message}" if streamed else message)
            await turn.add_reply({"content": message}, stop_reason="end_turn")
            return
        cut_off = reply.finish == "length"
        await turn.add_reply(
            _assistant_message(reply), stop_reason="max_tokens" if cut_off else None
        )

    @property
    def _takes_session_servers(self) -> bool:
        return self._session_servers and self.skills.reads_mcp_servers

    def _opening(self, request: dict[str, Any]) -> dict[str, Any]:
        """A session request's MCP servers (none when they are left alone) and additional
        directories, as `AcpSkills` opens a session with them."""
        servers = request.get("mcp_servers")
        if servers and not self._session_servers:
            labels = [
                str(server.get("name") if isinstance(server, dict) else getattr(server, "name", ""))
                for server in servers
            ]
            _log.debug("mcp_session_servers_left_alone", servers=labels)
            servers = None
        return {
            "mcp_servers": servers,
            "additional_directories": request.get("additional_directories"),
        }

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.skills.cancel(session_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.skills.ext_method(method, params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        _log.debug("extension_notification_ignored", method=method)


def _assistant_message(reply: ModelReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    return message
