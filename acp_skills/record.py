"""The durable record of a session: request headers and conversation history.

A session's record is an append-only sequence of entries::

    RecordEntry
    ├── HeaderEntry    what a model request was built from besides the history:
    │                  {config, system, tools, message_prefix}, and why it was written
    │                  ("initial", "resume" or "change")
    └── HistoryEntry   one conversation message, an opaque JSON object the agent defines

The session prefix lives only in headers; history entries never contain it (contract §8).

Storage sits behind two small protocols, `SessionStore` (one per agent) and `SessionRecord` (one
per session id). This module holds the entries, the protocols and `InMemorySessionStore`, for
tests and embedded use; `JsonlSessionStore`, one JSON Lines file per session, lives in
`acp_skills.jsonl_store`.

Entries hold read-only, well-formed JSON: every string is checked for lone surrogates (which
become U+FFFD, see `acp_skills.text`) and nesting is bounded (`MAX_JSON_DEPTH`), so whatever
an entry holds can be written, read back and sent to a model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio.lowlevel

from .model import PrefixMessage
from .text import replace_lone_surrogates

__all__ = [
    "HeaderEntry",
    "HeaderReason",
    "HistoryEntry",
    "InMemorySessionStore",
    "RecordEntry",
    "SessionRecord",
    "SessionStore",
]

HeaderReason: TypeAlias = Literal["initial", "resume", "change"]
"""Why a header was recorded: the instance's first request on a fresh record (``initial``) or on
a record that already held a header (``resume``, after ``session/load``), or a later request whose
header differs from the previous one (``change``)."""

HEADER_REASONS: frozenset[str] = frozenset(get_args(HeaderReason))

MAX_JSON_DEPTH = 100
"""How deeply recorded JSON may nest (the entry's own object is level 1).

Real messages and tool schemas stay within a dozen levels; the bound keeps every recursive
walk over recorded values (copying, comparing, serializing, a model client's encoder) far
from Python's recursion limit, whatever a record file holds.
"""


# -- immutable JSON values -------------------------------------------------------------------


def _refuse_mutation(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError("a recorded JSON value is read-only; copy it (dict(), list()) to change it")


class _FrozenJsonObject(dict[str, object]):
    """A JSON object that refuses mutation.

    A dict subclass rather than a ``MappingProxyType`` so that ``json.dumps``, pydantic,
    ``isinstance(value, dict)`` and equality with the plain dict it came from keep working on
    recorded values (the ACP glue serializes headers as they are); every mutating method raises.
    """

    __slots__ = ()

    __setitem__ = __delitem__ = __ior__ = _refuse_mutation
    clear = pop = popitem = setdefault = update = _refuse_mutation

    def __reduce__(self) -> tuple[type[_FrozenJsonObject], tuple[dict[str, object]]]:
        # The default protocol rebuilds a dict subclass item by item through __setitem__, which
        # we refuse; rebuilding from a plain copy keeps copy.copy, deepcopy and pickle working.
        return (type(self), (dict(self),))


class _FrozenJsonArray(list[object]):
    """A JSON array that refuses mutation.

    A list subclass rather than a tuple so that a recorded message still compares equal to
    the plain message it was built from (``(1,) != [1]`` in Python).
    """

    __slots__ = ()

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse_mutation
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse_mutation

    def __reduce__(self) -> tuple[type[_FrozenJsonArray], tuple[list[object]]]:
        return (type(self), (list(self),))


def _freeze_json(value: object, where: str, depth: int = 1) -> object:
    """Deep-copy ``value`` into immutable, well-formed JSON: read-only dicts and lists.

    Lone surrogates in strings and keys become U+FFFD.

    Raises:
        TypeError: on a value JSON cannot carry (a set, an arbitrary object, a non-string key).
        ValueError: on a non-finite number (JSON has no NaN or infinity), or on containers
            nested more than `MAX_JSON_DEPTH` levels deep.
    """
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if value is None or isinstance(value, bool | int | _FrozenJsonObject | _FrozenJsonArray):
        # The frozen containers are only ever built here, from frozen parts, checked when they
        # were built: already safe.
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
        frozen: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a non-string key {key!r}")
            frozen[replace_lone_surrogates(key)] = _freeze_json(
                item, f"{where}[{key!r}]", depth + 1
            )
        return _FrozenJsonObject(frozen)
    if isinstance(value, list | tuple):
        return _FrozenJsonArray(
            _freeze_json(item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value)
        )
    raise TypeError(f"{where} holds a {type(value).__name__}, which is not JSON")


def _freeze_object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a JSON object (a mapping), got {type(value).__name__}")
    return cast(Mapping[str, object], _freeze_json(value, where))


def _thaw_json(value: object) -> Any:
    """A fresh, mutable deep copy of frozen JSON: dicts and lists the caller may change."""
    if isinstance(value, Mapping):
        return {key: _thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw_json(item) for item in value]
    return value


# -- entries ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderEntry:
    """The request header: everything a model request is built from besides the history.

    The values are deep-copied into read-only JSON when the entry is built (nested objects
    become read-only dicts, arrays read-only lists), so changing the caller's config or tool list
    afterwards never changes what was recorded. Lone surrogates in strings become U+FFFD.

    Attributes:
        reason: why the header was recorded (see `HeaderReason`).
        config: the model configuration the agent sends (model name, temperature, ...).
        system: the system prompt.
        tools: the tool specifications offered to the model, as JSON objects.
        message_prefix: the session instance's frozen prefix.

    Raises:
        ValueError: on an unknown ``reason``, a non-finite number in ``config`` or ``tools``,
            or either of them nested more than `MAX_JSON_DEPTH` levels deep.
        TypeError: on a value that is not JSON, a ``system`` that is not a string, or a
            prefix item that is not a `PrefixMessage`.
    """

    reason: HeaderReason
    config: Mapping[str, object]
    system: str
    tools: tuple[Mapping[str, object], ...]
    message_prefix: tuple[PrefixMessage, ...]

    def __post_init__(self) -> None:
        if self.reason not in HEADER_REASONS:
            raise ValueError(
                f"header reason must be one of {sorted(HEADER_REASONS)}, got {self.reason!r}"
            )
        if not isinstance(self.system, str):
            raise TypeError(f"header system must be a string, got {type(self.system).__name__}")
        object.__setattr__(self, "system", replace_lone_surrogates(self.system))
        if not isinstance(self.tools, list | tuple):
            raise TypeError(f"header tools must be a sequence, got {type(self.tools).__name__}")
        if not isinstance(self.message_prefix, list | tuple):
            raise TypeError(
                "header message_prefix must be a sequence, "
                f"got {type(self.message_prefix).__name__}"
            )
        for message in self.message_prefix:
            if not isinstance(message, PrefixMessage):
                raise TypeError(f"header message_prefix holds {message!r}, not a PrefixMessage")
        # Frozen dataclass: __post_init__ is the one place the fields may be replaced, and it
        # is where the deep, read-only copies are taken.
        object.__setattr__(self, "config", _freeze_object(self.config, "header config"))
        object.__setattr__(
            self,
            "tools",
            tuple(
                _freeze_object(tool, f"header tools[{index}]")
                for index, tool in enumerate(self.tools)
            ),
        )
        object.__setattr__(self, "message_prefix", tuple(self.message_prefix))

    def same_request_as(self, other: HeaderEntry) -> bool:
        """Return whether both headers describe the same request, whatever their reasons.

        The comparison is on the JSON text, so key order does not matter but ``1``, ``1.0`` and
        ``true`` differ (Python equality would call them equal; a model API would not).
        """
        return _canonical(self) == _canonical(other)

    def to_json(self) -> dict[str, Any]:
        """The header as a fresh JSON object with camelCase keys.

        ``{"reason", "config", "system", "tools", "messagePrefix": [{"role", "text"}, ...]}``,
        which is what the ``_skills/prefix`` extension method reports.
        """
        return {
            "reason": self.reason,
            "config": _thaw_json(self.config),
            "system": self.system,
            "tools": _thaw_json(self.tools),
            "messagePrefix": [
                {"role": message.role, "text": message.text} for message in self.message_prefix
            ],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One conversation message, as the agent defines it.

    ``message`` is opaque to this package: ``{"role": "user", "content": "..."}``, an
    OpenAI-style assistant message with ``tool_calls``, a ``tool`` result, or any other JSON
    object. It is deep-copied into read-only JSON when the entry is built, with lone surrogates
    in its strings replaced by U+FFFD.

    Raises:
        TypeError: if ``message`` is not a JSON object.
        ValueError: on a non-finite number inside it, or nesting more than `MAX_JSON_DEPTH`
            levels deep.
    """

    message: Mapping[str, object]

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", _freeze_object(self.message, "history message"))

    def plain_message(self) -> dict[str, Any]:
        """A fresh, mutable deep copy of ``message`` (plain dicts and lists)."""
        return cast(dict[str, Any], _thaw_json(self.message))

    def to_json(self) -> dict[str, Any]:
        """The entry as a fresh JSON object: ``{"message": {...}}``."""
        return {"message": self.plain_message()}


RecordEntry: TypeAlias = HeaderEntry | HistoryEntry


def _canonical(header: HeaderEntry) -> str:
    payload = header.to_json()
    del payload["reason"]
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


# -- the seam --------------------------------------------------------------------------------


@runtime_checkable
class SessionRecord(Protocol):
    """The durable, append-only record of one session.

    An entry is either appended whole or not at all: a failed or cancelled ``append`` raises,
    and a reader never sees half an entry. Storage failures are `OSError`s, which
    `PrefixedSession` survives (the conversation goes on in memory and is written later, see
    `PrefixedSession.save_error`); any other exception fails the caller.
    """

    async def append(self, entry: RecordEntry) -> None:
        """Append one entry, durably enough to survive the agent process crashing.

        Raises:
            OSError: the entry could not be stored (a full disk, a permission, a record path
                that is not a regular file).
        """

    async def entries(self) -> list[RecordEntry]:
        """Every readable entry, oldest first, as a fresh list.

        An entry that cannot be decoded is skipped (with a warning), never raised.

        Raises:
            OSError: the record cannot be read at all.
        """


@runtime_checkable
class SessionStore(Protocol):
    """Where session records live: one record per session id."""

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``, created empty (and lazily) if there is none yet."""

    async def exists(self, session_id: str) -> bool:
        """Whether anything has been recorded for ``session_id``."""


def require_entry(entry: object) -> RecordEntry:
    """Return ``entry`` if it is a record entry (for stores checking what they are given).

    Raises:
        TypeError: if it is not a `HeaderEntry` or `HistoryEntry`.
    """
    if not isinstance(entry, HeaderEntry | HistoryEntry):
        raise TypeError(f"a session record holds HeaderEntry or HistoryEntry, got {entry!r}")
    return entry


# -- in memory -------------------------------------------------------------------------------


class _MemoryRecord:
    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[RecordEntry] = []

    async def append(self, entry: RecordEntry) -> None:
        require_entry(entry)
        # Checkpoint first, like a real store: a cancelled append leaves nothing behind.
        await anyio.lowlevel.checkpoint()
        self._entries.append(entry)

    async def entries(self) -> list[RecordEntry]:
        await anyio.lowlevel.checkpoint()
        return list(self._entries)


class InMemorySessionStore:
    """Keeps every record in memory, for tests and agents that need no persistence.

    Entries are immutable, so the store keeps the appended objects themselves. ``open`` returns
    the same record for the same session id; a session "exists" once something was appended.
    """

    def __init__(self) -> None:
        self._records: dict[str, _MemoryRecord] = {}

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``, created empty if there is none yet.

        Raises:
            TypeError: if ``session_id`` is not a string.
        """
        require_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        return self._records.setdefault(session_id, _MemoryRecord())

    async def exists(self, session_id: str) -> bool:
        """Whether at least one entry was appended for ``session_id``."""
        require_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        record = self._records.get(session_id)
        return record is not None and bool(record._entries)


def require_session_id(session_id: object) -> None:
    """Check that a store was given a string session id.

    Raises:
        TypeError: if ``session_id`` is not a string.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session id must be a string, got {type(session_id).__name__}")
