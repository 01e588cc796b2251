"""No MCP server twice (contract §16): a session lent by the agent carries the skills, and the
provider's own connection to that server goes; a session's servers are connected and listed
from ``session/new`` on, in the background; the demo agent's ``--mcp-session-servers off`` never
starts the servers the editor forwards. (The agent's own session carrying its tools and the
skills at once: docs/integration.md's sharing block, tests/test_integration_doc.py.)

In process against FastMCP servers (tests/mcp_memory.py) wherever a connection is the point;
real stdio servers only where a process is: a server that exits as it starts, one that must
not outlive a session closed while it was still connecting, and the count of a forwarded
server's starts through the demo agent as its command line builds it.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from acp.schema import McpServerStdio, TextContentBlock
from mcp import ClientSession
from mcp.client import Transport

from acp_skills import SkillLookupOptions, SkillRegistry, SkillSnapshot
from acp_skills.acp import AcpSkills
from acp_skills.mcp import McpServer, McpSkillProvider
from acp_skills.mcp.transport import open_transport
from acp_skills.trust import TrustStore
from tests.acp_peer import demo_peer
from tests.events import WAIT_SECONDS, named_pipe, process_ends, read_pipe, write_pipe
from tests.mcp_http import SERVER, write_served_skill
from tests.mcp_memory import InProcess, fastmcp_streams
from tests.mcp_scripted import SCRIPTED_SERVER, served, skill_text, write_script
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


class Starts:
    """A transport factory that counts the connections it is asked to open; ``called`` is set
    by the first."""

    def __init__(self, inner: Callable[[McpServer], Transport] = open_transport) -> None:
        self.inner = inner
        self.started: list[McpServer] = []
        self.called = anyio.Event()

    def __call__(self, server: McpServer) -> Transport:
        self.started.append(server)
        self.called.set()
        return self.inner(server)


def skills_entry(root: Path, *extra: str) -> McpServerStdio:
    """The FastMCP skills server of ``root`` as an editor forwards it."""
    write_served_skill(root, "served-skill", "A skill from the server.", "Do the thing.")
    return McpServerStdio(
        name="team", command=sys.executable, args=[SERVER, str(root), *extra], env=[]
    )


def scripted_entry(script: Path, label: str = "team") -> McpServerStdio:
    return McpServerStdio(
        name=label, command=sys.executable, args=[SCRIPTED_SERVER, str(script)], env=[]
    )


def methods(record: Path) -> list[str]:
    return record.read_text(encoding="utf-8").split() if record.exists() else []


def names(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return [(skill["name"], skill["source"]) for skill in listing["skills"]]


@asynccontextmanager
async def mounted(
    tmp_path: Path, transport: Callable[[McpServer], Transport]
) -> AsyncIterator[tuple[AcpSkills, McpSkillProvider]]:
    """`AcpSkills` with only an MCP provider reaching servers through ``transport``, not
    served: nothing but what the test calls looks anything up."""
    provider = McpSkillProvider(timeout=WAIT_SECONDS, transport=transport)
    registry = SkillRegistry()
    registry.register_provider(provider)
    store = TrustStore(tmp_path / "trust.json")
    try:
        yield AcpSkills(registry, mcp=provider, trust="all", trust_store=store), provider
    finally:
        await provider.aclose()


# -- a session lent by the agent ----------------------------------------------------------------


async def test_lending_a_session_closes_the_providers_own_connection(tmp_path: Path) -> None:
    """A server the provider had connected itself is let go when the agent lends its session;
    the next listing goes over the lent one."""
    record = tmp_path / "methods.txt"
    entry = skills_entry(tmp_path / "served", "--record", str(record))
    server, servers = McpServer.from_acp(entry), InProcess()
    async with mounted(tmp_path, servers) as (skills, provider):
        await skills.open_session("s1", str(tmp_path), mcp_servers=[entry])
        first = await skills.ext_method("skills/list", {"sessionId": "s1"})
        async with (
            fastmcp_streams(entry.args[1:]) as (read, write),
            ClientSession(read, write) as own,
        ):
            await own.discover()
            await provider.share(server, own)
            closed = list(servers.closed)
            second = await skills.ext_method("skills/list", {"sessionId": "s1"})
            provider.unshare(server)
    assert closed == [server]
    assert names(first) == names(second) == [("served-skill", "mcp:team")]
    # The provider's own connection's handshake, then the agent's; nothing after the lending.
    assert methods(record).count("server/discover") == 2
    assert servers.opened == [server]


async def test_a_session_lent_before_its_handshake_is_refused(tmp_path: Path) -> None:
    """Lending a session that has not done its handshake is a ValueError naming the call."""
    entry = skills_entry(tmp_path / "served")
    provider = McpSkillProvider(transport=InProcess())
    async with (
        fastmcp_streams(entry.args[1:]) as (read, write),
        ClientSession(read, write) as own,
    ):
        with pytest.raises(ValueError, match=r"has had no handshake: lend it after its discover"):
            await provider.share(McpServer.from_acp(entry), own)
    await provider.aclose()


# -- a session's servers connect from session/new -----------------------------------------------


async def test_session_new_starts_connecting_before_anything_looks_the_server_up(
    tmp_path: Path,
) -> None:
    """Opening a session starts its server in the background, before any lookup, and lists
    it there; the lookup that comes later finds it connected: one handshake in all."""
    record = tmp_path / "methods.txt"
    entry = skills_entry(tmp_path / "served", "--record", str(record))
    starts = Starts(InProcess())
    async with mounted(tmp_path, starts) as (skills, _):
        await skills.open_session("s1", str(tmp_path), mcp_servers=[entry])
        with anyio.fail_after(WAIT_SECONDS):  # nothing else here would ever connect
            await starts.called.wait()
        listing = await skills.ext_method("skills/list", {"sessionId": "s1"})
    assert names(listing) == [("served-skill", "mcp:team")]
    assert methods(record)[:2] == ["server/discover", "skills/list"]
    assert methods(record).count("server/discover") == 1
    assert starts.started == [McpServer.from_acp(entry)]


async def test_the_first_lookup_takes_the_listing_its_session_started(tmp_path: Path) -> None:
    """A lookup that comes while the listing the session's opening started is under way takes
    that listing: the server is asked once."""
    record, released = tmp_path / "methods.txt", named_pipe(tmp_path / "listing-released")
    entry = skills_entry(
        tmp_path / "served", "--record", str(record), "--hold-listing", str(released)
    )
    options = SkillLookupOptions(cwd=str(tmp_path), servers=(McpServer.from_acp(entry),))
    snapshots: list[SkillSnapshot] = []

    async def lookup() -> None:
        snapshots.append(await skills.registry.snapshot(options))

    async with mounted(tmp_path, InProcess()) as (skills, _):
        with anyio.fail_after(WAIT_SECONDS):
            await skills.open_session("s1", str(tmp_path), mcp_servers=[entry])
            async with anyio.create_task_group() as group:
                group.start_soon(lookup)
                # The session's listing is held by the server; the lookup waits on something.
                await anyio.wait_all_tasks_blocked()
                await write_pipe(released)
    assert [skill.name for skill in snapshots[0].skills] == ["served-skill"]
    assert methods(record) == ["server/discover", "skills/list"]


async def test_a_server_that_exits_as_it_connects_is_started_once_and_told(
    tmp_path: Path,
) -> None:
    """A server that exits while it connects in the background is not started a second time
    by the lookup that comes after: that lookup reports its exit and the end of its stderr
    (`mcp-server-unavailable`). A process is the point: it exits."""
    entry = scripted_entry(write_script(tmp_path / "exits.json", exit=3, stderr="no token\n"))
    ended = anyio.Event()

    def note_the_end(_: Any, __: str, event: MutableMapping[str, Any]) -> Any:
        if event["event"] == "mcp_server_ended":  # the connection has given up
            ended.set()
        raise structlog.DropEvent

    structlog.configure(processors=[note_the_end])  # conftest puts the configuration back
    starts = Starts()
    async with mounted(tmp_path, starts) as (skills, _):
        await skills.open_session("s1", str(tmp_path), mcp_servers=[entry])
        with anyio.fail_after(WAIT_SECONDS):
            await ended.wait()
        listing = await skills.ext_method("skills/list", {"sessionId": "s1"})
    assert starts.started == [McpServer.from_acp(entry)]
    assert listing["skills"] == []
    [problem] = listing["problems"]
    assert problem["code"] == "mcp-server-unavailable"
    assert "the server exited with status 3; its stderr ends: no token" in problem["message"]


@pytest.mark.parametrize("ending", ["closed", "resumed without it", "the agent exits"])
async def test_a_server_still_connecting_when_its_session_ends_leaves_no_process(
    tmp_path: Path, ending: str
) -> None:
    """A server that never answers its handshake, and ignores SIGTERM and the end of its
    input, is still connecting when its session is closed, reopened without it, or the agent
    exits: neither it nor the helper it started is left. A process is the point."""
    pid, helper = named_pipe(tmp_path / "server.pid"), named_pipe(tmp_path / "helper.pid")
    script = write_script(
        tmp_path / "slow.json",
        pid=str(pid),
        helper=str(helper),
        stubborn=True,
        silent=["server/discover"],
    )
    async with mounted(tmp_path, open_transport) as (skills, provider):
        await skills.open_session("s1", str(tmp_path), mcp_servers=[scripted_entry(script)])
        with anyio.fail_after(WAIT_SECONDS):
            pids = [int(await read_pipe(pid)), int(await read_pipe(helper))]
        if ending == "closed":
            await skills.close_session("s1")
        elif ending == "resumed without it":
            await skills.resume_session("s1", str(tmp_path))
        else:
            await provider.aclose()
        with anyio.fail_after(WAIT_SECONDS):
            for each in pids:
                await process_ends(each)


# -- the demo agent: --mcp-session-servers ---------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "env", "starts"),
    [
        ((), {}, 1),
        (("--mcp-session-servers", "off"), {}, 0),
        ((), {"ACP_SKILLS_MCP_SESSION_SERVERS": "off"}, 0),
        (("--mcp-session-servers", "on"), {"ACP_SKILLS_MCP_SESSION_SERVERS": "off"}, 1),
    ],
    ids=["default", "flag-off", "variable-off", "flag-over-variable"],
)
async def test_a_forwarded_server_starts_only_when_the_agent_takes_the_editors_servers(
    tmp_path: Path, flags: tuple[str, ...], env: dict[str, str], starts: int
) -> None:
    """With ``--mcp-session-servers off`` (or its variable) a server the editor forwards with
    session/new is never started, through a prompt, ``/skills`` and ``_skills/list``, and the
    agent does not ask for HTTP servers; on (the default), it is started once. The server, a
    real stdio process, records every request it gets: one handshake per start."""
    record = tmp_path / "methods.txt"
    fields = {"name": "team-skill", "description": "A team skill."}
    text = skill_text("name: team-skill\ndescription: A team skill.")
    script = write_script(
        tmp_path / "team.json", [served("team-skill", text, fields)], record=str(record)
    )
    entry = scripted_entry(script)
    sandbox = Sandbox.create(tmp_path / "box")
    async with demo_peer(sandbox, *flags, env=env) as agent:
        created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[entry])
        session_id = created.session_id
        for words in ("hello", "/skills"):
            await agent.conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text=words)]
            )
        listing = await agent.conn.ext_method("skills/list", {"sessionId": session_id})
        capabilities = agent.initialized.agent_capabilities
    assert methods(record).count("server/discover") == starts
    served_skills = [skill["name"] for skill in listing["skills"] if skill["provider"] == "mcp"]
    assert served_skills == ["team-skill"] * starts
    assert capabilities is not None
    assert capabilities.mcp_capabilities is not None
    assert capabilities.mcp_capabilities.http is bool(starts)
