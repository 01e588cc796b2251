"""Bad input and awkward timing in raw lines: each answered correctly, and the agent serves on.

The demo agent is served in this process through the transport it serves stdio with
(`open_raw`); what only a process shows is in ``test_faults.py``. Every test ends with a
follow-up request that must be answered, and every frame the agent wrote is checked against
the schema when the connection closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fake_model import FakeModel
from .harness import WAIT_SECONDS, AgentSpec, RawAgent, fake_model_options, open_raw
from .wire import AGENT, CLIENT, Schema

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
PARSE_ERROR = -32700


@pytest.fixture
async def raw(agent: AgentSpec, schema: Schema) -> AsyncIterator[RawAgent]:
    """The agent under test, initialized, spoken to in raw lines."""
    async with open_raw(agent, schema) as conn:
        await conn.initialize()
        yield conn


@pytest.fixture
async def slow_raw(
    agent: AgentSpec, schema: Schema, fake_model: FakeModel
) -> AsyncIterator[RawAgent]:
    """The demo agent on the scripted model (prompts with ``[slow]`` hang mid-request)."""
    async with open_raw(agent, schema, fake_model_options(fake_model)) as conn:
        await conn.initialize()
        yield conn


def text(value: str) -> list[dict[str, str]]:
    """A prompt of one text block."""
    return [{"type": "text", "text": value}]


def prompt_params(session_id: str, value: str, **extra: Any) -> dict[str, Any]:
    """``session/prompt`` params with one text block."""
    return {"sessionId": session_id, "prompt": text(value), **extra}


async def run_turn(raw: RawAgent, session_id: str, value: str) -> str:
    """Prompt, and return the turn's stop reason."""
    return stop_reason(await raw.call("session/prompt", prompt_params(session_id, value)))


def prompt(raw: RawAgent, session_id: str, value: str, **extra: Any) -> dict[str, Any]:
    """A ``session/prompt`` request."""
    return raw.request("session/prompt", prompt_params(session_id, value, **extra))


def cancel(session_id: object) -> dict[str, Any]:
    """A ``session/cancel`` notification."""
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}


def error_code(reply: dict[str, Any]) -> int:
    """The error code of a response that must be an error."""
    assert "result" not in reply, reply
    assert "error" in reply, reply
    code = reply["error"]["code"]
    assert isinstance(code, int)
    return code


def stop_reason(reply: dict[str, Any]) -> str:
    """The stop reason of a prompt response that must be a result."""
    assert "result" in reply, reply
    reason = reply["result"]["stopReason"]
    assert isinstance(reason, str)
    return reason


async def assert_quiet_until_answered(raw: RawAgent, cwd: Path) -> None:
    """The next response is the follow-up's: nothing was answered in between."""
    follow_up = raw.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    await raw.send(follow_up)
    message = await raw.next_response()
    assert message.get("id") == follow_up["id"], f"unexpected answer {message}"
    assert "sessionId" in message.get("result", {}), message
    assert not [m for m in raw.take_inbox() if "error" in m]


# -- malformed lines --------------------------------------------------------------------------
# Each case is followed by a request that must be answered, on one agent per test.

NOT_JSON = [
    b"this is not json",
    b'{"jsonrpc": "2.0", "id": 1, "method": ',
    b"\xff\xfe\x00 bin",
    b"{",
]
NOT_OBJECTS = [b"[1, 2]", b"[]", b"42", b'"initialize"', b"true", b"null", b"3.5"]


async def test_lines_that_are_not_json(raw: RawAgent, agent: AgentSpec) -> None:
    """Invalid JSON gets a parse error with id null."""
    for line in NOT_JSON:
        await raw.write(line + b"\n")
        reply = await raw.next_response()
        assert reply["id"] is None, line
        assert error_code(reply) == PARSE_ERROR, line
        await raw.assert_serving(agent.cwd)


