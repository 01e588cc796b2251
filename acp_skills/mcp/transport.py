"""How bytes reach an MCP server and come back, bounded (contract §14a): a stdio server runs in a
process group of its own that is ended whole, even after the server itself has exited, and
keeps the tail of its stderr for the reason it stopped; no response over `MAX_RESPONSE_BYTES`
is held in memory, over stdio or streamable HTTP.

Both transports count what they receive (``received``) and say why their stream of messages
ended (``ended``) before the session sees it end, so a failure is reported with its cause
rather than the SDK's "Connection closed".

`open_transport` picks one for a server's configuration. It is the default `TransportFactory`,
the seam through which `McpPool` opens every connection: any other factory (a server running
in the same process over memory streams, say) yields the streams of an MCP client session as
well, and is used without the bounds of this module (docs/mcp.md).
"""

from __future__ import annotations

import abc
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
import httpx2
import mcp.types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from .config import McpServer

if TYPE_CHECKING:
    from mcp.client import Transport

MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
"""One message from a server (a listing page, a read), and one listing's pages together."""
TOO_LARGE: Final = f"it sent a response over {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB"
STDERR_TAIL_BYTES: Final = 2048
_JOINED: Final = " | "  # between the lines of stderr in a reason, which is one line
# A server whose input closed may leave by itself for this long (at most half the deadline),
# then its group gets SIGTERM, then SIGKILL.
_EXIT_GRACE: Final = 2.0
_TERM_GRACE: Final = 1.0
# How often a server's exit (or its group's) is looked for.
_EXIT_POLL: Final = 0.02
# How long a killed server is given to be reaped, whatever is left of the deadline.
_REAP: Final = 0.5
# After the server exits: how long its last words on stderr (and its exit status) are awaited.
_LAST_WORDS: Final = 0.5

Streams: TypeAlias = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


TransportFactory: TypeAlias = "Callable[[McpServer], Transport]"
"""How a connection reaches a server: given the server's configuration, an async context
manager (the MCP SDK's `mcp.client.Transport`) whose block holds the read and write streams of
an MCP client session. One connection's task enters it and leaves it; leaving it ends the
server's use. `open_transport` is the default."""


def open_transport(server: McpServer) -> BoundedTransport:
    """The default `TransportFactory`: the server's command as a child process over stdio, or
    its url over streamable HTTP, both bounded as this module says."""
    return StdioProcess(server) if server.command is not None else HttpEndpoint(server)


class BoundedTransport(abc.ABC):
    """A `mcp.client.Transport` that also tells its connection why the server's messages
    stopped (``ended``, ``None`` while they flow) and how many bytes came (``received``, which
    caps a listing's pages together), and stops the server within ``stop_within`` seconds when
    its block ends (the connection lowers it to 0 for a server it gives up on)."""

    def __init__(self) -> None:
        self.ended: str | None = None
        self.received = 0
        self.stop_within = 10.0
        self._block: AbstractAsyncContextManager[Any] | None = None

    @abc.abstractmethod
    def open(self) -> AbstractAsyncContextManager[Any]:
        """Connect; the block holds the session's ``(read, write)`` streams."""

    async def __aenter__(self) -> Any:
        self._block = self.open()
        return await self._block.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        block, self._block = self._block, None
        assert block is not None, "left a transport that was never entered"
        return await block.__aexit__(exc_type, exc, traceback)


class ResponseTooLarge(Exception):
    """A server sent more than `MAX_RESPONSE_BYTES` for one answer."""

    def __init__(self) -> None:
        super().__init__(TOO_LARGE)


