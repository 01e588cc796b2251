"""The test MCP servers in the test's own process, over memory streams: `InProcess` is a
`TransportFactory` (acp_skills/mcp/transport.py, docs/mcp.md) for `McpSkillProvider`.

A configuration that would start the FastMCP skills server (tests/mcp_skills_server.py) or the
scripted one (tests/mcp_scripted_server.py) with this interpreter gets that server built here
from the same arguments, so its label, identity and arguments are what a real process would
have; any other configuration (a server that exits, one that never answers) goes through the
default transport, as a real process. The transport itself (process groups, stderr, the 16 MiB
caps, HTTP) is tested with real processes and sockets in tests/test_mcp.py and
tests/test_mcp_bounds.py.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from fastmcp.client.transports import FastMCPTransport
from fastmcp.client.transports.base import TransportOptions
from mcp import ClientSession
from mcp.client import Transport
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from acp_skills import SkillRegistry
from acp_skills.mcp import McpServer, McpSkillProvider
from acp_skills.mcp.transport import open_transport
from acp_skills.trust import TrustStore
from tests import mcp_skills_server
from tests.acp_peer import Peer, ScriptedModelAgent, connected
from tests.mcp_http import SERVER as SKILLS_SERVER
from tests.mcp_scripted import SCRIPTED_SERVER
from tests.mcp_scripted_server import PROCESS_KEYS, answer


class InProcess:
    """Serves each configuration of a test server in this process (see the module).

    ``urls`` maps a url to the stdio configuration whose server answers there, for a session
    that names an HTTP server. ``opened`` and ``closed`` list the configurations whose
    in-process server a connection started, and whose connection then ended, in order.
    """

    def __init__(self, *, urls: Mapping[str, McpServer] | None = None) -> None:
        self.urls = dict(urls or {})
        self.opened: list[McpServer] = []
        self.closed: list[McpServer] = []

    def __call__(self, server: McpServer) -> Transport:
        served = self.urls.get(server.url) if server.url is not None else server
        if served is not None and served.command == sys.executable and served.args:
            script, *arguments = served.args
            if script == SKILLS_SERVER:
                return self._recorded(server, fastmcp_streams(arguments))
            if script == SCRIPTED_SERVER:
                return self._recorded(server, scripted_streams(Path(arguments[0])))
        return open_transport(server)

    @contextlib.asynccontextmanager
    async def _recorded(
        self, server: McpServer, streams: contextlib.AbstractAsyncContextManager[Any]
    ) -> AsyncIterator[Any]:
        self.opened.append(server)
        try:
            async with streams as opened:
                yield opened
        finally:
            self.closed.append(server)


class _Streams(ClientSession):
    """Keeps the streams FastMCP's in-memory transport would start a client session on: its
    one public way to a FastMCP server's streams (``TransportOptions.session_class``)."""

    def __init__(self, read_stream: Any = None, write_stream: Any = None, **_: Any) -> None:
        self.streams = (read_stream, write_stream)

    async def __aenter__(self) -> _Streams:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


@contextlib.asynccontextmanager
async def fastmcp_streams(arguments: list[str]) -> AsyncIterator[Any]:
    """The FastMCP skills server of ``arguments`` (its command line), running in this process
    until the block ends; yields the client's ``(read, write)`` streams."""
    server, _ = mcp_skills_server.build(arguments)
    options = TransportOptions(session_class=_Streams)
    async with FastMCPTransport(server).connect_session(transport_options=options) as session:
        assert isinstance(session, _Streams)
        yield session.streams


@contextlib.asynccontextmanager
async def scripted_streams(script: Path) -> AsyncIterator[Any]:
    """The scripted server of ``script`` running in this process until the block ends; yields
    the client's ``(read, write)`` streams. A script about the process itself is refused."""
    keys = set(json.loads(await anyio.Path(script).read_text(encoding="utf-8")))
    assert not keys & set(PROCESS_KEYS), f"{script} needs a real process"

    async def serve(read: Any, write: Any) -> None:
        async for item in read:
            if isinstance(item, Exception):
                continue
            text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            # The script is read again (and the method recorded) as the process would.
            reply = await anyio.to_thread.run_sync(answer, json.loads(text), str(script))
            if reply is not None:
                message = types.jsonrpc_message_adapter.validate_json(
                    json.dumps(reply), by_name=False
                )
                await write.send(SessionMessage(message))

    async with (
        create_client_server_memory_streams() as (client, server),
        anyio.create_task_group() as group,
    ):
        group.start_soon(serve, *server)
        try:
            yield client
        finally:
            group.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def session_with(server: McpServer, store: TrustStore, answer: str) -> AsyncIterator[Peer]:
    """A connection whose sessions name ``server`` (served in this process), asking trust of
    ``store`` and answering its question with ``answer``."""
    mcp = McpSkillProvider(servers=[server], timeout=30, transport=InProcess())
    registry = SkillRegistry()
    registry.register_provider(mcp)
    try:
        async with connected(
            registry, agent_type=ScriptedModelAgent, trust="ask", trust_store=store, answer=answer
        ) as peer:
            yield peer
    finally:
        await mcp.aclose()
