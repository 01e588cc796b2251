"""The ``openai`` model against a real OpenAI-compatible HTTP server on 127.0.0.1.

`tests.fake_openai.FakeOpenAI` streams scripted server-sent events (or fails, or never answers);
the model is exercised directly (`OpenAIChatModel.complete`) and end to end through the demo
agent subprocess (``--model openai --base-url http://127.0.0.1:PORT/v1``).
"""

from __future__ import annotations

import gc
import json
import os
import socket
import types
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest

from demo_agent.models import ModelError, ModelReply, ModelRequest, ToolCall
from demo_agent.models.openai_chat import OpenAIChatModel
from tests.agent_client import Agent, Sandbox, text_prompt
from tests.fake_openai import (
    Fail,
    FakeOpenAI,
    Hang,
    Raw,
    ReceivedRequest,
    Reply,
    Stream,
    chunk,
    openai_agent_args,
    text_reply,
    tool_call_reply,
)

pytestmark = pytest.mark.anyio

TEST_SECONDS = 30
SKILL_TOOL = {
    "type": "function",
    "function": {
        "name": "skill",
        "description": "Load a skill.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
NOTES_BODY = "# Meeting notes\n\n1. Read the notes.\n2. List the action items.\n"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    return Sandbox.create(tmp_path)


def make_model(server: FakeOpenAI, **options: Any) -> OpenAIChatModel:
    settings: dict[str, Any] = {"api_key": "secret", "timeout": 5.0}
    settings.update(options)
    return OpenAIChatModel(
        base_url=server.base_url, model="test", key_variable="TEST_KEY", **settings
    )


async def complete(
    model: OpenAIChatModel, messages: list[dict[str, Any]], tools: list[Any] | None = None
) -> tuple[ModelReply, list[str]]:
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    request = ModelRequest(system="be brief", tools=tools or [], messages=messages)
    with anyio.fail_after(TEST_SECONDS):
        reply = await model.complete(request, on_text)
    return reply, pieces


HELLO = [{"role": "user", "content": "hello"}]


# -- the model class ---------------------------------------------------------------------------


async def test_model_streams_text_and_sends_a_streaming_request() -> None:
    """Text arrives piece by piece; the request is an authorized, streaming chat completion."""
    with FakeOpenAI([text_reply("Hel", "lo", " there")]) as server:
        model = make_model(server, max_tokens=64)
        reply, pieces = await complete(model, HELLO, [SKILL_TOOL])
    assert pieces == ["Hel", "lo", " there"]
    assert reply == ModelReply(text="Hello there", tool_calls=(), finish="stop")
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer secret"
    assert request.body["stream"] is True
    assert request.body["model"] == "test"
    assert request.body["max_tokens"] == 64
    assert request.body["tools"] == [SKILL_TOOL]
    assert request.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]
    assert model.config == {"model": "test", "base_url": server.base_url, "max_tokens": 64}


async def test_model_assembles_tool_calls_streamed_in_pieces() -> None:
    """Tool-call ids, names and arguments split across chunks are put back together by index."""
    interleaved = Stream(
        [
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"index": 0, "id": "call_a", "function": {"name": "sk", "arguments": ""}}
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "ill", "arguments": '{"na'}}]}),
            chunk(
                {
                    "tool_calls": [
                        {"index": 1, "id": "call_b", "function": {"name": "skill", "arguments": ""}}
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"name": "b"}'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'me": "a"}'}}]}),
            chunk({}, "tool_calls"),
        ]
    )
    with FakeOpenAI(
        [tool_call_reply("call_1", "skill", ['{"na', 'me": "al', 'pha"}']), interleaved]
    ) as server:
        model = make_model(server)
        single, single_pieces = await complete(model, HELLO, [SKILL_TOOL])
        double, double_pieces = await complete(model, HELLO, [SKILL_TOOL])
    assert single == ModelReply(
        text="",
        tool_calls=(ToolCall(id="call_1", name="skill", arguments='{"name": "alpha"}'),),
        finish="tool_calls",
    )
    assert double.tool_calls == (
        ToolCall(id="call_a", name="skill", arguments='{"name": "a"}'),
        ToolCall(id="call_b", name="skill", arguments='{"name": "b"}'),
    )
    assert single_pieces == double_pieces == []


