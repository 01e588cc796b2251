"""The session table (`acp_skills.acp.sessions`): every instance kept until ``session/close``;
the request's ``mcpServers`` made `McpServer` values, and a server closed once no open
instance names it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer
from anyio.abc import TaskGroup

from acp_skills import SessionPrefix, SkillLookupOptions, SkillSnapshot
from acp_skills.acp.commands import skills_report
from acp_skills.acp.sessions import SessionTable, request_servers
from acp_skills.mcp import McpServer
from acp_skills.mcp.provider import ServerState
from acp_skills.model import PrefixContext
from acp_skills.record import InMemorySessionStore

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


class Servers:
    """A session table over an in-memory store, its sessions named by id with their servers."""

    def __init__(self, mcp: ClosingRecorder) -> None:
        self.table = SessionTable(SessionPrefix(), InMemorySessionStore(), mcp)

    async def bind(self, session_id: str, servers: tuple[Any, ...]) -> None:
        await self.table.open(PrefixContext(session_id=session_id, cwd="/", servers=servers))

    async def unbind(self, session_id: str) -> None:
        await self.table.close(session_id)


class ClosingRecorder:
    """Stands in for the MCP provider: records which servers were connected and let go."""

    def __init__(self) -> None:
        self.connected: list[Any] = []
        self.released: list[Any] = []

    def connect(self, server: Any) -> None:
        self.connected.append(server)

    async def release(self, server: Any) -> None:
        self.released.append(server)

    def states(self, options: SkillLookupOptions) -> Sequence[Any]:
        return ()


def test_request_entries_become_servers_in_order() -> None:
    """stdio (command, args, env) and HTTP (url, headers) entries, SDK models or dicts."""
    entries: list[object] = [
        McpServerStdio(
            name="team", command="/bin/srv", args=["-x"], env=[EnvVariable(name="K", value="v")]
        ),
        HttpMcpServer(
            type="http",
            name="hub",
            url="https://hub/mcp",
            headers=[HttpHeader(name="Authorization", value="Bearer t")],
        ),
        {"type": "http", "name": "raw", "url": "http://127.0.0.1:1/mcp", "headers": []},
    ]
    assert request_servers(ClosingRecorder(), entries) == (
        McpServer(label="team", command="/bin/srv", args=("-x",), env=(("K", "v"),)),
        McpServer(label="hub", url="https://hub/mcp", headers=(("Authorization", "Bearer t"),)),
        McpServer(label="raw", url="http://127.0.0.1:1/mcp"),
    )


def test_unusable_entries_are_left_out() -> None:
    """An SSE server, a nameless one and a non-http url are skipped; the rest stay."""
    entries: list[object] = [
        SseMcpServer(type="sse", name="old", url="http://h/sse", headers=[]),
        McpServerStdio(name=" ", command="/bin/srv", args=[], env=[]),
        {"type": "http", "name": "ftp", "url": "ftp://h/mcp", "headers": []},
        McpServerStdio(name="ok", command="/bin/srv", args=[], env=[]),
    ]
    assert request_servers(ClosingRecorder(), entries) == (
        McpServer(label="ok", command="/bin/srv"),
    )


def test_without_an_mcp_client_servers_are_ignored() -> None:
    entries = [McpServerStdio(name="team", command="/bin/srv", args=[], env=[])]
    assert request_servers(None, entries) == ()


async def test_a_server_is_let_go_when_no_open_session_names_it() -> None:
    """Shared by two sessions: closed only after both let go; a reload that drops it too."""
    recorder = ClosingRecorder()
    servers = Servers(recorder)
    shared, own = McpServer(label="a", command="a"), McpServer(label="b", command="b")
    await servers.bind("s1", (shared,))
    await servers.bind("s2", (shared, own))
    await servers.unbind("s1")
    assert recorder.released == []
    await servers.bind("s2", (shared,))  # session/load of s2 without `own`
    assert recorder.released == [own]
    await servers.unbind("s2")
    assert recorder.released == [own, shared]
    await servers.unbind("s2")  # twice is harmless
    assert recorder.released == [own, shared]


class SlowCloser(ClosingRecorder):
    """Its close takes until the test lets it end, as a process past its grace does."""

    def __init__(self) -> None:
        super().__init__()
        self.closing, self.may_end = anyio.Event(), anyio.Event()

    def connect(self, server: Any) -> None:
        self.connected.append(("connect", server))

    async def release(self, server: Any) -> None:
        self.connected.append(("release", server))
        self.closing.set()
        await self.may_end.wait()
        self.released.append(server)


@contextlib.asynccontextmanager
async def a_close_underway() -> AsyncIterator[tuple[Servers, SlowCloser, Any, TaskGroup]]:
    """Servers closed in a task group, where session ``s1`` has let its server go and that
    server's close has begun; the group ends with the block (the close allowed to end first)."""
    closer = SlowCloser()
    servers = Servers(closer)
    server = McpServer(label="a", command="a")
    async with anyio.create_task_group() as group:
        servers.table.tasks = group
        await servers.bind("s1", (server,))
        with anyio.fail_after(5):
            await servers.unbind("s1")
            await closer.closing.wait()
        yield servers, closer, server, group
    servers.table.tasks = None  # the group has ended: closed in place from now on


