"""The durable record of a session (contract §8): append-only `HeaderEntry` and `HistoryEntry`
values behind the `SessionStore` / `SessionRecord` protocols. The storage choke point for text:
an entry deep-copies what it is given into well-formed JSON, so the caller's later changes
never reach the record, and what reads the history gets copies (`PrefixedSession.history`)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import (
    Any,
    Final,
    Literal,
    Protocol,
    TypeAlias,
    cast,
    get_args,
    runtime_checkable,
)

import anyio.lowlevel
import anyio.to_thread

from .model import PrefixMessage
from .session_index import (
    PAGE_SIZE,
    MemorySessionIndex,
    SessionDescription,
    SessionPage,
    real_directory,
)
from .text import well_formed

HeaderReason: TypeAlias = Literal["initial", "resume", "change"]
"""``initial``: the first request on a fresh record; ``resume``: the first on a record holding a
header already (``session/load``); ``change``: a later request whose header differs."""
_HEADER_REASONS: Final = frozenset(get_args(HeaderReason))

# Far above real messages and schemas, far below the recursion limit of any walk over a value.
MAX_JSON_DEPTH = 100


def _checked_json(value: object, where: str, depth: int = 1) -> object:
    # A checked, well-formed deep copy in plain dicts and lists: json.dumps, pydantic and
    # equality with the value it came from work on it as on any message.
    if isinstance(value, str):
        return well_formed(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} holds {value!r}, which JSON cannot carry")
        return value
    if isinstance(value, Mapping | list | tuple) and depth > MAX_JSON_DEPTH:
        # Named by its root ("history message"): the full path would be a hundred keys long.
        root = where.split("[", 1)[0]
        raise ValueError(f"{root} is nested more than {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, Mapping):
        if odd := [key for key in value if not isinstance(key, str)]:
            raise TypeError(f"{where} has a non-string key {odd[0]!r}")
        return {
            well_formed(k): _checked_json(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            _checked_json(item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value)
        ]
    raise TypeError(f"{where} holds a {type(value).__name__}, which is not JSON")


def _checked_object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a JSON object (a mapping), got {type(value).__name__}")
    return cast(Mapping[str, object], _checked_json(value, where))


def _json_copy(value: object) -> Any:
    # A deep copy of a checked value, in fresh dicts and lists a caller may change.
    if isinstance(value, Mapping):
        return {key: _json_copy(item) for key, item in value.items()}
    return [_json_copy(item) for item in value] if isinstance(value, tuple | list) else value


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderEntry:
    """What a model request is built from besides the history (a checked copy, as JSON)."""

    reason: HeaderReason
    config: Mapping[str, object]
    system: str
    tools: tuple[Mapping[str, object], ...]
    message_prefix: tuple[PrefixMessage, ...]

    def __post_init__(self) -> None:
        if self.reason not in _HEADER_REASONS:
            reasons = sorted(_HEADER_REASONS)
            raise ValueError(f"header reason must be one of {reasons}, got {self.reason!r}")
        if not isinstance(self.system, str):
            raise TypeError(f"header system must be a string, got {type(self.system).__name__}")
        for field in ("tools", "message_prefix"):
            if not isinstance(value := getattr(self, field), list | tuple):
                raise TypeError(f"header {field} must be a sequence, got {type(value).__name__}")
        for message in self.message_prefix:
            if not isinstance(message, PrefixMessage):
                raise TypeError(f"header message_prefix holds {message!r}, not a PrefixMessage")
        tools = tuple(_checked_object(t, f"header tools[{i}]") for i, t in enumerate(self.tools))
        object.__setattr__(self, "system", well_formed(self.system))
        object.__setattr__(self, "config", _checked_object(self.config, "header config"))
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "message_prefix", tuple(self.message_prefix))

    def same_request_as(self, other: HeaderEntry) -> bool:
        """Whether both describe the same request (compared as JSON text, but the reason)."""

        def canonical(header: HeaderEntry) -> str:
            payload = header.to_json()
            del payload["reason"]
            return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)

        return canonical(self) == canonical(other)

    def to_json(self) -> dict[str, Any]:
        """``{"reason", "config", "system", "tools", "messagePrefix": [{"role", "text"}]}``."""
        return {
            "reason": self.reason,
            "config": _json_copy(self.config),
            "system": self.system,
            "tools": _json_copy(self.tools),
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
        return cast(dict[str, Any], _json_copy(self.message))

    def to_json(self) -> dict[str, Any]:
        """``{"message": {...}}``."""
        return {"message": self.plain_message()}


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


def require_entry(entry: object) -> RecordEntry:
    if not isinstance(entry, HeaderEntry | HistoryEntry):
        raise TypeError(f"a session record holds HeaderEntry or HistoryEntry, got {entry!r}")
    return entry


def require_session_id(session_id: object) -> None:
    if not isinstance(session_id, str):
        raise TypeError(f"session id must be a string, got {type(session_id).__name__}")


class _MemoryRecord:
    __slots__ = ("kept", "updated")

    def __init__(self) -> None:
        self.kept: list[RecordEntry] = []
        self.updated = 0  # when an entry was last appended (ns since the epoch)

    async def append(self, entry: RecordEntry) -> None:
        require_entry(entry)
        # Checkpoint first, like a real store: a cancelled append leaves nothing behind.
        await anyio.lowlevel.checkpoint()
        self.kept.append(entry)
        self.updated = time.time_ns()

    async def entries(self) -> list[RecordEntry]:
        await anyio.lowlevel.checkpoint()
        return list(self.kept)


class InMemorySessionStore:
    """Every record in memory; a session exists once something was appended to it."""

    def __init__(self) -> None:
        self._records: dict[str, _MemoryRecord] = {}
        self._index = MemorySessionIndex()

    async def open(self, session_id: str) -> SessionRecord:
        require_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        return self._records.setdefault(session_id, _MemoryRecord())

    async def exists(self, session_id: str) -> bool:
        require_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        return bool(self._records.get(session_id, _MemoryRecord()).kept)

    async def describe_session(self, description: SessionDescription) -> None:
        """Keep what ``session/list`` shows of the session (`acp_skills.session_index`)."""
        self._index.describe(description, await _real_directory(description.cwd))

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = PAGE_SIZE
    ) -> SessionPage:
        """One page of the described sessions that have a record, newest first."""
        real = await _real_directory(cwd) if cwd is not None else None

        def updated(session_id: str) -> int | None:
            record = self._records.get(session_id)
            return record.updated if record is not None and record.kept else None

        return self._index.page(real, cursor, limit, updated)


async def _real_directory(path: str) -> str:
    return await anyio.to_thread.run_sync(real_directory, path)
