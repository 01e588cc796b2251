"""Connections to MCP servers: one per configuration, opened on first use, shared by every
session naming the same server, closed by `McpPool.aclose` (the agent's exit)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..quiet_log import get_logger
from .config import McpServer

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"

_log = get_logger(__name__)


class McpConnection:
    """One live MCP session. A task of its own owns the transport, because the SDK's context
    managers must be entered and left by the same task."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    @property
    def failed(self) -> bool:
        """The connection ended (or never started): a new one is needed."""
        return self._task.done()

    async def session(self) -> ClientSession:
        """The connected session (after ``server/discover``); raises why it could not connect."""
        return await asyncio.shield(self._ready)

    def supports_skills(self, session: ClientSession) -> bool:
        """Whether the server declared the skills extension."""
        capabilities = session.server_capabilities
        extensions = capabilities.extensions if capabilities is not None else None
        return bool(extensions) and SKILLS_EXTENSION in (extensions or {})

    async def aclose(self) -> None:
        """End the session; a stdio server's whole process tree is stopped (the SDK closes its
        input, then terminates and kills it if it ignores that)."""
        self._closing.set()
        with contextlib.suppress(BaseException):
            await self._task

    async def _run(self) -> None:
        try:
            async with (
                self._transport() as (read, write),
                ClientSession(read, write, extensions={SKILLS_EXTENSION: {}}) as session,
            ):
                await session.discover()
                self._ready.set_result(session)
                await self._closing.wait()
        except BaseException as error:
            if not self._ready.done():
                self._ready.set_exception(
                    error if isinstance(error, Exception) else ConnectionError("connection ended")
                )
            if not isinstance(error, Exception):
                raise
            _log.warning("mcp_server_ended", server=self.server.label, error=repr(error))
        finally:
            if not self._ready.done():
                self._ready.set_exception(ConnectionError("the server closed the connection"))
            with contextlib.suppress(BaseException):
                self._ready.exception()  # retrieved: never reported as unretrieved

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        server = self.server
        if server.url is not None:
            async with (
                httpx2.AsyncClient(headers=dict(server.headers)) as http,
                streamable_http_client(server.url, http_client=http) as streams,
            ):
                yield streams[0], streams[1]
            return
        assert server.command is not None
        env = {**os.environ, **dict(server.env)}
        parameters = StdioServerParameters(command=server.command, args=list(server.args), env=env)
        async with stdio_client(parameters) as streams:
            yield streams[0], streams[1]


class McpPool:
    """The agent's MCP connections, keyed by configuration; shared across sessions."""

    def __init__(self) -> None:
        self._connections: dict[McpServer, McpConnection] = {}

    def connection(self, server: McpServer) -> McpConnection:
        """The live connection to ``server``, started now if there is none (or it ended)."""
        found = self._connections.get(server)
        if found is None or found.failed:
            found = self._connections[server] = McpConnection(server)
        return found

    async def release(self, server: McpServer) -> None:
        """Close the connection to ``server`` (no session uses it any more)."""
        if (found := self._connections.pop(server, None)) is not None:
            await found.aclose()

    async def aclose(self) -> None:
        """Close every connection (at exit: no server process outlives the agent)."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(connection.aclose() for connection in connections))
