"""`JsonlSessionStore`: one JSON Lines record per session, and the summaries ``session/list``
reads beside them (docs/architecture.md, docs/sessions.md)."""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import re
import stat
import time
import weakref
from pathlib import Path
from typing import TypeAlias

import anyio
import anyio.lowlevel

from .confined import OPEN_FLAGS
from .fs import read_local_file, replace_file
from .model import PrefixMessage
from .quiet_log import get_logger
from .record import HeaderEntry, HistoryEntry, RecordEntry, SessionRecord
from .session_index import (
    Listed,
    SessionDescription,
    SessionPage,
    SessionSummary,
    ordered_after,
    page_of,
    real_directory,
    summary_document,
    summary_of,
)
from .text import cut

_log = get_logger(__name__)

# Kept verbatim as the file name: lowercase (two ids never share a file on a case-insensitive
# file system), no hidden file, far below the 255-byte name limit.
_PLAIN_SESSION_ID = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")
_NOT_PLAIN = re.compile(r"[^a-z0-9_-]+")
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)"}
Paths: TypeAlias = tuple[str, str]  # a listed session's summary and record


def _record_name(session_id: str) -> str:
    if _PLAIN_SESSION_ID.fullmatch(session_id):
        return session_id
    # Any other id is named by its SHA-256 (of lone surrogates too), behind a readable hint;
    # no plain id holds a "~", so a hashed name never collides with a plain one.
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{_NOT_PLAIN.sub('-', session_id.lower()).strip('-')[:32]}~{digest}"


class _JsonlRecord:
    __slots__ = ("__weakref__", "_fsync", "_lock", "path")

    def __init__(self, path: Path, *, fsync: bool) -> None:
        # Serializes appends (the "ends with a newline?" check and its write) and keeps a read
        # from catching one half-written and calling it a torn line.
        self.path, self._fsync, self._lock = path, fsync, anyio.Lock()

    async def append(self, entry: RecordEntry) -> None:
        kind = "header" if isinstance(entry, HeaderEntry) else "history"
        line = _json_line({"v": 1, "type": kind, **entry.to_json()})
        async with self._lock:
            # Not abandoned on cancellation (the default): complete, or never began.
            await anyio.to_thread.run_sync(_append_line, self.path, line, self._fsync)

    async def entries(self) -> list[RecordEntry]:
        async with self._lock:
            return await anyio.to_thread.run_sync(_read_entries, self.path)


class JsonlSessionStore:
    """One JSON Lines file per session in ``directory``, made on the first append, mode 0600;
    ``fsync=True`` forces each append to the disk."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self._fsync = fsync
        # Shared while someone holds them, so that two session instances over the same id (an
        # old one still running when session/load opens a new one) share a lock.
        self._records = weakref.WeakValueDictionary[Path, _JsonlRecord]()
        # The last listing's cwd, the cursor it handed out, when, and what is left after it.
        self._continued: tuple[str | None, str, float, list[Listed[Paths]]] | None = None

    def path_for(self, session_id: str) -> Path:
        """The file that holds (or will hold) the record of ``session_id``."""
        return self.directory / f"{_record_name(session_id)}.jsonl"

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``; nothing touches the disk until the first append."""
        path = self.path_for(session_id)
        await anyio.lowlevel.checkpoint()
        if (record := self._records.get(path)) is None:
            record = self._records[path] = _JsonlRecord(path, fsync=self._fsync)
        return record

    async def exists(self, session_id: str) -> bool:
        """Whether anything is at the session's path: what is no record is named on reading."""
        return await anyio.to_thread.run_sync(os.path.lexists, self.path_for(session_id))

    async def describe_session(self, description: SessionDescription) -> None:
        """Keep what ``session/list`` shows of the session; `OSError` when it cannot."""
        await anyio.to_thread.run_sync(self._write_summary, description)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None
    ) -> SessionPage:
        """One page, newest first by the records' times; what cannot be read is skipped."""
        # The next page of the last listing, asked for within 60 s, goes on from what that
        # listing left; else the cursor says where a fresh listing goes on from.
        kept, self._continued = self._continued, None
        go_on = kept and kept[:2] == (cwd, cursor) and time.monotonic() - kept[2] < 60
        ordered = kept[3] if kept and go_on else None
        page, rest = await anyio.to_thread.run_sync(
            lambda: page_of(ordered or ordered_after(self._summaries(cwd), cursor), _load_summary)
        )
        if page.next_cursor is not None:
            self._continued = (cwd, page.next_cursor, time.monotonic(), rest)
        return page

    def _write_summary(self, description: SessionDescription) -> None:
        # Under the cwd's key; one kept under another key (the session was opened elsewhere
        # before) goes.
        name, index = _record_name(description.session_id), self.directory / "index"
        target = index / _cwd_key(real_directory(description.cwd)) / f"{name}.json"
        moved = [] if target.exists() else list(index.glob(f"*/{name}.json"))
        target.parent.mkdir(parents=True, exist_ok=True)
        # The temporary name does not end in ".json", so no listing takes it for a summary.
        document = _json_line(summary_document(description))
        replace_file(target, document, prefix=".summary-", sync=False)
        for stale in moved:
            stale.unlink(missing_ok=True)

    def _summaries(self, cwd: str | None) -> list[Listed[Paths]]:
        # Each summary (in the cwd's key only, if given) whose record is a regular file, with
        # the record's time: one stat per record, nothing read. Plain strings, not `Path`s: this
        # runs once per recorded session, and a `Path` costs more than the stat.
        records = os.path.join(self.directory, "")
        key = "*" if cwd is None else _cwd_key(real_directory(cwd))
        found: dict[str, Listed[Paths]] = {}
        for summary in glob.glob(os.path.join(glob.escape(records), "index", key, "*.json")):
            name = os.path.basename(summary).removesuffix(".json")
            try:
                status = os.stat(record := f"{records}{name}.jsonl")
            except FileNotFoundError:
                with contextlib.suppress(OSError):  # the record was removed: its summary goes too
                    os.unlink(summary)
                continue
            except OSError as error:
                _skip(record, error.strerror or str(error))
                continue
            if not stat.S_ISREG(status.st_mode):
                _skip(record, "not a regular file")
            else:  # keyed by name: a move cut short by a crash lists the session once
                found[name] = (status.st_mtime_ns, name, (summary, record))
        return list(found.values())


