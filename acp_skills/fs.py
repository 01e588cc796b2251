"""The filesystem seam: what the local provider needs from a disk, and the local disk itself.

    SkillFileSystem    the protocol (three coarse async operations)
    LocalFileSystem    the default: the machine's own disk, via worker threads
    DirEntry           one entry of a directory listing: a name and a kind
    FileReadError      why one file of a batch could not be read

A sandboxed or remote workspace can supply its own ``SkillFileSystem``. The operations are
deliberately coarse: handing work to a worker thread costs on the order of a hundred
microseconds, so a discovery of a thousand skills must not pay it per file. Listing a directory
is one hop and reading any number of files is one hop.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

# anyio imports its event-loop backend on first use, which would add ~20 ms to the first
# discovery. The library runs on asyncio (the ACP SDK is asyncio-only): pay it at import.
import anyio._backends._asyncio
import anyio.to_thread

from ._collector import collection_paused

T = TypeVar("T")

__all__ = [
    "DirEntry",
    "DirEntryKind",
    "FileReadError",
    "LocalFileSystem",
    "SkillFileSystem",
]

DirEntryKind: TypeAlias = Literal["dir", "file", "broken_link", "other"]
"""What a directory entry is, after following symbolic links.

``broken_link`` is a symbolic link whose target is missing or cannot be examined; ``other`` is
anything that is neither a directory nor a regular file (a socket, a FIFO, a device).
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class DirEntry:
    """One entry of a directory listing.

    Attributes:
        name: The entry's name (not a path).
        kind: What it is, following symbolic links.
    """

    name: str
    kind: DirEntryKind


@dataclass(frozen=True, slots=True, kw_only=True)
class FileReadError:
    """Why a file of a ``read_files`` batch could not be read.

    Attributes:
        reason: A human-readable explanation (for example the size and the cap).
        not_found: True when nothing exists at the path (so a caller probing for an optional
            file, like a bundle's ``SKILL.md``, can stay quiet). A broken symbolic link is
            *not* "not found": the link is there, pointing nowhere.
    """

    reason: str
    not_found: bool = False


@runtime_checkable
class SkillFileSystem(Protocol):
    """The file operations skill discovery needs. Paths are absolute, in the host's syntax."""

    async def exists(self, path: str) -> bool:
        """Return whether anything (file or directory, following links) exists at ``path``.

        Used to look for ``.git``, which is a file in a git worktree.
        """
        ...

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """List a directory's entries, in no particular order.

        Returns:
            The entries, or ``None`` when ``path`` does not exist or is not a directory.

        Raises:
            OSError: The directory exists but cannot be read (for example, permission denied).
        """
        ...

    async def read_files(
        self, paths: Sequence[str], max_bytes: int
    ) -> Sequence[bytes | FileReadError]:
        """Read whole files, as one batch.

        A file larger than ``max_bytes`` is not read in full; it gives a ``FileReadError``.

        Args:
            paths: The files to read.
            max_bytes: The largest file size accepted.

        Returns:
            One result per path, in the same order: the file's bytes or why they are missing.
        """
        ...

    async def digest_files(
        self, paths: Sequence[str], max_bytes: int, digest: Callable[[bytes], T]
    ) -> Sequence[T | FileReadError]:
        """Read files like `read_files`, handing each one's bytes to ``digest`` as it arrives.

        Only the digests are kept, so a discovery of thousands of files never holds all their
        bytes at once. ``digest`` is pure and thread-safe; a local implementation runs it in
        the same worker thread as the reads (off the event loop). An implementation without
        threads may simply apply it to what `read_files` returns.

        Returns:
            One result per path, in the same order: the digest, or why the file is missing.
        """
        ...


class LocalFileSystem:
    """The local disk. Every operation runs in a worker thread, off the event loop."""

    async def exists(self, path: str) -> bool:
        """Return whether anything exists at ``path`` (a broken link does not count)."""
        return await anyio.to_thread.run_sync(os.path.exists, path)

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """List a directory with ``os.scandir``; see `SkillFileSystem.list_dir`.

        Raises:
            OSError: The directory exists but cannot be read.
        """
        return await anyio.to_thread.run_sync(_list_dir, path)

    async def read_files(
        self, paths: Sequence[str], max_bytes: int
    ) -> Sequence[bytes | FileReadError]:
        """Read every file in one worker-thread hop; see `SkillFileSystem.read_files`."""
        if not paths:
            return ()
        batch = tuple(paths)
        return await anyio.to_thread.run_sync(_read_batch, batch, max_bytes)

    async def digest_files(
        self, paths: Sequence[str], max_bytes: int, digest: Callable[[bytes], T]
    ) -> Sequence[T | FileReadError]:
        """Read and digest every file in one worker-thread hop; see `SkillFileSystem`."""
        if not paths:
            return ()
        batch = tuple(paths)
        return await anyio.to_thread.run_sync(_digest_batch, batch, max_bytes, digest)


