"""The agent's own tools through ``run_tool``: the editor shows each call as the agent built it
(kind, title, locations, content), the model reads a text result, and errors keep the history
well formed. Over a real in-memory ACP connection (`tests/acp_peer.py`), every frame checked
against the ACP schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest
from acp.schema import (
    ContentToolCallContent,
    FileEditToolCallContent,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallUpdate,
)

from acp_skills import SkillRegistry, ToolResult
from acp_skills.acp import ToolCall
from tests.acp_peer import ScriptedModelAgent, connected, fixture_registry, write_fixture_skills

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "edit_file", "run")
]


@pytest.fixture
def registry(tmp_path: Path) -> SkillRegistry:
    return fixture_registry(tmp_path, write_fixture_skills(tmp_path))


class ToolAgent(ScriptedModelAgent):
    """An agent with tools of its own (read, edit, run), shown as it wants them shown."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.calls: list[ToolCall] = []
        self.built: dict[str, ToolCallUpdate] = {}
        self.wrong_id = False

    async def run_tool(self, call: ToolCall) -> ToolCallUpdate | ToolResult | str:
        self.calls.append(call)
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        path = str(arguments.get("path", ""))
        if call.name == "read_file":
            text = await anyio.Path(path).read_text(encoding="utf-8")
            built = ToolCallUpdate(
                tool_call_id=call.id,
                kind="read",
                title=f"Read {Path(path).name}",
                locations=[ToolCallLocation(path=path, line=1)],
                content=[
                    ContentToolCallContent(
                        type="content", content=TextContentBlock(type="text", text=text)
                    )
                ],
            )
        elif call.name == "edit_file":
            old = await anyio.Path(path).read_text(encoding="utf-8")
            new = old.replace("world", "editor")
            await anyio.Path(path).write_text(new, encoding="utf-8")
            diff = FileEditToolCallContent(type="diff", path=path, old_text=old, new_text=new)
            built = ToolCallUpdate(
                tool_call_id="another-call" if self.wrong_id else call.id,
                kind="edit",
                title=f"Edit {Path(path).name}",
                locations=[ToolCallLocation(path=path)],
                content=[diff],
            )
        elif call.name == "run":
            built = ToolCallUpdate(
                tool_call_id=call.id,
                kind="execute",
                title="Run make",
                status="failed",
                content=[TerminalToolCallContent(type="terminal", terminal_id="term-1")],
            )
        else:
            return ToolResult(text=f"Error: no {call.name}", is_error=True)
        self.built[call.id] = built
        return built

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        turn_of = self.skills.turn(session_id, prompt, tools=TOOLS, run_tool=self.run_tool)
        async with turn_of as turn:
            async for _messages in turn.requests():
                await turn.add_reply(self.replies.pop(0) if self.replies else {"content": "ok"})
        return turn.response


def calls_reply(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message calling the agent's own tools, ``(id, name, arguments)`` each."""
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
        for call_id, name, a in calls
    ]
    return {"role": "assistant", "content": "", "tool_calls": tool_calls}