async def test_model_reports_a_length_cut_off() -> None:
    """finish_reason "length" gives finish "length" with the text streamed so far."""
    with FakeOpenAI([text_reply("Once upon", " a", finish="length")]) as server:
        reply, pieces = await complete(make_model(server), HELLO)
    assert reply == ModelReply(text="Once upon a", tool_calls=(), finish="length")
    assert pieces == ["Once upon", " a"]


async def test_model_drops_tool_calls_that_never_got_results() -> None:
    """An assistant tool call left unanswered by a cancelled turn is not sent to the endpoint."""
    unanswered = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "lost", "type": "function", "function": {"name": "skill", "arguments": "{}"}}
        ],
    }
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "first"},
        unanswered,
        {"role": "user", "content": "2nd"},
    ]
    with FakeOpenAI([text_reply("ok")]) as server:
        await complete(make_model(server), history)
    assert server.requests[0].messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "2nd"},
    ]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(
            Fail(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}}),
            "The model endpoint rejected the API key (HTTP 401). Check TEST_KEY.",
            id="http-401",
        ),
        pytest.param(
            Fail(429, {"error": {"message": "Rate limit reached", "type": "rate_limit"}}),
            "The model endpoint is rate-limiting requests (HTTP 429).",
            id="http-429",
        ),
        pytest.param(
            Fail(500, {"error": {"message": "The server had an error", "type": "server"}}),
            "The model endpoint answered HTTP 500: ",
            id="http-500",
        ),
        pytest.param(
            Hang(), "The model endpoint did not answer within 0.3 s.", id="timeout-no-response"
        ),
        pytest.param(
            Stream([chunk({"content": "partial"})], hold=True),
            "The model endpoint did not answer within 0.3 s.",
            id="timeout-mid-stream",
        ),
        pytest.param(
            Stream([chunk({"content": "Par"}), {"error": {"message": "Overloaded, retry"}}]),
            "The model request failed: Overloaded, retry",
            id="error-mid-stream",
        ),
        pytest.param(
            Stream([chunk({"content": "Par"}), {"error": "Model is loading"}]),
            "The model request failed: Model is loading",
            id="error-as-text-mid-stream",
        ),
    ],
)
async def test_model_failures_raise_a_clear_model_error(reply: Reply, expected: str) -> None:
    """HTTP errors and timeouts become a ModelError whose message names the problem."""
    # A short timeout only where the test waits for it: an HTTP error must not race it.
    timeout = 0.3 if isinstance(reply, Hang | Stream) else 5.0
    with FakeOpenAI([reply]) as server, pytest.raises(ModelError) as caught:
        await complete(make_model(server, timeout=timeout), HELLO)
    assert expected in str(caught.value)
    assert len(server.requests) == 1
    if isinstance(reply, Fail) and reply.status == 500:
        assert "The server had an error" in str(caught.value)


# Line breaks JSON may carry as they are, which server-sent events do not end a line at.
UNICODE_BREAKS = "one\u2028two\u2029three\x85four"
BROKEN_TEXT = json.dumps(chunk({"content": UNICODE_BREAKS}), ensure_ascii=False)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"data: {BROKEN_TEXT}\n\ndata: [DONE]\n\n", id="unicode-breaks"),
        pytest.param(
            f": ping\r\nevent: message\r\ndata:{BROKEN_TEXT}\r\n\r\ndata: [DONE]\r\n\r\n",
            id="comment-event-crlf-no-space",
        ),
        pytest.param(f"data: {BROKEN_TEXT}\r\rdata: [DONE]", id="cr-no-final-blank-line"),
        pytest.param(f"data: {BROKEN_TEXT}", id="no-done-no-line-end"),
    ],
)
async def test_model_reads_events_split_only_where_server_sent_events_end_lines(
    body: str,
) -> None:
    """A line of server-sent events ends at CRLF, LF or CR only: a reply whose text holds
    U+2028, U+2029 or U+0085 unescaped (as many JSON encoders write them) is read whole, among
    comments, event names, any of the three line ends and ``data:`` without its space."""
    with FakeOpenAI([Raw(body.encode())]) as server:
        reply, pieces = await complete(make_model(server), HELLO)
    assert (reply.text, pieces) == (UNICODE_BREAKS, [UNICODE_BREAKS])


