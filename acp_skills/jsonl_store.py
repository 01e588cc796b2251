"""`JsonlSessionStore`: one JSON Lines record per session, and the listing's summaries beside."""

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
from typing import Any

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
    session_title,
)
from .text import cut

_log = get_logger(__name__)

# Kept verbatim as the file name: lowercase (for case-insensitive file systems), not hidden, short.
_PLAIN_SESSION_ID = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")
_NOT_PLAIN = re.compile(r"[^a-z0-9_-]+")
_SUMMARY_BYTES = 256 * 1024  # a few paths and a title: anything far larger is no summary


def _record_name(session_id: str) -> str:
    if _PLAIN_SESSION_ID.fullmatch(session_id):
        return session_id
    # Any other id by its SHA-256 behind a readable hint; no plain id holds a "~".
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{_NOT_PLAIN.sub('-', session_id.lower()).strip('-')[:32]}~{digest}"


class JsonlSessionStore:
    """One file per session in ``directory``, mode 0600; its instance serializes its appends."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        # The last listing's cwd, when it was made, and what it found.
        self._listing: tuple[str | None, float, list[Listed[tuple[str, str]]]] | None = None

    def path_for(self, session_id: str) -> Path:
        """The file that holds (or will hold) ``session_id``'s record."""
        return self.directory / f"{_record_name(session_id)}.jsonl"

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        if isinstance(entry, HeaderEntry):
            line = _json_line({"v": 1, "type": "header", **entry.to_json()})
        else:
            line = _json_line({"v": 1, "type": "history", "message": entry.message})
        # Not abandoned on cancellation (the default): complete, or never began.
        await anyio.to_thread.run_sync(_append_line, self.path_for(session_id), line)

    async def entries(self, session_id: str) -> list[RecordEntry]:
        return await anyio.to_thread.run_sync(_read_entries, self.path_for(session_id))

    async def exists(self, session_id: str) -> bool:  # anything at the path: reading names it
        return await anyio.to_thread.run_sync(os.path.lexists, self.path_for(session_id))

    async def describe_session(self, description: SessionDescription) -> None:
        await anyio.to_thread.run_sync(self._write_summary, description)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None
    ) -> SessionPage:
        # A later page of the same cwd within 60 s reuses the last listing's stat of every record
        # (bench/session_list.py: 200 pages of 10,000 sessions in under a second, not 28 s).
        kept = self._listing
        if cursor is None or kept is None or kept[0] != cwd or time.monotonic() - kept[1] > 60:
            listed = await anyio.to_thread.run_sync(self._listed, cwd)
            kept = self._listing = (cwd, time.monotonic(), listed)
        return await anyio.to_thread.run_sync(page_after, cursor, kept[2], _load)

    def _write_summary(self, description: SessionDescription) -> None:
        # Under the cwd's key; one under another key (opened elsewhere before) goes.
        name, index = _record_name(description.session_id), self.directory / "index"
        target = index / _cwd_key(os.path.realpath(description.cwd)) / f"{name}.json"
        moved = [] if target.exists() else list(index.glob(f"*/{name}.json"))
        target.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "v": 1,
            "sessionId": description.session_id,
            "cwd": description.cwd,
            "title": description.title,
            "additionalDirectories": list(description.additional_directories),
        }
        replace_file(target, _json_line(document), prefix=".summary-", sync=False)
        for stale in moved:
            stale.unlink(missing_ok=True)

    def _listed(self, cwd: str | None) -> list[Listed[tuple[str, str]]]:
        # Each summary (under the cwd's key, if given) whose record is a regular file, with the
        # record's time: one stat each, nothing read; strings, as a `Path` costs more than a stat.
        records = os.path.join(self.directory, "")
        key = "*" if cwd is None else _cwd_key(os.path.realpath(cwd))
        found: dict[str, Listed[tuple[str, str]]] = {}
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
        return sorted(found.values())  # names are unique: no two compare their paths


def _json_line(document: dict[str, Any]) -> bytes:
    # ASCII-only: a torn write can never split a multi-byte character.
    return (json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _skip(path: str, reason: str) -> None:
    _log.warning("session_record_skipped", path=path, reason=reason)


def _cwd_key(real_cwd: str) -> str:
    return hashlib.sha256(real_cwd.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _load(paths: tuple[str, str]) -> SessionDescription | None:
    summary_path, record = paths  # a listed session's summary and record
    if not os.access(record, os.R_OK):
        _skip(record, "permission denied")
        return None
    try:
        with open(summary_path, "rb") as file:
            fields = json.loads(file.read(_SUMMARY_BYTES))
        # A file a person may have edited: every field is checked again.
        session_id, cwd, title = fields["sessionId"], fields["cwd"], fields.get("title")
        directories = fields.get("additionalDirectories", [])
        paths = (session_id, cwd, *directories) if isinstance(directories, list) else (None,)
        if fields["v"] != 1 or not all(isinstance(p, str) for p in paths) or not os.path.isabs(cwd):
            raise ValueError("not a summary of format version 1 with an absolute cwd")
        title = session_title(title) if isinstance(title, str) else None
        return SessionDescription(
            session_id=session_id, cwd=cwd, title=title, additional_directories=tuple(directories)
        )
    except FileNotFoundError:
        return None  # the session moved since the listing began
    except Exception as error:  # whatever a summary holds
        _skip(summary_path, cut(f"not a session summary: {error!r}", 300))
        return None


def _open_record(path: Path, flags: int) -> tuple[int, os.stat_result]:
    # O_NONBLOCK (in OPEN_FLAGS): a FIFO at the path cannot hang the open; fstat then refuses it.
    descriptor = os.open(path, flags | OPEN_FLAGS, 0o600)
    if not stat.S_ISREG((status := os.fstat(descriptor)).st_mode):
        os.close(descriptor)
        raise OSError(errno.EINVAL, "Not a regular file", os.fspath(path))
    return descriptor, status


def _append_line(path: Path, line: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, status = _open_record(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = status.st_size
        if size and os.pread(descriptor, 1, size - 1) != b"\n":
            line = b"\n" + line  # a crash tore the last line: this entry starts a line of its own
        try:
            # O_APPEND puts it at the end; the loop runs again only on a short write.
            pending = memoryview(line)
            while pending:
                pending = pending[os.write(descriptor, pending) :]
        except OSError:
            os.ftruncate(descriptor, size)  # what a full disk let through: a retry writes it once
            raise
    finally:
        os.close(descriptor)


def _read_entries(path: Path) -> list[RecordEntry]:
    try:
        descriptor, _ = _open_record(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    with open(descriptor, "rb") as file:
        lines = file.read().split(b"\n")
    entries: list[RecordEntry] = []
    for number, raw in enumerate(lines, start=1):
        try:
            if raw.strip():
                entries.append(_decode_line(raw))
        except Exception as error:  # whatever a line holds, a crash's torn one too
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