async def test_json_that_is_not_an_object(raw: RawAgent, agent: AgentSpec) -> None:
    """JSON that is not a JSON-RPC object (array, number, string, ...) gets -32600, id null."""
    for line in NOT_OBJECTS:
        await raw.write(line + b"\n")
        reply = await raw.next_response()
        assert reply["id"] is None, line
        assert error_code(reply) == INVALID_REQUEST, line
        await raw.assert_serving(agent.cwd)


async def test_batch_is_refused(raw: RawAgent, agent: AgentSpec) -> None:
    """A JSON-RPC batch is not executed: one invalid request error, no session created."""
    batch = [{"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": "/"}}]
    await raw.write(json.dumps(batch).encode() + b"\n")
    reply = await raw.next_response()
    assert reply["id"] is None
    assert error_code(reply) == INVALID_REQUEST
    await assert_quiet_until_answered(raw, agent.cwd)


async def test_method_that_is_not_a_string(raw: RawAgent, agent: AgentSpec) -> None:
    """A request whose method is not a string is an invalid request for its id."""
    await raw.send({"jsonrpc": "2.0", "id": 9, "method": 42})
    reply = await raw.response(9)
    assert error_code(reply) == INVALID_REQUEST
    await raw.assert_serving(agent.cwd)


# -- unknown methods --------------------------------------------------------------------------


async def test_unknown_methods(raw: RawAgent, agent: AgentSpec) -> None:
    """An unknown method gets "method not found" for its id."""
    for method in ("session/bogus", "bogus", "session/set_model_x", "$/unknown"):
        reply = await raw.call(method, {"sessionId": "x"})
        assert error_code(reply) == METHOD_NOT_FOUND, method
        await raw.assert_serving(agent.cwd)


async def test_unknown_extension_request(raw: RawAgent, agent: AgentSpec) -> None:
    """An unknown ``_``-prefixed request gets "method not found"."""
    reply = await raw.call("_nobody/knows", {"anything": [1, 2, 3]})
    assert error_code(reply) == METHOD_NOT_FOUND
    await raw.assert_serving(agent.cwd)


async def test_unknown_extension_notification_is_ignored(raw: RawAgent, agent: AgentSpec) -> None:
    """An unknown ``_``-prefixed notification gets no answer at all."""
    await raw.send({"jsonrpc": "2.0", "method": "_nobody/knows", "params": {"x": 1}})
    await raw.send({"jsonrpc": "2.0", "method": "unknown/notification", "params": {}})
    await assert_quiet_until_answered(raw, agent.cwd)


# -- invalid params ---------------------------------------------------------------------------

INVALID_NEW_PARAMS: list[object] = [
    {"cwd": "relative/dir", "mcpServers": []},
    {"cwd": ".", "mcpServers": []},
    {"cwd": "/tmp"},  # mcpServers is required in v1
    {"cwd": 42, "mcpServers": []},
    {"mcpServers": []},
    [1, 2],
]


async def test_invalid_session_new_params(raw: RawAgent, agent: AgentSpec) -> None:
    """``session/new`` with invalid params (relative cwd, no mcpServers, ...) gets -32602."""
    for params in INVALID_NEW_PARAMS:
        reply = await raw.call("session/new", params)
        assert error_code(reply) == INVALID_PARAMS, params
        await raw.assert_serving(agent.cwd)


async def test_prompt_for_unknown_session(raw: RawAgent, agent: AgentSpec) -> None:
    """A prompt for a session nobody opened is an error, not a turn."""
    reply = await raw.call("session/prompt", {"sessionId": "no-such-session", "prompt": text("hi")})
    assert error_code(reply) in ({INVALID_PARAMS} if agent.is_demo else {INVALID_PARAMS, -32002})
    await raw.assert_serving(agent.cwd)


async def test_load_of_unknown_session(raw: RawAgent, agent: AgentSpec) -> None:
    """``session/load`` of a session that was never stored is an error."""
    params = {"sessionId": "never-was", "cwd": str(agent.cwd), "mcpServers": []}
    reply = await raw.call("session/load", params)
    assert error_code(reply) in {INVALID_PARAMS, METHOD_NOT_FOUND, -32002}
    await raw.assert_serving(agent.cwd)


