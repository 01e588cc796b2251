"""`PromptTurn`: one ``session/prompt`` turn, from the person's message to the stop reason."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

import anyio
from acp import RequestError
from acp.schema import PromptResponse, ToolCallUpdate

from ..catalog import CatalogFit, SkillCatalogContributor
from ..diagnostics import Markdown
from ..quiet_log import get_logger
from ..record import HistoryEntry
from ..tool import SkillTool, ToolResult
from ..trust import SessionView
from ..trust_text import command_note, waiting_note, withheld_parts
from . import commands, consent, sessions, wire
from .sessions import DISPLAY_KEY, ERROR_KEY, INVOKED_KEY, LiveSession, SessionTable

_log = get_logger(__name__)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of the agent's own tool; ``arguments`` decoded (text that is not JSON stays)."""

    id: str
    name: str
    arguments: object


AgentToolRunner: TypeAlias = Callable[[ToolCall], Awaitable[ToolResult | str | ToolCallUpdate]]

_CANCELLED = ToolResult(
    text="Error: the turn was cancelled before this tool call finished", is_error=True
)


@dataclass(frozen=True, slots=True)
class TurnKit:
    sessions: SessionTable
    tool: SkillTool
    link: wire.ClientLink
    announcer: commands.CommandsAnnouncer
    max_requests: int
    expand_arguments: bool
    gate: consent.TrustGate
    catalog: SkillCatalogContributor

    def tool_spec(self, *, searchable: bool) -> dict[str, Any]:
        function = {
            "name": self.tool.name,
            "description": self.tool.description_for(searchable=searchable),
            "parameters": self.tool.parameters_for(searchable=searchable),
        }
        return {"type": "function", "function": function}


