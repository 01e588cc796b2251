"""`GuardedTransport`: raw lines into a real `AgentSideConnection` (contract §9, hygiene).

The test plays the client by hand: it writes raw bytes into one end of a socketpair and reads
the agent's frames from it, so it can send exactly the garbage the SDK mishandles.
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, cast

import anyio
import pytest
from acp import PROTOCOL_VERSION, run_agent
from acp.core import AgentSideConnection
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)
from structlog.testing import capture_logs

from acp_skills.acp import GuardedTransport, open_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

INITIALIZE_PARAMS: dict[str, Any] = {"protocolVersion": PROTOCOL_VERSION}


class TrivialAgent:
    """Records what its handlers receive; ``_read`` reads a file through the client, ``_wait``
    answers once ``release`` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.client: AgentSideConnection | None = None
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        self.calls.append(("new_session", {"cwd": cwd, "kwargs": kwargs}))
        return NewSessionResponse(session_id="s1")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        self.calls.append(("prompt", {"session_id": session_id, "kwargs": kwargs}))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.calls.append(("cancel", {"session_id": session_id}))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, params))
        if method == "wait":
            self.waiting.set()
            await self.release.wait()
            return {"released": True}
        if method == "read" and self.client is not None:
            response = await self.client.read_text_file(session_id="s1", path="/some/file")
            return {"content": response.content}
        return {}


@dataclass
class RawClient:
    """The client end of the socketpair: raw lines out, decoded frames in."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    next_id: int = 100

    async def send_line(self, line: str | bytes) -> None:
        data = line.encode("utf-8") if isinstance(line, str) else line
        self.writer.write(data + b"\n")
        await self.writer.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message))

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(5):
            line = await self.reader.readline()
        assert line, "the agent closed the connection"
        return cast(dict[str, Any], json.loads(line))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its response frame."""
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await self.receive()

    async def assert_serving(self) -> None:
        """An ``initialize`` still gets its answer: the receive loop is alive."""
        response = await self.request("initialize", INITIALIZE_PARAMS)
        assert response["id"] == self.next_id
        assert response["result"]["protocolVersion"] == PROTOCOL_VERSION


