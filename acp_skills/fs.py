"""The filesystem seam discovery reads through, and the local disk. Coarse on purpose: a hop to
a worker thread costs ~100 µs, which a discovery of a thousand skills must not pay per file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

import anyio.to_thread

# anyio loads its asyncio backend on first use, which would cost the first discovery about 40 ms.
# No public call loads it without a running loop, so its module is named here (the one private
# module used, docs/architecture.md); tests/test_fs.py fails loudly the day anyio moves it, and
# the library then merely pays that cost later.
with contextlib.suppress(ImportError):
    import anyio._backends._asyncio

from .confined import OPEN_FLAGS, ConfinedFile, ConfinedReadError, read_confined, read_descriptor

DirEntryKind: TypeAlias = Literal["dir", "file", "broken_link", "other"]
"""What an entry is, following links (``broken_link``: the target is missing or unreachable)."""


class DirEntry(NamedTuple):
    """One entry of a directory listing: its name (not a path) and what it is."""

    # A tuple: a listing makes one per entry, and a tuple is the cheapest immutable record.
    name: str
    kind: DirEntryKind


@dataclass(frozen=True, slots=True, kw_only=True)
class FileReadError:
    """Why a file of a batch could not be read (a broken link is not ``not_found``)."""

    reason: str
    not_found: bool = False
    code: str = "file-unreadable"


@runtime_checkable
class SkillFileSystem(Protocol):
    """The file operations skill discovery needs. Paths are absolute, in the host's syntax."""

    async def exists(self, path: str) -> bool:
        """Whether anything (file or directory, following links) exists at ``path``."""

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """A directory's entries, ``None`` if it is none, ``OSError`` if it cannot be read."""

    async def read_files(
        self, paths: Sequence[str], max_bytes: int
    ) -> Sequence[bytes | FileReadError]:
        """Whole files as one batch, one result per path; a file over ``max_bytes`` is an error."""


class LocalFileSystem:
    """The local disk. Every operation runs in a worker thread, off the event loop."""

    async def exists(self, path: str) -> bool:
        """Whether anything exists at ``path`` (a broken link does not count)."""
        return await anyio.to_thread.run_sync(os.path.exists, path)

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        """A directory's entries (`SkillFileSystem.list_dir`)."""
        return await anyio.to_thread.run_sync(list_local_dir, path)

    async def read_files(
        self, paths: Sequence[str], max_bytes: int
    ) -> Sequence[bytes | FileReadError]:
        """Every file in one worker-thread hop (`SkillFileSystem.read_files`)."""
        if not (batch := tuple(paths)):
            return ()
        return await anyio.to_thread.run_sync(
            lambda: [read_local_file(p, max_bytes) for p in batch]
        )

    async def read_confined(
        self, directory: str, path: str, max_bytes: int, *, excluded: Collection[str] = ()
    ) -> ConfinedFile | ConfinedReadError:
        """`acp_skills.confined.read_confined` in a worker thread."""
        return await anyio.to_thread.run_sync(
            lambda: read_confined(directory, path, max_bytes, excluded=tuple(excluded))
        )


def list_local_dir(path: str) -> list[DirEntry] | None:
    """`LocalFileSystem.list_dir`, in the calling thread (blocking)."""
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


_REASONS = {"directory": "is a directory", "not_regular": "not a regular file"}
_REASONS["grew"] = "file grew past the {max_bytes}-byte limit while being read"
_REASONS["too_large"] = "file is {size} bytes, over the {max_bytes}-byte limit"


def read_local_file(path: str, max_bytes: int) -> bytes | FileReadError:
    """One file of `LocalFileSystem.read_files`, read in the calling thread (blocking)."""
    try:
        fd = os.open(path, OPEN_FLAGS)
        try:
            read = read_descriptor(fd, max_bytes)
        finally:
            os.close(fd)
    except FileNotFoundError:
        if os.path.islink(path):
            return FileReadError(reason="broken symbolic link", code="broken-link")
        return FileReadError(reason="file not found", not_found=True)
    except PermissionError:
        return FileReadError(reason="permission denied")
    except IsADirectoryError:
        return FileReadError(reason="is a directory")
    except OSError as exc:
        return FileReadError(reason=f"cannot read file: {exc.strerror or exc}")
    if isinstance(read, ConfinedReadError):
        reason = _REASONS[read.failure].format(size=read.size, max_bytes=max_bytes)
        large = read.failure in ("too_large", "grew")
        return FileReadError(reason=reason, code="file-too-large" if large else "file-unreadable")
    return read[1]
