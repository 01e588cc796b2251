"""The agent under test, and a raw JSON-lines connection to it.

The agent command is ``ACP_CONFORMANCE_AGENT`` (split like a shell would) when set, else this
interpreter running ``-m demo_agent`` with the example skills and a private state directory.
Tests that depend on the demo agent's own options, skills or records are marked ``demo_agent``
and are skipped for any other agent.

`open_raw` serves the demo agent in this process, over a socket pair, through the same
transport it serves stdio with (``tests/demo_in_process.py``); any other agent runs as a
process. `open_process` always starts a process, for what only a process shows: stdout purity,
closed pipes, signals and the exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demo_agent import EXAMPLE_SKILLS

from ..demo_in_process import environment, serve_demo_agent
from ..raw_agent import lone_surrogates_in
from .fake_model import FakeModel
from .wire import AGENT, CLIENT, FrameLog, Schema

__all__ = [
    "AGENT_ENV",
    "EXAMPLE_SKILLS",
    "FAKE_KEY",
    "AgentSpec",
    "RawAgent",
    "agent_spec",
    "close_transport",
    "open_process",
    "open_raw",
]

AGENT_ENV = "ACP_CONFORMANCE_AGENT"
FAKE_KEY_VARIABLE = "ACP_CONFORMANCE_FAKE_KEY"
FAKE_KEY = "sk-conformance-fake-key"
# Generous on purpose: every wait ends as soon as its frame arrives.
WAIT_SECONDS = 20.0
# The test's end of the connection reads whole lines of up to this size.
LINE_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """How to start the agent under test, and where its sessions work."""

    argv: tuple[str, ...]  # the command
    env: Mapping[str, str]  # the child's complete environment (the in-process agent's too)
    # An absolute, empty project directory for sessions. The agent itself starts in the
    # directory the tests run from, so a relative command works.
    cwd: Path
    state_dir: Path | None  # the demo agent's --state-dir; None for another agent
    stderr_path: Path  # the child's stderr goes here (never to a pipe nobody reads)
    is_demo: bool = True
    options: tuple[str, ...] = ()  # the demo agent's own options (in ``argv`` after the module)

    def command(self, *demo_options: str) -> list[str]:
        """The command line; ``demo_options`` are appended for the demo agent only."""
        return [*self.argv, *(demo_options if self.is_demo else ())]

    def with_fake_model(self, model: FakeModel) -> list[str]:
        """The demo agent's command line using ``model`` (the ``openai`` model over HTTP)."""
        return self.command(*fake_model_options(model))

    def record_path(self, session_id: str) -> Path:
        """The demo agent's JSON Lines record of a session."""
        assert self.state_dir is not None, "only the demo agent keeps records"
        return self.state_dir / "sessions" / f"{session_id}.jsonl"

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """The conversation messages in the session's record, oldest first."""
        lines = self.record_path(session_id).read_text(encoding="utf-8").splitlines()
        entries = [json.loads(line) for line in lines]
        return [entry["message"] for entry in entries if entry.get("type") == "history"]

    def stderr_tail(self, limit: int = 3000) -> str:
        """The end of what the agent wrote to stderr (for failure messages)."""
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")[-limit:]
        except OSError:
            return ""


def fake_model_options(model: FakeModel) -> list[str]:
    """The demo agent's options for ``model`` (its ``openai`` model over HTTP)."""
    return [
        "--model",
        "openai",
        "--base-url",
        model.base_url,
        "--model-name",
        "fake-model",
        "--api-key-env",
        FAKE_KEY_VARIABLE,
    ]


