"""The files the agent opens before it serves: only regular files, so start-up cannot hang.

A FIFO blocks ``open`` until someone writes to it and a device such as ``/dev/zero`` never ends,
so both the API key file and the log file are opened without blocking, checked with ``fstat``,
and refused unless they are regular files; the key is read only up to `MAX_KEY_FILE_BYTES`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final, TextIO

MAX_KEY_FILE_BYTES: Final = 65_536
_COMMON: Final = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


class NotARegularFile(OSError):
    """The path names a FIFO, a device, a directory or a socket, or is over its size cap."""


def _require_regular(fd: int, path: Path) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotARegularFile(f"{path} is not a regular file")
    # Back to blocking: later reads and writes of a regular file never wait anyway.
    os.set_blocking(fd, True)
    return info


def read_key_file(path: Path) -> str:
    """The text of ``path``, a regular file of at most `MAX_KEY_FILE_BYTES`.

    Raises:
        NotARegularFile: not a regular file, or larger than the cap.
        OSError: it cannot be opened or read.
        UnicodeDecodeError: it is not UTF-8.
    """
    fd = os.open(path, os.O_RDONLY | _COMMON)
    info = _require_regular(fd, path)
    with os.fdopen(fd, "rb") as file:
        if info.st_size > MAX_KEY_FILE_BYTES or len(data := file.read(MAX_KEY_FILE_BYTES + 1)) > (
            MAX_KEY_FILE_BYTES
        ):
            raise NotARegularFile(f"{path} is larger than {MAX_KEY_FILE_BYTES} bytes")
    return data.decode("utf-8")


def open_log_file(path: Path) -> TextIO:
    """``path`` opened to append, line-buffered, created if missing; a regular file only.

    Raises:
        NotARegularFile: it exists and is not a regular file.
        OSError: it cannot be opened.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _COMMON, 0o666)
    except OSError as error:
        if error.errno == errno.ENXIO:  # what a FIFO without a reader answers a non-blocking open
            raise NotARegularFile(f"{path} is not a regular file") from None
        raise
    _require_regular(fd, path)
    # Line-buffered, so a person following the file sees each event as it happens.
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
