"""Connections to MCP servers: one per configuration, opened on first use (or as soon as a
session names the server), shared by every session naming the same server, each closed within
the deadline (`McpPool.release`, and `McpPool.aclose` at the agent's exit). Each is opened
through the pool's `TransportFactory`: by default a child process over stdio or streamable HTTP
(`open_transport`). An agent that already holds a client session for a server (for tools of its
own) lends it instead (`McpPool.share`): the server is then connected once, and the pool never
closes what it did not open. `Underway` is the work started on a connection in the background
(a session's first listing) that a request coming meanwhile takes instead of asking again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import Final, Generic, TypeVar

import anyio
from mcp import ClientSession

from ..quiet_log import get_logger
from .config import McpServer
from .transport import BoundedTransport, TransportFactory, open_transport

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
DEFAULT_TIMEOUT: Final = 10.0
# After the deadline, a connection is cancelled: what is left to do then (reaping a killed
# server) takes moments.
_AFTER_CANCEL: Final = 1.0

_log = get_logger(__name__)
_T = TypeVar("_T")


class McpConnection:
    """One live MCP session, over what ``transport`` gives for ``server``. A task of its own
    owns the transport, because the SDK's context managers must be entered and left by the same
    task; it is cancelled through an anyio scope, which lets the transport's shielded clean-up
    (ending a server's process group) finish. Given ``lent``, a session the agent opened, it
    wraps that one instead: no task, and closing it is the agent's business."""

    def __init__(
        self,
        server: McpServer,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: TransportFactory = open_transport,
        lent: ClientSession | None = None,
    ) -> None:
        self.server = server
        self._timeout = timeout
        self._transport = transport
        # What only this package's transports tell (why the messages stopped, bytes received)
        # and take (how long stopping may take); any other transport goes without.
        self._bounded: BoundedTransport | None = None
        self._stop_seconds = timeout
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._scope = anyio.CancelScope()
        self._task: asyncio.Future[None] | None = None
        if lent is not None:  # opened, and to be closed, by the agent
            self._ready.set_result(lent)
        else:
            self._task = asyncio.ensure_future(self._run())

    @property
    def failed(self) -> bool:
        """The connection ended (or never started): a new one is needed. A lent session is
        the agent's to replace, never failed here."""
        return self._task is not None and self._task.done()

    @property
    def ended(self) -> str | None:
        """Why the server's messages stopped, when the transport knows (an exit and the last
        lines of its stderr, a response over the size cap); ``None`` while they flow, or when
        the transport does not say."""
        return self._bounded.ended if self._bounded is not None else None

    @property
    def received(self) -> int:
        """Bytes received from the server so far (0 when the transport does not count)."""
        return self._bounded.received if self._bounded is not None else 0

    async def session(self) -> ClientSession:
        """The connected session (after ``server/discover``); raises why it could not connect."""
        return await asyncio.shield(self._ready)

    def supports_skills(self, session: ClientSession) -> bool:
        """Whether the server declared the skills extension."""
        capabilities = session.server_capabilities
        extensions = capabilities.extensions if capabilities is not None else None
        return bool(extensions) and SKILLS_EXTENSION in (extensions or {})

    async def aclose(self, *, at_once: bool = False) -> None:
        """End the session within the deadline: a stdio server's input is closed, it is given
        part of the deadline to leave, then its whole process group is ended, helpers
        included. ``at_once`` (a server that failed or does not answer) skips the grace. A lent
        session is left open."""
        if self._task is None:
            return
        if at_once or not self._ready.done():
            # Nothing to say goodbye to: a server that is still connecting is not answering.
            self._stop_within(0.0)
            self._scope.cancel()
        self._closing.set()
        task = self._task
        done, _ = await asyncio.wait({task}, timeout=self._timeout)
        if not done:
            self._stop_within(0.0)
            self._scope.cancel()
            await asyncio.wait({task}, timeout=_AFTER_CANCEL)

    def _stop_within(self, seconds: float) -> None:
        self._stop_seconds = seconds
        if self._bounded is not None:
            self._bounded.stop_within = seconds

    async def _run(self) -> None:
        error: Exception | None = None
        try:
            with self._scope:
                try:
                    # Made here, so that a factory that fails is a connection that failed.
                    transport = self._transport(self.server)
                    if isinstance(transport, BoundedTransport):
                        self._bounded = transport
                        self._stop_within(self._stop_seconds)
                    async with (
                        transport as (read, write),
                        ClientSession(read, write, extensions={SKILLS_EXTENSION: {}}) as session,
                    ):
                        await session.discover()
                        self._ready.set_result(session)
                        await self._closing.wait()
                except Exception as caught:
                    error = caught
            if error is not None:
                why = self.ended or repr(error)
                # Told as a warning by the lookup that meets it (`mcp_server_skipped`).
                _log.info("mcp_server_ended", server=self.server.label, error=why)
        finally:
            if not self._ready.done():
                self._ready.set_exception(
                    error or ConnectionError(self.ended or "the connection ended")
                )
            with contextlib.suppress(BaseException):
                self._ready.exception()  # retrieved: never reported as unretrieved


class McpPool:
    """The agent's MCP connections, keyed by configuration; shared across sessions. Each is
    opened through ``transport`` (default: `open_transport`, stdio or streamable HTTP) and
    opened and closed under ``timeout`` seconds, unless the agent lent its own session for that
    server (`share`)."""

    def __init__(
        self, *, timeout: float = DEFAULT_TIMEOUT, transport: TransportFactory | None = None
    ) -> None:
        self._timeout = timeout
        self._transport = transport if transport is not None else open_transport
        self._connections: dict[McpServer, McpConnection] = {}
        self._lent: dict[McpServer, McpConnection] = {}

    def connection(self, server: McpServer) -> McpConnection:
        """The session lent for ``server``, else the pool's own connection to it, started now
        if there is none (or it ended)."""
        if (lent := self._lent.get(server)) is not None:
            return lent
        found = self._connections.get(server)
        if found is None or found.failed:
            found = self._connections[server] = McpConnection(
                server, timeout=self._timeout, transport=self._transport
            )
        return found

    async def share(self, server: McpServer, session: ClientSession) -> None:
        """Reach ``server`` over ``session`` from now on: a client session the agent opened
        (for tools of its own), after its handshake, and keeps open. The pool never closes
        it; a connection of the pool's own to ``server`` is closed now.

        Raises:
            ValueError: ``session`` has had no handshake yet (``discover()``).
        """
        if session.server_capabilities is None:
            raise ValueError(
                f'the session lent for MCP server "{server.label}" has had no handshake: '
                "lend it after its discover()"
            )
        self._lent[server] = McpConnection(server, lent=session)
        await self.release(server)

    def unshare(self, server: McpServer) -> None:
        """Stop using the session lent for ``server`` (the agent is about to close it); a
        later request opens a connection of the pool's own."""
        self._lent.pop(server, None)

    async def release(self, server: McpServer, *, at_once: bool = False) -> None:
        """Close the pool's own connection to ``server`` (no session uses it any more, or it
        failed); a session lent for it stays lent, and open."""
        if (found := self._connections.pop(server, None)) is not None:
            await found.aclose(at_once=at_once)

    async def aclose(self) -> None:
        """Close every connection the pool opened (at exit: no server process outlives the
        agent), and forget the lent ones without closing them."""
        connections, self._connections, self._lent = list(self._connections.values()), {}, {}
        await asyncio.gather(*(connection.aclose() for connection in connections))


class Underway(Generic[_T]):
    """Work started in the background, at most one per key, owned here until it ends or is
    cancelled: whoever asks for that key meanwhile takes its result (the listing a session's
    opening started is its first prompt's), or does the work anew if it gave none (cancelled,
    or failed)."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Future[_T]] = {}

    def start(self, key: Hashable, work: Callable[[], Awaitable[_T]]) -> None:
        """Start ``work()`` for ``key`` in the background, unless work for it is under way."""
        if key not in self._tasks:
            task = self._tasks[key] = asyncio.ensure_future(work())
            task.add_done_callback(partial(self._ended, key))

    async def join(self, key: Hashable, work: Callable[[], Awaitable[_T]]) -> _T:
        """The result of the work under way for ``key``, else of ``work()`` done now. Being
        cancelled while waiting leaves that work going."""
        task = self._tasks.get(key)
        if task is not None:
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is None:
                return task.result()
        return await work()

    async def cancel(self, key: Hashable) -> None:
        """Cancel the work under way for ``key``, and wait for it to unwind."""
        if (task := self._tasks.pop(key, None)) is not None:
            task.cancel()
            await asyncio.wait({task})

    async def aclose(self) -> None:
        """Cancel all the work under way, and wait for it to unwind."""
        await asyncio.gather(*(self.cancel(key) for key in list(self._tasks)))

    def _ended(self, key: Hashable, task: asyncio.Future[_T]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled():
            task.exception()  # retrieved: a caller who comes later does the work itself
