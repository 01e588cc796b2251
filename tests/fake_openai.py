"""A real OpenAI-compatible Chat Completions server on 127.0.0.1, for the tests (stdlib only).

It serves ``POST /v1/chat/completions`` from a script: each request gets the next scripted
reply (or whatever a responder function decides), and everything the server received is kept
for assertions. Replies are server-sent events (``data: {chunk}`` lines, then ``data: [DONE]``),
an HTTP error with a JSON body, or a response that never comes. Handlers that hold a connection
open watch the socket, so the test can see the client close it (a cancelled stream), and the
server's ``close`` stops and joins every handler thread.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias

__all__ = [
    "Fail",
    "FakeOpenAI",
    "Hang",
    "Raw",
    "ReceivedRequest",
    "Reply",
    "Stream",
    "chunk",
    "openai_agent_args",
    "text_reply",
    "tool_call_reply",
]

# A held connection is given up after this long, whatever happens: no test waits that long.
_MAX_HOLD_SECONDS = 30.0
_POLL_SECONDS = 0.02


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's chat messages."""
        messages = self.body.get("messages")
        return list(messages) if isinstance(messages, list) else []


@dataclass(frozen=True, slots=True)
class Stream:
    """Stream ``chunks`` as server-sent events.

    Attributes:
        chunks: the ``chat.completion.chunk`` objects, in order.
        delay: seconds between chunks (the server notices a client that goes away meanwhile).
        done: end with ``data: [DONE]`` and close the response.
        hold: after the chunks, keep the response open until the client closes it.
    """

    chunks: Sequence[Mapping[str, Any]]
    delay: float = 0.0
    done: bool = True
    hold: bool = False


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer with an HTTP error status and a JSON body."""

    status: int
    body: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hang:
    """Never answer: hold the request until the client gives up."""


@dataclass(frozen=True, slots=True)
class Raw:
    """Answer 200 with ``body`` as it is (a hostile or broken endpoint).

    Attributes:
        body: the bytes sent after the headers.
        content_type: the ``Content-Type`` header.
        drip: after the body, send one more byte every ``drip`` seconds until the client
            closes the connection (0: end the response after the body).
    """

    body: bytes
    content_type: str = "text/event-stream"
    drip: float = 0.0


Reply: TypeAlias = Stream | Fail | Hang | Raw
Responder: TypeAlias = Callable[[ReceivedRequest, int], Reply]
"""Decides the reply from the request and its 0-based position among all requests."""


def openai_agent_args(base_url: str, *extra: str) -> list[str]:
    """The demo agent's arguments for the ``openai`` model at ``base_url``, key in ``TEST_KEY``."""
    return [
        "--model",
        "openai",
        "--base-url",
        base_url,
        "--model-name",
        "test",
        "--api-key-env",
        "TEST_KEY",
        *extra,
    ]


def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def text_reply(*pieces: str, finish: str = "stop", delay: float = 0.0) -> Stream:
    """Assistant text in ``pieces``, then a final chunk carrying ``finish``."""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    chunks.append(chunk({}, finish))
    return Stream(chunks, delay=delay)


def tool_call_reply(call_id: str, name: str, argument_pieces: Sequence[str]) -> Stream:
    """One tool call streamed in pieces: id and name first, then the arguments in parts."""
    chunks = [
        chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ],
            }
        )
    ]
    chunks += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in argument_pieces
    ]
    chunks.append(chunk({}, "tool_calls"))
    return Stream(chunks)


class _Server(ThreadingHTTPServer):
    # Handler threads are joined by server_close(), so none outlives the test.
    daemon_threads = False
    block_on_close = True

    def __init__(self, fake: FakeOpenAI) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            self.fake.errors.append(repr(error))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # HTTP/1.0: a response without a length ends when the connection closes, so a stream needs
    # no chunked encoding, and every request gets a connection of its own.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests assert on what was received instead."""

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw) if raw else {}
        request = ReceivedRequest(
            method="POST",
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body if isinstance(body, dict) else {},
        )
        reply = fake._accept(request)
        try:
            if isinstance(reply, Fail):
                self._fail(reply)
            elif isinstance(reply, Hang):
                self._hold()
            elif isinstance(reply, Raw):
                self._raw(reply)
            else:
                self._stream(reply)
        except ConnectionError:
            fake.client_closed.set()

    def _fail(self, reply: Fail) -> None:
        data = json.dumps(dict(reply.body)).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _raw(self, reply: Raw) -> None:
        self.send_response(200)
        self.send_header("Content-Type", reply.content_type)
        self.end_headers()
        self.wfile.write(reply.body)
        self.wfile.flush()
        if not reply.drip:
            return
        deadline = time.monotonic() + _MAX_HOLD_SECONDS
        fake = self.server.fake
        while not fake.stopping.is_set() and time.monotonic() < deadline:
            # An SSE comment, one byte at a time: every socket read succeeds.
            self.wfile.write(b":")
            self.wfile.flush()
            if self._client_gone(reply.drip):
                fake.client_closed.set()
                return

    def _stream(self, reply: Stream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()
        for item in reply.chunks:
            self.wfile.write(b"data: " + json.dumps(item).encode() + b"\n\n")
            self.wfile.flush()
            if reply.delay and self._client_gone(reply.delay):
                self.server.fake.client_closed.set()
                return
        if reply.hold:
            self._hold()
        elif reply.done:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    def _hold(self) -> None:
        deadline = time.monotonic() + _MAX_HOLD_SECONDS
        fake = self.server.fake
        while not fake.stopping.is_set() and time.monotonic() < deadline:
            if self._client_gone(_POLL_SECONDS):
                fake.client_closed.set()
                return

    def _client_gone(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; whether the client closed the connection meanwhile."""
        # The client sends nothing after its request, so the socket turns readable only when
        # the client closes it (recv then returns b"").
        readable, _, _ = select.select([self.connection], [], [], timeout)
        if not readable:
            return False
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        return peeked == b""


class FakeOpenAI:
    """The server. Use it as a context manager; ``base_url`` is what the client is given.

    Args:
        replies: the scripted replies, one per request in order, or a responder function.
    """

    def __init__(self, replies: Sequence[Reply] | Responder = ()) -> None:
        self.requests: list[ReceivedRequest] = []
        self.errors: list[str] = []
        self.client_closed = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._responder: Responder = _scripted(replies) if not callable(replies) else replies
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (still answered after the server stopped)."""
        assert self._base_url is not None, "the server was never started"
        return self._base_url

    def script(self, replies: Sequence[Reply] | Responder) -> None:
        """Replace what the following requests get."""
        with self._lock:
            self._responder = _scripted(replies) if not callable(replies) else replies

    def _accept(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self._responder(request, len(self.requests) - 1)

    def __enter__(self) -> FakeOpenAI:
        self._server = _Server(self)
        self._base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None


def _scripted(replies: Sequence[Reply]) -> Responder:
    script = list(replies)

    def respond(request: ReceivedRequest, index: int) -> Reply:
        if index < len(script):
            return script[index]
        return Fail(500, {"error": {"message": f"unscripted request #{index}"}})

    return respond
