"""Race-free reads inside one directory: a skill's resource files, never anything outside.
The walk opens one component at a time, relative to the one before, with O_NOFOLLOW, and resolves
each link met against the confined directory; a path that changes mid-walk is a failure."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final

from .errors import ReadError


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfinedFile:
    """A file read inside its directory: its path with no link left, its bytes, its identity."""

    path: str
    data: bytes
    identity: tuple[int, int]


# O_NONBLOCK: a FIFO swapped in for a file cannot hang open(). The root is opened following
# links (a skill directory may be a link); every component below it with O_NOFOLLOW.
OPEN_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_ROOT_FLAGS: Final = OPEN_FLAGS | os.O_DIRECTORY
_MAX_SYMBOLIC_LINKS: Final = 40  # as many as Linux resolves in one path before ELOOP
# Smallest read request; it also bounds how far past the cap a growing file is read.
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
    # Asking for more than fstat's size, the usual case costs one call (a second "is that all?"
    # read adds a fifth to a large discovery); asking for max_bytes would allocate a megabyte.
    chunks: list[bytes] = []
    total = 0
    while True:
        request = max(info.st_size + 1 - total, _CHUNK)
        if not (chunk := os.read(fd, request)):
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            return ReadError(failure="grew", limit=max_bytes)
        if total == info.st_size and len(chunk) < request:
            break
    return info, b"".join(chunks)


def read_path(path: str, max_bytes: int, flags: int = OPEN_FLAGS) -> bytes | ReadError:
    """Open ``path``, read it whole within the cap and close it (raises ``OSError``)."""
    fd = os.open(path, flags)
    try:
        read = read_descriptor(fd, max_bytes)
    finally:
        os.close(fd)
    return read if isinstance(read, ReadError) else read[1]


def read_confined(
    directory: str, path: str, max_bytes: int, *, excluded: Collection[str] = ()
) -> ConfinedFile | ReadError:
    """Read ``path`` (relative, without ``..``) inside ``directory``, never outside it nor
    ``excluded``."""
    if "\0" in directory or "\0" in path:
        return ReadError(failure="not_found")  # no file name holds a NUL
    if ".." in (pending := _segments(path)[::-1]):  # a stack: the next segment is last
        return ReadError(failure="outside")  # the caller refuses these with its own words
    root = os.path.realpath(directory)
    excluded_ids = _identities(excluded)
    try:
        root_fd = os.open(root, _ROOT_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return ReadError(failure="not_found")
    except OSError as exc:
        return _unreadable(exc)
    # Only the root and the current entry are open: a deep path holds two descriptors, not one
    # per segment. `names` is the physical chain from the root, no link in it.
    names: list[str] = []
    current = root_fd
    links = 0
    try:
        while pending:
            name = pending.pop()
            flags = (OPEN_FLAGS if not pending else _ROOT_FLAGS) | os.O_NOFOLLOW
            try:
                fd = os.open(name, flags, dir_fd=current)
            except OSError as exc:
                try:
                    target = os.readlink(name, dir_fd=current)
                except OSError:  # not a symbolic link (or gone): the open's own error stands
                    return _open_failure(exc)
                links += 1
                if links > _MAX_SYMBOLIC_LINKS:
                    return ReadError(failure="unreadable", detail=os.strerror(errno.ELOOP))
                # Where the link leads now is only a proposal: the walk starts again from the
                # root and opens it one component at a time, so a swap meanwhile fails there.
                resolved = os.path.realpath(os.path.join(root, *names, target))
                if os.path.commonpath([root, resolved]) != root:
                    return ReadError(failure="outside")
                pending.extend(_segments(os.path.relpath(resolved, root))[::-1])
                names.clear()
                current = _step_to(root_fd, current, root_fd)
                continue
            current = _step_to(root_fd, current, fd)
            names.append(name)
            if _identity(os.fstat(fd)) in excluded_ids:
                return ReadError(failure="excluded")
        read = read_descriptor(current, max_bytes)
        if isinstance(read, ReadError) and read.failure == "directory":
            read = _with_entries(read, current, excluded_ids)
    except OSError as exc:
        return _unreadable(exc)
    finally:
        if current != root_fd:
            os.close(current)
        os.close(root_fd)
    if isinstance(read, ReadError):
        return read
    info, data = read
    return ConfinedFile(path=os.path.join(root, *names), data=data, identity=_identity(info))


def _step_to(root_fd: int, current: int, following: int) -> int:
    # Closes the entry left behind (never the root, held for the whole walk).
    if current not in (root_fd, following):
        os.close(current)
    return following


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


def _segments(path: str) -> list[str]:
    return [segment for segment in path.split("/") if segment not in ("", ".")]


def _open_failure(exc: OSError) -> ReadError:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return ReadError(failure="not_found")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        # O_NOFOLLOW met a link, yet it was no link by the time it was looked at.
        return ReadError(failure="changed")
    return _unreadable(exc)


def _unreadable(exc: OSError) -> ReadError:
    return ReadError(failure="unreadable", detail=exc.strerror or str(exc))


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