async def test_model_unreachable_endpoint_is_a_clear_error() -> None:
    """Nothing listening at the base URL gives a ModelError naming the endpoint."""
    base_url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = OpenAIChatModel(base_url=base_url, model="test", api_key="secret", timeout=5.0)
    with pytest.raises(ModelError, match="Could not reach the model endpoint at http://127"):
        await complete(model, HELLO)


async def test_model_without_a_key_says_which_variable_to_set() -> None:
    """With no key the model sends nothing and names the environment variable, and the key
    file docs/zed.md recommends for an editor's settings."""
    no_key = "No API key: set the TEST_KEY environment variable"
    with FakeOpenAI([text_reply("unused")]) as server, pytest.raises(ModelError, match=no_key) as e:
        await complete(make_model(server, api_key=None), HELLO)
    assert server.requests == []
    assert "with --api-key-file" in str(e.value)


async def test_model_cancel_closes_the_stream() -> None:
    """Cancelling a completion mid-stream closes the HTTP connection."""
    with FakeOpenAI([text_reply(*["tick "] * 400, delay=0.05)]) as server:
        model = make_model(server)
        pieces: list[str] = []
        first = anyio.Event()

        async def on_text(piece: str) -> None:
            pieces.append(piece)
            first.set()

        request = ModelRequest(system="s", tools=[], messages=HELLO)
        with anyio.fail_after(TEST_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(model.complete, request, on_text)
                await first.wait()
                group.cancel_scope.cancel()
            assert await anyio.to_thread.run_sync(server.client_closed.wait, 5.0)
    assert 1 <= len(pieces) < 400


def _suspended_stream_readers() -> list[str]:
    """The HTTP client's async generators still waiting mid-stream (not closed, not done)."""
    libraries = ("openai", "httpx", "httpx2", "httpcore")  # the openai client on httpx or httpx2
    return [
        found.ag_code.co_qualname
        for found in gc.get_objects()
        if isinstance(found, types.AsyncGeneratorType)
        and found.ag_frame is not None
        and any(f"{os.sep}{name}{os.sep}" in found.ag_code.co_filename for name in libraries)
    ]


STILL_TALKING = [chunk({"content": "more "})] * 3


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param([chunk({"content": {"text": "hi"}})], id="content-not-text"),
        pytest.param([chunk({"tool_calls": [{"id": "c1"}]})], id="call-without-index"),
    ],
)
async def test_a_reply_read_no_further_leaves_no_stream_reader_waiting(
    pieces: list[dict[str, Any]],
) -> None:
    """A reply the model stops reading mid-stream closes every reader of the HTTP stream as
    it stops, instead of leaving them suspended for the garbage collector, which may finalise
    them after their event loop is gone."""
    gc.disable()  # what only the collector would free stays visible
    try:
        reply = Stream([*pieces, *STILL_TALKING], hold=True)
        with FakeOpenAI([reply]) as server, pytest.raises(ModelError, match="could not read"):
            await complete(make_model(server), HELLO)
        for _ in range(TEST_SECONDS * 100):  # the closed readers' own clean-up runs on the loop
            if not _suspended_stream_readers():
                break
            await anyio.sleep(0.01)
        assert _suspended_stream_readers() == []
    finally:
        gc.enable()


# -- end to end through the agent --------------------------------------------------------------