class PromptTurn:
    """One prompt turn, made by `AcpSkills.turn`: ``tools`` to offer the model (``skill`` first)."""

    def __init__(
        self,
        kit: TurnKit,
        live: LiveSession,
        request: dict[str, Any],
        run_tool: AgentToolRunner | None,
    ) -> None:
        self._kit, self._live, self._session = kit, live, live.session
        self._session_id, self._cwd = live.context.session_id, live.context.cwd
        self._options = live.context.lookup_options
        self._request = request  # the request header's config, system and tools
        self._run_tool = run_tool
        self.tools: list[dict[str, Any]] = request["tools"]  # `skill` goes first as it begins
        self._searchable = False  # the catalog left skills out: the tool takes `query` too
        self.stop_reason: StopReason | None = None
        self._requests, self._replied, self._streamed = 0, True, False
        self._view: SessionView | None = None  # taken once, as the turn begins
        # The first turn resends a list that went out before it (not one sent while it runs).
        self._resend_commands, live.turned = live.commands is not None and not live.turned, True
        self._unrecorded: list[Mapping[str, Any] | HistoryEntry] = []

    @property
    def trust_note(self) -> str | None:
        """The skills waiting for trust and how to admit them, or ``None``."""
        return waiting_note(self._view.pending) if self._view is not None else None

    @property
    def finished(self) -> bool:
        """Whether the turn has its stop reason."""
        return self.stop_reason is not None

    @property
    def response(self) -> PromptResponse:
        """The ``session/prompt`` answer (``end_turn`` if no stop reason was set)."""
        return PromptResponse(stop_reason=self.stop_reason or "end_turn")

    def stop(self, reason: StopReason) -> None:
        """End the turn with ``reason``."""
        self.stop_reason = reason

    async def requests(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Yield each request's messages until the turn is over; answer each with `add_reply`."""
        while self.stop_reason is None:
            if self._requests >= self._kit.max_requests:
                self.stop_reason = "max_turn_requests"
                return
            yield await self.request_messages()
            if not self._replied:
                raise RuntimeError("each request of a turn must be answered with add_reply()")

    async def request_messages(self) -> list[dict[str, Any]]:
        """Record what the turn added and this request's header; return its messages."""
        recorded, view = bool(self._unrecorded), await self._current_view()
        messages = await self._session.advance(self._unrecorded, self._request, view.offered)
        self._requests, self._replied, self._streamed = self._requests + 1, False, False
        if recorded and not self._live.described:
            await self._kit.sessions.describe(self._live)
        return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]

    async def show_text(self, text: str) -> None:
        """Stream a piece of the reply (`add_reply` then shows no text)."""
        if text:
            self._streamed = True
            await self._send(wire.agent_text(text))

    async def add_reply(
        self, message: Mapping[str, Any], *, stop_reason: StopReason | None = None
    ) -> None:
        """Show the model's reply, run its tool calls (none: the turn is over), record both."""
        # Over-bound arguments are recorded as a note; a reply the record refuses runs nothing.
        bounded, refused = wire.bound_tool_calls({"role": "assistant", **message})
        entry = HistoryEntry(message=bounded)
        reply = entry.message
        self._replied = True
        text = reply.get("content")
        if isinstance(text, str) and text and not self._streamed:
            await self._send(wire.agent_text(text))
        self._unrecorded.append(entry)
        calls = wire.tool_calls(reply)
        answered: set[str] = set()
        try:
            for index, (call_id, name, arguments) in calls.items():
                await self._call(call_id, name, arguments, refused.get(index))
                answered.add(call_id)
        except anyio.get_cancelled_exc_class():
            # Every tool call gets a result, so the next turn's request is well formed.
            for call_id, _, _ in calls.values():
                if call_id not in answered:
                    self._add_result(call_id, _CANCELLED)
            raise
        if stop_reason is not None:
            self.stop_reason = stop_reason
        elif not calls:
            self.stop_reason = "end_turn"

    async def call_tool(self, call_id: str, name: str, arguments: object) -> ToolResult:
        """Run one tool call (``arguments``: JSON text or decoded), report and record it."""
        return await self._call(call_id, name, arguments, wire.arguments_problem(arguments))

    async def _send(self, update: Any) -> None:
        await self._kit.link.send(self._session_id, update)

    async def _current_view(self) -> SessionView:
        return self._view or await self._kit.gate.view(self._options, self._live.trust)

    async def _call(
        self, call_id: str, name: str, arguments: object, problem: str | None
    ) -> ToolResult:
        refused: ToolResult | None = None
        if problem is not None:
            _log.warning(
                "tool_call_refused", session_id=self._session_id, tool=name, reason=problem
            )
            text = f"Error: {problem}, so this call was not run. Send smaller arguments."
            arguments, refused = {"omitted": problem}, ToolResult(text=text, is_error=True)
        decoded = wire.decode_tool_arguments(arguments)
        try:
            await self._send(wire.tool_call_started(call_id, name, decoded, self._kit.tool.name))
            try:
                outcome = refused or await self._run(call_id, name, decoded)
                result, shown = wire.settle(call_id, outcome)
            except Exception as error:
                _log.warning("tool_call_raised", tool=name[:100], error=repr(error), exc_info=error)
                detail = str(error) or type(error).__name__
                text = f'Error: the tool "{name[:100]}" failed: {detail}'
                result = ToolResult(text=text, is_error=True)
                shown = wire.tool_call_finished(call_id, result)
            await self._send(shown)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(wire.CANCEL_REPORT_SECONDS):
                await self._send(wire.tool_call_finished(call_id, _CANCELLED))
            raise
        self._add_result(call_id, result)
        return result

    async def _run(self, call_id: str, name: str, arguments: object) -> object:
        kit = self._kit
        if name == kit.tool.name:
            view = await self._current_view()
            return await kit.tool.call(
                arguments,
                cwd=self._cwd,
                servers=self._options.servers,
                read_text=kit.link.reader(self._session_id),
                searchable=self._searchable,
                additional_directories=self._options.additional_directories,
                view=view,
            )
        if self._run_tool is None:
            return ToolResult(text=f'Error: there is no tool called "{name[:100]}"', is_error=True)
        return await self._run_tool(ToolCall(call_id, name, arguments))

    def _add_result(self, call_id: str, result: ToolResult) -> None:
        message = {"role": "tool", "tool_call_id": call_id, "content": result.text}
        self._unrecorded.append(message | {ERROR_KEY: result.is_error})

    async def _record_unrecorded(self, *, ended: bool = False) -> None:
        # A turn that ended waits for the store; a cancelled one, or one whose block raised,
        # records within the bound of its last reports (shielded: it may be cancelled already).
        if self._unrecorded and ended:
            await self._session.advance(self._unrecorded)
        if self._unrecorded:
            with anyio.CancelScope(shield=True), anyio.move_on_after(wire.CANCEL_REPORT_SECONDS):
                await self._session.advance(self._unrecorded)

    async def _begin(self, prompt: Sequence[object]) -> None:
        kit, live, session = self._kit, self._live, self._session
        # Taken once a turn (after the first turn's trust question) and handed down.
        view = self._view = await kit.gate.turn_view(
            kit.link, self._session_id, self._options, live.trust
        )
        if not session.composed:
            live.catalog = await kit.catalog.fit(replace(session.context, skills=view.offered))
        fit = live.catalog
        self._searchable = fit is not None and bool(fit.omitted)
        self.tools.insert(0, kit.tool_spec(searchable=self._searchable))
        await kit.announcer.refresh(live, view.offered, resend=self._resend_commands)
        typed = wire.prompt_text(prompt)
        if (answer := await self._answer_without_model(typed, view, fit)) is not None:
            await self._send(wire.agent_text(answer))
            self.stop("end_turn")
            return
        await self._add_prompt(typed, prompt, view)

    async def _answer_without_model(
        self, typed: str, view: SessionView, fit: CatalogFit | None
    ) -> str | None:
        word, offered = commands.leading_slash_word(typed), view.offered
        if word is None or any(s.name == word for s in commands.invocable(offered.skills)):
            return None  # a skill invocation: expanded for the model
        if word == commands.SKILLS_COMMAND:
            problems = view.seen(await self._kit.gate.registry.diagnose(self._options))
            parts = withheld_parts(view.withheld.values(), Markdown())
            mcp = self._kit.sessions.mcp
            states = mcp.states(self._options) if mcp is not None else ()
            return commands.skills_report(self._cwd, offered, problems, fit, parts, states)
        if withheld := view.withheld.get(word):
            return command_note(word, withheld)
        # "/tmp is full" is about a path, not a command.
        if await anyio.to_thread.run_sync(os.path.lexists, f"/{word}"):
            return None
        return commands.no_such_command(word, offered)

    async def _add_prompt(self, typed: str, prompt: Sequence[object], view: SessionView) -> None:
        content = "\n\n".join(part for part in (typed, *wire.prompt_context(prompt)) if part)
        names = [skill.name for skill in commands.invocable(view.offered.skills)]
        withheld = commands.invocable([w.skill for w in view.withheld.values()])
        # Where each skill's text sits in the content: `session/load` replays the calls from it.
        calls: list[dict[str, Any]] = []
        skill_tool = self._kit.tool.name
        for name, arguments in wire.find_invocations_with_arguments(typed, names):
            call_id = f"slash-{name}-{uuid.uuid4().hex}"
            await self._send(
                wire.tool_call_started(call_id, skill_tool, {"name": name}, skill_tool)
            )
            expand = arguments if self._kit.expand_arguments else None
            result = await self._kit.tool.invoke_for_user(
                name, self._options, snapshot=view.offered, arguments=expand
            )
            await self._send(wire.tool_call_finished(call_id, result))
            if content and result.text:
                content += "\n\n"
            start, content = len(content), content + result.text
            entry = {"id": call_id, "name": name, "is_error": result.is_error, "start": start}
            calls.append(entry | {"end": len(content)})
        # A withheld `/NAME` stays plain text for the model; the person is told why it did not run.
        unrun = {s.name for s in withheld} - {call["name"] for call in calls}
        for name, _ in wire.find_invocations_with_arguments(typed, unrun):
            note = command_note(name, view.withheld[name])
            await self._send(wire.agent_text(note + "\n\n"))
        message: dict[str, Any] = {"role": "user", "content": content, DISPLAY_KEY: typed}
        if calls:
            message[INVOKED_KEY] = calls
        self._unrecorded.append(message)