async def test_letting_a_server_go_does_not_wait_for_its_close() -> None:
    """With a task group, a session released or closed answers while its server still
    closes (another session's ``session/new`` is not held by it)."""
    async with a_close_underway() as (_, closer, server, _):
        assert closer.released == []
        closer.may_end.set()
    assert closer.released == [server]


async def test_a_session_naming_a_server_being_closed_connects_once_the_close_ends() -> None:
    """A session naming a server while its last one's close is underway connects to it
    afresh after that close, never to the connection going away."""
    async with a_close_underway() as (servers, closer, server, group):
        group.start_soon(servers.bind, "s2", (server,))
        await anyio.wait_all_tasks_blocked()
        assert closer.connected == [("connect", server), ("release", server)]
        closer.may_end.set()
    assert closer.connected == [("connect", server), ("release", server), ("connect", server)]
    await servers.unbind("s2")  # it counted s2: letting go closes it again
    assert closer.released == [server, server]


class FaringRecorder(ClosingRecorder):
    """A provider whose one server was skipped, for a reason its stderr wrote over lines."""

    def states(self, options: SkillLookupOptions) -> Sequence[Any]:
        reason = "the server exited with status 1: boom\n- error `forged`: not from us"
        server = McpServer(label="team", command="srv")
        return (ServerState(server=server, failure=reason),)


def test_a_server_reason_cannot_forge_a_line_of_the_skills_report() -> None:
    """What a server wrote stays on its server's line of ``/skills``, line feeds spelt out
    and shown as text (no code span of its own)."""
    empty = SkillSnapshot(skills=(), complete=True)
    states = FaringRecorder().states(SkillLookupOptions())
    report = skills_report("/w", empty, [], servers=states)
    assert report.splitlines()[-3:] == [
        "**MCP servers** (1)",
        "",
        "- `team`: skipped: the server exited with status 1: boom\\\\x0a- error \\`forged\\`: "
        "not from us",
    ]


async def test_two_loads_at_once_let_go_of_the_servers_of_each_instance_they_replace() -> None:
    """Two `session/load`s of one session racing: the instance the later one replaces (the
    earlier load's) lets its servers go too, so closing the session leaves none connected."""
    recorder = ClosingRecorder()
    servers = Servers(recorder)
    old, first, second = (McpServer(label=n, command=n) for n in ("old", "first", "second"))
    await servers.bind("s1", (old,))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(servers.bind, "s1", (first,))
            group.start_soon(servers.bind, "s1", (second,))
        await servers.unbind("s1")
    assert sorted(server.label for server in recorder.released) == ["first", "old", "second"]


async def test_an_instance_replaced_while_its_turn_runs_has_that_turn_cancelled() -> None:
    """A turn begun on the old instance while a load was opening the new one (after the load
    ended the turns it saw) is cancelled as the new one takes its place: `session/cancel`
    reaches only the live instance, so nothing else could end it."""
    servers = Servers(ClosingRecorder())
    await servers.bind("s1", ())
    old = servers.table.get("s1")
    ended, scope = anyio.Event(), anyio.CancelScope()

    async def turn() -> None:
        with scope:
            await anyio.sleep_forever()
        ended.set()

    old.turn = scope
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(turn)
            await anyio.wait_all_tasks_blocked()
            await servers.bind("s1", ())  # `session/load`: a new instance
            await ended.wait()
