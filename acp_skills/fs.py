"""The filesystem seam: what the local provider needs from a disk, and the local disk itself.

    SkillFileSystem    the protocol: exists, list_dir, read_files (a batch)
    LocalFileSystem    the default: the machine's own disk, via worker threads
    DirEntry           one entry of a directory listing: a name and a kind
    FileReadError      why one file of a batch could not be read (with its problem code)

A sandboxed or remote workspace can supply its own ``SkillFileSystem``. The operations are
coarse on purpose: handing work to a worker thread costs on the order of a hundred microseconds,
so a discovery of a thousand skills must not pay it per file.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, runtime_checkable

# anyio imports its event-loop backend on first use, which would add ~20 ms to the first
# discovery. The library runs on asyncio (the ACP SDK is asyncio-only): pay it at import.
import anyio._backends._asyncio
import anyio.to_thread

from .confined import OPEN_FLAGS, ConfinedFile, ConfinedReadError, read_confined, read_descriptor

__all__ = ["DirEntry", "DirEntryKind", "FileReadError", "LocalFileSystem", "SkillFileSystem"]

DirEntryKind: TypeAlias = Literal["dir", "file", "broken_link", "other"]
"""What a directory entry is, following symbolic links: ``broken_link`` is a link whose target is
missing or cannot be examined, ``other`` neither a directory nor a regular file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DirEntry:
    """One entry of a directory listing: its name (not a path) and what it is."""

    name: str
    kind: DirEntryKind


@dataclass(frozen=True, slots=True, kw_only=True)
class FileReadError:
    """Why a file of a ``read_files`` batch could not be read.

    Attributes:
        reason: A human-readable explanation (for example the size and the cap).
        not_found: True when nothing exists at the path (a caller probing for an optional
            file stays quiet). A broken symbolic link is *not* "not found".
        code: The problem's code: ``file-unreadable``, ``file-too-large`` or ``broken-link``.
    """

    reason: str
    not_found: bool = False
    code: str = "file-unreadable"


@runtime_checkable
class SkillFileSystem(Protocol):
    """The file operations skill discovery needs. Paths are absolute, in the host's syntax."""

    async def exists(self, path: str) -> bool:
        """Whether anything (file or directory, following links) exists at ``path``."""
        ...

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """A directory's entries in no particular order, or ``None`` when ``path`` does not
        exist or is not a directory.

        Raises:
            OSError: The directory exists but cannot be read.
        """
        ...

    async def read_files(
        self, paths: Sequence[str], max_bytes: int
    ) -> Sequence[bytes | FileReadError]:
        """Read whole files as one batch: one result per path, in order. A file larger than
        ``max_bytes`` is not read in full; it gives a ``FileReadError``."""
        ...


class LocalFileSystem:
    """The local disk. Every operation runs in a worker thread, off the event loop."""

    async def exists(self, path: str) -> bool:
        """Whether anything exists at ``path`` (a broken link does not count)."""
        return await anyio.to_thread.run_sync(os.path.exists, path)

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """List a directory with ``os.scandir``; see `SkillFileSystem.list_dir`."""
        return await anyio.to_thread.run_sync(_list_dir, path)

    async def read_files(
        self, paths: Sequence[str], max_bytes: int
    ) -> Sequence[bytes | FileReadError]:
        """Read every file in one worker-thread hop; see `SkillFileSystem.read_files`."""
        if not paths:
            return ()
        batch = tuple(paths)
        return await anyio.to_thread.run_sync(_read_batch, batch, max_bytes)

    async def read_confined(
        self, directory: str, path: str, max_bytes: int, *, excluded: Collection[str] = ()
    ) -> ConfinedFile | ConfinedReadError:
        """`acp_skills.confined.read_confined` in a worker thread."""
        return await anyio.to_thread.run_sync(
            lambda: read_confined(directory, path, max_bytes, excluded=tuple(excluded))
        )


def _list_dir(path: str) -> list[DirEntry] | None:
    try:
        entries = os.scandir(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with entries:
        return [DirEntry(name=entry.name, kind=_kind_of(entry)) for entry in entries]


def _kind_of(entry: os.DirEntry[str]) -> DirEntryKind:
    try:
        # They follow links, and usually answer from the listing itself, without a stat call.
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        if entry.is_symlink() and not os.path.exists(entry.path):
            return "broken_link"
    except OSError:
        return "broken_link"  # following the link failed: unusable, like a broken link
    return "other"


def _read_batch(paths: Sequence[str], max_bytes: int) -> list[bytes | FileReadError]:
    return [read_local_file(path, max_bytes) for path in paths]


_REASONS = {
    "directory": "is a directory",
    "not_regular": "not a regular file",
    "grew": "file grew past the {max_bytes}-byte limit while being read",
    "too_large": "file is {size} bytes, over the {max_bytes}-byte limit",
}


def read_local_file(path: str, max_bytes: int) -> bytes | FileReadError:
    """One file of `LocalFileSystem.read_files`, read in the calling thread (blocking)."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        if os.path.islink(path):
            return FileReadError(reason="broken symbolic link", code="broken-link")
        return FileReadError(reason="file not found", not_found=True)
    except OSError as exc:
        return _os_error(exc)
    try:
        read = read_descriptor(fd, max_bytes)
    except OSError as exc:
        return _os_error(exc)
    finally:
        os.close(fd)
    if isinstance(read, ConfinedReadError):
        reason = _REASONS[read.failure].format(size=read.size, max_bytes=max_bytes)
        large = read.failure in ("too_large", "grew")
        return FileReadError(reason=reason, code="file-too-large" if large else "file-unreadable")
    return read[1]


def _os_error(exc: OSError) -> FileReadError:
    if isinstance(exc, PermissionError):
        return FileReadError(reason="permission denied")
    if isinstance(exc, IsADirectoryError):
        return FileReadError(reason="is a directory")
    return FileReadError(reason=f"cannot read file: {exc.strerror or exc}")
