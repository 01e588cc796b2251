"""Adversarial cases: frames and model data nested deep, in raw lines to the real agent.

The demo agent is served in this process through the transport it serves stdio with
(`open_raw`). Each case is named after the failure it keeps away; each ends with the agent
still serving.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from ..tmpfs import fill, small_tmpfs
from .fake_model import FakeModel
from .harness import AgentSpec, RawAgent, fake_model_options, open_raw
from .wire import CLIENT, Schema

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

INVALID_REQUEST = -32600
DEPTH = 500  # what a 1 KB frame reaches: "[" * 500


def nested(depth: int) -> object:
    """Arrays ``depth - 1`` deep around a number (``depth`` levels, counting the number)."""
    value: object = 0
    for _ in range(depth - 1):
        value = [value]
    return value


async def test_a_request_nested_500_deep_is_refused_by_its_id(
    agent: AgentSpec, schema: Schema
) -> None:
    """`session/new` with params 500 deep: -32600 with its id, and the agent serves on."""
    async with open_raw(agent, schema) as raw:
        await raw.initialize()
        raw.log.add(CLIENT, {"jsonrpc": "2.0", "id": 41, "method": "session/new"})
        deep = b"[" * DEPTH + b"]" * DEPTH
        await raw.write(
            b'{"jsonrpc":"2.0","id":41,"method":"session/new","params":' + deep + b"}\n"
        )
        reply = await raw.response(41)
        assert reply["error"]["code"] == INVALID_REQUEST, reply
        assert "nested more than 64 levels deep" in reply["error"]["data"]["details"]
        await raw.assert_serving(agent.cwd)


async def test_an_unknown_notification_nested_500_deep_is_dropped(
    agent: AgentSpec, schema: Schema
) -> None:
    """A notification 500 deep gets no answer and does not end the agent."""
    async with open_raw(agent, schema) as raw:
        await raw.initialize()
        line = b'{"jsonrpc":"2.0","method":"_x/y","params":{"a":' + b"[" * DEPTH + b"]" * DEPTH
        await raw.write(line + b"}}\n")
        await raw.assert_serving(agent.cwd)
        assert raw.take_inbox() == []


async def test_a_deep_meta_on_a_prompt_is_refused_and_the_session_lives(
    agent: AgentSpec, schema: Schema
) -> None:
    """A prompt whose `_meta` nests 500 deep: -32600 for it; the same session then prompts."""
    async with open_raw(agent, schema) as raw:
        await raw.initialize()
        session_id = await raw.new_session(agent.cwd)
        params = {
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": "hi"}],
            "_meta": {"deep": nested(DEPTH)},
        }
        reply = await raw.call("session/prompt", params)
        assert reply["error"]["code"] == INVALID_REQUEST, reply
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        answer = await raw.call("session/prompt", params)
        assert answer["result"]["stopReason"] == "end_turn", answer


async def test_a_frame_at_the_limit_is_served(agent: AgentSpec, schema: Schema) -> None:
    """The limit is not lower than documented: `_meta` reaching depth 64 is still served."""
    async with open_raw(agent, schema) as raw:
        await raw.initialize()
        # frame (1) > params (2) > _meta (3) > 61 arrays (4 to 64).
        params = {"cwd": str(agent.cwd), "mcpServers": [], "_meta": {"k": nested(62)}}
        reply = await raw.call("session/new", params)
        assert "sessionId" in reply.get("result", {}), reply


def tool_updates(raw_inbox: list[dict[str, Any]], status: str) -> list[dict[str, Any]]:
    """The ``tool_call_update`` updates of one status among the notifications read."""
    updates = [m["params"]["update"] for m in raw_inbox if m.get("method") == "session/update"]
    return [
        u
        for u in updates
        if u.get("sessionUpdate") == "tool_call_update" and u.get("status") == status
    ]


@pytest.mark.demo_agent
async def test_tool_arguments_nested_300_deep_fail_only_that_call_and_load_later(
    agent: AgentSpec, schema: Schema, fake_model: FakeModel
) -> None:
    """The model's call nests 300 deep: that call fails, the turn ends, and the session loads."""
    command = fake_model_options(fake_model)
    async with open_raw(agent, schema, command) as raw:
        await raw.initialize()
        session_id = await raw.new_session(agent.cwd)
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "[deep 300]"}]}
        reply = await raw.call("session/prompt", params)
        assert reply["result"]["stopReason"] == "end_turn", reply
        failed = tool_updates(raw.take_inbox(), "failed")
        assert failed
        assert "nested more than 64 levels deep" in json.dumps(failed[0])
    recorded = json.dumps(agent.history(session_id))
    assert "[[[[" not in recorded
    assert "nested more than 64 levels deep" in recorded
    async with open_raw(agent, schema, command) as raw:
        await raw.initialize()
        params = {"sessionId": session_id, "cwd": str(agent.cwd), "mcpServers": []}
        loaded = await raw.call("session/load", params)
        assert "result" in loaded, loaded
        await raw.assert_serving(agent.cwd)


