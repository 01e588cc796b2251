"""Race-free reads inside one directory (docs/architecture.md): the file is opened, then the
opened descriptor's path must lie inside it, so what is checked is what is read."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final

from .errors import ReadError

if sys.platform == "darwin":
    import fcntl


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfinedFile:
    """A file read inside its directory: its path with no link left, bytes and identity."""

    path: str
    data: bytes
    identity: tuple[int, int]


# O_NONBLOCK: a FIFO swapped in for a file cannot hang open().
OPEN_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
# A growing file is read this much at a time, so at most this far past the cap.
_CHUNK: Final = 8192
# A directory read by mistake is answered with at most this many of its names.
MAX_LISTED_ENTRIES: Final = 50


def read_descriptor(fd: int, max_bytes: int) -> tuple[os.stat_result, bytes] | ReadError:
    """Read an opened regular file whole, within the cap (raises ``OSError``)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return ReadError(failure="directory" if stat.S_ISDIR(info.st_mode) else "not_regular")
    if info.st_size > max_bytes:
        return ReadError(failure="too_large", size=info.st_size, limit=max_bytes)
    # fstat's size and one byte more: one call in the usual case (a second "is that all?" read adds
    # a fifth to a large discovery), where asking for max_bytes would allocate a megabyte.
    data = os.read(fd, info.st_size + 1)
    while info.st_size < len(data) <= max_bytes and (more := os.read(fd, _CHUNK)):
        data += more  # it grew
    if len(data) > max_bytes:
        return ReadError(failure="grew", limit=max_bytes)
    return info, data


def read_path(path: str, max_bytes: int, flags: int = OPEN_FLAGS) -> bytes | ReadError:
    """Open ``path``, read it whole within the cap and close it (raises ``OSError``)."""
    fd = os.open(path, flags)
    try:
        read = read_descriptor(fd, max_bytes)
    finally:
        os.close(fd)
    return read if isinstance(read, ReadError) else read[1]


def read_confined(
    directory: str, path: str, max_bytes: int, excluded: Collection[str] = ()
) -> ConfinedFile | ReadError:
    """Read ``path`` (relative) inside ``directory``, never outside it nor ``excluded``."""
    if "\0" in directory or "\0" in path:
        return ReadError(failure="not_found")  # no file name holds a NUL
    try:
        root = os.path.realpath(directory)
        # Looked at before opening, so that nothing outside (a device) is opened but in a race;
        # the opened descriptor is what decides, so a link swapped in meanwhile cannot pass.
        if not _inside(root, os.path.realpath(os.path.join(root, path))):
            return ReadError(failure="outside")
        fd = os.open(os.path.join(root, path), OPEN_FLAGS)
    except OSError as exc:  # realpath's too: a link can vanish while it is resolved
        return read_failure(exc)
    try:
        if not _inside(root, opened := _opened_path(fd)):
            return ReadError(failure="outside")
        excluded_ids = _identities(excluded)
        hidden = [os.path.realpath(place) for place in excluded]
        if _identity(os.fstat(fd)) in excluded_ids or any(_inside(h, opened) for h in hidden):
            return ReadError(failure="excluded")
        read = read_descriptor(fd, max_bytes)
        if isinstance(read, ReadError) and read.failure == "directory":
            read = _with_entries(read, fd, excluded_ids)
    except OSError as exc:
        return read_failure(exc)
    finally:
        os.close(fd)
    if isinstance(read, ReadError):
        return read
    info, data = read
    return ConfinedFile(path=opened, data=data, identity=_identity(info))


def _opened_path(fd: int) -> str:
    # Where the kernel says the descriptor's file is, every link resolved.
    if sys.platform == "darwin":
        found = fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(os.pathconf(fd, "PC_PATH_MAX")))
        return os.fsdecode(found.split(b"\0", 1)[0])
    return os.readlink(f"/proc/self/fd/{fd}")


def _inside(directory: str, path: str) -> bool:
    return path == directory or path.startswith(os.path.join(directory, ""))


def _with_entries(
    failure: ReadError, directory: int, excluded: frozenset[tuple[int, int]]
) -> ReadError:
    # Names only, never followed into: what a directory holds, so the next read can be right.
    listed: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                info = entry.stat()
            except OSError:  # a broken link: still a name the path may have meant
                listed.append(entry.name)
                continue
            if _identity(info) not in excluded:
                listed.append(entry.name + ("/" if stat.S_ISDIR(info.st_mode) else ""))
    return ReadError(failure="directory", entries=listed_entries(listed))


def listed_entries(names: Iterable[str]) -> tuple[str, ...]:
    """The first `MAX_LISTED_ENTRIES` names, sorted: a directory read by mistake's answer."""
    return tuple(sorted(names)[:MAX_LISTED_ENTRIES])


def read_failure(error: OSError) -> ReadError:
    """Why a file could not be opened or read, from the system's error."""
    if isinstance(error, FileNotFoundError | NotADirectoryError):
        return ReadError(failure="not_found")
    if isinstance(error, IsADirectoryError):
        return ReadError(failure="directory")
    return ReadError(failure="unreadable", detail=error.strerror or str(error))


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _identities(paths: Collection[str]) -> frozenset[tuple[int, int]]:
    found = set()
    for path in paths:
        try:
            found.add(_identity(os.stat(path)))
        except (OSError, ValueError):
            continue  # nothing there: nothing to protect
    return frozenset(found)
