"""`open_stdio`: the protocol's streams, on a private copy of stdout."""

from __future__ import annotations

import asyncio
import errno
import os
import selectors
import sys
import threading

from ..quiet_log import get_logger

_log = get_logger(__name__)


async def open_stdio(
    *, protect_stdout: bool = True
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open stdin and stdout as asyncio streams, frames on a private copy of fd 1 by default."""
    for name in ("stdin", "stdout"):
        if getattr(sys, name) is None:  # Python started with that descriptor closed
            raise OSError(errno.EBADF, f"{name} is closed")
    # Longer lines are still read, in pieces; the reader pauses the pipe at twice the limit.
    loop, reader = asyncio.get_running_loop(), asyncio.StreamReader(limit=1024 * 1024)
    stdin = os.fdopen(_watchable(sys.stdin.fileno(), incoming=True), "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    sys.stdout.flush()
    out_fd = os.dup(1) if protect_stdout else sys.stdout.fileno()
    if protect_stdout:
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    stdout = os.fdopen(_watchable(out_fd, incoming=False), "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _watchable(fd: int, *, incoming: bool) -> int:
    """``fd`` when asyncio can watch it, else one end of a pipe a thread copies it through."""
    with selectors.DefaultSelector() as selector:
        try:  # epoll refuses files and /dev/null with EPERM: asking it is the one sure test
            selector.register(fd, selectors.EVENT_READ)
            return fd
        except (OSError, ValueError):
            pass
    read_end, write_end = os.pipe()
    source, target = (fd, write_end) if incoming else (read_end, fd)
    # Output's thread is no daemon: the interpreter waits for it, so the last frames arrive.
    threading.Thread(target=_copy, args=(source, target), daemon=incoming).start()
    return read_end if incoming else write_end


def _copy(source: int, target: int) -> None:
    # Closing the target lets its reader see the end; closing the source on a failure gives
    # its writer EPIPE instead of blocking once the pipe is full.
    try:
        while chunk := os.read(source, 65536):
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    except OSError as error:
        _log.warning("acp_stdio_copy_failed", error=repr(error))
        os.close(source)
    finally:
        os.close(target)