def as_the_editor_sees(updates: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    """A tool call's card: its ``tool_call``, then each ``tool_call_update``'s fields over it."""
    card: dict[str, Any] = {}
    for update in updates:
        if update["toolCallId"] == call_id:
            card |= {key: value for key, value in update.items() if key != "sessionUpdate"}
    return card


def sent(built: ToolCallUpdate) -> dict[str, Any]:
    return built.model_dump(mode="json", by_alias=True, exclude_none=True)


class Turn(NamedTuple):
    """One prompt turn of a `ToolAgent`: the agent, what the editor received, the history."""

    agent: ToolAgent
    updates: list[dict[str, Any]]
    history: tuple[dict[str, Any], ...]


async def one_turn(
    registry: SkillRegistry,
    cwd: Path,
    *calls: tuple[str, str, dict[str, Any]],
    wrong_id: bool = False,
) -> Turn:
    """A prompt whose model calls the agent's tools once, then ends the turn (``end_turn``)."""
    async with connected(registry, agent_type=ToolAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ToolAgent)
        agent.wrong_id = wrong_id
        session_id = await peer.new_session(cwd)
        agent.replies = [calls_reply(*calls), {"role": "assistant", "content": "Done."}]
        assert await peer.ask(session_id, "go") == "end_turn"
        history = (await peer.skills.session(session_id)).history
    updates = [*peer.wire.updates(session_id, "tool_call")]
    updates += peer.wire.updates(session_id, "tool_call_update")
    return Turn(agent, updates, tuple(dict(message) for message in history))


def finished(turn: Turn, call_id: str) -> dict[str, Any]:
    """The ``tool_call_update`` that ended the call ``call_id``."""
    [last] = [
        u
        for u in turn.updates
        if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == call_id
    ]
    return last


def tool_results(turn: Turn) -> dict[str, object]:
    return {m["tool_call_id"]: m["content"] for m in turn.history if m["role"] == "tool"}


async def test_the_agent_s_own_read_and_edit_calls_reach_the_editor_as_it_built_them(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """The runner gets each call's id, name and decoded arguments; its `ToolCallUpdate`
    reaches the editor field for field (kind, title, locations, text and diff content)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("hello world\n", encoding="utf-8")
    read = ("call-read", "read_file", {"path": str(notes)})
    edit = ("call-edit", "edit_file", {"path": str(notes)})
    turn = await one_turn(registry, tmp_path, read, edit)
    assert turn.agent.calls == [ToolCall(*read), ToolCall(*edit)]
    for call_id in ("call-read", "call-edit"):
        built = sent(turn.agent.built[call_id])
        ended = {"sessionUpdate": "tool_call_update", "status": "completed"}
        assert finished(turn, call_id) == ended | built
        card = as_the_editor_sees(turn.updates, call_id)
        assert {key: card[key] for key in ("kind", "title", "locations", "content")} == {
            key: built[key] for key in ("kind", "title", "locations", "content")
        }
    diff = {"type": "diff", "path": str(notes), "oldText": "hello world\n"}
    assert finished(turn, "call-edit")["content"] == [diff | {"newText": "hello editor\n"}]
    assert tool_results(turn) == {
        "call-read": "hello world\n",
        "call-edit": f"--- a{notes}\n+++ b{notes}\n@@ -1 +1 @@\n-hello world\n+hello editor",
    }


async def test_a_failed_rich_result_is_an_error_for_the_model_and_failed_in_the_editor(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """``status="failed"``: the call ends ``failed`` as built; the model reads ``Error: ...``."""
    turn = await one_turn(registry, tmp_path, ("call-run", "run", {}))
    last = finished(turn, "call-run")
    assert last == {"sessionUpdate": "tool_call_update"} | sent(turn.agent.built["call-run"])
    assert last["status"] == "failed"
    assert tool_results(turn) == {"call-run": "Error: (the output is in terminal term-1)"}


async def test_an_update_for_another_call_fails_the_call_and_keeps_the_history_well_formed(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """A runner answering with another call's id: that call ends ``failed`` with the reason,
    its result is recorded, and the turn goes on."""
    notes = tmp_path / "notes.txt"
    notes.write_text("hello world\n", encoding="utf-8")
    edit = ("call-edit", "edit_file", {"path": str(notes)})
    turn = await one_turn(registry, tmp_path, edit, wrong_id=True)
    assert finished(turn, "call-edit")["status"] == "failed"
    assert [(m["role"], m.get("tool_call_id")) for m in turn.history] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call-edit"),
        ("assistant", None),
    ]
    assert tool_results(turn) == {
        "call-edit": (
            'Error: the tool "edit_file" failed: '
            "run_tool returned the update of call 'another-call'"
        )
    }
