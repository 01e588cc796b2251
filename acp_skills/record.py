"""The durable record of a session (contract §8): its entries (storage's text choke point: each
keeps a checked, well-formed JSON copy), the store protocols and the in-memory store."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio.lowlevel
import anyio.to_thread

from .model import PrefixMessage
from .session_index import (
    SessionDescription,
    SessionPage,
    ordered_after,
    page_of,
    real_directory,
    summary_document,
    summary_of,
)
from .text import well_formed

# The first request on a fresh record, the first on one holding a header, a later change.
HeaderReason: TypeAlias = Literal["initial", "resume", "change"]

# Far above real messages and schemas, far below the recursion limit of any walk over a value.
MAX_JSON_DEPTH = 100


def _checked_json(value: object, where: str, depth: int = 1) -> object:
    # A deep copy in plain dicts and lists: json.dumps, pydantic and equality with the value it
    # came from work on it as on any message, and the caller's later changes never reach it.
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} holds {value!r}, which JSON cannot carry")
    if value is None or isinstance(value, bool | int | float):
        return value
    if not isinstance(value, Mapping | list | tuple):
        raise TypeError(f"{where} holds a {type(value).__name__}, which is not JSON")
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{where} is nested more than {MAX_JSON_DEPTH} levels deep")
    if not isinstance(value, Mapping):
        return [_checked_json(item, where, depth + 1) for item in value]
    if not all(isinstance(key, str) for key in value):
        raise TypeError(f"{where} has a key that is not a string")
    return {well_formed(k): _checked_json(v, where, depth + 1) for k, v in value.items()}


def _checked_object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a JSON object (a mapping), got {type(value).__name__}")
    return cast(dict[str, Any], _checked_json(value, where))


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
        tools = _checked_json(self.tools, "header tools", depth=0)
        if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
            raise TypeError("header tools must be a sequence of JSON objects")
        if not isinstance(self.system, str):
            raise TypeError("header system must be a string")
        object.__setattr__(self, "system", well_formed(self.system))
        object.__setattr__(self, "config", _checked_object(self.config, "header config"))
        object.__setattr__(self, "tools", tuple(tools))

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
        object.__setattr__(self, "message", _checked_object(self.message, "history message"))

    def plain_message(self) -> dict[str, Any]:
        """A fresh, mutable deep copy of ``message``."""
        return cast(dict[str, Any], json.loads(json.dumps(self.message)))

    def copy(self) -> HistoryEntry:
        """An entry of its own over a copy of ``message``, which needs no second check."""
        copied = object.__new__(HistoryEntry)
        object.__setattr__(copied, "message", self.plain_message())
        return copied

    def to_json(self) -> dict[str, Any]:
        """The record line's fields, sharing the entry's own dicts: not to change."""
        return {"message": self.message}


RecordEntry: TypeAlias = HeaderEntry | HistoryEntry


@runtime_checkable
class SessionRecord(Protocol):
    """The append-only record of one session; storage fails with `OSError`."""

    async def append(self, entry: RecordEntry) -> None:
        """Append one entry, durably enough to survive the agent process crashing."""

    async def entries(self) -> list[RecordEntry]:
        """Every readable entry, oldest first; an undecodable one is skipped with a warning."""


@runtime_checkable
class SessionStore(Protocol):
    """Where session records live: one record per session id."""

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``, created empty (and lazily) if there is none yet."""

    async def exists(self, session_id: str) -> bool:
        """Whether anything has been recorded for ``session_id``."""


class _MemoryRecord:
    __slots__ = ("kept", "updated")

    def __init__(self) -> None:
        self.kept: list[RecordEntry] = []
        self.updated = 0  # when an entry was last appended (ns since the epoch)

    async def append(self, entry: RecordEntry) -> None:
        # Checkpoint first, like a real store: a cancelled append leaves nothing behind.
        await anyio.lowlevel.checkpoint()
        self.kept.append(entry)
        self.updated = time.time_ns()

    async def entries(self) -> list[RecordEntry]:
        await anyio.lowlevel.checkpoint()
        return list(self.kept)


class InMemorySessionStore:
    """Every record, and what ``session/list`` shows of it, in memory."""

    def __init__(self) -> None:
        self._records: dict[str, _MemoryRecord] = {}
        self._summaries: dict[str, tuple[dict[str, object], str]] = {}  # with the real cwd

    async def open(self, session_id: str) -> SessionRecord:
        await anyio.lowlevel.checkpoint()
        return self._records.setdefault(session_id, _MemoryRecord())

    async def exists(self, session_id: str) -> bool:
        await anyio.lowlevel.checkpoint()
        return bool((record := self._records.get(session_id)) and record.kept)

    async def describe_session(self, description: SessionDescription) -> None:
        """Keep what ``session/list`` shows of the session."""
        real = await anyio.to_thread.run_sync(real_directory, description.cwd)
        self._summaries[description.session_id] = (summary_document(description), real)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None
    ) -> SessionPage:
        real = await anyio.to_thread.run_sync(real_directory, cwd) if cwd is not None else None
        listed = [
            (record.updated, session_id, summary)
            for session_id, (summary, where) in self._summaries.items()
            if real in (None, where) and (record := self._records.get(session_id)) and record.kept
        ]
        return page_of(ordered_after(listed, cursor), summary_of)[0]
