"""`PromptTurn`: one ``session/prompt`` turn, from the person's message to the stop reason.

The agent keeps its model call and its own tools; the turn does the rest. A turn records the
person's message (with attached context and every skill invoked as ``/name``) before the agent
sees it, builds each model request from the session's frozen prefix and history (recording the
request header first), and takes each reply: shows its text, records it, runs its tool calls
(``skill`` itself, the agent's own tools through the agent's runner) with ``tool_call`` /
``tool_call_update`` reports, and records their results.

Messages use the OpenAI Chat Completions shape (``role``, ``content``, assistant ``tool_calls``
with JSON-text ``arguments``, ``tool`` results), the shape most model APIs speak. Keys that
start with ``_`` are the library's own bookkeeping in the record (what the person typed, whether
a tool failed) and never appear in a request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from acp.helpers import update_agent_message_text
from acp.schema import PromptResponse

from ..model import PrefixMessage
from ..session import PrefixedSession
from ..text import replace_lone_surrogates
from ..tool import ToolResult
from .updates import decode_tool_arguments, tool_call_finished, tool_call_started

__all__ = [
    "DISPLAY_KEY",
    "ERROR_KEY",
    "INVOKED_KEY",
    "AgentToolRunner",
    "InvokedSkill",
    "PromptTurn",
    "StopReason",
]

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

AgentToolRunner = Callable[[str, object], Awaitable[ToolResult | str]]
"""Runs one of the agent's own tools: ``(tool name, decoded arguments) -> result``.

A plain string is a successful result; return ``ToolResult(text=..., is_error=True)`` for a
failure the model should read.
"""

DISPLAY_KEY = "_display"
"""A user message's key in the record: what the person typed (replayed on ``session/load``)."""

ERROR_KEY = "_is_error"
"""A tool result's key in the record: whether the call failed (replayed on ``session/load``)."""

INVOKED_KEY = "_invoked"
"""A user message's key in the record: the skills invoked as ``/name`` in it, each as
``{"id", "name", "is_error", "start", "end"}`` where ``content[start:end]`` is the skill's text
(replayed on ``session/load`` as the tool calls the person saw)."""

# How long the final reports of a cancelled turn may take: they are sent shielded from the
# cancellation, and a client that stopped reading must not hold the turn open.
_CANCEL_REPORT_SECONDS = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class InvokedSkill:
    """A skill the person invoked as ``/name``: ``text`` is its rendered content, or an error."""

    name: str
    text: str
    is_error: bool = False


Send = Callable[[Any], Awaitable[None]]
SkillCall = Callable[[str, object], Awaitable[ToolResult]]