def _json_line(document: dict[str, object]) -> bytes:
    # ASCII-only (non-ASCII as \u escapes): the file is valid UTF-8 whatever the strings hold,
    # and a torn write can never split a multi-byte character.
    return (json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _skip(path: str, reason: str) -> None:
    _log.warning("session_record_skipped", path=path, reason=reason)


def _cwd_key(real_cwd: str) -> str:
    return hashlib.sha256(real_cwd.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _load_summary(updated: int, paths: Paths) -> SessionSummary | None:
    summary, record = paths
    if not os.access(record, os.R_OK):
        _skip(record, "permission denied")
        return None
    # A few paths and an 80-character title: anything far larger is not a summary. Not found:
    # removed since the listing began (the session moved).
    content = read_local_file(summary, 256 * 1024)
    found: SessionSummary | str | None = None
    if isinstance(content, bytes):
        try:
            found = summary_of(updated, json.loads(content))
        except (ValueError, RecursionError) as error:
            found = f"not a session summary: {error}"[:300]
    elif content.failure != "not_found":
        found = content.reason
    if isinstance(found, str):
        _skip(summary, found)
        return None
    return found


def _open_record(path: Path, flags: int) -> int:
    # O_NONBLOCK (in OPEN_FLAGS): a FIFO at the path cannot hang the open; fstat then refuses it.
    descriptor = os.open(path, flags | OPEN_FLAGS, 0o600)
    if not stat.S_ISREG(mode := os.fstat(descriptor).st_mode):
        os.close(descriptor)
        # Shaped like the operating system's own errors: strerror says what, filename where.
        kind = _KINDS.get(stat.S_IFMT(mode), "a socket or device")
        raise OSError(errno.EINVAL, f"Is {kind}, not a regular file", os.fspath(path))
    return descriptor


def _append_line(path: Path, line: bytes, fsync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = _open_record(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(descriptor).st_size
        if size and os.pread(descriptor, 1, size - 1) != b"\n":
            line = b"\n" + line  # a crash tore the last line: this entry starts a line of its own
        try:
            # Unbuffered, one write call; O_APPEND puts it at the end whatever the offset. The
            # loop only runs again on a short write (a full disk, a signal).
            pending = memoryview(line)
            while pending:
                pending = pending[os.write(descriptor, pending) :]
        except OSError:
            os.ftruncate(descriptor, size)  # what a full disk let through: a retry stores it once
            raise
        if fsync:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _read_entries(path: Path) -> list[RecordEntry]:
    try:
        descriptor = _open_record(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    with open(descriptor, "rb") as file:
        lines = file.read().split(b"\n")
    entries: list[RecordEntry] = []
    for number, raw in enumerate(lines, start=1):
        try:
            if raw.strip():
                entries.append(_decode_line(raw))
        except Exception as error:  # whatever a line holds (a crash's torn one too), it is skipped
            reason = cut(f"corrupt line: {error}", 300)  # the error may quote megabytes
            _log.warning("session_record_line_skipped", path=str(path), line=number, reason=reason)
    return entries


def _decode_line(raw: bytes) -> RecordEntry:
    # The entries check the rest: JSON types, non-finite numbers, nesting, surrogates.
    document = json.loads(raw.decode("utf-8"))
    if not isinstance(document, dict) or type(document.get("v")) is not int or document["v"] != 1:
        raise ValueError("not an entry of format version 1")
    if (kind := document.get("type")) == "history":
        return HistoryEntry(message=document["message"])
    if kind != "header":
        raise ValueError(f"unknown entry type {kind!r}")
    prefix = (PrefixMessage(role=m["role"], text=m["text"]) for m in document["messagePrefix"])
    fields = {key: document[key] for key in ("reason", "config", "system", "tools")}
    return HeaderEntry(**fields, message_prefix=tuple(prefix))
