"""One client session per MCP server configuration (contract §16), without the MCP SDK at import:
a stdio server is spawned before the SDK loads (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import suppress
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
from anyio.abc import Process

from ..quiet_log import get_logger
from .config import McpServer

if TYPE_CHECKING:
    from mcp import ClientSession

    from .transport import TransportFactory

MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024  # one answer, and one listing's pages together
_AFTER_CANCEL: Final = 1.0  # a cancelled connection's last moments (reaping a killed server)
_log = get_logger(__name__)
_sdk: list[ModuleType] = []  # `transport.py`, once imported


class Unavailable(Exception):
    """A server could not be asked; the message says why."""


class TooLarge(Unavailable):
    """It sent an answer over `MAX_RESPONSE_BYTES`: its use ends (docs/mcp.md)."""

    def __init__(self) -> None:
        super().__init__(f"it sent a response over {MAX_RESPONSE_BYTES >> 20} MiB")


async def spawn(server: McpServer) -> Process:
    """``server``'s command in a process group of its own, over pipes (anyio's default)."""
    assert server.command is not None
    return await anyio.open_process(
        [server.command, *server.args],
        env={**os.environ, **dict(server.env)},
        start_new_session=True,  # its own process group, ended whole
    )


async def load_sdk() -> ModuleType:
    """`transport.py` and the MCP SDK, imported once in a worker thread; `Unavailable` if not."""
    if not _sdk:
        try:
            _sdk.append(await anyio.to_thread.run_sync(import_module, f"{__package__}.transport"))
        except Exception as error:
            raise Unavailable(f"the MCP SDK cannot be loaded: {leaf_reason(error)}") from None
    return _sdk[0]


def leaf_reason(error: BaseException) -> str:
    """Why a request failed: the SDK's task groups wrap the real failure, so the first leaf."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    if isinstance(error, Unavailable) or not str(error):
        return str(error) or repr(error)
    return f"{type(error).__name__}: {error}"


class Pool:
    """Each server's session: one the agent lent, else a connection opened on first use over
    ``factory`` (``None``: `transport.BoundedTransport`) and closed within ``timeout``."""

    def __init__(self, timeout: float, factory: TransportFactory | None) -> None:
        self._timeout, self._factory = timeout, factory
        self._connections: dict[McpServer, _Connection] = {}
        self.lent: dict[McpServer, ClientSession] = {}  # the agent's, never closed here

    async def session(self, server: McpServer) -> tuple[ClientSession, ModuleType]:
        """``server``'s session after its handshake, and `transport.py`; raises why not."""
        if (session := self.lent.get(server)) is None:
            found = self._connections.get(server)
            if found is None or found.task.done():
                found = _Connection(server, self._timeout, self._factory)
                self._connections[server] = found
            await asyncio.wait({found.ready})  # a cancelled caller leaves it connecting
            sdk = await load_sdk()  # an `mcp` that does not import is the reason, before all else
            return found.ready.result(), sdk
        return session, await load_sdk()

    def ended(self, server: McpServer) -> Unavailable | None:
        """Why ``server``'s messages stopped, when its transport knows."""
        found = self._connections.get(server)
        return found.ended if found is not None else None

    async def close(self, server: McpServer, *, at_once: bool = False) -> None:
        """End the pool's own connection to ``server``; ``at_once``: with no grace."""
        if (found := self._connections.pop(server, None)) is not None:
            await found.aclose(at_once=at_once)

    async def aclose(self) -> None:
        """End every connection of the pool's own and forget the lent sessions."""
        found, self._connections, self.lent = list(self._connections.values()), {}, {}
        await asyncio.gather(*(connection.aclose(at_once=False) for connection in found))


class _Connection:
    # A task of its own enters and leaves the SDK's context managers; cancelling it through an
    # anyio scope lets the transport's shielded clean-up finish.
    def __init__(self, server: McpServer, timeout: float, factory: TransportFactory | None) -> None:
        self.server, self._timeout, self._factory = server, timeout, factory
        self.transport: object = None  # the default one tells why its messages stopped
        self.ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._scope = anyio.CancelScope()
        self.task = asyncio.ensure_future(self._run())

    @property
    def ended(self) -> Unavailable | None:
        return getattr(self.transport, "ended", None)

    async def aclose(self, *, at_once: bool) -> None:
        if at_once or not self.ready.done():
            self._scope.cancel()  # a cancelled transport stops its server at once
        self._closing.set()
        if not (await asyncio.wait({self.task}, timeout=self._timeout))[0]:
            self._scope.cancel()
            await asyncio.wait({self.task}, timeout=_AFTER_CANCEL)

    async def _run(self) -> None:
        try:
            with self._scope:
                stdio = self._factory is None and self.server.command is not None
                process = await spawn(self.server) if stdio else None
                try:
                    sdk = await load_sdk()
                except BaseException:
                    if process is not None:  # never handed to its transport: ended at once
                        with suppress(ProcessLookupError, PermissionError):
                            os.killpg(process.pid, signal.SIGKILL)
                        with anyio.CancelScope(shield=True), anyio.move_on_after(_AFTER_CANCEL):
                            await process.aclose()
                    raise
                # Made here, so that a factory that fails is a connection that failed.
                factory = self._factory or (lambda server: sdk.BoundedTransport(server, process))
                self.transport = factory(self.server)
                if isinstance(self.transport, sdk.BoundedTransport):
                    self.transport.stop_within = self._timeout
                async with sdk.discovered(self.transport) as session:  # it owns the process now
                    self.ready.set_result(session)
                    await self._closing.wait()
        except Exception as error:  # the lookup that meets it warns (`mcp_server_skipped`)
            why = str(self.ended or repr(error))
            _log.info("mcp_server_ended", server=self.server.label, error=why)
            if not self.ready.done():
                self.ready.set_exception(error)
        finally:
            if not self.ready.done():
                self.ready.set_exception(ConnectionError(str(self.ended or "the connection ended")))
            self.ready.exception()  # retrieved: never reported as unretrieved
