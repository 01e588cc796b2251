"""A hardened stdio transport for agents built on the official ACP Python SDK (0.12.x).

The SDK's own newline-delimited JSON transport has gaps that let one bad line take an agent
down or let a client smuggle parameters. `GuardedTransport` implements the SDK's message-level
transport (``send`` / ``receive`` / ``close``) and closes them before the SDK sees a frame:

* invalid JSON -> ``-32700`` with ``id: null``; the agent keeps serving (the SDK only logs it);
* JSON that is not an object (an array, a number, a string, ``true``) -> ``-32600``: the SDK's
  receive loop raises on these and the agent exits;
* the line ``null`` -> ``-32600``: the SDK mistakes it for the end of input;
* a request with a malformed id or a non-string method, or an object that is neither a request
  nor a response -> ``-32600``; a response with a malformed id is dropped (the SDK crashes on
  it while a request of its own is pending);
* ``params._meta`` is nested one level (``{"_meta": original}``) for every standard method, so the
  SDK, which spreads ``_meta`` keys into handler keyword arguments, passes exactly one argument
  ``_meta=<original>`` and a key such as ``session_id`` can never override the real parameter;
* a message sent after ``close()`` is dropped: the SDK answers cancelled handlers during
  shutdown, and blocking on a closed pipe would hang the process.

The error replies mirror what the TypeScript SDK answers to the same garbage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import sys
import threading
from typing import Any

import structlog

__all__ = ["GuardedTransport", "open_stdio"]

_log = structlog.get_logger(__name__)

# The SDK's own default line limit: a prompt may carry megabytes of embedded context.
DEFAULT_LINE_LIMIT = 50 * 1024 * 1024

_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_INTERNAL_ERROR = -32603


def _error(
    request_id: object, code: int, message: str, details: str | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["data"] = {"details": details}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _is_valid_id(value: object) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


class GuardedTransport:
    """The SDK's message-level transport over a pair of asyncio streams, with the guards above.

    Pass it where the SDK takes a transport: ``acp.run_agent(agent, GuardedTransport(r, w))`` or
    ``AgentSideConnection(agent, GuardedTransport(r, w))``.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame. After ``close()`` the frame is dropped rather than blocking forever."""
        if self._closed:
            _log.debug("acp_frame_dropped_after_close", method=message.get("method"))
            return
        try:
            line = json.dumps(message, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            if "id" not in message or "method" in message:
                raise
            # A response the SDK cannot serialise still gets an answer, so no client waits forever.
            line = json.dumps(_error(message["id"], _INTERNAL_ERROR, "Internal error", str(error)))
        async with self._write_lock:
            self._writer.write(line.encode("utf-8") + b"\n")
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """Return the next well-formed message, answering malformed ones; ``None`` at the end."""
        while True:
            raw = await self._read_line()
            if not raw:
                return None
            raw = raw.strip()
            if not raw:
                continue
            try:
                message = json.loads(raw)
            except (ValueError, RecursionError):
                _log.warning("acp_line_rejected", reason="not valid JSON", size=len(raw))
                await self._reply(_error(None, _PARSE_ERROR, "Parse error"))
                continue
            if not isinstance(message, dict):
                kind = "a batch" if isinstance(message, list) else "not a JSON object"
                _log.warning("acp_line_rejected", reason=kind)
                await self._reply(_error(None, _INVALID_REQUEST, "Invalid request", kind))
                continue
            checked = await self._check(message)
            if checked is not None:
                return checked

    async def close(self) -> None:
        """Stop sending and close the writer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._writer.close()
            await self._writer.wait_closed()

    async def _reply(self, payload: dict[str, Any]) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            await self.send(payload)

    async def _check(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if "method" in message:
            method = message["method"]
            if not _is_valid_id(message.get("id")):
                await self._reply(_error(None, _INVALID_REQUEST, "Invalid request", "invalid id"))
                return None
            if not isinstance(method, str):
                if "id" in message:
                    await self._reply(
                        _error(message["id"], _INVALID_REQUEST, "Invalid request", "bad method")
                    )
                return None
            params = message.get("params")
            # Extension methods receive their params untouched, so only standard methods need it.
            if not method.startswith("_") and isinstance(params, dict):
                meta = params.get("_meta")
                if isinstance(meta, dict) and meta:
                    message = {**message, "params": {**params, "_meta": {"_meta": meta}}}
            return message
        if "id" in message:
            if not _is_valid_id(message["id"]):
                _log.warning("acp_line_rejected", reason="response with an invalid id")
                return None
            if "error" in message and not isinstance(message["error"], dict):
                message = {
                    **message,
                    "error": {"code": _INTERNAL_ERROR, "message": str(message["error"])},
                }
            return message
        # JSON-RPC: an object that is neither a request nor a response is an invalid request.
        _log.warning("acp_line_rejected", reason="neither a request nor a response")
        await self._reply(
            _error(None, _INVALID_REQUEST, "Invalid request", "neither a request nor a response")
        )
        return None

    async def _read_line(self) -> bytes:
        # Lines longer than the reader's limit are still read whole (a 2 MB prompt is fine).
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    chunks.append(await self._reader.readuntil(b"\n"))
                    return b"".join(chunks)
                except asyncio.LimitOverrunError as overrun:
                    chunks.append(await self._reader.readexactly(overrun.consumed))
        except asyncio.IncompleteReadError as end:
            chunks.append(end.partial)
            return b"".join(chunks)


async def open_stdio(
    *, limit: int = DEFAULT_LINE_LIMIT, protect_stdout: bool = True
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open the process's stdin and stdout as asyncio streams for the protocol.

    With ``protect_stdout``, frames go to a private duplicate of file descriptor 1 and fd 1
    itself (and ``sys.stdout``) is pointed at stderr, so a stray ``print`` or a child process
    can never corrupt a frame.

    asyncio can only watch pipes, sockets and terminals; when stdin or stdout is something else
    (``< /dev/null``, ``> frames.jsonl``) a thread copies it through a pipe instead.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    stdin_fd = sys.stdin.fileno()
    if not _pollable(stdin_fd):
        stdin_fd = _pumped_into_pipe(stdin_fd, daemon=True)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdin_fd, "rb", buffering=0)
    )
    sys.stdout.flush()
    out_fd = os.dup(1) if protect_stdout else sys.stdout.fileno()
    if protect_stdout:
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    if not _pollable(out_fd):
        out_fd = _pumped_from_pipe(out_fd)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


def _pollable(fd: int) -> bool:
    # epoll refuses regular files and /dev/null with EPERM; asking it is the one sure test.
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


def _copy(source: int, target: int) -> None:
    """Copy until end of input, then close the target (the reader then sees the end)."""
    try:
        while chunk := os.read(source, 65536):
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    except OSError as error:
        _log.warning("acp_stdio_copy_failed", error=repr(error))
    finally:
        os.close(target)


def _pumped_into_pipe(source: int, *, daemon: bool) -> int:
    """A pipe whose read end receives everything read from ``source``, copied by a thread."""
    read_end, write_end = os.pipe()
    threading.Thread(target=_copy, args=(source, write_end), daemon=daemon).start()
    return read_end


def _pumped_from_pipe(target: int) -> int:
    """A pipe whose write end is copied to ``target`` by a thread.

    Not a daemon thread: the interpreter waits for it, so the last frames reach ``target``
    after the protocol closes its end.
    """
    read_end, write_end = os.pipe()
    threading.Thread(target=_copy, args=(read_end, target), daemon=False).start()
    return write_end
