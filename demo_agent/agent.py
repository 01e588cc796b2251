"""The demo ACP agent: skills mounted through `acp_skills.acp.AcpSkills`, and a model loop.

It is deliberately a plain class rather than a subclass of ``acp.Agent``: that class is a
``Protocol`` whose unimplemented methods silently answer ``null``, whereas a method that does
not exist here is answered with a proper "method not found" error.

One prompt turn runs at a time per session; a second ``session/prompt`` while one runs is
refused (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import (
    start_tool_call,
    update_agent_message_text,
    update_user_message_text,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
)

from acp_skills import PrefixedSession, ToolResult
from acp_skills.acp import (
    AcpClient,
    AcpSkills,
    SkillTurn,
    is_absolute_cwd,
    prompt_text,
    skill_tool_call_end,
    skill_tool_call_start,
)

from . import __version__
from .models import DISPLAY_KEY, ERROR_KEY, ChatModel, ModelError, ModelReply, ModelRequest

__all__ = ["SYSTEM_PROMPT", "DemoAgent"]

_log = structlog.get_logger(__name__)

SYSTEM_PROMPT = (
    "You are a coding assistant working in the user's project through an editor. Be concise "
    "and concrete. Skills are instruction bundles listed in a catalog at the start of the "
    "conversation; use the `skill` tool to load one before acting on a task it covers."
)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """What the agent is configured with (see ``python -m demo_agent --help``)."""

    max_steps: int = 8


class DemoAgent:
    """An ACP agent whose only tool is ``skill``.

    Args:
        skills: the mounted skill system (registry, store, tool, prefix).
        model: the model that answers prompts.
        settings: limits.
    """

    def __init__(
        self, skills: AcpSkills, model: ChatModel, settings: AgentSettings | None = None
    ) -> None:
        self._skills = skills
        self._model = model
        self._settings = settings or AgentSettings()
        self._client: AcpClient | None = None
        self._turns: dict[str, asyncio.Task[StopReason]] = {}

    # -- connection and session lifecycle ------------------------------------------------------

    def on_connect(self, conn: AcpClient) -> None:
        self._client = conn
        self._skills.attach(conn)

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        meta = self._skills.initialize(client_capabilities)
        _log.info("client_initialized", protocol_version=protocol_version)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                field_meta=meta,
            ),
            agent_info=Implementation(
                name="acp-skills-demo", title="acp-skills demo agent", version=__version__
            ),
            auth_methods=[],
        )

    async def new_session(
        self,
        cwd: str,
        mcp_servers: Sequence[Any] | None = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        _require_absolute(cwd)
        _ignore_mcp_servers(mcp_servers)
        session_id = uuid.uuid4().hex
        await self._skills.open_session(session_id, cwd, tool_names=(self._skills.tool.name,))
        _log.info("session_created", session_id=session_id, cwd=cwd)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Sequence[Any] | None = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        _require_absolute(cwd)
        _ignore_mcp_servers(mcp_servers)
        # Live but not yet prompted, a session has no record yet: it still loads.
        known = self._skills.has_session(session_id)
        if not known and not await self._skills.store.exists(session_id):
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        running = self._turns.get(session_id)
        if running is not None:
            running.cancel()
        session = await self._skills.open_session(
            session_id, cwd, tool_names=(self._skills.tool.name,), announce=False
        )
        await self._replay(session_id, session)
        self._skills.announce_commands(session_id)
        _log.info("session_loaded", session_id=session_id, messages=len(session.history))
        return LoadSessionResponse()

    async def _replay(self, session_id: str, session: PrefixedSession) -> None:
        """Send the stored conversation as ``session/update`` notifications."""
        for message in session.history:
            role = message.get("role")
            content = message.get("content")
            shown = message.get(DISPLAY_KEY, content)
            if role == "user" and isinstance(shown, str):
                await self._send(session_id, update_user_message_text(shown))
            elif role == "assistant":
                if isinstance(content, str) and content:
                    await self._send(session_id, update_agent_message_text(content))
                for call in _sequence(message.get("tool_calls")):
                    function = call.get("function") if isinstance(call, Mapping) else None
                    if isinstance(function, Mapping):
                        arguments = _decode_arguments(str(function.get("arguments", "")))
                        start = skill_tool_call_start(str(call.get("id")), arguments)
                        await self._send(session_id, start)
            elif role == "tool" and isinstance(content, str):
                result = ToolResult(text=content, is_error=message.get(ERROR_KEY) is True)
                end = skill_tool_call_end(str(message.get("tool_call_id")), result)
                await self._send(session_id, end)

    # -- prompt turns --------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        self._skills.session(session_id)  # unknown session -> invalid params
        if session_id in self._turns:
            raise RequestError.invalid_request(
                {"sessionId": session_id, "reason": "a prompt turn is already running"}
            )
        # The turn runs as its own task and this handler awaits it shielded: `session/cancel`
        # cancels the inner task and we answer "cancelled"; if the handler itself is cancelled
        # (the connection is closing) the turn is cancelled too and the cancellation propagates.
        turn = asyncio.ensure_future(self._run_turn(session_id, prompt))
        self._turns[session_id] = turn
        try:
            stop_reason = await asyncio.shield(turn)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if turn.cancelled() and not (current is not None and current.cancelling()):
                _log.info("turn_cancelled", session_id=session_id)
                return PromptResponse(stop_reason="cancelled")
            turn.cancel()
            raise
        finally:
            if self._turns.get(session_id) is turn:
                del self._turns[session_id]
        return PromptResponse(stop_reason=stop_reason)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        turn = self._turns.get(session_id)
        if turn is not None:
            turn.cancel()

    async def _run_turn(self, session_id: str, prompt: Sequence[Any]) -> StopReason:
        session = self._skills.session(session_id)
        stop_reason = await self._converse(session_id, session, prompt)
        if session.save_error is not None:
            # The reply is out; the person also needs to know it will not survive a restart.
            notice = f"\n\n{_not_saved_notice(session.save_error)}"
            await self._send(session_id, update_agent_message_text(notice))
        return stop_reason

    async def _converse(
        self, session_id: str, session: PrefixedSession, prompt: Sequence[Any]
    ) -> StopReason:
        turn = await self._skills.begin_turn(session_id, prompt)
        await session.append_history(
            {
                "role": "user",
                "content": _user_content(prompt, turn),
                # What the person typed, for replay: the content also holds loaded skills.
                DISPLAY_KEY: prompt_text(prompt),
            }
        )
        tools = [_tool_spec(self._skills)]
        streamed: list[str] = []

        async def on_text(text: str) -> None:
            streamed.append(text)
            await self._send(session_id, update_agent_message_text(text))

        for _step in range(self._settings.max_steps):
            streamed.clear()
            await session.record_request(
                config=dict(self._model.config), system=SYSTEM_PROMPT, tools=tools
            )
            request = ModelRequest(
                system=SYSTEM_PROMPT, tools=tools, messages=session.request_messages()
            )
            try:
                reply = await self._model.complete(request, on_text)
            except ModelError as error:
                _log.warning("model_failed", session_id=session_id, error=str(error))
                message = str(error)
                # Text the model streamed before failing stays on screen: start on a new line.
                shown = f"\n\n{message}" if streamed else message
                await self._send(session_id, update_agent_message_text(shown))
                await session.append_history({"role": "assistant", "content": message})
                return "end_turn"
            await session.append_history(_assistant_message(reply))
            if reply.finish == "length":
                return "max_tokens"
            if not reply.tool_calls:
                return "end_turn"
            for call in reply.tool_calls:
                result = await self._run_tool(session_id, call.id, call.name, call.arguments)
                await session.append_history(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": result.text,
                        ERROR_KEY: result.is_error,
                    }
                )
        return "max_turn_requests"

    async def _run_tool(
        self, session_id: str, call_id: str, name: str, arguments: str
    ) -> ToolResult:
        if name == self._skills.tool.name:
            return await self._skills.call_tool(session_id, call_id, _decode_arguments(arguments))
        result = ToolResult(
            text=f'Error: there is no tool called "{name}"; the only tool is "skill"',
            is_error=True,
        )
        await self._send(
            session_id, start_tool_call(call_id, name, kind="other", status="in_progress")
        )
        await self._send(session_id, skill_tool_call_end(call_id, result))
        return result

    # -- extension methods ---------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._skills.handles(method):
            return await self._skills.ext_method(method, params)
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        _log.debug("extension_notification_ignored", method=method)

    async def _send(self, session_id: str, update: Any) -> None:
        if self._client is not None:
            await self._client.session_update(session_id=session_id, update=update)

    async def aclose(self) -> None:
        """Cancel running turns and background sends."""
        for turn in tuple(self._turns.values()):
            turn.cancel()
        await asyncio.gather(*self._turns.values(), return_exceptions=True)
        await self._skills.aclose()


def _not_saved_notice(error: OSError) -> str:
    problem = f"{error.strerror}: {error.filename}" if error.filename else str(error)
    return (
        f"Note: this conversation could not be saved ({problem}). It goes on here, and "
        "what is missing is saved as soon as writing works again; if the agent stops first, "
        "reopening the session will not show it."
    )


def _require_absolute(cwd: object) -> None:
    if not is_absolute_cwd(cwd):
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd must be an absolute path"})


def _ignore_mcp_servers(servers: Sequence[Any] | None) -> None:
    if servers:
        names = [getattr(server, "name", "?") for server in servers]
        _log.warning(
            "mcp_servers_ignored", servers=names, reason="the demo agent has no MCP client"
        )


def _user_content(prompt: Sequence[Any], turn: SkillTurn) -> str:
    """The user's message as the model sees it: text, embedded files, and invoked skills."""
    parts = [prompt_text(prompt)]
    for block in prompt:
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            parts.append(f'<context uri="{getattr(resource, "uri", "")}">\n{text}\n</context>')
        uri = getattr(block, "uri", None)
        if getattr(block, "type", None) == "resource_link" and isinstance(uri, str):
            parts.append(f"(attached: {uri})")
    for invoked in turn.invoked:
        parts.append(invoked.text)
    return "\n\n".join(part for part in parts if part)


def _tool_spec(skills: AcpSkills) -> dict[str, Any]:
    tool = skills.tool
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


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


def _decode_arguments(arguments: str) -> object:
    # Undecodable arguments are passed on as they are: the tool answers with a readable error.
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()
