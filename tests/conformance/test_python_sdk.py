"""The agent driven by the official Python SDK client (``agent-client-protocol``) over stdio."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import pytest
from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.core import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
)
from acp.transports import spawn_stdio_transport

from .fake_model import FakeModel
from .harness import EXAMPLE_SKILLS, WAIT_SECONDS, AgentSpec, close_transport
from .wire import AGENT, CLIENT, FrameLog, Schema

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


class ScenarioClient:
    """A plain ACP client: records updates and every frame; file reads get a marked copy."""

    def __init__(self, schema: Schema) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.reads: list[str] = []
        self.log = FrameLog(schema)
        self._changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Record an update."""
        self.updates.append((session_id, update))
        self._wake()

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        """Answer with a marked copy, so the test can tell the client's text from the disk's."""
        self.reads.append(path)
        return ReadTextFileResponse(content=f"client copy of {path}")

    async def write_text_file(self, **kwargs: Any) -> Any:
        """Not offered."""
        raise RequestError.method_not_found("fs/write_text_file")

    async def request_permission(self, **kwargs: Any) -> RequestPermissionResponse:
        """Decline."""
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    def observe(self, event: StreamEvent) -> None:
        """Record a frame (a connection observer)."""
        sender = CLIENT if event.direction == StreamDirection.OUTGOING else AGENT
        self.log.add(sender, event.message)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, re-checked after every update and frame."""
        async with asyncio.timeout(WAIT_SECONDS):
            while not predicate():
                await self._changed.wait()

    def since(self, session_id: str, mark: int) -> list[Any]:
        """The session's updates from position ``mark`` of `updates` on."""
        return [u for sid, u in self.updates[mark:] if sid == session_id]


def kinds(updates: list[Any]) -> list[str]:
    """The ``sessionUpdate`` discriminators, in order."""
    return [u.session_update for u in updates]


def agent_text(updates: list[Any]) -> str:
    """The agent message chunks joined."""
    return "".join(u.content.text for u in updates if u.session_update == "agent_message_chunk")


def tool_pair(updates: list[Any], title: str) -> tuple[Any, Any]:
    """The ``tool_call`` with ``title`` and the ``tool_call_update`` closing it."""
    start = next(u for u in updates if u.session_update == "tool_call" and u.title == title)
    end = next(
        u
        for u in updates
        if u.session_update == "tool_call_update" and u.tool_call_id == start.tool_call_id
    )
    return start, end