async def test_prompt_with_invalid_blocks(raw: RawAgent, agent: AgentSpec) -> None:
    """A prompt that is not a list of content blocks gets "invalid params"."""
    session_id = await raw.new_session(agent.cwd)
    reply = await raw.call("session/prompt", {"sessionId": session_id, "prompt": "hello"})
    assert error_code(reply) == INVALID_PARAMS
    assert await run_turn(raw, session_id, "hello") == "end_turn"


# -- turns and cancellation -------------------------------------------------------------------


@pytest.mark.demo_agent
async def test_a_second_prompt_is_refused_while_a_turn_runs_and_a_cancel_ends_it(
    slow_raw: RawAgent, agent: AgentSpec, fake_model: FakeModel
) -> None:
    """Mid model request, a second prompt in the session is refused with -32600; a cancel then
    ends the turn with cancelled and closes its model request, and the session serves on."""
    session_id = await slow_raw.new_session(agent.cwd)
    first = prompt(slow_raw, session_id, "[slow] a long one")
    await slow_raw.send(first)
    await asyncio.wait_for(fake_model.slow_started.wait(), WAIT_SECONDS)
    second = await slow_raw.call("session/prompt", prompt_params(session_id, "me too"))
    assert error_code(second) == INVALID_REQUEST
    assert "a prompt turn is already running" in json.dumps(second["error"])
    await slow_raw.send(cancel(session_id))
    assert stop_reason(await slow_raw.response(first["id"])) == "cancelled"
    await asyncio.wait_for(fake_model.slow_hung_up.wait(), WAIT_SECONDS)
    assert await run_turn(slow_raw, session_id, "now me") == "end_turn"


@pytest.mark.demo_agent
async def test_cancel_reaches_only_its_session(
    slow_raw: RawAgent, agent: AgentSpec, fake_model: FakeModel
) -> None:
    """Two sessions mid-turn: cancelling one leaves the other running until it is cancelled,
    the second time by a ``session/cancel`` sent as a request, which is answered too."""
    first, second = [await slow_raw.new_session(agent.cwd) for _ in range(2)]
    turns = {sid: prompt(slow_raw, sid, "[slow] in parallel") for sid in (first, second)}
    await slow_raw.send(*turns.values())
    await asyncio.wait_for(fake_model.wait_for_slow(2), WAIT_SECONDS)
    await slow_raw.send(cancel(first))
    assert stop_reason(await slow_raw.response(turns[first]["id"])) == "cancelled"
    # The other turn is still running: its prompt is not answered yet, and a new one is refused.
    assert not [m for m in slow_raw.take_inbox() if m.get("id") == turns[second]["id"]]
    refused = await slow_raw.call("session/prompt", prompt_params(second, "me too"))
    assert error_code(refused) == INVALID_REQUEST
    request = slow_raw.request("session/cancel", {"sessionId": second})
    await slow_raw.send(request)
    assert (await slow_raw.response(request["id"]))["result"] == {}
    assert stop_reason(await slow_raw.response(turns[second]["id"])) == "cancelled"
    assert await run_turn(slow_raw, second, "hello") == "end_turn"


@pytest.mark.demo_agent
async def test_load_while_a_turn_runs(
    slow_raw: RawAgent, agent: AgentSpec, fake_model: FakeModel
) -> None:
    """``session/load`` of a session mid-turn stops that turn (cancelled) and reopens it."""
    session_id = await slow_raw.new_session(agent.cwd)
    turn = prompt(slow_raw, session_id, "[slow] interrupted by a load")
    await slow_raw.send(turn)
    await asyncio.wait_for(fake_model.slow_started.wait(), WAIT_SECONDS)
    params = {"sessionId": session_id, "cwd": str(agent.cwd), "mcpServers": []}
    loaded = await slow_raw.call("session/load", params)
    assert "result" in loaded, loaded
    assert stop_reason(await slow_raw.response(turn["id"])) == "cancelled"
    assert await run_turn(slow_raw, session_id, "hello") == "end_turn"


