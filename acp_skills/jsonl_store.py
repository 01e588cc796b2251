"""`JsonlSessionStore`: session records as JSON Lines files, one file per session.

Format version 1: one entry per line, a JSON object with ``"v": 1``, a ``"type"`` and camelCase
keys, like ``_skills/prefix`` reports headers::

    {"v":1,"type":"header","reason":"initial","config":{},"system":"...","tools":[],"messagePrefix":[{"role":"user","text":"..."}]}
    {"v":1,"type":"history","message":{"role":"user","content":"..."}}

Readers ignore unknown keys. A record file is input like any other (torn by a crash, edited by
hand, replaced by something that is not a file): reading never fails on what a line holds and
never blocks on what the path is.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn, cast

import anyio
import anyio.lowlevel
import structlog

from .model import PrefixMessage
from .record import (
    HEADER_REASONS,
    HeaderEntry,
    HeaderReason,
    HistoryEntry,
    RecordEntry,
    SessionRecord,
    require_entry,
    require_session_id,
)

__all__ = ["JsonlSessionStore"]

_log = structlog.get_logger(__name__)

_FORMAT_VERSION = 1

# Opening a FIFO waits for its other end unless O_NONBLOCK is given; the descriptor is then
# checked with fstat before anything is read or written. Neither flag exists everywhere.
_OPEN_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)

# Kept verbatim as the file name: lowercase only (so two ids never share a file on a
# case-insensitive file system), no leading dot (no hidden files), and short enough that
# "<id>.jsonl" stays far below the 255-byte name limit of common file systems.
_PLAIN_SESSION_ID = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")
# Names Windows reserves for devices, whatever the extension ("nul.jsonl" is the null device).
_WINDOWS_DEVICES = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{digit}" for digit in range(10)}
    | {f"lpt{digit}" for digit in range(10)}
)
_NOT_PLAIN = re.compile(r"[^a-z0-9_-]+")


def _record_file_name(session_id: str) -> str:
    if (
        _PLAIN_SESSION_ID.fullmatch(session_id)
        and session_id.split(".", 1)[0] not in _WINDOWS_DEVICES
    ):
        return f"{session_id}.jsonl"
    # Any other id is named by its SHA-256, behind a readable (lossy, lowercased) hint. The "~"
    # never occurs in a plain id, so a hashed name can never collide with a plain one.
    # "surrogatepass": ids decoded from JSON may hold lone surrogates, and they still need a name.
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    hint = _NOT_PLAIN.sub("-", session_id.lower()).strip("-")[:32]
    return f"{hint}~{digest}.jsonl"


class _JsonlRecord:
    __slots__ = ("__weakref__", "_fsync", "_lock", "path")

    def __init__(self, path: Path, *, fsync: bool) -> None:
        self.path = path
        self._fsync = fsync
        # Appends of one record are serialized so that the "does the file end with a newline?"
        # check and the write that follows it are never interleaved with another append.
        self._lock = anyio.Lock()

    async def append(self, entry: RecordEntry) -> None:
        line = _encode(require_entry(entry))
        async with self._lock:
            # Not abandoned on cancellation (the default): once started, the write finishes,
            # so an append is either complete or never began.
            await anyio.to_thread.run_sync(_append_line, self.path, line, self._fsync)

    async def entries(self) -> list[RecordEntry]:
        # Under the append lock, so a read never catches one of our own appends half-written
        # and reports it as a torn line.
        async with self._lock:
            entries, skipped = await anyio.to_thread.run_sync(_read_entries, self.path)
        # Logged here rather than in the worker thread, so the log lines carry the caller's
        # context variables.
        for line_number, reason in skipped:
            _log.warning(
                "session_record_line_skipped",
                path=str(self.path),
                line=line_number,
                reason=reason,
            )
        return entries


class JsonlSessionStore:
    """One JSON Lines file per session in ``directory`` (created on the first append).

    An id made only of ``[a-z0-9._-]`` (no leading dot, at most 100 characters, not a Windows
    device name) names its file as it is, ``<id>.jsonl``; any other id becomes
    ``<hint>~<sha256 of the id>.jsonl``, so distinct ids never share a file. New files are
    readable by their owner only: conversations may hold secrets.

    Each append is one unbuffered ``write`` in append mode (``fsync=True`` also forces it to the
    disk), so a killed process loses nothing written and can only tear the last line; the next
    append then starts a fresh line. Reading skips each torn or corrupt line with a
    ``session_record_line_skipped`` warning (path, line, reason), never the rest of the session.
    A record path that is not a regular file is refused with an `OSError` saying so, without
    ever blocking on it. All file I/O runs in worker threads; appends to one session are
    serialized.
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self._fsync = fsync
        # Records are shared while someone holds them, so that two session instances over the
        # same id (an old one still running when session/load opens a new one) share a lock.
        self._records: weakref.WeakValueDictionary[Path, _JsonlRecord] = (
            weakref.WeakValueDictionary()
        )

    def path_for(self, session_id: str) -> Path:
        """The file that holds (or will hold) the record of ``session_id``."""
        require_session_id(session_id)
        return self.directory / _record_file_name(session_id)

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``; nothing touches the disk until the first append."""
        path = self.path_for(session_id)
        await anyio.lowlevel.checkpoint()
        record = self._records.get(path)
        if record is None:
            record = _JsonlRecord(path, fsync=self._fsync)
            self._records[path] = record
        return record

    async def exists(self, session_id: str) -> bool:
        """Whether anything is at the session's path, readable or not: reading something
        that is not a record raises an `OSError` saying what is wrong, which tells a person
        more than "unknown session" would."""
        path = self.path_for(session_id)
        return await anyio.to_thread.run_sync(_something_at, path)


def _something_at(path: Path) -> bool:
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        # Something may be there that cannot be looked at: let the read report it.
        return True
    return True


def _encode(entry: RecordEntry) -> bytes:
    kind = "header" if isinstance(entry, HeaderEntry) else "history"
    document = {"v": _FORMAT_VERSION, "type": kind, **entry.to_json()}
    # ASCII-only (non-ASCII as \u escapes): the file is valid UTF-8 whatever the strings hold,
    # and a torn write can never split a multi-byte character.
    text = json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return (text + "\n").encode("ascii")


def _describe_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, or ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _not_a_regular_file(path: Path, kind: str) -> OSError:
    # Shaped like the operating system's own errors: strerror says what, filename says where.
    return OSError(errno.EINVAL, f"Is {kind}, not a regular file", os.fspath(path))


def _open_record(path: Path, flags: int) -> int:
    """Open the record file, refusing anything but a regular file without blocking on it."""
    try:
        descriptor = os.open(path, flags | _OPEN_FLAGS, 0o600)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as error:
        # Opening a directory for writing (EISDIR) or a socket (ENXIO) fails before fstat
        # could look at it: name what is in the way instead of the bare errno.
        try:
            kind = _describe_kind(os.stat(path).st_mode)
        except OSError:
            kind = None
        if kind is None:
            raise
        raise _not_a_regular_file(path, kind) from error
    try:
        kind = _describe_kind(os.fstat(descriptor).st_mode)
        if kind is not None:
            raise _not_a_regular_file(path, kind)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _append_line(path: Path, line: bytes, fsync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = _open_record(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(descriptor).st_size
        if size:
            os.lseek(descriptor, size - 1, os.SEEK_SET)
            if os.read(descriptor, 1) != b"\n":
                # The previous write was torn: end its fragment so the new entry is a line of
                # its own instead of being glued to garbage.
                line = b"\n" + line
        # Unbuffered, one write call; O_APPEND puts it at the end whatever the offset. The loop
        # only runs again on a short write (a full disk, a signal).
        pending = memoryview(line)
        while pending:
            written = os.write(descriptor, pending)
            pending = pending[written:]
        if fsync:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _read_entries(path: Path) -> tuple[list[RecordEntry], list[tuple[int, str]]]:
    try:
        descriptor = _open_record(path, os.O_RDONLY)
    except FileNotFoundError:
        return [], []
    with open(descriptor, "rb") as file:
        data = file.read()
    lines = data.split(b"\n")
    # A well-formed file ends with a newline, which leaves an empty piece after the last split;
    # anything else there is an entry whose write never finished.
    tail = lines.pop()
    entries: list[RecordEntry] = []
    skipped: list[tuple[int, str]] = []
    for line_number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entries.append(_decode_line(raw))
        except _UNDECODABLE as error:
            skipped.append((line_number, f"corrupt line: {_describe_problem(error)}"))
    if tail.strip():
        try:
            # A proper prefix of a JSON object never parses, so if this parses the write was
            # complete and only its newline is missing.
            entries.append(_decode_line(tail))
        except _UNDECODABLE:
            skipped.append(
                (len(lines) + 1, "torn last line: the writer stopped in the middle of an entry")
            )
    return entries, skipped


# What decoding a line may raise, whatever the line holds: UnicodeDecodeError and
# JSONDecodeError are ValueErrors, a wrong type is a TypeError, and the JSON decoder gives up
# on deep nesting ("[[[[..." a hundred thousand deep) with a RecursionError, cleanly.
_UNDECODABLE = (TypeError, ValueError, RecursionError)


# A reason quotes the offending value; a line may hold megabytes, and a log must not.
_MAX_REASON_LENGTH = 300


def _describe_problem(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested deeper than the JSON decoder allows"
    text = str(error)
    if len(text) > _MAX_REASON_LENGTH:
        text = text[: _MAX_REASON_LENGTH - 3] + "..."
    return text


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _decode_line(raw: bytes) -> RecordEntry:
    document = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    if not isinstance(document, dict):
        raise TypeError(f"expected a JSON object, got {type(document).__name__}")
    version = document.get("v")
    if isinstance(version, bool) or version != _FORMAT_VERSION:
        raise ValueError(f"unsupported format version {version!r}")
    kind = document.get("type")
    if kind == "history":
        return HistoryEntry(message=_field(document, "message"))
    if kind != "header":
        raise ValueError(f"unknown entry type {kind!r}")
    reason = document.get("reason")
    if not isinstance(reason, str) or reason not in HEADER_REASONS:
        raise ValueError(f"unknown header reason {reason!r}")
    tools = document.get("tools")
    prefix = document.get("messagePrefix")
    if not isinstance(tools, list) or not isinstance(prefix, list):
        raise TypeError("header tools and messagePrefix must be arrays")
    return HeaderEntry(
        reason=cast(HeaderReason, reason),
        config=_field(document, "config"),
        system=_field(document, "system"),
        tools=tuple(tools),
        message_prefix=tuple(_decode_prefix_message(item) for item in prefix),
    )


def _field(document: Mapping[str, Any], key: str) -> Any:
    # An absent key reads as None; the entry's own validation then says what is wrong.
    return document.get(key)


def _decode_prefix_message(item: object) -> PrefixMessage:
    if not isinstance(item, dict):
        raise TypeError(f"a messagePrefix item must be an object, got {item!r}")
    role, text = item.get("role"), item.get("text")
    if not isinstance(role, str) or not role or not isinstance(text, str):
        raise TypeError(f"a messagePrefix item needs a string role and text, got {item!r}")
    return PrefixMessage(role=role, text=text)