def agent_spec(tmp: Path) -> AgentSpec:
    """The agent under test, with a private home, state directory and project below ``tmp``."""
    project = tmp / "project"
    home = tmp / "home"
    project.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    foreign = os.environ.get(AGENT_ENV, "").strip()
    if foreign:
        # Another agent gets the test's environment as it is.
        return AgentSpec(
            argv=tuple(shlex.split(foreign)),
            env=env,
            cwd=project,
            state_dir=None,
            stderr_path=tmp / "agent.stderr",
            is_demo=False,
        )
    state = tmp / "state"
    # The demo agent reads ACP_SKILLS_* settings: none of the developer's may leak in.
    env = {k: v for k, v in env.items() if not k.startswith("ACP_SKILLS_")}
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        DSH_HOME=str(home / ".dsh"),
        DSH_AGENTS_HOME=str(home / ".agents"),
        PYTHONUNBUFFERED="1",
        # Trust is tested on its own (test_trust_text.py); here every project is trusted.
        ACP_SKILLS_TRUST="all",
    )
    env[FAKE_KEY_VARIABLE] = FAKE_KEY
    options = ("--state-dir", str(state), "--skills-dir", str(EXAMPLE_SKILLS))
    return AgentSpec(
        argv=(sys.executable, "-m", "demo_agent", *options),
        env=env,
        cwd=project,
        state_dir=state,
        stderr_path=tmp / "agent.stderr",
        options=options,
    )


class RawAgent:
    """The agent spoken to in raw bytes; every line it writes is recorded.

    Made by `open_raw` or `open_process`; ``proc`` is the child process, or ``None`` when the
    agent is served in this process.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        log: FrameLog,
        *,
        proc: asyncio.subprocess.Process | None = None,
        served: asyncio.Future[None] | None = None,
    ) -> None:
        self.proc = proc
        self.log = log
        self._reader, self._writer, self._served = reader, writer, served
        self._next_id = 1000
        self._inbox: list[dict[str, Any]] = []

    async def write(self, data: bytes) -> None:
        """Write raw bytes, in one write."""
        try:
            self._writer.write(data)
            await self._writer.drain()
        except ConnectionError:
            self._raise_what_the_agent_raised()
            raise

    def _raise_what_the_agent_raised(self) -> None:
        # An agent served in process that has ended by raising: that is the test's failure.
        if self._served is not None and self._served.done() and not self._served.cancelled():
            self._served.result()

    async def send(self, *messages: object) -> None:
        """Write messages as JSON lines, all in one write; record them as the client's."""
        for message in messages:
            self.log.add(CLIENT, message)
        await self.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def new_id(self) -> int:
        """A request id not used before on this connection."""
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: object = None) -> dict[str, Any]:
        """A request message with a fresh id (``params`` left out when ``None``)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id(), "method": method}
        if params is not None:
            message["params"] = params
        return message

    async def read(self) -> dict[str, Any]:
        """The next line from the agent, a JSON object free of lone surrogates (a strict
        reader such as Rust's serde_json rejects a frame holding one), within `WAIT_SECONDS`."""
        async with asyncio.timeout(WAIT_SECONDS):
            line = await self._reader.readline()
        if not line:
            self._raise_what_the_agent_raised()
        assert line, f"the agent closed its output (exit code {self._exit_code()})"
        try:
            message = json.loads(line)
        except ValueError as error:
            raise AssertionError(f"output line is not JSON: {line[:300]!r}") from error
        self.log.add(AGENT, message)
        assert isinstance(message, dict), f"output line is not a JSON object: {line[:300]!r}"
        bad = lone_surrogates_in(message)
        assert not bad, f"lone surrogates in a frame: {bad[:3]!r}"
        return message

    def _exit_code(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    async def next_response(self) -> dict[str, Any]:
        """The next response (or error) the agent writes; notifications are kept in `inbox`."""
        while True:
            message = await self.read()
            if "method" not in message:
                return message
            self._inbox.append(message)

    async def response(self, request_id: object) -> dict[str, Any]:
        """Read until the response to ``request_id``; other messages are kept in `inbox`."""
        for index, message in enumerate(self._inbox):
            if "method" not in message and message.get("id") == request_id:
                return self._inbox.pop(index)
        async with asyncio.timeout(WAIT_SECONDS):
            while True:
                message = await self.read()
                if "method" not in message and message.get("id") == request_id:
                    return message
                self._inbox.append(message)

    async def call(self, method: str, params: object = None) -> dict[str, Any]:
        """Send a request and return its response."""
        message = self.request(method, params)
        await self.send(message)
        return await self.response(message["id"])

    def take_inbox(self) -> list[dict[str, Any]]:
        """The messages read while waiting for responses, and forget them."""
        taken, self._inbox = self._inbox, []
        return taken

    async def initialize(self) -> dict[str, Any]:
        """``initialize`` with file reading offered; returns the result."""
        reply = await self.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                "clientInfo": {"name": "acp-conformance", "version": "1"},
            },
        )
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def new_session(self, cwd: Path) -> str:
        """``session/new`` in ``cwd``; returns the session id."""
        reply = await self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        assert "result" in reply, reply
        session_id = reply["result"]["sessionId"]
        assert isinstance(session_id, str)
        return session_id

    async def assert_serving(self, cwd: Path) -> None:
        """A follow-up request is still answered correctly (a new session is opened)."""
        session_id = await self.new_session(cwd)
        assert session_id

    async def end_input(self) -> None:
        """End the agent's input (its stdin closes; in process, the socket's sending half)."""
        with contextlib.suppress(ConnectionError):
            if self.proc is None:
                self._writer.write_eof()
            else:
                self._writer.close()
                await self._writer.wait_closed()

    async def close(self, grace: float = 10.0) -> int:
        """End the agent's input and wait for it to finish; its exit status (0 in process)."""
        await self.end_input()
        return await self.wait(grace)

    async def wait(self, grace: float = 10.0) -> int:
        """Wait for the agent to finish, reading the rest of its output into the log.

        A process is killed after ``grace`` seconds; an agent served in process that raised
        raises here.
        """
        try:
            async with asyncio.timeout(grace):
                await self._drain()
                if self.proc is not None:
                    return await self.proc.wait()
                assert self._served is not None
                await self._served
                return 0
        except TimeoutError:
            self.stop()
            if self.proc is not None:
                await self.proc.wait()
            raise

    def stop(self) -> None:
        """Kill the process, or cancel the agent served in process."""
        if self.proc is not None:
            if self.proc.returncode is None:
                self.proc.kill()
        elif self._served is not None:
            self._served.cancel()

    async def _drain(self) -> None:
        for line in (await self._reader.read()).splitlines():
            if line.strip():
                try:
                    self.log.add(AGENT, json.loads(line))
                except ValueError:
                    self.log.add(AGENT, line.decode("utf-8", "replace"))


