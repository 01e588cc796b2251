"""`JsonlSessionStore`: session records as JSON Lines files, one file per session (format:
docs/architecture.md). Reading never fails on what a line holds, never blocks on the path."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, cast

import anyio
import anyio.lowlevel

from .model import PrefixMessage
from .quiet_log import get_logger
from .record import (
    HeaderEntry,
    HistoryEntry,
    RecordEntry,
    SessionRecord,
    require_entry,
    require_session_id,
)
from .session_index import PAGE_SIZE, SessionDescription, SessionPage, SummaryDirectory
from .text import cut

_log = get_logger(__name__)

_FORMAT_VERSION = 1

# Opening a FIFO waits for its other end unless O_NONBLOCK is given; the descriptor is then
# checked with fstat before anything is read or written. Neither flag exists everywhere.
_OPEN_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)

# Kept verbatim as the file name: lowercase only (so two ids never share a file on a
# case-insensitive file system), no leading dot (no hidden files), and short enough that
# "<id>.jsonl" stays far below the 255-byte name limit of common file systems.
_PLAIN_SESSION_ID = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")
# Names Windows reserves for devices, whatever the extension ("nul.jsonl" is the null device).
_WINDOWS_DEVICES = {"con", "prn", "aux", "nul"}
_WINDOWS_DEVICES |= {f"{p}{d}" for p in ("com", "lpt") for d in range(10)}
_NOT_PLAIN = re.compile(r"[^a-z0-9_-]+")

# What decoding any line may raise: UnicodeDecodeError and JSONDecodeError are ValueErrors, and
# the JSON decoder gives up on deep nesting ("[[[[..." 100,000 deep) with a RecursionError.
_UNDECODABLE = (TypeError, ValueError, RecursionError)
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)"}
_KINDS |= {stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


def _record_file_name(session_id: str) -> str:
    plain = _PLAIN_SESSION_ID.fullmatch(session_id)
    if plain and session_id.split(".", 1)[0] not in _WINDOWS_DEVICES:
        return f"{session_id}.jsonl"
    # Any other id is named by its SHA-256, behind a readable (lossy, lowercased) hint. The "~"
    # never occurs in a plain id, so a hashed name can never collide with a plain one.
    # "surrogatepass": ids decoded from JSON may hold lone surrogates, and they still need a name.
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    hint = _NOT_PLAIN.sub("-", session_id.lower()).strip("-")[:32]
    return f"{hint}~{digest}.jsonl"


class _JsonlRecord:
    __slots__ = ("__weakref__", "_failed", "_fsync", "_lock", "path")

    def __init__(self, path: Path, *, fsync: bool) -> None:
        # Serializes appends (the "ends with a newline?" check and its write) and keeps a read
        # from catching one half-written and calling it a torn line.
        self.path, self._fsync, self._lock = path, fsync, anyio.Lock()
        self._failed: bytes | None = None  # the line whose append last failed

    async def append(self, entry: RecordEntry) -> None:
        line = _encode(require_entry(entry))
        async with self._lock:
            # A retry of the line that just failed may finish what that write began.
            resume, self._failed = line == self._failed, None
            try:
                # Not abandoned on cancellation (the default): complete, or never began.
                await anyio.to_thread.run_sync(_append_line, self.path, line, self._fsync, resume)
            except OSError:
                self._failed = line
                raise

    async def entries(self) -> list[RecordEntry]:
        async with self._lock:
            entries, skipped = await anyio.to_thread.run_sync(_read_entries, self.path)
        # Logged here, not in the worker thread, so the log lines carry the caller's context.
        for line_number, reason in skipped:
            _log.warning(
                "session_record_line_skipped", path=str(self.path), line=line_number, reason=reason
            )
        return entries


class JsonlSessionStore:
    """One JSON Lines file per session in ``directory``, made on the first append, mode 0600:
    ``<id>.jsonl``, or ``<hint>~<sha256>.jsonl`` for an id that is not plain. One unbuffered
    append-mode ``write`` per entry, forced to the disk with ``fsync=True``."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self._fsync = fsync
        # Shared while someone holds them, so that two session instances over the same id (an
        # old one still running when session/load opens a new one) share a lock.
        self._records = weakref.WeakValueDictionary[Path, _JsonlRecord]()
        self._summaries = SummaryDirectory(self.directory)  # what session/list shows

    def path_for(self, session_id: str) -> Path:
        """The file that holds (or will hold) the record of ``session_id``."""
        require_session_id(session_id)
        return self.directory / _record_file_name(session_id)

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``; nothing touches the disk until the first append."""
        path = self.path_for(session_id)
        await anyio.lowlevel.checkpoint()
        if (record := self._records.get(path)) is None:
            record = self._records[path] = _JsonlRecord(path, fsync=self._fsync)
        return record

    async def exists(self, session_id: str) -> bool:
        """Whether anything is at the session's path, readable or not (reading what is not a
        record raises an `OSError` saying so, which tells more than "unknown session")."""
        return await anyio.to_thread.run_sync(_something_at, self.path_for(session_id))

    async def describe_session(self, description: SessionDescription) -> None:
        """Keep what ``session/list`` shows of the session in its summary, under ``index/``
        (`acp_skills.session_index`); `OSError` when it cannot be written."""
        record = self.path_for(description.session_id)
        await anyio.to_thread.run_sync(self._summaries.describe, description, record)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = PAGE_SIZE
    ) -> SessionPage:
        """One page of the summarized sessions whose record is here, newest first (by the
        record's modification time); each record or summary that cannot be read is skipped
        with a warning naming it."""
        page, skipped = await anyio.to_thread.run_sync(self._summaries.page, cwd, cursor, limit)
        # Logged here, not in the worker thread, so the log lines carry the caller's context.
        for path, reason in skipped:
            _log.warning("session_record_skipped", path=path, reason=reason)
        return page


def _something_at(path: Path) -> bool:
    try:
        return bool(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # something may be there that cannot be looked at: let the read report it


def _encode(entry: RecordEntry) -> bytes:
    kind = "header" if isinstance(entry, HeaderEntry) else "history"
    document = {"v": _FORMAT_VERSION, "type": kind, **entry.to_json()}
    # ASCII-only (non-ASCII as \u escapes): the file is valid UTF-8 whatever the strings hold,
    # and a torn write can never split a multi-byte character.
    text = json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return (text + "\n").encode("ascii")


def _not_a_regular_file(path: Path, mode: int) -> OSError | None:
    if stat.S_ISREG(mode):
        return None
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    # Shaped like the operating system's own errors: strerror says what, filename says where.
    return OSError(errno.EINVAL, f"Is {kind}, not a regular file", os.fspath(path))


def _open_record(path: Path, flags: int) -> int:
    try:
        descriptor = os.open(path, flags | _OPEN_FLAGS, 0o600)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as error:
        # Opening a directory for writing (EISDIR) or a socket (ENXIO) fails before fstat
        # could look at it: name what is in the way instead of the bare errno.
        try:
            refusal = _not_a_regular_file(path, os.stat(path).st_mode)
        except OSError:
            refusal = None
        if refusal is None:
            raise
        raise refusal from error
    try:
        if (refusal := _not_a_regular_file(path, os.fstat(descriptor).st_mode)) is not None:
            raise refusal
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _append_line(path: Path, line: bytes, fsync: bool, resume: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = _open_record(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        if size := os.fstat(descriptor).st_size:
            line = _after_torn_tail(descriptor, size, line, resume)
        # Unbuffered, one write call; O_APPEND puts it at the end whatever the offset. The loop
        # only runs again on a short write (a full disk, a signal).
        pending = memoryview(line)
        while pending:
            pending = pending[os.write(descriptor, pending) :]
        if fsync:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _after_torn_tail(descriptor: int, size: int, line: bytes, resume: bool) -> bytes:
    # What to write so the file ends with ``line`` once, whatever the last write left.
    window = min(size, len(line)) if resume else 1
    tail = os.pread(descriptor, window, size - window)
    if tail.endswith(b"\n"):
        return line
    start = tail.rfind(b"\n") + 1
    fragment = tail[start:]
    if resume and (start or size <= len(line)) and line.startswith(fragment):
        # This entry's own torn write (a full disk cut it short, before its newline at
        # the latest): finish it rather than store it twice.
        return line[len(fragment) :]
    # Someone else's torn write: end its fragment so the new entry is a line of its own
    # instead of being glued to garbage.
    return b"\n" + line


def _read_entries(path: Path) -> tuple[list[RecordEntry], list[tuple[int, str]]]:
    try:
        descriptor = _open_record(path, os.O_RDONLY)
    except FileNotFoundError:
        return [], []
    with open(descriptor, "rb") as file:
        lines = file.read().split(b"\n")
    # A well-formed file ends with a newline, which leaves an empty piece after the last split;
    # anything else there is an entry whose write never finished.
    tail = lines.pop()
    entries: list[RecordEntry] = []
    skipped: list[tuple[int, str]] = []
    for line_number, raw in enumerate(lines, start=1):
        if raw.strip():
            try:
                entries.append(_decode_line(raw))
            except _UNDECODABLE as error:
                reason = str(error)  # cut: it quotes the line, which may hold megabytes
                if isinstance(error, RecursionError):
                    reason = "nested deeper than the JSON decoder allows"
                skipped.append((line_number, f"corrupt line: {cut(reason, 300)}"))
    if tail.strip():
        try:
            # A proper prefix of a JSON object never parses, so if this parses the write was
            # complete and only its newline is missing.
            entries.append(_decode_line(tail))
        except _UNDECODABLE:
            torn = "torn last line: the writer stopped in the middle of an entry"
            skipped.append((len(lines) + 1, torn))
    return entries, skipped


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _decode_line(raw: bytes) -> RecordEntry:
    document = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    if not isinstance(document, dict):
        raise TypeError(f"expected a JSON object, got {type(document).__name__}")
    version = document.get("v")
    if isinstance(version, bool) or version != _FORMAT_VERSION:
        raise ValueError(f"unsupported format version {version!r}")
    # An absent key reads as None; the entry's own validation then says what is wrong.
    field = cast(Callable[[str], Any], document.get)
    kind = field("type")
    if kind == "history":
        return HistoryEntry(message=field("message"))
    if kind != "header":
        raise ValueError(f"unknown entry type {kind!r}")
    tools, prefix = document.get("tools"), document.get("messagePrefix")
    if not isinstance(tools, list) or not isinstance(prefix, list):
        raise TypeError("header tools and messagePrefix must be arrays")
    return HeaderEntry(
        reason=field("reason"),
        config=field("config"),
        system=field("system"),
        tools=tuple(tools),
        message_prefix=tuple(_decode_prefix_message(item) for item in prefix),
    )


def _decode_prefix_message(item: object) -> PrefixMessage:
    if not isinstance(item, dict):
        raise TypeError(f"a messagePrefix item must be an object, got {item!r}")
    role, text = item.get("role"), item.get("text")
    if not isinstance(role, str) or not role or not isinstance(text, str):
        raise TypeError(f"a messagePrefix item needs a string role and text, got {item!r}")
    return PrefixMessage(role=role, text=text)