@pytest.mark.demo_agent
async def test_a_recorded_call_nested_300_deep_is_summarised_on_load(
    agent: AgentSpec, schema: Schema, caplog: pytest.LogCaptureFixture
) -> None:
    """A record already holding 300-deep arguments (an older agent's) loads, summarised."""
    session_id = "deep-record"
    path = agent.record_path(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    deep = '{"name": ' + "[" * 300 + "]" * 300 + "}"
    call = {"id": "c1", "type": "function", "function": {"name": "skill", "arguments": deep}}
    lines = [
        {"v": 1, "type": "history", "message": {"role": "user", "content": "hi"}},
        {"v": 1, "type": "history", "message": {"role": "assistant", "tool_calls": [call]}},
        {
            "v": 1,
            "type": "history",
            "message": {"role": "tool", "tool_call_id": "c1", "content": "x"},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    async with open_raw(agent, schema) as raw:
        await raw.initialize()
        params = {"sessionId": session_id, "cwd": str(agent.cwd), "mcpServers": []}
        with caplog.at_level(logging.WARNING):
            loaded = await raw.call("session/load", params)
        assert "result" in loaded, loaded
        updates = [
            m["params"]["update"] for m in raw.take_inbox() if m.get("method") == "session/update"
        ]
        started = [u for u in updates if u.get("sessionUpdate") == "tool_call"]
        assert "nested more than 64 levels deep" in json.dumps(started)
        await raw.assert_serving(agent.cwd)
    assert "session_replay_arguments_omitted" in caplog.text


FULL_DISK_TURN = "while the disk is full " + "x" * 3 * 4096


def said_by_user(agent: AgentSpec, session_id: str) -> list[object]:
    """What the person said, as the record holds it."""
    return [m.get("content") for m in agent.history(session_id) if m.get("role") == "user"]


@pytest.mark.demo_agent
async def test_a_turn_waiting_for_a_full_disk_survives_a_load_of_its_live_session(
    agent: AgentSpec, schema: Schema
) -> None:
    """Disk full, a turn is told it will be saved, the live session is loaded, the disk frees:
    after the agent leaves, the record holds that turn, once."""
    assert agent.state_dir is not None
    with small_tmpfs(agent.state_dir, "1m") as state:
        async with open_raw(agent, schema) as raw:
            await raw.initialize()
            session_id = await raw.new_session(agent.cwd)
            assert await prompt_stop_reason(raw, session_id, "before the disk filled") == "end_turn"
            filler = fill(state)
            # Longer than a page: it cannot hide in the slack of the record's last page.
            assert await prompt_stop_reason(raw, session_id, FULL_DISK_TURN) == "end_turn"
            told = json.dumps(raw.take_inbox())
            assert "could not be saved" in told
            params = {"sessionId": session_id, "cwd": str(agent.cwd), "mcpServers": []}
            loaded = await raw.call("session/load", params)
            assert "result" in loaded, loaded
            filler.unlink()
        said = said_by_user(agent, session_id)
    assert said.count(FULL_DISK_TURN) == 1, said
    assert said.index("before the disk filled") < said.index(FULL_DISK_TURN)


async def prompt_stop_reason(raw: RawAgent, session_id: str, text: str) -> str:
    """Prompt with one text block; the turn's stop reason."""
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    reply = await raw.call("session/prompt", params)
    reason = reply["result"]["stopReason"]
    assert isinstance(reason, str)
    return reason