def _list_dir(path: str) -> list[DirEntry] | None:
    try:
        entries = os.scandir(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with entries:
        return [DirEntry(name=entry.name, kind=_kind_of(entry)) for entry in entries]


def _kind_of(entry: os.DirEntry[str]) -> DirEntryKind:
    try:
        # is_dir/is_file follow links; for a plain entry they usually answer from the
        # directory listing itself, without a stat call.
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        if entry.is_symlink() and not os.path.exists(entry.path):
            return "broken_link"
    except OSError:
        # Following the link failed (say, it points into a directory we may not enter).
        # Whatever it points at, we cannot use it: report it like a broken link.
        return "broken_link"
    return "other"


# Open flags: O_NONBLOCK so that a FIFO swapped in for a skill file cannot hang the worker
# thread in open(); O_BINARY (Windows only) so no newline translation happens.
_OPEN_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _read_batch(paths: tuple[str, ...], max_bytes: int) -> list[bytes | FileReadError]:
    return [_read_one(path, max_bytes) for path in paths]


def _digest_batch(
    paths: tuple[str, ...], max_bytes: int, digest: Callable[[bytes], T]
) -> list[T | FileReadError]:
    results: list[T | FileReadError] = []
    # What the digests build outlives the batch, so collector passes during it find nothing.
    with collection_paused():
        for path in paths:
            data = _read_one(path, max_bytes)
            # Each file's bytes are dropped as soon as they are digested: holding a thousand of
            # them at once costs fresh memory (page faults) that rivals the reads themselves.
            results.append(data if isinstance(data, FileReadError) else digest(data))
    return results


def _read_one(path: str, max_bytes: int) -> bytes | FileReadError:
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        if os.path.islink(path):
            return FileReadError(reason="broken symbolic link")
        return FileReadError(reason="file not found", not_found=True)
    except OSError as exc:
        return FileReadError(reason=_describe_os_error(exc))
    try:
        # Check what was opened before reading: a directory or device must not be read, and
        # an oversized file must not be read in full.
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return FileReadError(reason="is a directory")
        if not stat.S_ISREG(info.st_mode):
            return FileReadError(reason="not a regular file")
        if info.st_size > max_bytes:
            return FileReadError(
                reason=f"file is {info.st_size} bytes, over the {max_bytes}-byte limit"
            )
        data = _read_to_end(fd, info.st_size, max_bytes)
    except OSError as exc:
        return FileReadError(reason=_describe_os_error(exc))
    finally:
        os.close(fd)
    if data is None:
        return FileReadError(reason=f"file grew past the {max_bytes}-byte limit while being read")
    return data


# Smallest read request; it also bounds how far past the cap a growing file is read.
_CHUNK: Final = 8192


def _read_to_end(fd: int, expected_size: int, max_bytes: int) -> bytes | None:
    """Read until end of file, or return None once more than ``max_bytes`` arrived.

    The first request asks for more than ``expected_size`` (from fstat). When exactly that
    many bytes come back, the file has not grown and the read stopped at its end, so the
    usual case costs one read call; a second "is that all?" read would add about a fifth to
    the cost of a large discovery. Anything else (the file grew, a short read) keeps reading
    until a read returns nothing. Asking for ``max_bytes`` up front is avoided on purpose: it
    would allocate a megabyte-sized buffer per file.
    """
    chunks: list[bytes] = []
    total = 0
    while True:
        request = max(expected_size + 1 - total, _CHUNK)
        chunk = os.read(fd, request)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            return None
        if total == expected_size and len(chunk) < request:
            break
    return b"".join(chunks)


def _describe_os_error(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    detail = exc.strerror or str(exc)
    return f"cannot read file: {detail}"
