"""Faults only a process shows: stdin closed mid-turn, SIGTERM, SIGKILL mid-turn, debug logging
beside stdout, a client that stops reading, and stdin or stdout closed from the start.

Each test starts the agent as a real process (`open_process`) and says why it needs one; the
rest of the robustness cases are served in process (``test_robustness.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import pytest

from .fake_model import PLAIN_REPLY, FakeModel
from .harness import (
    FAKE_KEY,
    WAIT_SECONDS,
    AgentSpec,
    RawAgent,
    close_transport,
    fake_model_options,
    open_process,
    open_raw,
)
from .wire import AGENT, CLIENT, Schema

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.sdk,
    pytest.mark.demo_agent,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes"),
]

FIRST = "hello"
SECOND = "Please load skill code-review"
# A safety net, not a speed test: the agent must not wait for the hung model request, which
# never ends; a loaded machine may still take a few seconds to wind down.
EXIT_SECONDS = 30.0


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    """``session/prompt`` params with one text block."""
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


async def two_turns_then_hang(raw: RawAgent, agent: AgentSpec, model: FakeModel) -> str:
    """Initialize, open a session, complete two turns, and leave a third hanging mid-request."""
    await raw.initialize()
    session_id = await raw.new_session(agent.cwd)
    for text in (FIRST, SECOND):
        reply = await raw.call("session/prompt", prompt_params(session_id, text))
        assert reply["result"]["stopReason"] == "end_turn", reply
    await raw.send(raw.request("session/prompt", prompt_params(session_id, "[slow] and on")))
    await asyncio.wait_for(model.slow_started.wait(), WAIT_SECONDS)
    return session_id


def assert_completed_turns_kept(history: list[dict[str, Any]]) -> None:
    """The record holds both completed turns: prompts, the skill call and its result, replies."""
    users = [m["content"] for m in history if m["role"] == "user"]
    assert users[:2] == [FIRST, SECOND], history
    assistant_texts = [m["content"] for m in history if m["role"] == "assistant"]
    assert PLAIN_REPLY in assistant_texts
    calls = [c for m in history for c in m.get("tool_calls", ())]
    assert [c["function"]["name"] for c in calls] == ["skill"]
    results = [m for m in history if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [calls[0]["id"]]
    assert '<skill_content name="code-review">' in results[0]["content"]
    assert any(t.startswith("Done: read") for t in assistant_texts)


async def test_stdin_closed_mid_turn(
    agent: AgentSpec, schema: Schema, fake_model: FakeModel
) -> None:
    """EOF on stdin during a turn: it is answered cancelled, exit 0 without waiting for the
    hung model request, turns on disk. A process: that it exits (no thread or open request
    keeps it alive) and its status show only there."""
    async with open_process(agent, schema, agent.with_fake_model(fake_model)) as raw:
        session_id = await two_turns_then_hang(raw, agent, fake_model)
        try:
            code = await raw.close(grace=EXIT_SECONDS)
        except TimeoutError:
            pytest.fail(f"the agent did not exit within {EXIT_SECONDS} s of its stdin closing")
    assert code == 0, agent.stderr_tail()
    assert fake_model.slow_hung_up.is_set(), "the model request must be closed on the way out"
    [slow] = [m for m in raw.log.sent_by(CLIENT) if "[slow]" in json.dumps(m)]
    [answer] = [m for m in raw.log.sent_by(AGENT) if m.get("id") == slow["id"]]
    assert answer["result"]["stopReason"] == "cancelled", "the running turn is still answered"
    assert_completed_turns_kept(agent.history(session_id))


@pytest.mark.parametrize("mid_turn", [False, True], ids=["idle", "mid-turn"])
async def test_sigterm_exits_cleanly(
    agent: AgentSpec, schema: Schema, fake_model: FakeModel, mid_turn: bool
) -> None:
    """SIGTERM, idle or in the middle of a turn: exit code 0, and the record is intact.
    A process: signals."""
    # Idle, the offline model does (and spares the start-up the HTTP client's imports).
    command = agent.with_fake_model(fake_model) if mid_turn else agent.command()
    async with open_process(agent, schema, command) as raw:
        if mid_turn:
            session_id = await two_turns_then_hang(raw, agent, fake_model)
        else:
            await raw.initialize()
            session_id = await raw.new_session(agent.cwd)
        assert raw.proc is not None
        raw.proc.send_signal(signal.SIGTERM)
        code = await raw.wait(grace=5.0)
    assert code == 0, agent.stderr_tail()
    if mid_turn:
        assert_completed_turns_kept(agent.history(session_id))


async def test_sigkill_mid_turn_then_load(
    agent: AgentSpec, schema: Schema, fake_model: FakeModel
) -> None:
    """SIGKILL mid-turn: a new agent loads the session with every completed turn. A process:
    a signal that cannot be handled (the new agent is served in process)."""
    async with open_process(agent, schema, agent.with_fake_model(fake_model)) as raw:
        session_id = await two_turns_then_hang(raw, agent, fake_model)
        assert raw.proc is not None
        raw.proc.kill()
        assert await raw.wait() == -signal.SIGKILL
    assert_completed_turns_kept(agent.history(session_id))

    async with open_raw(agent, schema, fake_model_options(fake_model)) as raw:
        await raw.initialize()
        params = {"sessionId": session_id, "cwd": str(agent.cwd), "mcpServers": []}
        loaded = await raw.call("session/load", params)
        assert "result" in loaded, loaded
        updates = [m["params"]["update"] for m in raw.take_inbox() if m.get("method")]
        users = [
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"
        ]
        assert users[:2] == [FIRST, SECOND]
        texts = [
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
        ]
        assert PLAIN_REPLY in texts
        assert [u["title"] for u in updates if u["sessionUpdate"] == "tool_call"] == [
            "Load skill code-review"
        ]
        reply = await raw.call("session/prompt", prompt_params(session_id, "still there?"))
        assert reply["result"]["stopReason"] == "end_turn"


async def test_debug_logging_keeps_stdout_clean(
    agent: AgentSpec, schema: Schema, fake_model: FakeModel
) -> None:
    """With ``--log-level debug`` every stdout line is a valid frame; the logs go to stderr.
    A process: stdout and stderr are the process's own."""
    command = [*agent.with_fake_model(fake_model), "--log-level", "debug"]
    async with open_process(agent, schema, command) as raw:
        session_id = await two_turns_then_hang(raw, agent, fake_model)
        await raw.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        )
        await raw.write(b"not json\n")
        # The cancelled turn's answer and the parse error may come in either order.
        assert (await raw.response(None))["error"]["code"] == -32700
        await raw.send({"jsonrpc": "2.0", "method": "_debug/ping", "params": {}})
        assert "result" in await raw.call("_skills/prefix", {"sessionId": session_id})
        assert "error" in await raw.call("no/such/method", {})
        assert await raw.close() == 0
    # open_raw has checked every stdout line: a JSON object valid against the schema.
    kinds = {
        m["params"]["update"]["sessionUpdate"] for m in raw.log.sent_by("agent") if m.get("method")
    }
    assert {"tool_call", "tool_call_update", "agent_message_chunk"} <= kinds
    assert {"cancelled"} <= {
        m.get("result", {}).get("stopReason") for m in raw.log.sent_by("agent")
    }
    stderr = agent.stderr_path.read_text(encoding="utf-8")
    assert "[debug" in stderr  # structlog's own debug events
    # The libraries log through the stdlib, rendered like our own events.
    assert any("[debug" in line and "[openai." in line for line in stderr.splitlines())
    assert "extension_notification_ignored" in stderr
    assert FAKE_KEY not in stderr, "the API key must never be logged"