def spawn_openai_agent(
    sandbox: Sandbox, server: FakeOpenAI, *extra: str, key: str | None = "secret"
) -> AbstractAsyncContextManager[Agent]:
    env = {"TEST_KEY": key} if key is not None else {}
    return sandbox.spawn(*openai_agent_args(server.base_url, *extra), env=env)


async def new_session(agent: Agent, sandbox: Sandbox) -> str:
    return (await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])).session_id


async def ask(agent: Agent, session_id: str, text: str) -> str:
    response = await agent.conn.prompt(session_id=session_id, prompt=text_prompt(text))
    return response.stop_reason


async def test_agent_streams_text_as_several_chunks(sandbox: Sandbox) -> None:
    """Streamed text reaches the editor as one agent_message_chunk per piece."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    with FakeOpenAI([text_reply("Hello", ", ", "world", "!")]) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_openai_agent(sandbox, server) as agent:
                sid = await new_session(agent, sandbox)
                assert await ask(agent, sid, "greet me") == "end_turn"
                prefix = await agent.conn.ext_method("skills/prefix", {"sessionId": sid})
                assert agent.client.agent_chunks(sid) == ["Hello", ", ", "world", "!"]
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer secret"
    assert request.body["stream"] is True
    assert request.body["model"] == "test"
    assert [tool["function"]["name"] for tool in request.body["tools"]] == ["skill"]
    [catalog] = prefix["messages"]
    assert request.messages[1:] == [
        {"role": "user", "content": catalog["text"]},
        {"role": "user", "content": "greet me"},
    ]
    assert request.messages[0]["role"] == "system"
    assert prefix["header"]["config"] == {"model": "test", "base_url": server.base_url}


async def test_agent_tool_call_round_trip(sandbox: Sandbox) -> None:
    """A streamed skill call is run and its result goes back in the next request."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)

    def respond(request: ReceivedRequest, index: int) -> Reply:
        if any(message["role"] == "tool" for message in request.messages):
            return text_reply("Following ", "alpha-notes.")
        return tool_call_reply("call_abc", "skill", ['{"na', 'me": "alpha', '-notes"}'])

    with FakeOpenAI(respond) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_openai_agent(sandbox, server) as agent:
                client = agent.client
                sid = await new_session(agent, sandbox)
                assert await ask(agent, sid, "summarise today's notes") == "end_turn"
                prefix = await agent.conn.ext_method("skills/prefix", {"sessionId": sid})
                start, end = client.tool_updates(sid)
                assert start.tool_call_id == end.tool_call_id == "call_abc"
                assert start.title == "Load skill alpha-notes"
                assert start.raw_input == {"name": "alpha-notes"}
                assert end.status == "completed"
                assert client.agent_text(sid) == "Following alpha-notes."

    first, second = server.requests
    [catalog] = prefix["messages"]
    system = {"role": "system", "content": first.messages[0]["content"]}
    catalog_message = {"role": "user", "content": catalog["text"]}
    user = {"role": "user", "content": "summarise today's notes"}
    assert first.messages == [system, catalog_message, user]
    assert second.messages[:4] == [
        system,
        catalog_message,
        user,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "skill", "arguments": '{"name": "alpha-notes"}'},
                }
            ],
        },
    ]
    tool_message = second.messages[4]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_abc"
    assert tool_message["content"].startswith('<skill_content name="alpha-notes">')
    assert "2. List the action items." in tool_message["content"]
    assert len(second.messages) == 5


