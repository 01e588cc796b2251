"""What ``session/list`` shows of each recorded session, kept beside the records so that a
listing never reads a record (contract §15, docs/sessions.md).

A store that lists its sessions (`ListedSessionStore`) keeps one small summary per session:
its id, working directory, additional directories and title (the first recorded prompt, one
line). The session layer hands it a `SessionDescription` once per session instance, at the
instance's first recorded prompt. When a session was last active is its record's own
modification time, so appending to a record writes nothing else.

`SummaryDirectory` keeps the summaries of `JsonlSessionStore` on disk as
``<records>/index/<cwd key>/<record name>.json``, the key being the SHA-256 of the working
directory's real path: a listing by ``cwd`` lists one directory, any listing stats each record
it names (for the time) and reads only the summaries of the page it returns.
`MemorySessionIndex` is the same for `InMemorySessionStore`. Both page the same way
(`page_of`): newest first, ties by name, at most `PAGE_SIZE` a page, the cursor naming the
last entry looked at.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, NamedTuple, Protocol, TypeVar, runtime_checkable

from .fs import read_local_file, replace_file
from .text import shorten_description

PAGE_SIZE: Final = 50
TITLE_LENGTH: Final = 80
INDEX_DIRECTORY: Final = "index"
# A summary holds a few paths and an 80-character title; anything far larger is not one.
MAX_SUMMARY_BYTES: Final = 256 * 1024
_SUMMARY_SUFFIX: Final = ".json"
_RECORD_SUFFIX: Final = ".jsonl"
_FORMAT_VERSION: Final = 1
_CURSOR_PREFIX: Final = "v1."
# A listing continued within this long goes on from what its first page left; later, or past
# the last few listings, it lists afresh (the cursor still says where to go on from).
CONTINUATION_SECONDS: Final = 60.0
_CONTINUATIONS_KEPT: Final = 8

Entry = TypeVar("Entry")
Problem = tuple[str, str]  # (path, reason): something a listing skipped, for a warning


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDescription:
    """What the session layer tells a store about a session instance (``title``: the text of
    the prompt being recorded, as `session_title` makes it; a store keeps the first one)."""

    session_id: str
    cwd: str
    additional_directories: tuple[str, ...] = ()
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """One session as ``session/list`` shows it (``updated_at``: its record's last change)."""

    session_id: str
    cwd: str
    title: str | None
    updated_at: datetime
    additional_directories: tuple[str, ...] = ()

    @property
    def updated_at_text(self) -> str:
        """``updated_at`` in ISO 8601 (RFC 3339), UTC, to the millisecond."""
        return self.updated_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of a listing, and the cursor of the next (``None``: this was the last)."""

    sessions: tuple[SessionSummary, ...]
    next_cursor: str | None = None


class InvalidCursor(ValueError):
    """A cursor that no listing of this store handed out."""


@runtime_checkable
class ListedSessionStore(Protocol):
    """A session store that can list its sessions (`JsonlSessionStore`, the in-memory one)."""

    async def describe_session(self, description: SessionDescription) -> None:
        """Keep what a listing shows of the session; `OSError` when it cannot be written."""

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = PAGE_SIZE
    ) -> SessionPage:
        """One page of sessions, newest first; ``cwd`` keeps those whose working directory has
        the same real path. Raises `InvalidCursor`, and `OSError` when nothing can be listed."""


def session_title(prompt_text: str) -> str | None:
    """A prompt's text as a session title: one line of at most `TITLE_LENGTH` characters."""
    return shorten_description(prompt_text, TITLE_LENGTH) or None


def real_directory(path: str) -> str:
    """The real path a listing compares working directories by (blocking: a worker thread)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


Ordered = list[tuple[tuple[int, str], Entry]]


def ordered_after(entries: Iterable[tuple[int, str, Entry]], cursor: str | None) -> Ordered[Entry]:
    """``entries`` (``(updated ns, name, entry)``) newest first, then by name, from just after
    the entry ``cursor`` names (`InvalidCursor` if no listing handed it out)."""
    after = _decode_cursor(cursor) if cursor is not None else None
    ordered = sorted((((-updated, name), entry) for updated, name, entry in entries), key=_first)
    return ordered if after is None else [item for item in ordered if item[0] > after]


def page_of(
    ordered: Ordered[Entry], limit: int, load: Callable[[Entry], SessionSummary | None]
) -> tuple[SessionPage, Ordered[Entry]]:
    """The first page of ``ordered`` and what is left after it. An entry ``load`` gives
    ``None`` for is skipped and the page filled from the next ones; the next cursor names the
    last entry looked at, so a later page starts after it whatever changed meanwhile."""
    found: list[SessionSummary] = []
    looked = 0
    for _key, entry in ordered:
        if len(found) == limit:
            break
        looked += 1
        if (summary := load(entry)) is not None:
            found.append(summary)
    rest = ordered[looked:]
    next_cursor = _encode_cursor(ordered[looked - 1][0]) if rest and looked else None
    return SessionPage(tuple(found), next_cursor), rest


def _first(item: tuple[tuple[int, str], object]) -> tuple[int, str]:
    return item[0]


def updated_at(nanoseconds: int) -> datetime:
    return datetime.fromtimestamp(nanoseconds / 1e9, UTC)


def _encode_cursor(key: tuple[int, str]) -> str:
    text = json.dumps([key[0], key[1]], ensure_ascii=True, separators=(",", ":"))
    return _CURSOR_PREFIX + base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii")


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        if not cursor.startswith(_CURSOR_PREFIX):
            raise ValueError("unknown cursor")
        decoded = json.loads(base64.urlsafe_b64decode(cursor[len(_CURSOR_PREFIX) :]))
        key, name = decoded
        if not isinstance(key, int) or isinstance(key, bool) or not isinstance(name, str):
            raise ValueError("unknown cursor")
    except (ValueError, TypeError, binascii.Error):
        raise InvalidCursor("the cursor was not handed out by a listing of this agent") from None
    return key, name


class MemorySessionIndex:
    """The summaries of an in-memory store, by session id."""

    def __init__(self) -> None:
        self._described: dict[str, tuple[SessionDescription, str]] = {}

    def describe(self, description: SessionDescription, real_cwd: str) -> None:
        """Keep ``description`` (and the title kept before, if there was one)."""
        if (kept := self._described.get(description.session_id)) is not None and kept[0].title:
            description = replace(description, title=kept[0].title)
        self._described[description.session_id] = (description, real_cwd)

    def page(
        self,
        real_cwd: str | None,
        cursor: str | None,
        limit: int,
        updated: Callable[[str], int | None],
    ) -> SessionPage:
        """A page of the described sessions that have a record (``updated`` gives when each
        record last changed, ``None`` when it has none)."""
        entries = [
            (nanoseconds, session_id, description)
            for session_id, (description, real) in self._described.items()
            if (real_cwd is None or real == real_cwd)
            and (nanoseconds := updated(session_id)) is not None
        ]
        ordered = ordered_after(entries, cursor)
        return page_of(ordered, limit, lambda d: _summary(d, updated(d.session_id)))[0]


def _summary(description: SessionDescription, nanoseconds: int | None) -> SessionSummary:
    return SessionSummary(
        session_id=description.session_id,
        cwd=description.cwd,
        title=description.title,
        updated_at=updated_at(nanoseconds or 0),
        additional_directories=description.additional_directories,
    )


class _Listed(NamedTuple):
    summary: str
    record: str
    updated: int


class SummaryDirectory:
    """The summaries of the records in ``records`` (a `JsonlSessionStore`'s directory), in
    ``records/index``. Every method blocks: async code calls them in a worker thread."""

    def __init__(self, records: Path) -> None:
        self.records = records
        self.index = records / INDEX_DIRECTORY
        # What is left of each recent listing after the page it answered, by (cwd, the cursor
        # it handed out): the next page continues from it instead of listing everything again
        # (an editor following every cursor of 10,000 sessions asks for 200 pages).
        self._continued: OrderedDict[tuple[str | None, str], tuple[float, Ordered[_Listed]]]
        self._continued = OrderedDict()
        self._lock = threading.Lock()

    def describe(self, description: SessionDescription, record: Path) -> None:
        """Write the summary of the session whose record is ``record``, under its working
        directory's key; one kept under another key (the session was opened elsewhere before)
        gives its title and goes. Nothing is written when nothing changed."""
        name = record.name.removesuffix(_RECORD_SUFFIX) + _SUMMARY_SUFFIX
        home = self.index / cwd_key(real_directory(description.cwd))
        target = home / name
        here = _read_summary(target)
        kept = here if isinstance(here, dict) else None
        elsewhere: list[Path] = []
        if kept is None:  # none here: a new session, or one opened elsewhere before
            elsewhere = [path for path in self._everywhere(name) if path != target]
            kept = next(
                (found for path in elsewhere if isinstance(found := _read_summary(path), dict)),
                None,
            )
        title = kept.get("title") if kept is not None else None
        document = {
            "v": _FORMAT_VERSION,
            "sessionId": description.session_id,
            "cwd": description.cwd,
            "title": title if isinstance(title, str) and title else description.title,
            "additionalDirectories": list(description.additional_directories),
        }
        if here != document:
            _write_atomically(target, document)
        for stale in elsewhere:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()

    def page(
        self, cwd: str | None, cursor: str | None, limit: int
    ) -> tuple[SessionPage, list[Problem]]:
        """A page of the sessions summarized here (whose working directory has the real path of
        ``cwd``, if given), and what was skipped and why."""
        problems: list[Problem] = []
        ordered = self._continuation(cwd, cursor)
        if ordered is None:
            ordered = ordered_after(self._scan(cwd, problems), cursor)

        def load(listed: _Listed) -> SessionSummary | None:
            if not os.access(listed.record, os.R_OK):
                problems.append((listed.record, "permission denied"))
                return None
            document = _read_summary(listed.summary)
            if document is None:
                return None  # removed since the listing began (its session moved)
            if isinstance(document, str):
                problems.append((listed.summary, document))
                return None
            summary = _summary_of(document, listed.updated)
            if isinstance(summary, str):
                problems.append((listed.summary, summary))
                return None
            return summary

        page, rest = page_of(ordered, limit, load)
        if page.next_cursor is not None:
            with self._lock:
                self._continued[(cwd, page.next_cursor)] = (time.monotonic(), rest)
                while len(self._continued) > _CONTINUATIONS_KEPT:
                    self._continued.popitem(last=False)
        return page, problems

    def _continuation(self, cwd: str | None, cursor: str | None) -> Ordered[_Listed] | None:
        if cursor is None:
            return None  # a first page always lists afresh
        with self._lock:
            kept = self._continued.pop((cwd, cursor), None)
        if kept is None or time.monotonic() - kept[0] > CONTINUATION_SECONDS:
            return None
        return kept[1]

    def _scan(self, cwd: str | None, problems: list[Problem]) -> Iterable[tuple[int, str, _Listed]]:
        homes = [self.index / cwd_key(real_directory(cwd))] if cwd is not None else None
        # Plain strings, not `Path`s: this loop runs once per recorded session, and building
        # two `Path`s each cost more than the stat that is its real work.
        records = os.fspath(self.records) + os.sep
        entries: dict[str, tuple[int, str, _Listed]] = {}
        for summary in self._summaries(homes):
            name = os.path.basename(summary).removesuffix(_SUMMARY_SUFFIX)
            record = records + name + _RECORD_SUFFIX
            try:
                status = os.stat(record)
            except FileNotFoundError:
                # The record was removed: its summary goes with it.
                with contextlib.suppress(OSError):
                    os.unlink(summary)
                continue
            except OSError as error:
                problems.append((record, error.strerror or str(error)))
                continue
            if not stat.S_ISREG(status.st_mode):
                problems.append((record, "not a regular file"))
                continue
            # One left under a second key by a move cut short: the newer summary stands.
            if name in entries and _mtime(entries[name][2].summary) >= _mtime(summary):
                continue
            updated = status.st_mtime_ns
            entries[name] = (updated, name, _Listed(summary, record, updated))

        return entries.values()

    def _summaries(self, homes: list[Path] | None) -> Iterator[str]:
        for home in homes if homes is not None else _subdirectories(self.index):
            try:
                with os.scandir(home) as listing:
                    for entry in listing:
                        if entry.name.endswith(_SUMMARY_SUFFIX):
                            yield entry.path
            except (FileNotFoundError, NotADirectoryError):
                continue

    def _everywhere(self, name: str) -> list[Path]:
        return [home / name for home in _subdirectories(self.index) if (home / name).exists()]


def cwd_key(real_cwd: str) -> str:
    """The name of the index directory of the sessions whose working directory is ``real_cwd``."""
    return hashlib.sha256(real_cwd.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _subdirectories(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as listing:
            return [Path(entry.path) for entry in listing if entry.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _read_summary(path: str | Path) -> dict[str, object] | str | None:
    """The summary at ``path`` as JSON, ``None`` when there is none, or why it cannot be read
    (bounded, regular files only)."""
    content = read_local_file(os.fspath(path), MAX_SUMMARY_BYTES)
    if not isinstance(content, bytes):
        return None if content.failure == "not_found" else content.reason
    try:
        document = json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        return f"not a session summary: {error}"[:300]
    return document if isinstance(document, dict) else "not a session summary: not an object"


def _summary_of(document: dict[str, object], updated: int) -> SessionSummary | str:
    session_id, cwd, title = document.get("sessionId"), document.get("cwd"), document.get("title")
    directories = document.get("additionalDirectories", [])
    if document.get("v") != _FORMAT_VERSION:
        return f"unsupported format version {document.get('v')!r}"
    if not isinstance(session_id, str) or not isinstance(cwd, str) or not os.path.isabs(cwd):
        return "not a session summary: no session id or no absolute cwd"
    if not isinstance(directories, list) or not all(isinstance(d, str) for d in directories):
        return "not a session summary: additionalDirectories is not a list of paths"
    return SessionSummary(
        session_id=session_id,
        cwd=cwd,
        # Cleaned here too: a summary is a file a person may have edited.
        title=session_title(title) if isinstance(title, str) else None,
        updated_at=updated_at(updated),
        additional_directories=tuple(directories),
    )


def _write_atomically(target: Path, document: dict[str, object]) -> None:
    # The temporary name does not end in ".json", so no listing takes it for a summary.
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n"
    replace_file(target, text.encode(), prefix=".summary-", sync=False)