class CorkableTransport:
    """The SDK's message-level transport over the child's pipes, with a cork."""

    # While corked, frames are held back; `uncork` writes them in one write, so a prompt and
    # the cancel right behind it reach the agent together. A line from the agent that is not a
    # JSON object goes to the frame log (where it fails the schema check) and is skipped.

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log: FrameLog
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._log = log
        self._held: list[bytes] | None = None

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame, or hold it while corked."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        if self._held is not None:
            self._held.append(data)
            return
        self._writer.write(data)
        await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next JSON object from the agent; ``None`` at the end."""
        while True:
            line = await self._reader.readline()
            if not line:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                message = line.decode("utf-8", "replace")
            if isinstance(message, dict):
                return message
            self._log.add(AGENT, message)

    async def close(self) -> None:
        """Send nothing more (the SDK closes stdin on the way out)."""
        self.cork()

    def cork(self) -> None:
        """Hold frames back from now on."""
        if self._held is None:
            self._held = []

    async def uncork(self) -> None:
        """Write every held frame in one write."""
        held, self._held = self._held or [], None
        self._writer.write(b"".join(held))
        await self._writer.drain()


@dataclass(frozen=True, slots=True)
class Connected:
    """A running agent: the SDK connection, its transport and the ``initialize`` answer."""

    conn: ClientSideConnection
    transport: CorkableTransport
    init: InitializeResponse


@asynccontextmanager
async def connect(
    agent: AgentSpec, command: list[str], client: ScenarioClient, *, reads: bool = False
) -> AsyncIterator[Connected]:
    """Start the agent, connect the SDK client, initialize; at the end the agent must exit 0."""
    executable, *args = command
    proc: asyncio.subprocess.Process | None = None
    try:
        with agent.stderr_path.open("ab") as stderr:
            async with spawn_stdio_transport(
                executable,
                *args,
                env=dict(agent.env),
                stderr=stderr.fileno(),
                limit=64 * 1024 * 1024,
            ) as (reader, writer, proc):
                transport = CorkableTransport(reader, writer, client.log)
                conn = ClientSideConnection(
                    cast(Any, client), transport, observers=[client.observe]
                )
                try:
                    init = await conn.initialize(
                        protocol_version=1,
                        client_capabilities=ClientCapabilities(
                            fs=FileSystemCapabilities(read_text_file=reads, write_text_file=False)
                        ),
                        client_info=Implementation(name="acp-conformance-py", version="1"),
                    )
                    yield Connected(conn, transport, init)
                finally:
                    await conn.close()
    finally:
        if proc is not None:
            close_transport(proc)
    assert proc is not None
    assert proc.returncode == 0, f"exit code {proc.returncode}:\n{agent.stderr_tail()}"


async def test_core_scenario(agent: AgentSpec, schema: Schema) -> None:
    """initialize, session/new, a prompt, a racing cancel, session/load; every frame valid."""
    client = ScenarioClient(schema)
    async with connect(agent, agent.command(), client) as agent_conn:
        conn, init = agent_conn.conn, agent_conn.init
        assert init.protocol_version == 1
        session = await conn.new_session(cwd=str(agent.cwd), mcp_servers=[])
        first = await conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(type="text", text="hello")]
        )
        assert first.stop_reason in ("end_turn", "max_tokens", "max_turn_requests", "refusal")

        # The prompt and its cancel leave in one write.
        agent_conn.transport.cork()
        racing = asyncio.ensure_future(
            conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="hello again")],
            )
        )
        sent = len(client.log.frames)
        await client.wait_until(
            lambda: any(f.message.get("method") == "session/prompt" for f in _after(client, sent))
        )
        await conn.cancel(session_id=session.session_id)
        await agent_conn.transport.uncork()
        assert (await racing).stop_reason == "cancelled"

        if init.agent_capabilities is not None and init.agent_capabilities.load_session:
            await conn.load_session(
                cwd=str(agent.cwd), session_id=session.session_id, mcp_servers=[]
            )
    client.log.assert_valid()


def _after(client: ScenarioClient, index: int) -> list[Any]:
    return [f for f in client.log.frames[index:] if isinstance(f.message, dict)]


@pytest.mark.demo_agent
async def test_skills_scenario(agent: AgentSpec, schema: Schema, fake_model: FakeModel) -> None:
    """Skill load, slash command, cancel mid-request and session/load, via the Python SDK."""
    client = ScenarioClient(schema)
    cwd = str(agent.cwd)
    command = agent.with_fake_model(fake_model)
    async with connect(agent, command, client, reads=True) as agent_conn:
        conn, init = agent_conn.conn, agent_conn.init
        assert init.agent_capabilities is not None
        assert init.agent_capabilities.load_session
        meta = init.agent_capabilities.field_meta or {}
        assert "_skills/list" in meta["acp-skills"]["methods"]
        sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        await client.wait_until(lambda: "available_commands_update" in kinds(client.since(sid, 0)))
        commands = next(
            u for u in client.since(sid, 0) if u.session_update == "available_commands_update"
        )
        names = {c.name for c in commands.available_commands}
        assert {"code-review", "commit-message", "release-checklist"} <= names
        assert "python-style" not in names  # user-invocable: false

        # A skill the model loads with the `skill` tool.
        mark = len(client.updates)
        loaded = await conn.prompt(
            session_id=sid,
            prompt=[TextContentBlock(type="text", text="Please load skill code-review")],
        )
        assert loaded.stop_reason == "end_turn"
        start, end = tool_pair(client.since(sid, mark), "Load skill code-review")
        assert (start.kind, start.status, start.raw_input) == (
            "read",
            "in_progress",
            {"name": "code-review"},
        )
        assert end.status == "completed"
        assert '<skill_content name="code-review">' in end.content[0].content.text
        assert agent_text(client.since(sid, mark)).startswith("Done: read")
        catalog = fake_model.requests[0]["messages"]
        assert any("code-review" in str(m.get("content")) for m in catalog[1:-1]), catalog

        # A resource of the skill, read through the client's fs/read_text_file.
        mark = len(client.updates)
        resource = "Please load skill code-review file references/checklist.md"
        read = await conn.prompt(
            session_id=sid, prompt=[TextContentBlock(type="text", text=resource)]
        )
        assert read.stop_reason == "end_turn"
        checklist = str(EXAMPLE_SKILLS / "code-review" / "references" / "checklist.md")
        assert client.reads == [checklist]
        end = tool_pair(client.since(sid, mark), "Load skill code-review")[1]
        assert end.status == "completed"
        assert end.content[0].content.text == f"client copy of {checklist}"

        # A slash command: the skill is in the turn before the model runs.
        mark = len(client.updates)
        slash = await conn.prompt(
            session_id=sid,
            prompt=[TextContentBlock(type="text", text="/commit-message tidy up the parser")],
        )
        assert slash.stop_reason == "end_turn"
        assert tool_pair(client.since(sid, mark), "Load skill commit-message")[1].status == (
            "completed"
        )
        assert agent_text(client.since(sid, mark)) == "Following the commit-message skill."

        # A turn cancelled in the middle of its model request.
        mark = len(client.updates)
        slow = asyncio.ensure_future(
            conn.prompt(
                session_id=sid, prompt=[TextContentBlock(type="text", text="[slow] take your time")]
            )
        )
        await client.wait_until(lambda: "thinking" in agent_text(client.since(sid, mark)))
        await conn.cancel(session_id=sid)
        assert (await slow).stop_reason == "cancelled"
        await asyncio.wait_for(fake_model.slow_hung_up.wait(), WAIT_SECONDS)

        listed = await conn.ext_method("skills/list", {"sessionId": sid})
        assert [s["name"] for s in listed["skills"]] == sorted(s["name"] for s in listed["skills"])

        # session/load replays the completed turns, then the session goes on.
        mark = len(client.updates)
        await conn.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
        replay = client.since(sid, mark)
        users = [u.content.text for u in replay if u.session_update == "user_message_chunk"]
        assert users[0] == "Please load skill code-review"
        assert users[1] == resource
        assert users[2] == "/commit-message tidy up the parser"  # what the person typed
        assert tool_pair(replay, "Load skill code-review")[1].status == "completed"
        after = await conn.prompt(
            session_id=sid, prompt=[TextContentBlock(type="text", text="and now?")]
        )
        assert after.stop_reason == "end_turn"
    client.log.assert_valid()
    agent_methods = {m.get("method") for m in client.log.sent_by(AGENT)}
    assert {"session/update", "fs/read_text_file"} <= agent_methods