@asynccontextmanager
async def guarded(
    agent: TrivialAgent, *, limit: int = 2**16, **options: Any
) -> AsyncIterator[RawClient]:
    """``agent`` behind a `GuardedTransport` (with ``options``), and the raw client end."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket, limit=limit)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer, **options)
    connection = AgentSideConnection(cast(Any, agent), transport)
    try:
        yield RawClient(client_reader, client_writer)
    finally:
        await connection.close()  # closes the transport, and with it the agent's writer
        client_writer.close()
        with suppress(ConnectionError):
            await client_writer.wait_closed()


def invalid_request(details: str, request_id: object = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32600, "message": "Invalid request", "data": {"details": details}},
    }


PARSE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}


@pytest.mark.parametrize(
    ("line", "reply"),
    [
        ("not json{", PARSE_ERROR),
        ('{"jsonrpc": "2.0", "id": 1, "method": "initialize"', PARSE_ERROR),
        ("[" * 100_000, PARSE_ERROR),
        ("[1,2]", invalid_request("a batch")),
        ("[]", invalid_request("a batch")),
        ("42", invalid_request("not a JSON object")),
        ('"x"', invalid_request("not a JSON object")),
        ("true", invalid_request("not a JSON object")),
        ("null", invalid_request("not a JSON object")),
        (
            '{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{"protocolVersion":1}}',
            invalid_request("invalid id"),
        ),
        (
            '{"jsonrpc":"2.0","id":true,"method":"initialize","params":{"protocolVersion":1}}',
            invalid_request("invalid id"),
        ),
        ('{"jsonrpc":"2.0","id":9,"method":7}', invalid_request("bad method", 9)),
        (
            '{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":NaN}}',
            PARSE_ERROR,
        ),
        ('{"jsonrpc":"2.0","id":3,"method":"x","params":[Infinity]}', PARSE_ERROR),
    ],
    ids=[
        "invalid-json",
        "truncated-object",
        "deep-nesting",
        "batch",
        "empty-batch",
        "number",
        "string",
        "true",
        "null",
        "list-id",
        "boolean-id",
        "non-string-method",
        "nan-literal",
        "infinity-literal",
    ],
)
async def test_a_bad_line_gets_an_error_reply_and_the_agent_keeps_serving(
    line: str, reply: dict[str, Any]
) -> None:
    """Each malformed line is answered like the TypeScript SDK answers it; serving goes on."""
    async with guarded(TrivialAgent()) as client:
        await client.send_line(line)
        assert await client.receive() == reply
        await client.assert_serving()


async def test_blank_lines_are_skipped_and_objects_without_method_or_id_are_invalid() -> None:
    """Blank lines get no reply; an object that is neither request nor response gets -32600."""
    async with guarded(TrivialAgent()) as client:
        await client.send_line("")
        await client.send_line("   ")
        await client.send_line('{"jsonrpc": "2.0"}')
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "Invalid request",
                "data": {"details": "neither a request nor a response"},
            },
        }
        response = await client.request("initialize", INITIALIZE_PARAMS)
    assert response["id"] == client.next_id
    assert response["result"]["protocolVersion"] == PROTOCOL_VERSION


async def test_meta_keys_never_override_standard_parameters() -> None:
    """``_meta`` keys named like parameters reach the handler as one ``_meta`` keyword."""
    agent = TrivialAgent()
    session_meta = {"cwd": "/evil", "session_id": "evil", "sessionId": "evil", "foo-bar": 1}
    prompt_meta = {"session_id": "evil", "sessionId": "evil", "prompt": "evil", "self": 1}
    async with guarded(agent) as client:
        created = await client.request(
            "session/new", {"cwd": "/real", "mcpServers": [], "_meta": session_meta}
        )
        prompted = await client.request(
            "session/prompt",
            {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}], "_meta": prompt_meta},
        )
    assert created["result"] == {"sessionId": "s1"}
    assert prompted["result"] == {"stopReason": "end_turn"}
    assert agent.calls == [
        ("new_session", {"cwd": "/real", "kwargs": {"_meta": session_meta}}),
        ("prompt", {"session_id": "s1", "kwargs": {"_meta": prompt_meta}}),
    ]


async def test_extension_params_reach_ext_method_untouched() -> None:
    """Extension methods get their params as sent, ``_meta`` included and not nested."""
    agent = TrivialAgent()
    params = {"sessionId": "s1", "_meta": {"trace": "t-1"}}
    async with guarded(agent) as client:
        response = await client.request("_skills/list", params)
    assert response["result"] == {}
    assert agent.calls == [("skills/list", params)]


@pytest.mark.parametrize(
    "bad_response",
    [
        {"jsonrpc": "2.0", "id": [0], "result": {}},
        {"jsonrpc": "2.0", "id": {"a": 1}, "result": {}},
        {"jsonrpc": "2.0", "id": True, "result": {}},
        {"jsonrpc": "2.0", "id": 1.5, "result": {}},
    ],
    ids=["list-id", "object-id", "boolean-id", "float-id"],
)
async def test_a_response_with_an_invalid_id_is_dropped_while_a_request_is_pending(
    bad_response: dict[str, Any],
) -> None:
    """A response with a malformed id is dropped; the pending request still completes."""
    async with guarded(TrivialAgent()) as client:
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "_read", "params": {}})
        read = await client.receive()
        assert (read["method"], read["params"]) == (
            "fs/read_text_file",
            {"sessionId": "s1", "path": "/some/file"},
        )
        await client.send(bad_response)
        await client.send({"jsonrpc": "2.0", "id": read["id"], "result": {"content": "text"}})
        assert await client.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"content": "text"}}
        await client.assert_serving()


async def test_a_string_error_for_a_pending_request_becomes_an_error_object() -> None:
    """``"error": "boom"`` fails the pending request cleanly instead of killing the loop."""
    async with guarded(TrivialAgent()) as client:
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "_read", "params": {}})
        read = await client.receive()
        await client.send({"jsonrpc": "2.0", "id": read["id"], "error": "boom"})
        answer = await client.receive()
        assert answer["id"] == 1
        assert (answer["error"]["code"], answer["error"]["message"]) == (-32603, "boom")
        await client.assert_serving()


async def test_a_line_longer_than_the_reader_limit_is_read_whole() -> None:
    """A frame over the stream's buffer limit is still one message."""
    async with guarded(TrivialAgent(), limit=256) as client:
        response = await client.request(
            "initialize",
            {"protocolVersion": 1, "clientInfo": {"name": "x" * 10_000, "version": "1"}},
        )
    assert response["result"]["protocolVersion"] == PROTOCOL_VERSION