async def test_a_cancel_with_no_turn_running_changes_nothing(
    raw: RawAgent, agent: AgentSpec
) -> None:
    """A cancel before the first turn, after a turn, or naming no session (or no params) gets
    no answer, and the next turn runs to its end."""
    session_id = await raw.new_session(agent.cwd)
    await raw.send(cancel(session_id))
    await assert_quiet_until_answered(raw, agent.cwd)
    assert await run_turn(raw, session_id, "hello") == "end_turn"
    await raw.send(cancel(session_id))
    await assert_quiet_until_answered(raw, agent.cwd)
    assert await run_turn(raw, session_id, "again") == "end_turn"
    for params in ({"sessionId": "no-such-session"}, {}, {"sessionId": 7}, None):
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": "session/cancel"}
        if params is not None:
            message["params"] = params
        await raw.send(message)
        await assert_quiet_until_answered(raw, agent.cwd)
    assert not [m for m in raw.take_inbox() if "error" in m]


@pytest.mark.parametrize("pairs", [1, 5])
async def test_cancel_in_the_same_write_as_its_prompt(
    raw: RawAgent, agent: AgentSpec, pairs: int
) -> None:
    """Prompt and cancel in one write: the turn stops with cancelled, and nothing hangs."""
    sessions = [await raw.new_session(agent.cwd) for _ in range(pairs)]
    turns = [prompt(raw, sid, "hello") for sid in sessions]
    await raw.send(
        *[m for turn, sid in zip(turns, sessions, strict=True) for m in (turn, cancel(sid))]
    )
    for turn in turns:
        assert stop_reason(await raw.response(turn["id"])) == "cancelled"
    assert await run_turn(raw, sessions[0], "hello") == "end_turn"


async def test_protocol_version_is_negotiated(agent: AgentSpec, schema: Schema) -> None:
    """A client asking for a newer protocol version is answered with version 1."""
    async with open_raw(agent, schema) as raw:
        reply = await raw.call("initialize", {"protocolVersion": 99, "clientCapabilities": {}})
        assert reply["result"]["protocolVersion"] == 1
        await raw.assert_serving(agent.cwd)


# -- size and scale ---------------------------------------------------------------------------


async def test_two_megabyte_prompt(raw: RawAgent, agent: AgentSpec) -> None:
    """A 2 MB prompt line is read whole and answered."""
    session_id = await raw.new_session(agent.cwd)
    big = ("lorem ipsum dolor sit amet " * 80_000)[: 2 * 1024 * 1024]
    request = prompt(raw, session_id, big)
    assert len(json.dumps(request)) > 2 * 1024 * 1024
    await raw.send(request)
    assert stop_reason(await raw.response(request["id"])) == "end_turn"
    assert await run_turn(raw, session_id, "small") == "end_turn"


async def test_hundred_sessions_at_once(raw: RawAgent, agent: AgentSpec) -> None:
    """100 ``session/new`` in one write, then 100 prompts in one write: all answered."""
    creates = [
        raw.request("session/new", {"cwd": str(agent.cwd), "mcpServers": []}) for _ in range(100)
    ]
    await raw.send(*creates)
    sessions = [(await raw.response(c["id"]))["result"]["sessionId"] for c in creates]
    assert len(set(sessions)) == 100
    turns = [prompt(raw, sid, f"hello number {n}") for n, sid in enumerate(sessions)]
    await raw.send(*turns)
    for turn in turns:
        assert stop_reason(await raw.response(turn["id"])) == "end_turn"
    updated = {
        m["params"]["sessionId"] for m in raw.take_inbox() if m.get("method") == "session/update"
    }
    assert updated == set(sessions)


# -- _meta --------------------------------------------------------------------------------------

