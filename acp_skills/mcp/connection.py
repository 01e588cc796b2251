"""One live MCP client session, owned by a task of its own: the SDK's context managers are entered
and left by one task, and an anyio scope's cancel lets the transport's shielded clean-up finish."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import anyio
from mcp import ClientSession

from ..quiet_log import get_logger
from .config import McpServer
from .transport import BoundedTransport, TransportFactory

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
_AFTER_CANCEL: Final = 1.0  # a cancelled connection's last moments (reaping a killed server)

_log = get_logger(__name__)


def serves_skills(session: ClientSession) -> bool:
    """Whether the server declared the skills extension."""
    capabilities = session.server_capabilities
    return SKILLS_EXTENSION in ((capabilities.extensions if capabilities else None) or {})


class McpConnection:
    """A client session to ``server``, connecting from now on, closed within ``timeout``."""

    def __init__(self, server: McpServer, *, timeout: float, transport: TransportFactory) -> None:
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
                # Made here, so that a factory that fails is a connection that failed.
                transport = self._transport(self.server)
                if isinstance(transport, BoundedTransport):
                    self._bounded, transport.stop_within = transport, self._timeout
                async with (
                    transport as (read, write),
                    ClientSession(read, write, extensions={SKILLS_EXTENSION: {}}) as session,
                ):
                    await session.discover()
                    self._ready.set_result(session)
                    await self._closing.wait()
        except Exception as caught:
            error = caught
            # Told as a warning by the lookup that meets it (`mcp_server_skipped`).
            _log.info("mcp_server_ended", server=self.server.label, error=self.ended or repr(error))
        finally:
            if not self._ready.done():
                ended = ConnectionError(self.ended or "the connection ended")
                self._ready.set_exception(error or ended)
            with contextlib.suppress(BaseException):
                self._ready.exception()  # retrieved: never reported as unretrieved