async def test_send_after_close_is_dropped() -> None:
    """After ``close()`` a frame is dropped without raising, and ``close`` is idempotent."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer)
    await transport.send({"jsonrpc": "2.0", "method": "before"})
    await transport.close()
    await transport.close()
    await transport.send({"jsonrpc": "2.0", "method": "after"})
    with anyio.fail_after(5):
        received = await client_reader.read()
    client_writer.close()
    await client_writer.wait_closed()
    assert received == b'{"jsonrpc":"2.0","method":"before"}\n'


async def test_an_unserialisable_response_is_answered_with_an_internal_error() -> None:
    """A response the SDK cannot encode still answers the request, with -32603."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer)
    await transport.send({"jsonrpc": "2.0", "id": 3, "result": {"value": object()}})
    with pytest.raises(TypeError):
        await transport.send({"jsonrpc": "2.0", "method": "note", "params": {"v": object()}})
    await transport.close()
    with anyio.fail_after(5):
        line = await client_reader.readline()
    client_writer.close()
    await client_writer.wait_closed()
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32603,
            "message": "Internal error",
            "data": {"details": "Object of type object is not JSON serializable"},
        },
    }


async def test_receive_returns_none_at_end_of_input_only() -> None:
    """``null`` is not the end of input; closing the stream is."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer)
    client_writer.write(b'null\n{"jsonrpc":"2.0","method":"ping"}\n')
    client_writer.write_eof()
    with anyio.fail_after(5):
        first = await transport.receive()
        end = await transport.receive()
        reply = await client_reader.readline()
    await transport.close()
    client_writer.close()
    await client_writer.wait_closed()
    assert first == {"jsonrpc": "2.0", "method": "ping"}
    assert end is None
    assert json.loads(reply) == invalid_request("not a JSON object")


async def test_an_answer_refused_for_its_depth_fails_its_request_once() -> None:
    """A deep answer to the agent's own request goes on as an error for its id, and that
    request is no longer waited for: the end of input fails nothing a second time."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    _, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer)
    await transport.send({"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file"})
    deep = {"jsonrpc": "2.0", "id": 5, "result": json.loads("[" * 80 + "]" * 80)}
    client_writer.write(json.dumps(deep).encode() + b"\n")
    client_writer.write_eof()
    with anyio.fail_after(5):
        failed = await transport.receive()
        end = await transport.receive()
    await transport.close()
    client_writer.close()
    await client_writer.wait_closed()
    assert failed is not None
    assert (failed["id"], failed["error"]["code"]) == (5, -32600)
    assert end is None


# -- bounded lines ----------------------------------------------------------------------------

LIMIT = 1000


def line_of_size(size: int, request_id: int = 7) -> str:
    """An ``initialize`` request exactly ``size`` bytes long (its newline not counted)."""
    template = {"jsonrpc": "2.0", "id": request_id, "method": "initialize"}

    def line_with(name: str) -> str:
        params = {"protocolVersion": 1, "clientInfo": {"name": name, "version": "1"}}
        return json.dumps({**template, "params": params})

    line = line_with("n" * (size - len(line_with(""))))
    assert len(line) == size
    return line


def too_long(size: int, request_id: object = None) -> dict[str, Any]:
    return invalid_request(f"the line is {size} bytes, over the {LIMIT}-byte limit", request_id)


async def test_a_line_at_the_limit_is_read_and_one_over_is_refused_by_its_id() -> None:
    """``max_line_bytes`` is inclusive; the refusal names the request's id when it shows."""
    async with guarded(TrivialAgent(), limit=256, max_line_bytes=LIMIT) as client:
        await client.send_line(line_of_size(LIMIT, request_id=7))
        assert (await client.receive())["result"]["protocolVersion"] == PROTOCOL_VERSION
        await client.send_line(line_of_size(LIMIT + 1, request_id=8))
        assert await client.receive() == too_long(LIMIT + 1, 8)
        await client.assert_serving()


@pytest.mark.parametrize(
    "head",
    ["x" * 50, '{"jsonrpc":"2.0","params":{"a":"', '{"jsonrpc":"2.0","method":"m","params":["'],
    ids=["not-json", "no-id-before-params", "notification"],
)
async def test_an_overlong_line_without_a_readable_id_is_refused_with_id_null(head: str) -> None:
    """When the first bytes show no id, the refusal has ``id: null``; nothing is executed."""
    agent = TrivialAgent()
    async with guarded(agent, limit=256, max_line_bytes=LIMIT) as client:
        await client.send_line(head + "y" * 5000)
        assert await client.receive() == too_long(len(head) + 5000)
        await client.assert_serving()
    assert agent.calls == []


