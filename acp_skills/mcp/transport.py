"""How an MCP server is reached, bounded (contract §14a), and the extension's requests: the one
module that imports the MCP SDK, loaded by `pool.load_sdk`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
import httpx2
import mcp.types as types
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import ClientSession, MCPError
from mcp.client.caching import MAX_TTL_MS
from mcp.client.streamable_http import streamable_http_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, ConfigDict

from .config import McpServer
from .listing import SKILLS_EXTENSION, ListedSkill, Listing, RejectedEntry, read_entry
from .pool import MAX_RESPONSE_BYTES, TooLarge, Unavailable, spawn

if TYPE_CHECKING:
    from mcp.client import Transport

STDERR_TAIL_BYTES: Final = 2048
_NO_SKILL_THERE: Final = (-32602, -32601)  # invalid params; no `skills/get` at all
_EXIT_GRACE: Final = 2.0  # to leave once its input closed (at most half the deadline)
_TERM_GRACE: Final = 1.0  # from SIGTERM to SIGKILL (at most half the deadline)
_REAP: Final = 0.5  # for a killed server to be reaped, or an exited one's stderr to be read
_CLOSED: Final = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)

TransportFactory: TypeAlias = "Callable[[McpServer], Transport]"
"""A server's configuration to the MCP SDK's `mcp.client.Transport` (docs/mcp.md)."""


class BoundedTransport:
    """``server``'s command as a child process over stdio (``process``: spawned already), or
    its url over streamable HTTP; ``ended``: why its messages stopped."""

    def __init__(self, server: McpServer, process: Process | None = None) -> None:
        self.server, self._process = server, process
        self.ended: Unavailable | None = None
        self.stop_within = 10.0
        self._opened = self._stdio() if server.command is not None else self._http()

    async def __aenter__(self) -> Any:
        return await self._opened.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._opened.__aexit__(*exc_info)

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[Any]:
        process = self._process or await spawn(self.server)
        stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
        assert stdin is not None
        assert stdout is not None
        assert stderr is not None
        # No await until the `try`: a cancellation in between would leave the process running.
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        tail, tail_read, grace = bytearray(), anyio.Event(), self.stop_within

        async def end(reason: Unavailable | None = None) -> None:
            # The first reason found is why the messages stopped; by default, how it exited.
            if self.ended is None and reason is None:
                with anyio.move_on_after(_REAP):
                    await _exited(process)
                    await tail_read.wait()
                reason = Unavailable(_exit_reason(process.returncode, bytes(tail)))
            self.ended = self.ended or reason
            await to_session.aclose()

        async def read_stdout() -> None:
            lines = BufferedByteReceiveStream(stdout)
            try:
                while True:
                    line = await lines.receive_until(b"\n", MAX_RESPONSE_BYTES + 1)
                    if line.strip():
                        await to_session.send(_message(line))
            except anyio.DelimiterNotFound:
                await end(TooLarge())  # never held whole: the server's use ends here
            except (*_CLOSED, anyio.IncompleteRead):
                await end()

        async def read_stderr() -> None:
            with contextlib.suppress(*_CLOSED):
                async for chunk in stderr:
                    tail.extend(chunk)
                    del tail[:-STDERR_TAIL_BYTES]
            tail_read.set()

        async def write_stdin() -> None:
            with contextlib.suppress(*_CLOSED):  # it stopped reading: its exit is watched
                async for message in from_session:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send((text + "\n").encode())

        async def watch_exit() -> None:
            # A helper that inherited the server's stdout keeps it open after the server exits.
            await _exited(process)
            await end()

        try:
            async with anyio.create_task_group() as group:
                for task in (read_stdout, read_stderr, write_stdin, watch_exit):
                    group.start_soon(task)
                try:
                    yield from_server, to_server
                except BaseException:
                    grace = 0.0  # a server given up on (or failed) has no time to leave
                    raise
                finally:
                    group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                # Input closed, then SIGTERM and SIGKILL to the whole group (helpers included),
                # even when the server itself has gone; each step within half the grace.
                with contextlib.suppress(*_CLOSED):
                    await stdin.aclose()
                with anyio.move_on_after(min(_EXIT_GRACE, grace / 2)):
                    await _exited(process)
                await terminate_posix_process_tree(process, min(_TERM_GRACE, grace / 2))
                with anyio.move_on_after(_REAP):
                    await process.aclose()
                for stream in (to_session, from_server, to_server, from_session):
                    await stream.aclose()

    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[Any]:
        assert self.server.url is not None
        # Compressed bodies are refused: their size says nothing of what they expand to.
        headers = {**dict(self.server.headers), "Accept-Encoding": "identity"}
        async with (
            httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [self._capped]},
            ) as http,
            streamable_http_client(
                self.server.url, http_client=http, max_sse_event_size=MAX_RESPONSE_BYTES
            ) as streams,
        ):
            yield streams[0], streams[1]

    async def _capped(self, response: httpx2.Response) -> None:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            said = f"it sent a {encoding}-compressed response though asked not to"
            raise self._refuse(Unavailable(said))
        # Server-sent events stay open for many messages; the SDK caps each event.
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.stream = _Capped(response.stream, self._refuse)

    def _refuse(self, reason: Unavailable) -> httpx2.StreamError:
        self.ended = reason
        return httpx2.StreamError(str(reason))


open_transport: TransportFactory = BoundedTransport  # the default


class _Capped(httpx2.AsyncByteStream):
    # A JSON answer counted as it arrives, refused past `MAX_RESPONSE_BYTES`.
    def __init__(self, stream: Any, refuse: Callable[[Unavailable], Exception]) -> None:
        self._stream, self._refuse = stream, refuse

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            if (size := size + len(chunk)) > MAX_RESPONSE_BYTES:
                raise self._refuse(TooLarge())
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


@contextlib.asynccontextmanager
async def discovered(transport: Transport) -> AsyncIterator[ClientSession]:
    """A client session over ``transport`` after its ``server/discover``."""
    async with (
        transport as (read, write),
        ClientSession(read, write, extensions={SKILLS_EXTENSION: {}}) as session,
    ):
        await session.discover()
        yield session


# -- the extension's requests, as the protocol writes them (the SDK has no skills API yet) ------


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")  # every field as the server sent it


async def list_skills(session: ClientSession) -> Listing:
    """Every page of `skills/list`, their entries capped together (a lent session's transport
    counts nothing); a server that pages on and on meets the deadline."""
    pages: list[dict[str, Any]] = []
    entries: list[ListedSkill | RejectedEntry] = []
    size, params = 0, dict[str, Any]()
    while True:
        pages.append(page := await _request(session, "skills/list", params))
        if not isinstance(skills := page.pop("skills", None), list):  # only its hints are kept
            raise ValueError("its skills/list answer holds no list of skills")
        size += len(json.dumps(skills, ensure_ascii=False, separators=(",", ":")).encode())
        if size > MAX_RESPONSE_BYTES:
            raise TooLarge()
        entries.extend(read_entry(raw) for raw in skills)
        if not isinstance(cursor := page.get("nextCursor"), str) or not cursor:
            return _listing(pages, entries)
        params = {"cursor": cursor}


async def get_skill(session: ClientSession, uri: str) -> Listing | None:
    """`skills/get` of ``uri``; ``None`` when the server serves no skill there."""
    try:
        answer = await _request(session, "skills/get", {"uri": uri})
    except MCPError as error:
        if error.code in _NO_SKILL_THERE:
            return None
        raise
    entry = read_entry(answer.get("skill"))
    if isinstance(entry, ListedSkill) and entry.uri != uri:
        entry = RejectedEntry(uri=uri, reason=f"the server answered with the entry of {entry.uri}")
    return _listing([answer], [entry])


async def read_text(session: ClientSession, uri: str) -> bytes | None:
    """`resources/read` of ``uri``: its one text block as UTF-8 (``None``: no text came)."""
    for content in (await session.read_resource(uri)).contents:
        if content.uri == uri and isinstance(content, types.TextResourceContents):
            return content.text.encode("utf-8", "surrogatepass")
    return None


async def _request(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    request = types.Request[dict[str, Any], str](method=method, params=params)
    return (await session.send_request(request, _Answer)).model_extra or {}


def _listing(
    answers: Sequence[Mapping[str, Any]], entries: list[ListedSkill | RejectedEntry]
) -> Listing:
    # Kept as long and as widely as its strictest answer allows; a missing or malformed hint
    # is the strictest (0, private).
    ttls = [ttl if type(ttl := a.get("ttlMs")) is int and ttl > 0 else 0 for a in answers]
    return Listing(
        tuple(entry for entry in entries if isinstance(entry, ListedSkill)),
        tuple(entry for entry in entries if isinstance(entry, RejectedEntry)),
        min(*ttls, MAX_TTL_MS),
        all(answer.get("cacheScope") == "public" for answer in answers),
    )


def _message(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error  # the session reports it and goes on


def _exit_reason(status: int | None, stderr: bytes) -> str:
    if status is None:
        said = "the server closed its output"
    elif status < 0:
        said = f"the server was ended by signal {-status}"
    else:
        said = f"the server exited with status {status}"
    # Its stderr's last whole lines as written (each report cleans what it shows), on one line.
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    last = " | ".join(line for line in lines if line).encode()
    if len(stderr) >= STDERR_TAIL_BYTES or len(last) > STDERR_TAIL_BYTES:
        last = last[-STDERR_TAIL_BYTES:].split(b" | ", 1)[-1]  # a piece of a line goes
    return f"{said}; its stderr ends: {last.decode('utf-8', 'ignore')}" if last else said


async def _exited(process: Process) -> None:
    # Polled: asyncio's `wait()` also waits for the pipes to close, and a helper that inherited
    # them keeps them open after the server has gone.
    while process.returncode is None:  # noqa: ASYNC110
        await anyio.sleep(0.02)