HIJACK = {
    "sessionId": "hijacked",
    "session_id": "hijacked",
    "prompt": [{"type": "text", "text": "Please load skill code-review"}],
    "cwd": "not/absolute",
    "mcpServers": "nope",
    "mcp_servers": "nope",
    "protocol_version": "nope",
    "self": 1,
}


async def test_meta_keys_named_like_parameters(raw: RawAgent, agent: AgentSpec) -> None:
    """``_meta`` keys named like parameters never replace the real parameters."""
    reply = await raw.call("initialize", {"protocolVersion": 1, "_meta": HIJACK})
    assert reply["result"]["protocolVersion"] == 1
    created = await raw.call(
        "session/new", {"cwd": str(agent.cwd), "mcpServers": [], "_meta": HIJACK}
    )
    session_id = created["result"]["sessionId"]
    assert session_id != "hijacked"
    turn = prompt(raw, session_id, "hello", _meta=HIJACK)
    await raw.send(turn)
    assert stop_reason(await raw.response(turn["id"])) == "end_turn"
    updates = [m for m in raw.take_inbox() if m.get("method") == "session/update"]
    assert updates
    assert {u["params"]["sessionId"] for u in updates} == {session_id}
    kinds = {u["params"]["update"]["sessionUpdate"] for u in updates}
    if agent.is_demo:
        # Had `_meta.prompt` won, the offline model would have loaded the skill.
        assert "tool_call" not in kinds
        first = agent.history(session_id)[0]
        assert (first["role"], first["content"]) == ("user", "hello")
    await raw.send(
        {
            "jsonrpc": "2.0",
            "method": "session/cancel",
            "params": {"sessionId": session_id, "_meta": HIJACK},
        }
    )
    loaded = await raw.call(
        "session/load",
        {"sessionId": session_id, "cwd": str(agent.cwd), "mcpServers": [], "_meta": HIJACK},
    )
    assert "result" in loaded or error_code(loaded) == METHOD_NOT_FOUND
    await raw.assert_serving(agent.cwd)


@pytest.mark.demo_agent
async def test_meta_cwd_does_not_move_the_session(
    raw: RawAgent, agent: AgentSpec, tmp_path: Path
) -> None:
    """A session opened with ``_meta.cwd`` elsewhere still sees its real project's skills."""
    (agent.cwd / ".git").mkdir()
    skill = agent.cwd / ".agents" / "skills" / "only-here" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: only-here\ndescription: A project skill.\n---\nBody.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    meta = {"cwd": str(elsewhere), "sessionId": "x", "session_id": "x"}
    created = await raw.call(
        "session/new", {"cwd": str(agent.cwd), "mcpServers": [], "_meta": meta}
    )
    session_id = created["result"]["sessionId"]
    listed = await raw.call("_skills/list", {"sessionId": session_id})
    assert "only-here" in {s["name"] for s in listed["result"]["skills"]}


@pytest.mark.demo_agent
async def test_commands_follow_the_session_new_response_in_stream_order(
    raw: RawAgent, agent: AgentSpec
) -> None:
    """Read strictly in order: the ``session/new`` answer, then its commands update."""
    request = raw.request("session/new", {"cwd": str(agent.cwd), "mcpServers": []})
    await raw.send(request)
    answer = await raw.read()
    assert (answer.get("id"), "result" in answer) == (request["id"], True)
    update = await raw.read()
    assert update.get("method") == "session/update"
    assert update["params"]["sessionId"] == answer["result"]["sessionId"]
    assert update["params"]["update"]["sessionUpdate"] == "available_commands_update"


# -- the end of input -------------------------------------------------------------------------


