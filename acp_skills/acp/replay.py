"""``session/load`` replay; an entry an edit left unfit is left out, not replayed wrong."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp.schema import UserMessageChunk
from pydantic import ValidationError

from ..quiet_log import get_logger
from ..session import PrefixedSession
from ..tool import ToolResult
from . import wire
from .sessions import DISPLAY_KEY, ERROR_KEY, INVOKED_KEY

_log = get_logger(__name__)

# What one message's updates may raise on a recorded value gone odd (edited, or older than a bound).
_UNREPLAYABLE = (TypeError, ValueError, RecursionError, ValidationError)


async def replay(link: wire.ClientLink, session: PrefixedSession, skill_tool: str) -> None:
    session_id = session.context.session_id
    for position, message in enumerate(session.history):
        try:
            await _replay_message(link, session_id, message, skill_tool)
        except _UNREPLAYABLE as error:
            _log.warning(
                "session_replay_message_skipped",
                session_id=session_id,
                position=position,
                role=str(message.get("role"))[:40],
                error=type(error).__name__,
            )


async def _replay_message(
    link: wire.ClientLink, session_id: str, message: Mapping[str, Any], skill_tool: str
) -> None:
    role, content = message.get("role"), message.get("content")
    updates: list[Any] = []
    if role == "user":
        shown = message.get(DISPLAY_KEY, content)
        if isinstance(shown, str):
            chunk = wire.text_block(shown)
            updates.append(UserMessageChunk(session_update="user_message_chunk", content=chunk))
        if isinstance(content, str):
            for call_id, name, result in _invoked_calls(message, content):
                updates.append(
                    wire.tool_call_started(call_id, skill_tool, {"name": name}, skill_tool)
                )
                updates.append(wire.tool_call_finished(call_id, result))
    elif role == "assistant":
        if isinstance(content, str) and content:
            updates.append(wire.agent_text(content))
        bounded, refused = wire.bound_tool_calls(message)
        if refused:
            _log.warning("session_replay_arguments_omitted", reasons=sorted(set(refused.values())))
        for call_id, name, arguments in wire.tool_calls(bounded).values():
            decoded = wire.decode_tool_arguments(arguments)
            updates.append(wire.tool_call_started(call_id, name, decoded, skill_tool))
    elif role == "tool" and isinstance(content, str):
        result = ToolResult(text=content, is_error=message.get(ERROR_KEY) is True)
        updates.append(wire.tool_call_finished(str(message.get("tool_call_id")), result))
    for update in updates:
        await link.send(session_id, update)


def _invoked_calls(message: Mapping[str, Any], content: str) -> list[tuple[str, str, ToolResult]]:
    calls = []
    for entry in wire.sequence(message.get(INVOKED_KEY)):
        if not isinstance(entry, Mapping):
            continue
        call_id, name, start, end = (entry.get(key) for key in ("id", "name", "start", "end"))
        if not (isinstance(call_id, str) and isinstance(name, str)):
            continue
        # `type() is int`: a bool is no offset.
        if type(start) is int and type(end) is int and 0 <= start <= end <= len(content):
            result = ToolResult(text=content[start:end], is_error=entry.get("is_error") is True)
            calls.append((call_id, name, result))
    return calls
