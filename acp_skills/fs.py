"""The filesystem seam discovery reads through, and the local disk. Coarse on purpose: a hop to a
worker thread costs ~100 µs, which a discovery of a thousand skills must not pay per file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

import anyio.to_thread

# anyio loads its asyncio backend on first use (about 40 ms of the first discovery); no public
# call loads it without a running loop (docs/architecture.md; tests/test_fs.py).
with contextlib.suppress(ImportError):
    import anyio._backends._asyncio

from .confined import read_failure, read_path
from .errors import Problem, ReadError
from .model import SKILL_FILE_NAME

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
        if not (batch := tuple(paths)):
            return ()
        return await anyio.to_thread.run_sync(
            lambda: [read_local_file(p, max_bytes) for p in batch]
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


def misnamed_skill_file() -> Problem:
    """The warning for a bundle whose skill file is spelled ``skill.md``."""
    message = (
        f"this directory has {_LOWERCASE_SKILL_FILE} but no {SKILL_FILE_NAME}: the name is "
        f"case-sensitive, so the skill is not loaded; rename it to {SKILL_FILE_NAME}"
    )
    return Problem("skill-file-lowercase", message)


def why_no_skill_file(directory: str) -> Problem | None:
    """Why a directory of a root has no ``SKILL.md``: spelled ``skill.md``, or skills one level
    too deep (``None``: nothing to say)."""
    if os.path.isfile(os.path.join(directory, _LOWERCASE_SKILL_FILE)):
        return misnamed_skill_file()
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
