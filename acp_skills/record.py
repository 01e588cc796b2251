"""A session's record entries, the `SessionStore` seam with its listing, `InMemorySessionStore`."""

from __future__ import annotations

import bisect
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeVar, get_args, runtime_checkable

import anyio.lowlevel
import anyio.to_thread

from .json_depth import nests_deeper_than
from .model import PrefixMessage
from .text import shorten_description, well_formed

HeaderReason: TypeAlias = Literal["initial", "resume", "change"]
# Far above real messages and schemas, far below the recursion limit of any walk over a value.
MAX_JSON_DEPTH: Final = 100
PAGE_SIZE: Final = 50
TITLE_LENGTH: Final = 80


def _json_object(value: object, where: str) -> dict[str, Any]:
    # Through JSON text: what JSON cannot carry is refused; later changes never reach the copy.
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a JSON object (a mapping), got {type(value).__name__}")
    if nests_deeper_than(value := dict(value), MAX_JSON_DEPTH):
        raise ValueError(f"{where} is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{where} is not JSON: {error}") from None
    copied: dict[str, Any] = json.loads(well_formed(text))
    return copied


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderEntry:
    """What a model request is built from besides the history (a checked copy, as JSON)."""

    reason: HeaderReason
    config: Mapping[str, object]
    system: str
    tools: tuple[Mapping[str, object], ...]
    message_prefix: tuple[PrefixMessage, ...]

    def __post_init__(self) -> None:
        if self.reason not in get_args(HeaderReason):
            raise ValueError(f"header reason must be one of {get_args(HeaderReason)}")
        if not isinstance(self.system, str):
            raise TypeError("header system must be a string")
        tools = tuple(_json_object(tool, "header tools") for tool in self.tools)
        object.__setattr__(self, "system", well_formed(self.system))
        object.__setattr__(self, "config", _json_object(self.config, "header config"))
        object.__setattr__(self, "tools", tools)

    def same_request_as(self, other: HeaderEntry) -> bool:
        """Whether both describe the same request (compared as JSON text, but the reason)."""
        mine, theirs = ({**header.to_json(), "reason": None} for header in (self, other))
        return json.dumps(mine, sort_keys=True) == json.dumps(theirs, sort_keys=True)

    def to_json(self) -> dict[str, Any]:
        """The record line's fields (camelCase), sharing the entry's own dicts: not to change."""
        return {
            "reason": self.reason,
            "config": self.config,
            "system": self.system,
            "tools": list(self.tools),
            "messagePrefix": [{"role": m.role, "text": m.text} for m in self.message_prefix],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One conversation message, opaque to this package, kept as a well-formed JSON copy."""

    message: Mapping[str, object]

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", _json_object(self.message, "history message"))


RecordEntry: TypeAlias = HeaderEntry | HistoryEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDescription:
    """One session as ``session/list`` shows it; a listing sets ``updated_at`` (ISO 8601, UTC)."""

    session_id: str
    cwd: str
    additional_directories: tuple[str, ...] = ()
    title: str | None = None  # `session_title` of the record's first prompt
    updated_at: str = ""


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of a listing, and the cursor of the next (``None``: this was the last)."""

    sessions: tuple[SessionDescription, ...]
    next_cursor: str | None = None


class InvalidCursor(ValueError):
    """A cursor that no listing of this store handed out."""


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions' append-only records and listings live; storage fails with `OSError`."""

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        """Append one entry, durably enough to survive the agent process crashing."""

    async def entries(self, session_id: str) -> list[RecordEntry]:
        """Every readable entry, oldest first; an undecodable one is skipped with a warning."""

    async def exists(self, session_id: str) -> bool: ...

    async def describe_session(self, description: SessionDescription) -> None: ...

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None
    ) -> SessionPage:
        """One page, newest first, of the sessions in ``cwd`` (by real path) or all."""


def session_title(prompt_text: str) -> str | None:
    """A prompt's text as a session title: one line of at most `TITLE_LENGTH` characters."""
    return shorten_description(prompt_text, TITLE_LENGTH) or None


T = TypeVar("T")
# When the record last changed, negated (ns since the epoch: sorted, the newest come first), a
# name unique in the store, and what the store loads the session's description from.
Listed: TypeAlias = tuple[int, str, T]
_CURSOR = re.compile(r"v1\.(\d+)\.(.*)", re.DOTALL)  # as `page_after` writes it


def page_after(
    cursor: str | None, ordered: list[Listed[T]], load: Callable[[T], SessionDescription | None]
) -> SessionPage:
    """The page of ``ordered`` (sorted) after ``cursor``; its cursor names the last entry looked
    at, whatever changes meanwhile. What ``load`` gives nothing for is skipped."""
    if cursor is not None:
        if (named := _CURSOR.fullmatch(cursor)) is None:
            raise InvalidCursor("the cursor was not handed out by a listing of this agent")
        after = (-int(named[1]), named[2])
        ordered = ordered[bisect.bisect_right(ordered, after, key=lambda entry: entry[:2]) :]
    found: list[SessionDescription] = []
    for looked, (negated, name, item) in enumerate(ordered, start=1):
        if (description := load(item)) is not None:
            changed = datetime.fromtimestamp(-negated / 1e9, UTC).isoformat(timespec="milliseconds")
            found.append(replace(description, updated_at=changed.replace("+00:00", "Z")))
        if len(found) == PAGE_SIZE and looked < len(ordered):
            return SessionPage(tuple(found), f"v1.{-negated}.{name}")
    return SessionPage(tuple(found))


class InMemorySessionStore:
    """Every record, and its description, in memory."""

    def __init__(self) -> None:
        self._records: dict[str, list[RecordEntry]] = {}
        self._updated: dict[str, int] = {}  # when each record last changed
        self._described: dict[str, tuple[SessionDescription, str]] = {}  # with the real cwd

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        # Checkpoint first, like a real store: a cancelled append leaves nothing behind.
        await anyio.lowlevel.checkpoint()
        self._records.setdefault(session_id, []).append(entry)
        self._updated[session_id] = time.time_ns()

    async def entries(self, session_id: str) -> list[RecordEntry]:
        return list(self._records.get(session_id, ()))

    async def exists(self, session_id: str) -> bool:
        return session_id in self._records

    async def describe_session(self, description: SessionDescription) -> None:
        real = await anyio.to_thread.run_sync(os.path.realpath, description.cwd)
        self._described[description.session_id] = (description, real)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None
    ) -> SessionPage:
        real = await anyio.to_thread.run_sync(os.path.realpath, cwd) if cwd is not None else None
        listed = sorted(
            (-self._updated[session_id], session_id, description)
            for session_id, (description, where) in self._described.items()
            if real in (None, where) and session_id in self._updated
        )
        return page_after(cursor, listed, lambda description: description)