@contextlib.asynccontextmanager
async def open_raw(
    spec: AgentSpec, schema: Schema, options: Sequence[str] = ()
) -> AsyncIterator[RawAgent]:
    """The agent under test, spoken to in raw lines: the demo agent in this process with
    ``options`` added, any other agent as a process. At the end of the block the agent must
    finish cleanly at the end of its input, and every frame it wrote must be valid."""
    if not spec.is_demo:
        async with open_process(spec, schema) as agent:
            yield agent
        return
    ours, theirs = socket.socketpair()
    with environment(spec.env), ours, theirs:
        served = asyncio.ensure_future(serve_demo_agent([*spec.options, *options], theirs))
        reader, writer = await asyncio.open_connection(sock=ours, limit=LINE_LIMIT)
        agent = RawAgent(reader, writer, FrameLog(schema, check_client=False), served=served)
        try:
            yield agent
        except BaseException:
            agent.stop()
            with contextlib.suppress(BaseException):
                await served
            writer.close()
            raise
        if not served.done():
            await agent.close()
        writer.close()
        await served  # what the agent raised, if it did, fails the test
    agent.log.assert_valid()


@contextlib.asynccontextmanager
async def open_process(
    spec: AgentSpec, schema: Schema, argv: Sequence[str] | None = None
) -> AsyncIterator[RawAgent]:
    """Start the agent as a process (``argv``, else the spec's command); on exit it must exit 0
    at the end of its input, and every frame it wrote must be valid."""
    # The client's own frames are not checked: the tests send malformed ones on purpose.
    command = list(argv) if argv is not None else spec.command()
    with spec.stderr_path.open("ab") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=dict(spec.env),
            limit=LINE_LIMIT,
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    agent = RawAgent(proc.stdout, proc.stdin, FrameLog(schema, check_client=False), proc=proc)
    try:
        yield agent
    except BaseException:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        close_transport(proc)
        raise
    try:
        if proc.returncode is None:
            code = await agent.close()
            assert code == 0, f"the agent exited with {code} at the end of its input"
    finally:
        close_transport(proc)
    agent.log.assert_valid()


def close_transport(proc: asyncio.subprocess.Process) -> None:
    """Close a finished child's pipe transports now, not in the garbage collector."""
    transport: Any = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()
