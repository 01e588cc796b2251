"""The filesystem seam: what the local provider needs from a disk, and the local disk itself.

    SkillFileSystem    the protocol (three coarse async operations)
    LocalFileSystem    the default: the machine's own disk, via worker threads
    DirEntry           one entry of a directory listing: a name and a kind
    FileReadError      why one file of a batch could not be read
    read_confined      one file inside a directory, never outside it, whatever changes meanwhile
                       (a skill's resource reads); `ConfinedFile` or `ConfinedReadError`

A sandboxed or remote workspace can supply its own ``SkillFileSystem``. The operations are
deliberately coarse: handing work to a worker thread costs on the order of a hundred
microseconds, so a discovery of a thousand skills must not pay it per file. Listing a directory
is one hop and reading any number of files is one hop.

Every file's bytes are read by one routine (`_read_descriptor`) whichever way the file was
opened: by path for skill files, or component by component for confined resource reads.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

# anyio imports its event-loop backend on first use, which would add ~20 ms to the first
# discovery. The library runs on asyncio (the ACP SDK is asyncio-only): pay it at import.
import anyio._backends._asyncio
import anyio.to_thread

from ._collector import collection_paused

T = TypeVar("T")

__all__ = [
    "ConfinedFile",
    "ConfinedReadError",
    "ConfinedReadFailure",
    "DirEntry",
    "DirEntryKind",
    "FileReadError",
    "LocalFileSystem",
    "SkillFileSystem",
    "read_confined",
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

    async def read_and_parse(
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

    async def read_and_parse(
        self, paths: Sequence[str], max_bytes: int, digest: Callable[[bytes], T]
    ) -> Sequence[T | FileReadError]:
        """Read and digest every file in one worker-thread hop; see `SkillFileSystem`."""
        if not paths:
            return ()
        batch = tuple(paths)
        return await anyio.to_thread.run_sync(_digest_batch, batch, max_bytes, digest)

    async def read_confined(
        self, directory: str, path: str, max_bytes: int, *, excluded: Collection[str] = ()
    ) -> ConfinedFile | ConfinedReadError:
        """`read_confined` in a worker thread: a file inside ``directory``, never outside."""
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
        read = _read_descriptor(fd, max_bytes)
    except OSError as exc:
        return FileReadError(reason=_describe_os_error(exc))
    finally:
        os.close(fd)
    if isinstance(read, _Unfit):
        return FileReadError(reason=_unfit_reason(read, max_bytes))
    return read[1]


@dataclass(frozen=True, slots=True)
class _Unfit:
    """Why an opened file was not read (and how big it was, for ``too_large``)."""

    failure: Literal["directory", "not_regular", "too_large", "grew"]
    size: int = 0


def _unfit_reason(unfit: _Unfit, max_bytes: int) -> str:
    if unfit.failure == "directory":
        return "is a directory"
    if unfit.failure == "not_regular":
        return "not a regular file"
    if unfit.failure == "too_large":
        return f"file is {unfit.size} bytes, over the {max_bytes}-byte limit"
    return f"file grew past the {max_bytes}-byte limit while being read"


def _read_descriptor(fd: int, max_bytes: int) -> tuple[os.stat_result, bytes] | _Unfit:
    """Read an opened file whole: the one place where file contents are read.

    What was opened is checked before reading: a directory or a device must not be read, and
    an oversized file must not be read in full.

    Raises:
        OSError: ``fstat`` or a read failed.
    """
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        return _Unfit("directory")
    if not stat.S_ISREG(info.st_mode):
        return _Unfit("not_regular")
    if info.st_size > max_bytes:
        return _Unfit("too_large", info.st_size)
    data = _read_to_end(fd, info.st_size, max_bytes)
    if data is None:
        return _Unfit("grew")
    return info, data


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


# -- confined reads ----------------------------------------------------------------------------
#
# A resource read must return a file from inside one directory (a skill's bundle), whatever
# happens on disk meanwhile. Checking a resolved path and then opening it leaves a window in
# which an intermediate directory can be swapped for a symbolic link to anywhere, so the walk
# opens one component at a time, each relative to the descriptor of the directory before it,
# and never lets the kernel follow a link (O_NOFOLLOW). A symbolic link met on the way is
# resolved here instead, like the kernel would, but against the confined directory: a relative
# target continues from where the link is (its ``..`` may climb back up, never above the
# directory), an absolute target must lead back inside the directory. Every byte returned
# therefore comes from a descriptor reached from the directory's own, whatever was renamed
# or swapped in the meantime; a path that vanishes or changes mid-walk is a plain failure
# ("not_found" or "changed"), never an exception.

ConfinedReadFailure: TypeAlias = Literal[
    "outside",
    "excluded",
    "not_found",
    "directory",
    "not_regular",
    "too_large",
    "grew",
    "changed",
    "unreadable",
]
"""Why `read_confined` returned no file; see `ConfinedReadError`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfinedFile:
    """A file `read_confined` read from inside its directory.

    Attributes:
        path: The directory's real path joined with the path that was walked inside it:
            absolute, with no symbolic link left in it.
        data: The file's bytes.
        identity: Its ``(st_dev, st_ino)``, to tell later whether ``path`` still names it.
    """

    path: str
    data: bytes
    identity: tuple[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfinedReadError:
    """Why `read_confined` returned no file.

    Attributes:
        failure: ``outside`` (a symbolic link, or ``..``, leads out of the directory),
            ``excluded`` (the path reaches a file or directory the caller excluded),
            ``not_found`` (nothing there, or it vanished during the walk), ``directory``,
            ``not_regular`` (a FIFO, a socket, a device), ``too_large``, ``grew`` (past the
            cap while being read), ``changed`` (the file the path names changed while it was
            being opened) or ``unreadable`` (the system refused; see ``detail``).
        size: The file's size, for ``too_large``.
        detail: The system's explanation, for ``unreadable``.
    """

    failure: ConfinedReadFailure
    size: int = 0
    detail: str = ""


def read_confined(
    directory: str, path: str, max_bytes: int, *, excluded: Collection[str] = ()
) -> ConfinedFile | ConfinedReadError:
    """Read the file at ``path`` inside ``directory``, never anything outside it.

    Blocking: run it in a worker thread (`LocalFileSystem.read_confined` does). ``directory``
    itself may be reached through symbolic links (it is where a provider found the skill); inside
    it, symbolic links are followed only while they stay inside. The containment holds even when
    the tree changes during the read (see the comment above).

    Args:
        directory: The confining directory (absolute).
        path: A path relative to it, ``/``-separated (``.`` and empty segments are ignored).
        max_bytes: The largest file accepted.
        excluded: Files and directories the read must not reach even inside ``directory``
            (compared by identity, so another name, a link or a hard link for them is refused
            too). Ones that do not exist are ignored.

    Returns:
        The file, or why it was not read.
    """
    if "\0" in directory or "\0" in path:
        return ConfinedReadError(failure="not_found")  # no file name holds a NUL
    root = os.path.realpath(directory)
    identities = _identities(excluded)
    if _WALKS_FROM_DESCRIPTORS:
        return _read_by_walking(root, path, max_bytes, identities)
    return _read_by_path(root, path, max_bytes, identities)


# The root itself is opened following links: a skill directory may be a symbolic link.
# O_NONBLOCK: a FIFO swapped in for a directory must not hang the open either.
_ROOT_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_NO_FOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY_FLAGS: Final = _ROOT_FLAGS | _NO_FOLLOW
_LEAF_FLAGS: Final = _OPEN_FLAGS | _NO_FOLLOW
# A backslash separates too where the system says so (Windows).
_SEPARATORS: Final = re.compile("[/\\\\]" if os.altsep is not None else "/")
# As many links as Linux resolves in one path before it gives up with ELOOP.
_MAX_SYMBOLIC_LINKS: Final = 40

# Windows has neither openat() nor O_NOFOLLOW; there the read falls back to `_read_by_path`.
_WALKS_FROM_DESCRIPTORS: Final = (
    os.open in os.supports_dir_fd
    and os.readlink in os.supports_dir_fd
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)


def _read_by_walking(
    root: str, path: str, max_bytes: int, excluded: frozenset[tuple[int, int]]
) -> ConfinedFile | ConfinedReadError:
    try:
        root_fd = os.open(root, _ROOT_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return ConfinedReadError(failure="not_found")
    except OSError as exc:
        return _unreadable(exc)
    # `names[i]` is the entry opened as `fds[i + 1]`; `fds[0]` is the root.
    names: list[str] = []
    fds: list[int] = [root_fd]
    pending = _segments(path)[::-1]  # a stack: the next segment is last
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name == "..":
                if not names:
                    return ConfinedReadError(failure="outside")
                names.pop()
                os.close(fds.pop())
                continue
            flags = _LEAF_FLAGS if not pending else _DIRECTORY_FLAGS
            try:
                fd = os.open(name, flags, dir_fd=fds[-1])
            except OSError as exc:
                target = _link_target(name, fds[-1])
                if target is None:
                    return _open_failure(exc)
                links += 1
                if links > _MAX_SYMBOLIC_LINKS:
                    return ConfinedReadError(failure="unreadable", detail=os.strerror(errno.ELOOP))
                if os.path.isabs(target):
                    inside = _relative_inside(root, target)
                    if inside is None:
                        return ConfinedReadError(failure="outside")
                    while names:
                        names.pop()
                        os.close(fds.pop())
                    target = inside
                pending.extend(_segments(target)[::-1])
                continue
            fds.append(fd)
            names.append(name)
            if _identity(os.fstat(fd)) in excluded:
                return ConfinedReadError(failure="excluded")
        read = _read_descriptor(fds[-1], max_bytes)
    except OSError as exc:
        return _unreadable(exc)
    finally:
        for fd in fds:
            os.close(fd)
    if isinstance(read, _Unfit):
        return ConfinedReadError(failure=read.failure, size=read.size)
    info, data = read
    return ConfinedFile(path=os.path.join(root, *names), data=data, identity=_identity(info))


def _read_by_path(
    root: str, path: str, max_bytes: int, excluded: frozenset[tuple[int, int]]
) -> ConfinedFile | ConfinedReadError:
    """Where descriptors cannot be walked: resolve, open, then prove the opened file is the
    one the resolved path names (same identity, same real path) after the read."""
    target = os.path.realpath(os.path.join(root, *_segments(path)))
    inside = _relative_inside(root, target)
    if inside is None:
        return ConfinedReadError(failure="outside")
    directory = root
    for name in _segments(inside):
        directory = os.path.join(directory, name)
        try:
            if _identity(os.stat(directory)) in excluded:
                return ConfinedReadError(failure="excluded")
        except OSError:
            break  # the open below reports what is missing
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as exc:
        return _open_failure(exc)
    try:
        read = _read_descriptor(fd, max_bytes)
        if isinstance(read, _Unfit):
            return ConfinedReadError(failure=read.failure, size=read.size)
        info, data = read
        if os.path.realpath(target) != target or _identity(os.stat(target)) != _identity(info):
            return ConfinedReadError(failure="changed")
    except FileNotFoundError:
        return ConfinedReadError(failure="changed")
    except OSError as exc:
        return _unreadable(exc)
    finally:
        os.close(fd)
    return ConfinedFile(path=target, data=data, identity=_identity(info))


def _segments(path: str) -> list[str]:
    return [segment for segment in _SEPARATORS.split(path) if segment not in ("", ".")]


def _relative_inside(root: str, target: str) -> str | None:
    """``target`` (absolute) relative to ``root`` once resolved, or None when it is outside.

    The resolution only proposes where to continue: the walk opens what it names again, one
    confined component at a time.
    """
    resolved = os.path.realpath(target)
    try:
        if os.path.commonpath([root, resolved]) != root:
            return None
    except ValueError:  # different drives on Windows
        return None
    return os.path.relpath(resolved, root)


def _link_target(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None  # not a symbolic link (or gone): the open's own error stands


def _open_failure(exc: OSError) -> ConfinedReadError:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return ConfinedReadError(failure="not_found")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        # O_NOFOLLOW met a symbolic link, yet it was no link by the time it was looked at.
        return ConfinedReadError(failure="changed")
    return _unreadable(exc)


def _unreadable(exc: OSError) -> ConfinedReadError:
    return ConfinedReadError(failure="unreadable", detail=exc.strerror or str(exc))


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