def request_line(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    """One JSON-RPC request as a line."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode() + b"\n"


async def test_agent_leaves_when_its_output_is_no_longer_read(agent: AgentSpec) -> None:
    """The client closes its end of stdout: the agent exits by itself, with one warning.
    A process: a broken pipe (EPIPE) on the real stdout."""
    read_end, write_end = os.pipe()
    try:
        with agent.stderr_path.open("ab") as stderr:
            proc = await asyncio.create_subprocess_exec(
                *agent.command(),
                stdin=asyncio.subprocess.PIPE,
                stdout=write_end,
                stderr=stderr,
                env=dict(agent.env),
            )
    finally:
        os.close(write_end)
    assert proc.stdin is not None
    try:
        proc.stdin.write(request_line(1, "initialize", {"protocolVersion": 1}))
        await proc.stdin.drain()
        first = await asyncio.wait_for(asyncio.to_thread(os.read, read_end, 65536), WAIT_SECONDS)
        assert first.startswith(b'{"jsonrpc":"2.0","id":1,"result"'), first
        os.close(read_end)
        read_end = -1
        # Twenty requests whose answers have nowhere to go; stdin itself stays open.
        params = {"cwd": str(agent.cwd), "mcpServers": []}
        proc.stdin.write(b"".join(request_line(n, "session/new", params) for n in range(2, 22)))
        await proc.stdin.drain()
        code = await asyncio.wait_for(proc.wait(), WAIT_SECONDS)
    finally:
        if read_end >= 0:
            os.close(read_end)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        close_transport(proc)
    log = agent.stderr_path.read_text(encoding="utf-8")
    assert code == 0, log
    assert "Traceback" not in log
    assert log.count("acp_output_closed") == 1, log


@pytest.mark.parametrize(
    ("redirect", "stream"), [("<&-", "stdin"), (">&-", "stdout")], ids=["stdin", "stdout"]
)
async def test_started_with_stdio_closed_exits_with_one_line(
    agent: AgentSpec, redirect: str, stream: str
) -> None:
    """``agent <&-`` or ``agent >&-``: exit status 2 and one line on stderr, no traceback.
    A process: file descriptors 0 and 1 themselves are missing."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        f'exec "$@" {redirect}',
        "sh",
        *agent.command(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(agent.env),
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), WAIT_SECONDS)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        close_transport(proc)
    assert proc.returncode == 2
    assert stdout == b""
    assert stderr.decode().splitlines() == [
        f"acp-skills-demo: {stream} is closed; the agent speaks ACP over stdin and stdout"
    ]