async def test_requests_piped_before_end_of_input_are_all_answered(
    agent: AgentSpec, schema: Schema
) -> None:
    """A script written and ended at once (``printf ... | agent``): every request is answered
    before the agent finishes."""
    cwd = str(agent.cwd)
    requests: list[dict[str, Any]] = [
        {"method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}},
        {"method": "session/new", "params": {"cwd": cwd, "mcpServers": []}},
        {"method": "session/prompt", "params": prompt_params("no-such-session", "hi")},
        {"method": "_skills/list", "params": {"cwd": cwd}},
        {"method": "session/load", "params": {"sessionId": "nope", "cwd": cwd, "mcpServers": []}},
        {"method": "session/bogus", "params": {}},
        {"method": "session/new", "params": {"cwd": cwd, "mcpServers": []}},
    ]
    requests = [{"jsonrpc": "2.0", "id": n, **r} for n, r in enumerate(requests, start=1)]
    async with open_raw(agent, schema) as raw:
        await raw.send(*requests)
        assert await raw.close() == 0, agent.stderr_tail()
    answered = Counter(m["id"] for m in raw.log.sent_by(AGENT) if "method" not in m)
    assert answered == Counter(r["id"] for r in requests), agent.stderr_tail()


async def test_a_turn_running_at_end_of_input_is_answered(agent: AgentSpec, schema: Schema) -> None:
    """Prompts, loads and lists written together with the end of input each get one answer."""
    async with open_raw(agent, schema) as raw:
        await raw.initialize()
        session_id = await raw.new_session(agent.cwd)
        batch = [
            prompt(raw, session_id, "hello"),
            raw.request("_skills/list", {"cwd": str(agent.cwd)}),
            raw.request("session/new", {"cwd": str(agent.cwd), "mcpServers": []}),
            prompt(raw, "no-such-session", "hello"),
        ]
        await raw.send(*batch)
        assert await raw.close() == 0, agent.stderr_tail()
        answers = [dict(m) for m in raw.log.sent_by(AGENT) if "method" not in m]
        by_id = Counter(m["id"] for m in answers)
        assert all(by_id[m["id"]] == 1 for m in batch), answers
        [turn] = [m for m in answers if m["id"] == batch[0]["id"]]
        assert stop_reason(turn) in {"end_turn", "cancelled"}


# -- limits -----------------------------------------------------------------------------------

MAX_LINE_BYTES = 8 * 1024 * 1024
MIB = 1024 * 1024


async def write_long_prompt(raw: RawAgent, request_id: int, text_bytes: int) -> None:
    """A ``session/prompt`` line whose text is ``text_bytes`` long, written a MiB at a time."""
    head = {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt"}
    raw.log.add(CLIENT, head)
    await raw.write(json.dumps(head)[:-1].encode() + b', "params": {"sessionId": "s", "prompt": ')
    await raw.write(b'[{"type": "text", "text": "')
    for _ in range(text_bytes // MIB):
        await raw.write(b"a" * MIB)
    await raw.write(b"a" * (text_bytes % MIB) + b'"}]}}\n')


@pytest.mark.demo_agent
async def test_an_overlong_request_is_refused_by_its_id(raw: RawAgent, agent: AgentSpec) -> None:
    """A request line over 8 MiB gets -32600 for its id; the next request is served."""
    await write_long_prompt(raw, 77, MAX_LINE_BYTES + 1)
    reply = await raw.response(77)
    assert error_code(reply) == INVALID_REQUEST
    assert "over the 8388608-byte limit" in reply["error"]["data"]["details"]
    await raw.assert_serving(agent.cwd)


@pytest.mark.demo_agent
async def test_an_overlong_line_without_an_id_is_refused_with_id_null(
    raw: RawAgent, agent: AgentSpec
) -> None:
    """An over-long line whose id cannot be read gets -32600 with id null, not a parse error."""
    for _ in range(MAX_LINE_BYTES // MIB + 1):
        await raw.write(b"x" * MIB)
    await raw.write(b"\n")
    reply = await raw.next_response()
    assert reply["id"] is None
    assert error_code(reply) == INVALID_REQUEST
    await raw.assert_serving(agent.cwd)


@pytest.mark.demo_agent
async def test_an_overlong_line_is_not_held_in_memory(raw: RawAgent, agent: AgentSpec) -> None:
    """A 64 MiB line raises the peak memory allocated meanwhile by far less than its size."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        await write_long_prompt(raw, 78, 64 * MIB)
        assert error_code(await raw.response(78)) == INVALID_REQUEST
        growth = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert growth < 40 * MIB, f"peak memory grew by {growth / MIB:.0f} MiB"
    await raw.assert_serving(agent.cwd)


def path_limit() -> int:
    """The platform's longest path in bytes, its terminating NUL included."""
    try:
        limit = os.pathconf("/", "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):
        limit = -1
    return limit if limit > 0 else 4096


@pytest.mark.demo_agent
@pytest.mark.parametrize("method", ["session/new", "session/load", "_skills/list"])
async def test_a_cwd_over_the_path_limit_is_invalid_params(
    raw: RawAgent, agent: AgentSpec, method: str
) -> None:
    """A ``cwd`` longer than the platform's path limit is -32602, and is not echoed back."""
    cwd = "/" + "a" * path_limit()
    params = {"cwd": cwd, "mcpServers": [], "sessionId": await raw.new_session(agent.cwd)}
    if method == "_skills/list":
        params = {"cwd": cwd}
    reply = await raw.call(method, params)
    assert error_code(reply) == INVALID_PARAMS
    assert "path limit" in reply["error"]["data"]["reason"]
    assert cwd not in json.dumps(reply)
    await raw.assert_serving(agent.cwd)


# -- lenient where the peer means well, strict where it must be -------------------------------


OUT_OF_RANGE = [
    b'"params": {"protocolVersion": 1e400}',
    b'"params": {"protocolVersion": -1e400}',
    b'"params": {"protocolVersion": 1180591620717411303424}',  # 2**70
    b'"params": {"protocolVersion": 1' + b"0" * 5000 + b"}",
    b'"params": {"protocolVersion": 1, "clientCapabilities": {"_meta": {"n": [1e400]}}}',
]


@pytest.mark.demo_agent
@pytest.mark.parametrize(
    "params", OUT_OF_RANGE, ids=["inf", "minus-inf", "2**70", "5000-digits", "nested"]
)
async def test_a_number_out_of_range_is_invalid_params(
    raw: RawAgent, agent: AgentSpec, params: bytes
) -> None:
    """A number that fits no 64-bit integer or finite double is -32602, never -32603."""
    request = raw.request("initialize")
    raw.log.add(CLIENT, request)
    await raw.write(json.dumps(request)[:-1].encode() + b", " + params + b"}\n")
    assert error_code(await raw.response(request["id"])) == INVALID_PARAMS
    await raw.assert_serving(agent.cwd)


@pytest.mark.demo_agent
async def test_an_out_of_range_number_in_a_prompt_is_invalid_params(
    raw: RawAgent, agent: AgentSpec
) -> None:
    """Every numeric parameter is covered, not only the protocol version."""
    session_id = await raw.new_session(agent.cwd)
    request = prompt(raw, session_id, "hello")
    raw.log.add(CLIENT, request)
    block = b'{"type": "text", "text": "hi", "annotations": {"priority": 1e400}}'
    line = json.dumps({**request, "params": {"sessionId": session_id, "prompt": []}})
    await raw.write(line.replace('"prompt": []', '"prompt": [' + block.decode() + "]").encode())
    await raw.write(b"\n")
    assert error_code(await raw.response(request["id"])) == INVALID_PARAMS
    assert await run_turn(raw, session_id, "hello") == "end_turn"


async def test_nan_and_infinity_literals_are_parse_errors(raw: RawAgent, agent: AgentSpec) -> None:
    """``NaN`` and ``Infinity`` are not JSON: -32700 with id null."""
    for literal in (b"NaN", b"Infinity", b"-Infinity"):
        line = b'{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": '
        await raw.write(line + literal + b"}}\n")
        reply = await raw.next_response()
        assert (reply["id"], error_code(reply)) == (None, PARSE_ERROR), literal
    await raw.assert_serving(agent.cwd)
