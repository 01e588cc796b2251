"""docs/integration.md: its "whole integration" snippet runs, as written, over a real connection;
so does the block that lends the agent's own MCP sessions to the skills, against a FastMCP
server in this process."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from acp import PROTOCOL_VERSION
from acp.connection import StreamEvent
from acp.core import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    McpServerStdio,
    ReadTextFileResponse,
    TextContentBlock,
)
from mcp import ClientSession

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry, render_skill_content
from acp_skills.acp import AcpSkills, GuardedTransport
from acp_skills.mcp import McpServer
from tests.events import WAIT_SECONDS
from tests.mcp_http import SERVER, write_served_skill
from tests.mcp_memory import fastmcp_streams

pytestmark = pytest.mark.sdk

DOC = Path(__file__).resolve().parent.parent / "docs" / "integration.md"
HEADING = "## The whole integration"


def integration_snippet(heading: str = HEADING) -> str:
    """The first ```python block after ``heading`` ("The whole integration" by default)."""
    text = DOC.read_text(encoding="utf-8")
    _, found, after = text.partition(f"\n{heading}\n")
    assert found, f"{DOC} has no {heading!r} heading"
    match = re.search(r"^```python\n(.*?)^```$", after, re.DOTALL | re.MULTILINE)
    assert match is not None, f"no python block after {heading!r}"
    return match.group(1)


def load_snippet(*more: str) -> types.ModuleType:
    """The whole integration's block, then the blocks after the headings ``more``, run as one
    module (a later block builds on the earlier ones)."""
    module = types.ModuleType("integration_snippet")
    module.__file__ = str(DOC)
    for heading in (HEADING, *more):
        exec(compile(integration_snippet(heading), str(DOC), "exec"), module.__dict__)
    return module


class Client:
    """A client that can read files and remembers nothing: the wire is recorded instead."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Updates are asserted on the recorded frames."""

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        return ReadTextFileResponse(content="")


class Frames:
    """Frames the client received, in order, with a way to wait for one."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.received.append(event.message)
            self._changed.set()

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [
            message["params"]["update"]
            for message in self.received
            if message.get("method") == "session/update"
            and message["params"]["update"]["sessionUpdate"] == kind
        ]

    async def wait_for_update(self, kind: str) -> None:
        with anyio.fail_after(5):
            while not self.updates(kind):
                self._changed.clear()
                await self._changed.wait()


@asynccontextmanager
async def linked(
    serve_on: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]],
) -> AsyncIterator[tuple[ClientSideConnection, Frames]]:
    """``serve_on(reader, writer)`` on one end of a socketpair, a client on the other."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    frames = Frames()
    client_conn = ClientSideConnection(
        cast(Any, Client()), client_writer, client_reader, observers=[frames.observe]
    )
    try:
        # Leaving the task group waits for the agent, which returns at the end of its input.
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(serve_on, agent_reader, agent_writer)
                try:
                    yield client_conn, frames
                finally:
                    await client_conn.close()
                    client_writer.close()
                    with suppress(ConnectionError):
                        await client_writer.wait_closed()
    finally:
        agent_writer.close()  # the agent's end, if what served it left it open
        with suppress(ConnectionError):
            await agent_writer.wait_closed()


def serve(agent: Any) -> AbstractAsyncContextManager[tuple[ClientSideConnection, Frames]]:
    """``agent.skills.serve(agent, ...)`` on one end of a socketpair, a client on the other."""

    async def serve_on(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await agent.skills.serve(agent, GuardedTransport(reader, writer))

    return linked(serve_on)


def snippet_agent(registry: SkillRegistry) -> Any:
    """The snippet's agent, with the test's registry instead of the home directory's skills."""
    agent = load_snippet().SkilledAgent()
    agent.skills = AcpSkills(registry)
    return agent


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SkillRegistry]:
    skill = tmp_path / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy the app.\n---\nRun the deploy script.\n",
        encoding="utf-8",
    )
    registry = SkillRegistry()
    handle = registry.register_provider(
        LocalSkillProvider(
            custom_skill_dirs=[str(tmp_path / "skills")],
            dsh_home=str(tmp_path / "dsh"),
            agents_home=str(tmp_path / "agents"),
        )
    )
    yield registry
    handle.dispose()  # stops watching the skills directory


def test_the_snippet_is_one_self_contained_agent_class() -> None:
    """The block imports what it uses and defines `SkilledAgent` with its six handlers."""
    module = load_snippet()
    handlers = ("initialize", "new_session", "load_session", "prompt", "cancel", "ext_method")
    assert all(callable(getattr(module.SkilledAgent, name, None)) for name in handlers)


def test_the_snippet_touches_the_library_in_at_most_thirteen_lines() -> None:
    """Every line that uses `acp_skills` is marked ``# skills``, and there are at most 13
    (twelve, plus the import of the on-disk store that makes `loadSession` honest)."""
    lines = integration_snippet().splitlines()
    uses = [line for line in lines if re.search(r"acp_skills|AcpSkills|skills\.|\bturn\b", line)]
    marked = [line for line in lines if line.rstrip().endswith("# skills") or "# skills:" in line]
    assert uses == marked
    assert len(marked) <= 13


@pytest.mark.anyio
async def test_the_snippet_agent_loads_a_skill_over_acp(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """initialize, session/new, a prompt naming a skill: tool call updates, then _skills/list."""
    agent = snippet_agent(registry)
    async with serve(agent) as (conn, frames):
        with anyio.fail_after(10):
            initialized = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=False)
                ),
                client_info=Implementation(name="doc-test-client", version="0"),
            )
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await frames.wait_for_update("available_commands_update")
            response = await conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="please use the deploy skill")],
            )
            listed = await conn.ext_method("skills/list", {"sessionId": session.session_id})
            prefix = await conn.ext_method("skills/prefix", {"sessionId": session.session_id})
    definition = await registry.get("deploy", SkillLookupOptions(cwd=str(tmp_path)))
    assert definition is not None
    capabilities = initialized.agent_capabilities
    assert capabilities is not None
    assert capabilities.field_meta == AcpSkills.capability_meta()
    assert response.stop_reason == "end_turn"
    [start] = frames.updates("tool_call")
    [end] = frames.updates("tool_call_update")
    assert (start["title"], start["kind"], start["status"], start["rawInput"]) == (
        "Load skill deploy",
        "read",
        "in_progress",
        {"name": "deploy"},
    )
    assert (end["toolCallId"], end["status"]) == (start["toolCallId"], "completed")
    assert end["content"][0]["content"]["text"] == render_skill_content(definition)
    assert [chunk["content"]["text"] for chunk in frames.updates("agent_message_chunk")] == [
        "Done."
    ]
    assert [skill["name"] for skill in listed["skills"]] == ["deploy"]
    assert prefix["composed"] is True
    assert prefix["header"]["reason"] == "initial"
    assert "`deploy`" in prefix["messages"][0]["text"]


@pytest.mark.anyio
async def test_the_snippet_agent_expands_a_slash_command(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """``/deploy`` puts the skill into the turn's user message, reported as a tool call."""
    agent = snippet_agent(registry)
    async with serve(agent) as (conn, frames):
        with anyio.fail_after(10):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="/deploy now")],
            )
    definition = await registry.get("deploy", SkillLookupOptions(cwd=str(tmp_path)))
    assert definition is not None
    [start] = frames.updates("tool_call")
    assert start["title"] == "Load skill deploy"
    history = (await agent.skills.session(session.session_id)).history
    assert (history[0]["role"], history[0]["content"]) == (
        "user",
        f"/deploy now\n\n{render_skill_content(definition)}",
    )


SHARING = "## One connection per MCP server"


@pytest.mark.anyio
async def test_the_sharing_agent_lends_its_own_mcp_session_to_the_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sharing block, as written, over a session the agent opened: its tool call and the
    skills' listing go over that session, the server sees one handshake, and the session is
    still open once the skills have let go of the server and closed."""
    for variable in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(variable, str(tmp_path / "home"))
    monkeypatch.delenv("ACP_SKILLS_TRUST_FILE", raising=False)
    root, record = tmp_path / "served", tmp_path / "methods.txt"
    write_served_skill(root, "served-skill", "A skill from the server.", "Do the thing.")
    arguments = [str(root), "--tool", "--record", str(record)]
    entry = McpServerStdio(name="team", command=sys.executable, args=[SERVER, *arguments], env=[])
    lent: list[McpServer] = []
    with anyio.fail_after(WAIT_SECONDS):
        async with (
            fastmcp_streams(arguments) as (read, write),
            ClientSession(read, write) as own,
        ):
            await own.discover()

            class Agent(load_snippet(SHARING).ToolfulAgent):  # type: ignore[misc]
                async def connect_mcp(self, server: McpServer) -> ClientSession:
                    lent.append(server)
                    return own

            agent = Agent()
            created = await agent.new_session(str(tmp_path), mcp_servers=[entry])
            listed = await agent.skills.ext_method("skills/list", {"sessionId": created.session_id})
            tool = await agent.mcp_sessions[McpServer.from_acp(entry)].call_tool("ping")
            await agent.skills.close_session(created.session_id)  # no session names it now
            await agent.mcp.aclose()
            agent.local.close()
            after = await own.call_tool("ping")
    assert lent == [McpServer.from_acp(entry)]
    assert [(skill["name"], skill["source"]) for skill in listed["skills"]] == [
        ("served-skill", "mcp:team")
    ]
    assert [block.text for block in (*tool.content, *after.content)] == ["pong", "pong"]
    methods = record.read_text(encoding="utf-8").split()
    assert (methods.count("server/discover"), methods.count("initialize")) == (1, 0)
    assert {"skills/list", "tools/call"} <= set(methods)