async def test_an_overlong_response_fails_the_agents_own_request() -> None:
    """A client answer over the limit fails the request that waited for it, cleanly."""
    async with guarded(TrivialAgent(), limit=256, max_line_bytes=LIMIT) as client:
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "_read", "params": {}})
        read = await client.receive()
        answer = {"jsonrpc": "2.0", "id": read["id"], "result": {"content": "z" * 5000}}
        await client.send(answer)
        failed = await client.receive()
        assert failed["id"] == 1
        assert failed["error"]["code"] == -32600
        assert "over the 1000-byte limit" in json.dumps(failed["error"])
        await client.assert_serving()


# -- the end of input -------------------------------------------------------------------------


async def test_run_agent_answers_a_running_request_before_it_ends() -> None:
    """``run_agent`` returns at the end of input only after the answers owed have gone out."""
    agent = TrivialAgent()
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    serving = asyncio.ensure_future(
        run_agent(cast(Any, agent), GuardedTransport(agent_reader, agent_writer))
    )
    client = RawClient(client_reader, client_writer)
    try:
        await client.send({"jsonrpc": "2.0", "id": 5, "method": "_wait", "params": {}})
        client_writer.write_eof()
        with anyio.fail_after(5):
            await agent.waiting.wait()
        agent.release.set()
        assert await client.receive() == {"jsonrpc": "2.0", "id": 5, "result": {"released": True}}
        with anyio.fail_after(5):
            await serving
    finally:
        serving.cancel()
        client_writer.close()
        with suppress(ConnectionError):
            await client_writer.wait_closed()


async def test_a_request_to_the_client_fails_once_its_input_has_ended() -> None:
    """The client can no longer answer ``fs/read_text_file``: the waiting request is answered."""
    async with guarded(TrivialAgent()) as client:
        await client.send({"jsonrpc": "2.0", "id": 6, "method": "_read", "params": {}})
        assert (await client.receive())["method"] == "fs/read_text_file"
        client.writer.write_eof()
        failed = await client.receive()
    assert failed["id"] == 6
    assert "the client's input ended before it answered" in json.dumps(failed["error"])


async def test_waiting_at_end_of_input_gives_up_after_drain_seconds() -> None:
    """A handler that never answers cannot keep the agent alive: the end comes anyway."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    _, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer, drain_seconds=0.05)
    client_writer.write(b'{"jsonrpc":"2.0","id":1,"method":"_never","params":{}}\n')
    client_writer.write_eof()
    with capture_logs() as logs, anyio.fail_after(5):
        assert (await transport.receive() or {}).get("id") == 1
        assert await transport.receive() is None
    await transport.close()
    client_writer.close()
    await client_writer.wait_closed()
    [warning] = [entry for entry in logs if entry["event"] == "acp_requests_unanswered"]
    assert warning["ids"] == [1]


# -- lenience and range -----------------------------------------------------------------------


async def test_session_cancel_sent_as_a_request_reaches_cancel_and_is_answered() -> None:
    """``session/cancel`` with an id is answered with ``{}`` and handled as the notification."""
    agent = TrivialAgent()
    async with guarded(agent) as client:
        reply = await client.request("session/cancel", {"sessionId": "s1"})
        await client.assert_serving()
    assert reply == {"jsonrpc": "2.0", "id": client.next_id - 1, "result": {}}
    assert agent.calls == [("cancel", {"session_id": "s1"})]


@pytest.mark.parametrize(
    "params",
    [
        '{"protocolVersion": 1e400}',
        '{"protocolVersion": 18446744073709551616}',
        '{"protocolVersion": -9223372036854775809}',
        '{"protocolVersion": 1, "clientInfo": {"name": "x", "version": "1", "_meta": [[-1e999]]}}',
    ],
    ids=["infinite", "just-over-64-bits", "just-under-int64", "nested"],
)
async def test_a_number_out_of_range_is_invalid_params(params: str) -> None:
    """Numbers beyond 64-bit integers or finite doubles are -32602, wherever they are."""
    async with guarded(TrivialAgent()) as client:
        await client.send_line(
            f'{{"jsonrpc":"2.0","id":4,"method":"initialize","params":{params}}}'
        )
        reply = await client.receive()
        await client.assert_serving()
    assert reply["id"] == 4
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["details"].endswith(" is out of range")


@pytest.mark.parametrize(
    "number", ["18446744073709551615", "-9223372036854775808", "1.7976931348623157e308"]
)
async def test_numbers_at_the_edge_of_the_range_reach_the_agent(number: str) -> None:
    """The largest 64-bit values and the largest double are passed on untouched."""
    agent = TrivialAgent()
    async with guarded(agent) as client:
        await client.send_line(
            f'{{"jsonrpc":"2.0","id":4,"method":"_x","params":{{"n":{number}}}}}'
        )
        assert (await client.receive())["result"] == {}
    assert agent.calls == [("x", {"n": json.loads(number)})]


async def test_an_error_response_that_cannot_be_serialised_keeps_its_code() -> None:
    """Invalid params whose details hold an object is still -32602, never -32603."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    transport = GuardedTransport(agent_reader, agent_writer)
    error = {"code": -32602, "message": "Invalid params", "data": {"ctx": ValueError("x")}}
    await transport.send({"jsonrpc": "2.0", "id": 3, "error": error})
    await transport.close()
    with anyio.fail_after(5):
        line = await client_reader.readline()
    client_writer.close()
    await client_writer.wait_closed()
    reply = json.loads(line)
    assert (reply["id"], reply["error"]["code"], reply["error"]["message"]) == (
        3,
        -32602,
        "Invalid params",
    )


