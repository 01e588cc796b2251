"""`JsonlSessionStore`: one JSON Lines record per session, and the summaries ``session/list``
reads beside them (docs/architecture.md, docs/sessions.md)."""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, TypeAlias

import anyio

from .fs import OPEN_FLAGS, replace_file
from .model import PrefixMessage
from .quiet_log import get_logger
from .record import (
    HeaderEntry,
    HistoryEntry,
    Listed,
    RecordEntry,
    SessionDescription,
    SessionPage,
    page_after,
    real_directory,
    session_title,
)
from .text import cut

_log = get_logger(__name__)

# Kept verbatim as the file name: lowercase (two ids never share a file on a case-insensitive
# file system), no hidden file, far below the 255-byte name limit.
_PLAIN_SESSION_ID = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")
_NOT_PLAIN = re.compile(r"[^a-z0-9_-]+")
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)"}
# A few paths and an 80-character title: anything far larger is not a summary.
_SUMMARY_BYTES = 256 * 1024
Paths: TypeAlias = tuple[str, str]  # a listed session's summary and record


def _record_name(session_id: str) -> str:
    if _PLAIN_SESSION_ID.fullmatch(session_id):
        return session_id
    # Any other id is named by its SHA-256 (of lone surrogates too), behind a readable hint;
    # no plain id holds a "~", so a hashed name never collides with a plain one.
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{_NOT_PLAIN.sub('-', session_id.lower()).strip('-')[:32]}~{digest}"


class JsonlSessionStore:
    """One JSON Lines file per session in ``directory``, made on the first append, mode 0600;
    ``fsync=True`` forces each append to the disk. A session's appends are serialized by its
    instance (`PrefixedSession`), so the store holds no lock."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self._fsync = fsync
        # The last listing's cwd, the cursor it handed out, when, and what is left after it.
        self._continued: tuple[str | None, str, float, list[Listed[Paths]]] | None = None

    def path_for(self, session_id: str) -> Path:
        """The file that holds (or will hold) the record of ``session_id``."""
        return self.directory / f"{_record_name(session_id)}.jsonl"

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        kind = "header" if isinstance(entry, HeaderEntry) else "history"
        line = _json_line({"v": 1, "type": kind, **entry.to_json()})
        # Not abandoned on cancellation (the default): complete, or never began.
        await anyio.to_thread.run_sync(_append_line, self.path_for(session_id), line, self._fsync)

    async def entries(self, session_id: str) -> list[RecordEntry]:
        return await anyio.to_thread.run_sync(_read_entries, self.path_for(session_id))

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
        # listing left (bench/session_list.py: 200 pages of 10,000 sessions in 0.3-0.6 s
        # rather than 28 s); else the cursor says where a fresh listing goes on from.
        kept, self._continued = self._continued, None
        listed: list[Listed[Paths]] = []
        if kept and kept[:2] == (cwd, cursor) and time.monotonic() - kept[2] < 60:
            cursor, listed = None, kept[3]  # ordered already, and all after the cursor
        page, rest = await anyio.to_thread.run_sync(
            lambda: page_after(cursor, listed or self._listed(cwd), _load)
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
        document = {
            "v": 1,
            "sessionId": description.session_id,
            "cwd": description.cwd,
            "title": description.title,
            "additionalDirectories": list(description.additional_directories),
        }
        # The temporary name does not end in ".json", so no listing takes it for a summary.
        replace_file(target, _json_line(document), prefix=".summary-", sync=False)
        for stale in moved:
            stale.unlink(missing_ok=True)

    def _listed(self, cwd: str | None) -> list[Listed[Paths]]:
        # Each summary (in the cwd's key only, if given) whose record is a regular file, with
        # the record's time: one stat per record, nothing read. Plain strings, not `Path`s: this
        # runs once per recorded session, and a `Path` costs more than the stat.
        records = os.path.join(self.directory, "")
        key = "*" if cwd is None else _cwd_key(real_directory(cwd))
        found: dict[str, Listed[Paths]] = {}
        for summary_path in glob.glob(os.path.join(glob.escape(records), "index", key, "*.json")):
            name = os.path.basename(summary_path).removesuffix(".json")
            try:
                status = os.stat(record := f"{records}{name}.jsonl")
                if not stat.S_ISREG(status.st_mode):
                    raise OSError(errno.EINVAL, "not a regular file")
            except FileNotFoundError:
                continue  # the record was removed
            except OSError as error:
                _skip(record, error.strerror or str(error))
                continue
            # Keyed by name: a move cut short by a crash lists the session once.
            found[name] = (-status.st_mtime_ns, name, (summary_path, record))
        return list(found.values())


def _json_line(document: dict[str, Any]) -> bytes:
    # ASCII-only (non-ASCII as \u escapes): the file is valid UTF-8 whatever the strings hold,
    # and a torn write can never split a multi-byte character.
    return (json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _skip(path: str, reason: str) -> None:
    _log.warning("session_record_skipped", path=path, reason=reason)


def _cwd_key(real_cwd: str) -> str:
    return hashlib.sha256(real_cwd.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _load(paths: Paths) -> SessionDescription | None:
    summary_path, record = paths
    if not os.access(record, os.R_OK):
        _skip(record, "permission denied")
        return None
    try:
        with open(summary_path, "rb") as file:
            fields = json.loads(file.read(_SUMMARY_BYTES))
        # A summary on disk is a file a person may have edited: every field is checked again.
        session_id, cwd, title = fields["sessionId"], fields["cwd"], fields.get("title")
        directories = fields.get("additionalDirectories", [])
        if fields["v"] != 1 or not isinstance(session_id, str) or not os.path.isabs(cwd):
            raise ValueError("an unknown format version, no session id or no absolute cwd")
        if not isinstance(directories, list) or not all(isinstance(d, str) for d in directories):
            raise ValueError("additionalDirectories is not a list of paths")
        title = session_title(title) if isinstance(title, str) else None
        return SessionDescription(
            session_id=session_id, cwd=cwd, title=title, additional_directories=tuple(directories)
        )
    except FileNotFoundError:
        return None  # removed since the listing began (the session moved)
    except Exception as error:  # whatever a summary holds, it is skipped
        _skip(summary_path, cut(f"not a session summary: {error!r}", 300))
        return None


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
            # Unbuffered; O_APPEND puts it at the end whatever the offset. The loop only runs
            # again on a short write (a full disk, a signal).
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