class PromptTurn:
    """One prompt turn of one session instance. Get it from `AcpSkills.turn`.

    A typical model loop::

        async with skills.turn(session_id, prompt, system=SYSTEM) as turn:
            async for messages in turn.requests():
                await turn.add_reply(await my_model(SYSTEM, turn.tools, messages))
        return turn.response

    Attributes:
        tools: the tool specs to give the model (OpenAI function format): ``skill`` first,
            then the agent's own.
        invoked: the skills the person invoked as ``/name`` in this prompt (already part of
            the recorded user message).
    """

    def __init__(
        self,
        *,
        session: PrefixedSession,
        send: Send,
        call_skill: SkillCall,
        skill_tool_spec: Mapping[str, Any],
        system: str,
        config: Mapping[str, object],
        tools: Sequence[Mapping[str, Any]],
        run_tool: AgentToolRunner | None,
        max_requests: int,
    ) -> None:
        self._session = session
        self._send = send
        self._call_skill = call_skill
        self._skill_tool_name = str(skill_tool_spec["function"]["name"])
        self._system = system
        self._config = config
        self.tools: list[dict[str, Any]] = [dict(skill_tool_spec), *(dict(t) for t in tools)]
        self._run_tool = run_tool
        self._max_requests = max_requests
        self.invoked: tuple[InvokedSkill, ...] = ()
        self._requests = 0
        self._stop_reason: StopReason | None = None
        self._replied = True
        self._streamed = False

    def _use_skill_tool_spec(self, spec: Mapping[str, Any]) -> None:
        # Called by `AcpSkills` once the session's prefix is composed: the skill tool's schema
        # follows the session's catalog (with `query` when the catalog left skills out).
        self.tools[0] = dict(spec)

    @property
    def prefix(self) -> tuple[PrefixMessage, ...]:
        """The session's frozen prefix, which every request of this turn starts with."""
        return self._session.messages

    # -- the outcome ---------------------------------------------------------------------------

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the turn ended, or ``None`` while it may still make requests."""
        return self._stop_reason

    @property
    def finished(self) -> bool:
        """Whether the turn has its stop reason (no further request is due)."""
        return self._stop_reason is not None

    @property
    def response(self) -> PromptResponse:
        """The ``session/prompt`` answer: the stop reason (``end_turn`` if none was set)."""
        return PromptResponse(stop_reason=self._stop_reason or "end_turn")

    def stop(self, reason: StopReason) -> None:
        """End the turn with ``reason`` (for example ``max_tokens`` or ``refusal``)."""
        self._stop_reason = reason

    # -- model requests ------------------------------------------------------------------------

    async def requests(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Yield the messages of each model request until the turn is over.

        The turn is over after a reply without tool calls (``end_turn``), after `stop`, or when
        the turn's request limit is reached (``max_turn_requests``). Answer every request with
        `add_reply`.

        Raises:
            RuntimeError: a request was not answered with `add_reply` before the next one.
        """
        while self._stop_reason is None:
            if self._requests >= self._max_requests:
                self._stop_reason = "max_turn_requests"
                return
            messages = await self.request_messages()
            yield messages
            if not self._replied:
                raise RuntimeError("each request of a turn must be answered with add_reply()")

    async def request_messages(self) -> list[dict[str, Any]]:
        """Record this request's header and return its messages: the frozen prefix, then the
        history, without the record's ``_`` bookkeeping keys.

        For agents that drive their own loop instead of `requests`.
        """
        await self._session.record_request(
            config=self._config, system=self._system, tools=self.tools
        )
        self._requests += 1
        self._replied = False
        self._streamed = False
        return [_without_bookkeeping(message) for message in self._session.request_messages()]

    async def show_text(self, text: str) -> None:
        """Stream a piece of the model's reply to the editor as it arrives.

        A reply whose text was streamed this way is not shown again by `add_reply`.
        """
        if text:
            self._streamed = True
            await self._send(update_agent_message_text(replace_lone_surrogates(text)))

    async def add_reply(
        self, message: Mapping[str, Any], *, stop_reason: StopReason | None = None
    ) -> None:
        """Take the model's reply to the last request.

        Shows its text (unless streamed with `show_text`), records it, runs each of its tool
        calls and records their results. Without tool calls (or with ``stop_reason``) the turn
        is over.

        Args:
            message: an assistant message: ``content`` text and optional ``tool_calls``
                (``[{"id", "type": "function", "function": {"name", "arguments"}}]``).
            stop_reason: end the turn with this reason once the reply is recorded (for
                example ``max_tokens`` when the model was cut off).

        Raises:
            TypeError: ``message`` is not a JSON object.
        """
        if not isinstance(message, Mapping):
            raise TypeError(f"a reply must be a message object, got {message!r}")
        reply = {"role": "assistant", **message}
        self._replied = True
        text = reply.get("content")
        if isinstance(text, str) and text and not self._streamed:
            await self._send(update_agent_message_text(replace_lone_surrogates(text)))
        await self._session.append_history(reply)
        calls = [call for call in _sequence(reply.get("tool_calls")) if isinstance(call, Mapping)]
        answered: set[str] = set()
        try:
            for call in calls:
                call_id = str(call.get("id", ""))
                function = call.get("function")
                function = function if isinstance(function, Mapping) else {}
                await self.call_tool(
                    call_id, str(function.get("name", "")), function.get("arguments", "")
                )
                answered.add(call_id)
        except anyio.get_cancelled_exc_class():
            # The history must stay a valid conversation: every tool call the model made gets
            # a result, so the next turn's request is well formed.
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_REPORT_SECONDS):
                for call in calls:
                    call_id = str(call.get("id", ""))
                    if call_id not in answered:
                        await self._record_result(call_id, _CANCELLED)
            raise
        if stop_reason is not None:
            self._stop_reason = stop_reason
        elif not calls:
            self._stop_reason = "end_turn"

    async def call_tool(self, call_id: str, name: str, arguments: object) -> ToolResult:
        """Run one tool call, report it to the editor and record its result.

        ``skill`` is run by the library; any other name goes to the agent's runner (or is
        refused with an ``Error:`` result when there is none). ``arguments`` may be the JSON
        text the model sent or already decoded.
        """
        decoded = decode_tool_arguments(arguments)
        try:
            if name == self._skill_tool_name:
                result = await self._call_skill(call_id, decoded)
            else:
                await self._send(tool_call_started(call_id, name, decoded))
                result = await self._run_agent_tool(name, decoded)
                await self._send(tool_call_finished(call_id, result))
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_REPORT_SECONDS):
                await self._send(tool_call_finished(call_id, _CANCELLED))
            raise
        await self._record_result(call_id, result)
        return result

    async def _run_agent_tool(self, name: str, arguments: object) -> ToolResult:
        if self._run_tool is None:
            return ToolResult(text=f'Error: there is no tool called "{name[:100]}"', is_error=True)
        outcome = await self._run_tool(name, arguments)
        return (
            outcome
            if isinstance(outcome, ToolResult)
            else ToolResult(text=str(outcome), is_error=False)
        )

    async def _record_result(self, call_id: str, result: ToolResult) -> None:
        await self._session.append_history(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "content": result.text,
                ERROR_KEY: result.is_error,
            }
        )


_CANCELLED = ToolResult(
    text="Error: the turn was cancelled before this tool call finished", is_error=True
)


def _without_bookkeeping(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if not key.startswith("_")}


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()