@asynccontextmanager
async def open_turn(
    kit: TurnKit,
    session_id: str,
    prompt: Sequence[object],
    request: dict[str, Any],
    run_tool: AgentToolRunner | None,
) -> AsyncIterator[PromptTurn]:
    kit.link.require_client()  # before the model is ever called
    live = kit.sessions.get(session_id)
    if live.turn is not None:
        busy = {"sessionId": session_id, "reason": "a prompt turn is already running"}
        raise RequestError.invalid_request(busy)
    turn = PromptTurn(kit, live, request, run_tool)
    # Set before anything awaits: a `session/cancel` read right after the prompt finds it.
    scope = live.turn = anyio.CancelScope()
    live.turn_ended = anyio.Event()
    began = False
    try:
        with scope:
            await turn._begin(prompt)
            began = True
            yield turn
        if scope.cancelled_caught:
            _log.info("turn_cancelled", session_id=session_id)
            live.session.discard_unused_prefix()
            turn.stop("cancelled")
        if not began:  # cancelled as it began: the block still runs, with nothing to do
            yield turn
        await turn._record_unrecorded(ended=began and not scope.cancelled_caught)
        if (error := live.session.save_error) is not None:
            why = sessions.describe_os_error(error)
            notice = (
                f"\n\nNote: this conversation could not be saved ({why}). "
                "It goes on here, and what is missing is saved as soon as writing works again; if "
                "the agent stops first, reopening the session will not show it."
            )
            await kit.link.send(session_id, wire.agent_text(notice))
    finally:
        try:
            await turn._record_unrecorded()  # a block that raised: what it added
            if missing := len(turn._unrecorded):  # the store took longer than the bound
                _log.error("turn_not_recorded", session_id=session_id, missing=missing)
        except Exception as error:  # the block's own outcome goes on
            _log.error("turn_not_recorded", session_id=session_id, error=repr(error))
        finally:
            live.turn = None
            live.turn_ended.set()
