"""The demo agent spoken to in raw JSON lines, synchronously, every frame checked.

Raw lines let a test send what the SDK's client would refuse to build: a lone surrogate is
valid JSON (``"\\ud800"``) but not Unicode text. A synchronous client lets a Hypothesis test
drive one agent through many examples. Every line the agent writes must be a well-formed
frame (`frame_problems`): strict UTF-8, one JSON-RPC 2.0 object, and no lone surrogate in any
string, since a strict reader (Rust's serde_json, in Zed) rejects the whole frame.

The agent is a subprocess (`RawStdioAgent`), or is served in a thread of this process through
the transport it serves stdio with (`RawStdioAgent.in_process`, ``tests/demo_in_process.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from tests.demo_in_process import environment, serve_demo_agent

__all__ = [
    "RawStdioAgent",
    "frame_problems",
    "initialize_params",
    "lone_surrogates_in",
]

WAIT_SECONDS = 30.0

_SURROGATE = re.compile("[\ud800-\udfff]")

ReadText = Callable[[str], str]
"""Answers the agent's ``fs/read_text_file`` request for an absolute path."""


def lone_surrogates_in(value: object) -> list[str]:
    """The strings (keys included) of a decoded JSON value that hold a lone surrogate."""
    found: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                found.append(item)
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return found


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def frame_problems(line: bytes) -> list[str]:
    """What is wrong with one line the agent wrote (nothing, for a well-formed frame)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        return [f"not UTF-8: {error}"]
    try:
        message = json.loads(text, parse_constant=_no_constants)
    except ValueError as error:
        return [f"not JSON: {error}"]
    if not isinstance(message, dict):
        return [f"not a JSON object: {type(message).__name__}"]
    problems = []
    if message.get("jsonrpc") != "2.0":
        problems.append('no "jsonrpc": "2.0"')
    bad = lone_surrogates_in(message)
    if bad:
        problems.append(f"lone surrogates in {bad[:3]!r}")
    return problems


class _ServedInProcess:
    """The demo agent served on one end of a socket pair by a thread with its own event loop;
    ``os.environ`` is the agent's environment until `finish`."""

    def __init__(self, options: Sequence[str], env: Mapping[str, str]) -> None:
        self._environment = environment(env)
        self._environment.__enter__()
        self.sock, theirs = socket.socketpair()
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._serve, args=(list(options), theirs), daemon=True
        )
        self._thread.start()

    def _serve(self, options: list[str], sock: socket.socket) -> None:
        try:
            asyncio.run(serve_demo_agent(options, sock))
        except BaseException as error:  # raised again in the test's thread, by `finish`
            self.error = error
        finally:
            sock.close()

    def finish(self) -> int:
        """End the agent's input and wait for it to finish: 0, or what it raised is raised."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        try:
            self._thread.join(WAIT_SECONDS)
        finally:
            self._environment.__exit__(None, None, None)
        if self._thread.is_alive():
            raise AssertionError(f"the agent did not finish within {WAIT_SECONDS} s")
        if self.error is not None:
            raise self.error
        return 0


class RawStdioAgent:
    """``argv`` as a child process, spoken to in JSON lines on its stdin and stdout.

    Use it as a context manager: leaving closes the agent's stdin and waits for it to exit.
    `in_process` serves the demo agent in this process instead.

    Args:
        argv: the command.
        env: the child's complete environment.
        stderr: where the child's stderr goes (a file: never a pipe nobody reads).
        read_text: answers ``fs/read_text_file``; without it, such requests get an error.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stderr: IO[Any],
        read_text: ReadText | None = None,
    ) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=dict(env)
        )
        self._served: _ServedInProcess | None = None
        assert self._proc.stdout is not None
        self._start(self._proc.stdout, read_text)

    @classmethod
    def in_process(
        cls,
        options: Sequence[str],
        *,
        env: Mapping[str, str],
        read_text: ReadText | None = None,
    ) -> RawStdioAgent:
        """The demo agent with ``options`` (``acp-skills-demo OPTIONS``), served in a thread of
        this process with ``env`` as its whole environment, spoken to as `RawStdioAgent` is."""
        agent = cls.__new__(cls)
        agent._proc = None
        agent._served = _ServedInProcess(options, env)
        agent._start(agent._served.sock.makefile("rb"), read_text)
        return agent

    def _start(self, lines: IO[bytes], read_text: ReadText | None) -> None:
        self.read_text = read_text
        self.frames: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        self._lines = lines
        self._reader = threading.Thread(target=self._read_frames, daemon=True)
        self._reader.start()

    def __enter__(self) -> RawStdioAgent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> int:
        """Close the agent's stdin, wait for it to exit, and return its exit status (0 for an
        agent served in process, which raises here what it raised)."""
        try:
            if self._served is not None:
                return self._served.finish()
            assert self._proc is not None
            assert self._proc.stdin is not None
            if not self._proc.stdin.closed:
                with contextlib.suppress(BrokenPipeError):
                    self._proc.stdin.close()
            try:
                return self._proc.wait(timeout=WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                return self._proc.wait()
        finally:
            self._reader.join(timeout=WAIT_SECONDS)
            self._lines.close()
            if self._served is not None:
                self._served.sock.close()

    def _status(self) -> str:
        if self._proc is not None:
            return f"exit code {self._proc.poll()}"
        assert self._served is not None
        return f"served in process, raised {self._served.error!r}"

    def _read_frames(self) -> None:
        for line in self._lines:
            problems = frame_problems(line)
            if problems:
                self.problems.append(f"{line[:300]!r}: {'; '.join(problems)}")
                continue
            self._inbox.put(json.loads(line))
        self._inbox.put(None)

    def send(self, message: Mapping[str, Any]) -> None:
        """Write one message as a JSON line (non-ASCII, lone surrogates included, as escapes)."""
        data = json.dumps(message).encode("ascii") + b"\n"
        if self._served is not None:
            self._served.sock.sendall(data)
            return
        assert self._proc is not None
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and return the agent's response to it (a result or an error).

        Requests the agent makes meanwhile are answered; every frame is kept in `frames`.

        Raises:
            AssertionError: the agent wrote a malformed frame, stopped, or took too long.
        """
        return self.response_to(self.start_request(method, params), method)

    def start_request(self, method: str, params: Mapping[str, Any]) -> int:
        """Send a request without waiting; return its id, for `response_to`."""
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def response_to(self, request_id: int, method: str = "a request") -> dict[str, Any]:
        """The response to ``request_id``, kept in `frames` or awaited (as `request` does)."""
        for frame in self.frames:
            if frame.get("id") == request_id and "method" not in frame:
                return frame
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                message = self._inbox.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise AssertionError(f"no answer to {method} within {WAIT_SECONDS} s") from None
            assert not self.problems, f"malformed frames: {self.problems}"
            assert message is not None, f"the agent stopped ({self._status()})"
            self.frames.append(message)
            if "method" in message and "id" in message:
                self.send(self._answer(message))
            elif message.get("id") == request_id and "method" not in message:
                return message

    def call(self, method: str, params: Mapping[str, Any]) -> Any:
        """`request`, asserting the response is a result (not a JSON-RPC error); return it."""
        response = self.request(method, params)
        assert "error" not in response, f"{method} failed: {response['error']}"
        return response["result"]

    def _answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        params = request.get("params") or {}
        if request["method"] == "fs/read_text_file" and self.read_text is not None:
            content = self.read_text(str(params.get("path")))
            return {"jsonrpc": "2.0", "id": request["id"], "result": {"content": content}}
        return {
            "jsonrpc": "2.0",
            "id": request["id"],
            "error": {"code": -32601, "message": f"method not found: {request['method']}"},
        }

    def updates(self, session_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The ``session/update`` payloads for ``session_id`` among `frames` from ``since`` on."""
        return [
            frame["params"]["update"]
            for frame in self.frames[since:]
            if frame.get("method") == "session/update"
            and frame.get("params", {}).get("sessionId") == session_id
        ]

    def agent_text(self, session_id: str, since: int = 0) -> str:
        """The session's ``agent_message_chunk`` texts from frame ``since`` on, joined."""
        return "".join(
            update["content"]["text"]
            for update in self.updates(session_id, since)
            if update.get("sessionUpdate") == "agent_message_chunk"
        )


def initialize_params(*, reads_files: bool) -> dict[str, Any]:
    """``initialize`` params for protocol version 1, with or without ``fs.readTextFile``."""
    return {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": reads_files, "writeTextFile": False}},
        "clientInfo": {"name": "raw-tests", "version": "0"},
    }
