"""`open_stdio`: the protocol's streams, on a private copy of stdout."""

from __future__ import annotations

import asyncio
import errno
import os
import selectors
import sys
import threading
from typing import Final

from ..quiet_log import get_logger

_log = get_logger(__name__)

# Longer lines are still read, in pieces; the reader pauses the pipe at twice this.
DEFAULT_BUFFER_BYTES: Final = 1024 * 1024


async def open_stdio(
    *, limit: int = DEFAULT_BUFFER_BYTES, protect_stdout: bool = True
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open stdin and stdout as asyncio streams, frames on a private copy of fd 1 by default."""
    for name in ("stdin", "stdout"):
        if getattr(sys, name) is None:
            raise OSError(errno.EBADF, f"{name} is closed")
    loop, reader = asyncio.get_running_loop(), asyncio.StreamReader(limit=limit)
    stdin_fd = sys.stdin.fileno()
    # asyncio only watches pipes, sockets and terminals: other stdio is copied by a thread.
    if not _pollable(stdin_fd):
        read_end, write_end = os.pipe()
        threading.Thread(target=_copy, args=(stdin_fd, write_end), daemon=True).start()
        stdin_fd = read_end
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdin_fd, "rb", buffering=0)
    )
    sys.stdout.flush()
    out_fd = os.dup(1) if protect_stdout else sys.stdout.fileno()
    if protect_stdout:
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    if not _pollable(out_fd):
        read_end, write_end = os.pipe()
        # Not a daemon: the interpreter waits for it, so the last frames reach the target.
        threading.Thread(target=_copy, args=(read_end, out_fd, True), daemon=False).start()
        out_fd = write_end
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0)
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _pollable(fd: int) -> bool:
    # epoll refuses regular files and /dev/null with EPERM; asking it is the one sure test.
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


def _copy(source: int, target: int, close_source_on_error: bool = False) -> None:
    # Closing the target lets its reader see the end; closing the source on a failure gives
    # its writer EPIPE instead of blocking once the pipe is full.
    try:
        while chunk := os.read(source, 65536):
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    except OSError as error:
        _log.warning("acp_stdio_copy_failed", error=repr(error))
        if close_source_on_error:
            os.close(source)
    finally:
        os.close(target)