async def test_agent_max_steps_bounds_the_turn(sandbox: Sandbox) -> None:
    """A model that always calls a tool is stopped after --max-steps requests."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)

    def respond(request: ReceivedRequest, index: int) -> Reply:
        return tool_call_reply(f"call_{index}", "skill", ['{"name": "alpha-notes"}'])

    with FakeOpenAI(respond) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_openai_agent(sandbox, server, "--max-steps", "2") as agent:
                sid = await new_session(agent, sandbox)
                assert await ask(agent, sid, "loop forever") == "max_turn_requests"
                tools = agent.client.tool_updates(sid)
    assert len(server.requests) == 2
    assert [(u.session_update, u.tool_call_id, u.status) for u in tools] == [
        ("tool_call", "call_0", "in_progress"),
        ("tool_call_update", "call_0", "completed"),
        ("tool_call", "call_1", "in_progress"),
        ("tool_call_update", "call_1", "completed"),
    ]


async def test_agent_length_cut_off_is_max_tokens(sandbox: Sandbox) -> None:
    """finish_reason "length" ends the turn with stopReason max_tokens."""
    with FakeOpenAI([text_reply("Once upon", " a time", finish="length")]) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_openai_agent(sandbox, server, "--max-tokens", "3") as agent:
                sid = await new_session(agent, sandbox)
                assert await ask(agent, sid, "tell a story") == "max_tokens"
                assert agent.client.agent_text(sid) == "Once upon a time"
    assert server.requests[0].body["max_tokens"] == 3
    assert sandbox.history(sid)[-1] == {"role": "assistant", "content": "Once upon a time"}


async def test_agent_without_key_explains_and_ends_the_turn(sandbox: Sandbox) -> None:
    """With the key variable unset the agent says which variable to set and ends the turn."""
    with FakeOpenAI([text_reply("unused")]) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_openai_agent(sandbox, server, key=None) as agent:
                sid = await new_session(agent, sandbox)
                assert await ask(agent, sid, "hello") == "end_turn"
                message = agent.client.agent_text(sid)
                assert message.startswith("No API key: set the TEST_KEY environment variable")
                assert "--model offline" in message
                assert await ask(agent, sid, "hello?") == "end_turn"
    assert server.requests == []


ENDPOINT_FAILURES: list[tuple[Reply, str]] = [
    (
        Fail(401, {"error": {"message": "Incorrect API key provided"}}),
        "The model endpoint rejected the API key (HTTP 401). Check TEST_KEY.",
    ),
    (
        Fail(429, {"error": {"message": "Rate limit reached"}}),
        "The model endpoint is rate-limiting requests (HTTP 429).",
    ),
    (
        Fail(500, {"error": {"message": "The server had an error"}}),
        "The model endpoint answered HTTP 500: ",
    ),
    (Hang(), "The model endpoint did not answer within 1 s."),
    # Text streamed before the stall stays; the message starts on a line of its own.
    (
        Stream([chunk({"content": "Partial answer"})], hold=True),
        "Partial answer\n\nThe model endpoint did not answer within 1 s.",
    ),
]


async def test_agent_reports_endpoint_failures_and_keeps_serving(sandbox: Sandbox) -> None:
    """401, 429, 500 and timeouts each get a clear message and end_turn; the next prompt works."""
    script: list[Reply] = []
    for number, (failure, _) in enumerate(ENDPOINT_FAILURES):
        script += [failure, text_reply(f"Back again {number}.")]
    with FakeOpenAI(script) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_openai_agent(sandbox, server, "--timeout", "1") as agent:
                client = agent.client
                sid = await new_session(agent, sandbox)
                for number, (_, expected) in enumerate(ENDPOINT_FAILURES):
                    mark = len(client.updates)
                    assert await ask(agent, sid, f"hello {number}") == "end_turn", expected
                    assert expected in client.agent_text(sid, since=mark)
                    assert agent.proc.returncode is None
                    mark = len(client.updates)
                    assert await ask(agent, sid, f"again {number}") == "end_turn", expected
                    assert client.agent_text(sid, since=mark) == f"Back again {number}."
    assert len(server.requests) == 2 * len(ENDPOINT_FAILURES)
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer secret"}
    # A failed turn stays in the conversation: the user's message and the agent's message.
    retry = server.requests[-1].messages
    assert [m["role"] for m in retry[-3:]] == ["user", "assistant", "user"]
    last = len(ENDPOINT_FAILURES) - 1
    assert retry[-3]["content"] == f"hello {last}"
    assert retry[-2]["content"].startswith("The model endpoint did not answer within 1 s.")
    assert retry[-1]["content"] == f"again {last}"