# -- a client that stops reading --------------------------------------------------------------


async def test_a_client_that_stops_reading_ends_the_connection_quietly() -> None:
    """EPIPE: later frames are dropped without raising, and ``receive`` reports the end."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    transport = GuardedTransport(agent_reader, agent_writer)
    client_socket.close()
    with capture_logs() as logs, anyio.fail_after(5):
        receiving = asyncio.ensure_future(transport.receive())
        for n in range(5):
            await transport.send({"jsonrpc": "2.0", "id": n, "result": {}})
        assert await receiving is None
    await transport.close()
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == [
        "acp_output_closed"
    ]


def nested_line(prefix: str, depth: int, suffix: str) -> str:
    """A line whose value between ``prefix`` and ``suffix`` nests ``depth`` arrays deep."""
    return prefix + "[" * depth + "]" * depth + suffix


async def test_a_request_nested_past_the_limit_is_invalid_by_its_id() -> None:
    """65 levels is refused with -32600 and the request's id; the transport serves on."""
    async with guarded(TrivialAgent()) as client:
        # The frame is level 1 and params level 2: 64 arrays reach level 65.
        await client.send_line(
            nested_line('{"jsonrpc":"2.0","id":9,"method":"x","params":', 64, "}")
        )
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {
                "code": -32600,
                "message": "Invalid request",
                "data": {"details": "nested more than 64 levels deep"},
            },
        }
        await client.assert_serving()


async def test_a_notification_nested_past_the_limit_is_dropped_with_a_warning() -> None:
    """No reply for a deep notification, one warning, and the next request is answered."""
    with capture_logs() as logs:
        async with guarded(TrivialAgent()) as client:
            await client.send_line(
                nested_line('{"jsonrpc":"2.0","method":"_x","params":', 300, "}")
            )
            await client.assert_serving()
    refused = [entry for entry in logs if entry["event"] == "acp_line_rejected"]
    assert [entry["reason"] for entry in refused] == ["nested more than 64 levels deep"]


async def test_a_frame_at_the_limit_is_passed_on() -> None:
    """64 levels is within the limit: the request reaches the agent (method not found)."""
    async with guarded(TrivialAgent()) as client:
        await client.send_line(
            nested_line('{"jsonrpc":"2.0","id":5,"method":"x","params":', 63, "}")
        )
        reply = await client.receive()
        assert reply["id"] == 5
        assert reply["error"]["code"] == -32601


@pytest.mark.parametrize("name", ["stdin", "stdout"])
async def test_open_stdio_with_a_closed_stream_is_ebadf(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python started with fd 0 or 1 closed has ``sys.stdin`` or ``sys.stdout`` set to None."""
    monkeypatch.setattr(sys, name, None)
    with pytest.raises(OSError, match=f"{name} is closed") as raised:
        await open_stdio()
    assert raised.value.errno == errno.EBADF
