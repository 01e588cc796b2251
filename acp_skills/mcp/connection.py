"""`McpConnection`, one client session to an MCP server, without the MCP SDK at import: a stdio
server is spawned first, then `transport.py` (the SDK, some 0.4 s) loads in a worker thread while
the server starts, so neither blocks the event loop and the import hides behind the start-up."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import subprocess
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
from anyio.abc import Process

from ..quiet_log import get_logger
from .config import McpServer

if TYPE_CHECKING:
    from mcp import ClientSession

    from .transport import BoundedTransport, TransportFactory

_AFTER_CANCEL: Final = 1.0  # a cancelled connection's last moments (reaping a killed server)
_REAP: Final = 0.5  # for a killed server to be reaped

_log = get_logger(__name__)


async def spawn(server: McpServer) -> Process:
    """``server``'s command as a child process in a process group of its own, over pipes."""
    assert server.command is not None
    return await anyio.open_process(
        [server.command, *server.args],
        env={**os.environ, **dict(server.env)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, ended whole
    )


async def load_transport() -> None:
    """`transport.py` and the MCP SDK imported in a worker thread, off the event loop."""
    await anyio.to_thread.run_sync(importlib.import_module, f"{__package__}.transport")


def leaf_reason(error: BaseException) -> str:
    """Why a request failed: the SDK's task groups wrap the real failure, so the first leaf."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}" if str(error) else repr(error)


class McpConnection:
    """A client session to ``server``, connecting from now on, closed within ``timeout``, over
    ``transport`` (``None``: the default, `transport.BoundedTransport`). A task of its own enters
    and leaves the SDK's context managers; cancelling it through an anyio scope lets the
    transport's shielded clean-up finish."""

    def __init__(
        self, server: McpServer, timeout: float, transport: TransportFactory | None
    ) -> None:
        self.server = server
        self._timeout = timeout
        self._transport = transport
        # Only the default transport tells why the messages stopped; another goes without.
        self._bounded: BoundedTransport | None = None
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._scope = anyio.CancelScope()
        self._task = asyncio.ensure_future(self._run())

    @property
    def failed(self) -> bool:
        """The connection ended (or never started)."""
        return self._task.done()

    @property
    def ended(self) -> str | None:
        """Why the server's messages stopped, when the transport knows."""
        return self._bounded.ended if self._bounded is not None else None

    async def session(self) -> ClientSession:
        """The session after ``server/discover``; raises why it could not connect."""
        return await asyncio.shield(self._ready)

    async def aclose(self, *, at_once: bool = False) -> None:
        """End the session within the deadline; ``at_once`` (or still connecting): no grace."""
        if at_once or not self._ready.done():
            self._scope.cancel()  # a cancelled transport stops its server at once
        self._closing.set()
        done, _ = await asyncio.wait({self._task}, timeout=self._timeout)
        if not done:
            self._scope.cancel()
            await asyncio.wait({self._task}, timeout=_AFTER_CANCEL)

    async def _run(self) -> None:
        error: Exception | None = None
        try:
            with self._scope:
                default_stdio = self._transport is None and self.server.command is not None
                process = await spawn(self.server) if default_stdio else None
                try:
                    await load_transport()
                except BaseException:
                    if process is not None:
                        await _abandon(process)
                    raise
                from .transport import BoundedTransport, discovered

                # Made here, so that a factory that fails is a connection that failed.
                if self._transport is not None:
                    transport = self._transport(self.server)
                else:
                    transport = BoundedTransport(self.server, process)
                if isinstance(transport, BoundedTransport):
                    self._bounded, transport.stop_within = transport, self._timeout
                async with discovered(transport) as session:  # it owns the process now
                    self._ready.set_result(session)
                    await self._closing.wait()
        except Exception as caught:
            error = caught  # the lookup that meets it warns (`mcp_server_skipped`)
            _log.info("mcp_server_ended", server=self.server.label, error=self.ended or repr(error))
        finally:
            if not self._ready.done():
                ended = ConnectionError(self.ended or "the connection ended")
                self._ready.set_exception(error or ended)
            with contextlib.suppress(BaseException):
                self._ready.exception()  # retrieved: never reported as unretrieved


async def _abandon(process: Process) -> None:
    # Spawned, but never handed to its transport (the SDK failed to load, or the connection was
    # cancelled first): its whole group ended at once.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP):
        await process.aclose()