class StdioProcess(BoundedTransport):
    """One stdio server: started by `open`, in a session (process group) of its own."""

    def __init__(self, server: McpServer) -> None:
        super().__init__()
        assert server.command is not None
        self._argv = [server.command, *server.args]
        self._env = {**os.environ, **dict(server.env)}
        self._stderr = bytearray()
        self._stderr_closed = anyio.Event()
        self._to_session: MemoryObjectSendStream[SessionMessage | Exception] | None = None

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Streams]:
        """Start the server; when the block ends, stop its whole process group within
        ``stop_within`` seconds (as it is then)."""
        process = await anyio.open_process(
            self._argv,
            env=self._env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, ended whole
        )
        # No await until the `try`: a cancellation in between would leave the process running.
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        self._to_session = to_session
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._read_stdout, process)
                group.start_soon(self._read_stderr, process)
                group.start_soon(self._write_stdin, process, from_session)
                group.start_soon(self._watch_exit, process)
                try:
                    yield from_server, to_server
                finally:
                    group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process, self.stop_within)
                for stream in (to_session, from_server, to_server, from_session):
                    await stream.aclose()

    async def _read_stdout(self, process: Process) -> None:
        assert process.stdout is not None
        pending: list[bytes] = []
        size = 0
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            async for chunk in process.stdout:
                while (newline := chunk.find(b"\n")) >= 0:
                    line, chunk = b"".join((*pending, chunk[:newline])), chunk[newline + 1 :]
                    pending, size = [], 0
                    if not await self._deliver(line):
                        return
                pending.append(chunk)
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    # Never held whole: the server's use ends here.
                    await self._end(process, TOO_LARGE)
                    return
        await self._end(process, None)

    async def _deliver(self, line: bytes) -> bool:
        self.received += len(line)
        if not line.strip():
            return True
        try:
            item: SessionMessage | Exception = SessionMessage(
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            )
        except ValueError as error:
            item = error  # the session reports it; the connection goes on
        try:
            assert self._to_session is not None
            await self._to_session.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def _read_stderr(self, process: Process) -> None:
        assert process.stderr is not None
        try:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                async for chunk in process.stderr:
                    self._stderr += chunk
                    del self._stderr[:-STDERR_TAIL_BYTES]
        finally:
            self._stderr_closed.set()

    async def _write_stdin(
        self, process: Process, messages: MemoryObjectReceiveStream[SessionMessage]
    ) -> None:
        assert process.stdin is not None
        try:
            async for message in messages:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((text + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server is gone or stopped reading: the session must see its end now
            # rather than wait for an answer that cannot come.
            await self._end(process, None)

    async def _watch_exit(self, process: Process) -> None:
        # A helper that inherited the server's stdout keeps it open after the server exits.
        await _exited(process)
        await self._end(process, None)

    async def _end(self, process: Process, reason: str | None) -> None:
        """The stream of messages ends: say why (the first reason found), then close it."""
        if self.ended is None and reason is None:
            with anyio.move_on_after(_LAST_WORDS):
                await _exited(process)
                await self._stderr_closed.wait()
            if self.ended is None:
                self.ended = self._exit_reason(process.returncode)
        elif self.ended is None:
            self.ended = reason
        if self._to_session is not None:
            await self._to_session.aclose()

    def _exit_reason(self, status: int | None) -> str:
        if status is None:
            said = "the server closed its output"
        elif status < 0:
            said = f"the server was ended by signal {-status}"
        else:
            said = f"the server exited with status {status}"
        if last := last_lines(bytes(self._stderr), cut=len(self._stderr) >= STDERR_TAIL_BYTES):
            said += f"; its stderr ends: {last}"
        return said


def last_lines(data: bytes, *, cut: bool) -> str:
    """The last non-blank lines of ``data`` (a tail of stderr) on one line (each report cleans
    it as it shows it), at most `STDERR_TAIL_BYTES` of them; the first dropped when ``cut`` (it is a
    piece of a line)."""
    lines = data.decode("utf-8", "replace").splitlines()
    if cut and len(lines) > 1:
        lines = lines[1:]
    kept: list[str] = []
    size = 0
    for line in reversed([line.strip() for line in lines if line.strip()]):
        size += len(line.encode()) + (len(_JOINED) if kept else 0)
        if size > STDERR_TAIL_BYTES:
            # One line longer than all the room: its end, where an error usually says what.
            if not kept:
                kept.append(line.encode()[-STDERR_TAIL_BYTES:].decode("utf-8", "ignore"))
            break
        kept.append(line)
    return _JOINED.join(reversed(kept))


async def _stop(process: Process, within: float) -> None:
    # Input closed, a grace to leave, then SIGTERM and SIGKILL to the whole group, helpers
    # included, even when the server itself has gone: all within ``within`` seconds.
    deadline = anyio.current_time() + max(within, 0.0)
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(min(_EXIT_GRACE, within / 2)):
        await _exited(process)
    # While a member lives, its group id is not given to another process, so this signals
    # nothing else; once none is left, the group is gone (ESRCH) and nothing more is sent.
    if _signal_group(process.pid, signal.SIGTERM):
        with anyio.move_on_after(min(_TERM_GRACE, deadline - anyio.current_time())):
            await _group_gone(process.pid)
        _signal_group(process.pid, signal.SIGKILL)
    # Our ends of the pipes closed, then the exit awaited (a killed server's takes moments).
    with anyio.move_on_after(max(deadline - anyio.current_time(), _REAP)):
        await process.aclose()


async def _exited(process: Process) -> None:
    # Polled: asyncio's `wait()` also waits for the pipes to close, and a helper that inherited
    # them keeps them open after the server has gone.
    while process.returncode is None:  # noqa: ASYNC110
        await anyio.sleep(_EXIT_POLL)


async def _group_gone(group: int) -> None:
    # Polled: nothing tells a process that another's group emptied.
    while _signal_group(group, 0):  # noqa: ASYNC110
        await anyio.sleep(_EXIT_POLL)


def _signal_group(group: int, signum: int) -> bool:
    """Send ``signum`` to the process group; whether any member was there to get it."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member that is not ours any more (it changed its user)
    return True


class HttpEndpoint(BoundedTransport):
    """One streamable HTTP server, whose JSON answers are counted as they arrive (and refused
    past `MAX_RESPONSE_BYTES`, never held whole) and whose SSE events are capped alike. Its
    ``stop_within`` is not used: the connection cancels the block after that long."""

    def __init__(self, server: McpServer) -> None:
        super().__init__()
        assert server.url is not None
        self._url = server.url
        # Compressed bodies are refused (below): their size says nothing of what they expand to.
        self._headers = {**dict(server.headers), "Accept-Encoding": "identity"}

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Any]:
        """Connect; the SDK ends the HTTP session when the block ends."""
        async with (
            httpx2.AsyncClient(
                headers=self._headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [self._capped]},
            ) as http,
            streamable_http_client(
                self._url, http_client=http, max_sse_event_size=MAX_RESPONSE_BYTES
            ) as streams,
        ):
            yield streams[0], streams[1]

    async def _capped(self, response: httpx2.Response) -> None:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            self.ended = f"it sent a {encoding}-compressed response though asked not to"
            raise _Refused(self.ended)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
            self.ended = TOO_LARGE
            raise _Refused(TOO_LARGE)
        # Server-sent events stay open for many messages; the SDK caps each event.
        events = response.headers.get("content-type", "").startswith("text/event-stream")
        response.stream = _Counted(response.stream, self, capped=not events)


class _Refused(httpx2.StreamError):
    pass


class _Counted(httpx2.AsyncByteStream):
    def __init__(self, stream: Any, endpoint: HttpEndpoint, *, capped: bool) -> None:
        self._stream, self._endpoint, self._capped = stream, endpoint, capped

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            size += len(chunk)
            self._endpoint.received += len(chunk)
            if self._capped and size > MAX_RESPONSE_BYTES:
                self._endpoint.ended = TOO_LARGE
                raise _Refused(TOO_LARGE)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
