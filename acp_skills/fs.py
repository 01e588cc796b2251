"""The filesystem seam discovery reads through, the local disk, and race-free reads inside one
directory. Coarse on purpose: a worker-thread hop (~100 µs) is never paid per file."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

import anyio.to_thread

# anyio loads its asyncio backend on first use (about 40 ms of the first discovery); no public
# call loads it without a running loop (docs/architecture.md; tests/test_fs.py).
with contextlib.suppress(ImportError):
    import anyio._backends._asyncio

from .errors import Problem, ReadError
from .model import SKILL_FILE_NAME

if sys.platform == "darwin":
    import fcntl

_LOWERCASE_SKILL_FILE: Final = SKILL_FILE_NAME.lower()

DirEntryKind: TypeAlias = Literal["dir", "file", "broken_link", "other"]
"""What an entry is, following links (``broken_link``: the target is missing or unreachable)."""


class DirEntry(NamedTuple):
    """One entry of a directory listing: its name (not a path) and what it is."""

    name: str
    kind: DirEntryKind


@runtime_checkable
class SkillFileSystem(Protocol):
    """The file operations skill discovery needs. Paths are absolute, in the host's syntax."""

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """A directory's entries, ``None`` if it is none, ``OSError`` if it cannot be read."""

    async def read_files(self, paths: Sequence[str], max_bytes: int) -> Sequence[bytes | ReadError]:
        """Whole files as one batch, one result per path; a file over ``max_bytes`` is an error."""


class LocalFileSystem:
    """The local disk, every operation in a worker thread."""

    async def exists(self, path: str) -> bool:
        """Whether anything exists at ``path`` (a broken link does not count)."""
        return await anyio.to_thread.run_sync(os.path.exists, path)

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        return await anyio.to_thread.run_sync(_list_dir, path)

    async def read_files(self, paths: Sequence[str], max_bytes: int) -> Sequence[bytes | ReadError]:
        return await anyio.to_thread.run_sync(
            lambda: [read_local_file(path, max_bytes) for path in paths]
        )


def _list_dir(path: str) -> list[DirEntry] | None:
    try:
        with os.scandir(path) as entries:
            return [DirEntry(name=entry.name, kind=_kind_of(entry)) for entry in entries]
    except (FileNotFoundError, NotADirectoryError):
        return None


def _kind_of(entry: os.DirEntry[str]) -> DirEntryKind:
    try:  # these follow links, and usually answer from the listing itself
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        return "broken_link" if entry.is_symlink() and not os.path.exists(entry.path) else "other"
    except OSError:
        return "broken_link"  # following the link failed: unusable, like a broken link


def read_local_file(path: str, max_bytes: int) -> bytes | ReadError:
    """One file of `LocalFileSystem.read_files`, in the calling thread."""
    try:
        return read_path(path, max_bytes)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and os.path.islink(path):
            return ReadError(failure="broken_link")
        return read_failure(exc)


def why_no_skill_file(directory: str, *, nested: bool = True) -> Problem | None:
    """Why a directory has no ``SKILL.md``: ``skill.md``, or (``nested``, for a directory in a
    root) skills one level too deep; ``None`` when neither."""
    if os.path.isfile(os.path.join(directory, _LOWERCASE_SKILL_FILE)):
        message = (
            f"this directory has {_LOWERCASE_SKILL_FILE} but no {SKILL_FILE_NAME}: the name is "
            f"case-sensitive, so the skill is not loaded; rename it to {SKILL_FILE_NAME}"
        )
        return Problem("skill-file-lowercase", message)
    if not nested:
        return None
    try:
        children = sorted(e.name for e in _list_dir(directory) or () if e.kind == "dir")
    except OSError:
        return None
    spellings = (SKILL_FILE_NAME, _LOWERCASE_SKILL_FILE)
    names = [
        n for n in children if any(os.path.isfile(os.path.join(directory, n, f)) for f in spellings)
    ]
    if not names:
        return None
    shown = ", ".join(f"{name}/{SKILL_FILE_NAME}" for name in names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    message = (
        f"no {SKILL_FILE_NAME} here, but {shown}{more} one level further down: discovery is one "
        "level deep, so those skills are not loaded; move them up into the skills directory, or "
        "add this directory as a skills directory of its own (--skills-dir)"
    )
    return Problem("skill-nested-too-deep", message)


def replace_file(target: str | os.PathLike[str], data: bytes, *, prefix: str, sync: bool) -> None:
    """Write ``data`` to ``prefix…tmp`` beside ``target`` and rename it over (a reader sees
    the old file or the new one); ``sync`` makes the data durable before the rename."""
    directory = os.path.dirname(os.fspath(target)) or "."
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            if sync:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


# Race-free reads inside one directory (docs/architecture.md): the file is opened, then the
# opened descriptor's path must lie inside it, so what is checked is what is read.
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
    if len(data) != info.st_size:  # it grew, or a short read (FUSE, network): on to its end
        chunks, total = [data], len(data)
        while total <= max_bytes and (more := os.read(fd, max(_CHUNK, info.st_size - total))):
            chunks.append(more)
            total += len(more)
        data = b"".join(chunks)
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
    except OSError as exc:  # realpath's too: a link can vanish, or stop being one (EINVAL from
        # its readlink), while it is resolved: what the path named is not there as it was
        return ReadError(failure="not_found") if exc.errno == errno.EINVAL else read_failure(exc)
    try:
        if not _inside(root, opened := _opened_path(fd)):
            return ReadError(failure="outside")
        excluded_ids = _identities(excluded)
        hidden = [os.path.realpath(place) for place in excluded]
        if _identity(os.fstat(fd)) in excluded_ids or any(_inside(h, opened) for h in hidden):
            return ReadError(failure="excluded")
        read = read_descriptor(fd, max_bytes)
        if isinstance(read, ReadError) and read.failure == "directory":
            read = _with_entries(fd, excluded_ids)
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


def _with_entries(directory: int, excluded: frozenset[tuple[int, int]]) -> ReadError:
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
