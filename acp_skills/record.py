"""The durable record of a session: request headers and conversation history.

A session's record is an append-only sequence of entries::

    RecordEntry
    ├── HeaderEntry    what a model request was built from besides the history:
    │                  {config, system, tools, message_prefix}, and why it was written
    │                  ("initial", "resume" or "change")
    └── HistoryEntry   one conversation message, an opaque JSON object the agent defines

The session prefix lives only in headers; history entries never contain it (contract §8).

Storage sits behind two small protocols, `SessionStore` (one per agent) and `SessionRecord` (one
per session id). Two stores ship with the package: `JsonlSessionStore`, one JSON Lines file per
session, and `InMemorySessionStore`, for tests and embedded use.

The JSON Lines format, version 1: one entry per line, each a JSON object carrying ``"v": 1`` and
a ``"type"`` discriminator. Keys are camelCase, like the ``_skills/prefix`` extension method that
reports headers::

    {"v":1,"type":"header","reason":"initial","config":{},"system":"...","tools":[],"messagePrefix":[{"role":"user","text":"..."}]}
    {"v":1,"type":"history","message":{"role":"user","content":"..."}}

Readers ignore keys they do not know, so later writers can add fields without a new version.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio
import anyio.lowlevel
import structlog

from .model import PrefixMessage

__all__ = [
    "HeaderEntry",
    "HeaderReason",
    "HistoryEntry",
    "InMemorySessionStore",
    "JsonlSessionStore",
    "RecordEntry",
    "SessionRecord",
    "SessionStore",
]

_log = structlog.get_logger(__name__)

HeaderReason: TypeAlias = Literal["initial", "resume", "change"]
"""Why a header was recorded: the instance's first request on a fresh record (``initial``) or on
a record that already held a header (``resume``, after ``session/load``), or a later request whose
header differs from the previous one (``change``)."""

_REASONS: frozenset[str] = frozenset(get_args(HeaderReason))

_FORMAT_VERSION = 1


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


def _freeze_json(value: object, where: str) -> object:
    """Deep-copy ``value`` into immutable JSON: read-only dicts and lists.

    Raises:
        TypeError: on a value JSON cannot carry (a set, an arbitrary object, a non-string key).
        ValueError: on a non-finite number (JSON has no NaN or infinity).
    """
    if value is None or isinstance(value, bool | int | str | _FrozenJsonObject | _FrozenJsonArray):
        # The frozen containers are only ever built here, from frozen parts: already safe.
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} holds {value!r}, which JSON cannot carry")
        return value
    if isinstance(value, Mapping):
        frozen: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a non-string key {key!r}")
            frozen[key] = _freeze_json(item, f"{where}[{key!r}]")
        return _FrozenJsonObject(frozen)
    if isinstance(value, list | tuple):
        return _FrozenJsonArray(
            _freeze_json(item, f"{where}[{index}]") for index, item in enumerate(value)
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
    afterwards never changes what was recorded.

    Attributes:
        reason: why the header was recorded (see `HeaderReason`).
        config: the model configuration the agent sends (model name, temperature, ...).
        system: the system prompt.
        tools: the tool specifications offered to the model, as JSON objects.
        message_prefix: the session instance's frozen prefix.

    Raises:
        ValueError: on an unknown ``reason`` or a non-finite number in ``config`` or ``tools``.
        TypeError: on a value that is not JSON, a ``system`` that is not a string, or a
            prefix item that is not a `PrefixMessage`.
    """

    reason: HeaderReason
    config: Mapping[str, object]
    system: str
    tools: tuple[Mapping[str, object], ...]
    message_prefix: tuple[PrefixMessage, ...]

    def __post_init__(self) -> None:
        if self.reason not in _REASONS:
            raise ValueError(
                f"header reason must be one of {sorted(_REASONS)}, got {self.reason!r}"
            )
        if not isinstance(self.system, str):
            raise TypeError(f"header system must be a string, got {type(self.system).__name__}")
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
    object. It is deep-copied into read-only JSON when the entry is built.

    Raises:
        TypeError: if ``message`` is not a JSON object.
        ValueError: on a non-finite number inside it.
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
    and a reader never sees half an entry.
    """

    async def append(self, entry: RecordEntry) -> None:
        """Append one entry, durably enough to survive the agent process crashing."""

    async def entries(self) -> list[RecordEntry]:
        """Every readable entry, oldest first, as a fresh list."""


@runtime_checkable
class SessionStore(Protocol):
    """Where session records live: one record per session id."""

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``, created empty (and lazily) if there is none yet."""

    async def exists(self, session_id: str) -> bool:
        """Whether anything has been recorded for ``session_id``."""


def _check_entry(entry: object) -> RecordEntry:
    if not isinstance(entry, HeaderEntry | HistoryEntry):
        raise TypeError(f"a session record holds HeaderEntry or HistoryEntry, got {entry!r}")
    return entry


# -- in memory -------------------------------------------------------------------------------


class _MemoryRecord:
    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[RecordEntry] = []

    async def append(self, entry: RecordEntry) -> None:
        _check_entry(entry)
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
        _check_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        return self._records.setdefault(session_id, _MemoryRecord())

    async def exists(self, session_id: str) -> bool:
        """Whether at least one entry was appended for ``session_id``."""
        _check_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        record = self._records.get(session_id)
        return record is not None and bool(record._entries)


def _check_session_id(session_id: object) -> None:
    if not isinstance(session_id, str):
        raise TypeError(f"session id must be a string, got {type(session_id).__name__}")


# -- JSON Lines ------------------------------------------------------------------------------

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
        line = _encode(_check_entry(entry))
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

    File names: an id made only of ``[a-z0-9._-]`` (not starting with a dot, at most 100
    characters, not a Windows device name) is used as it is: ``<directory>/<id>.jsonl``. Any
    other id becomes ``<hint>~<sha256 of the id>.jsonl``, where the hint is a lowercased,
    sanitized prefix kept for humans; distinct ids always get distinct names.

    Each append writes its whole line with a single ``write`` on a file opened in append mode,
    so it reaches the operating system at once and survives the agent process crashing. With
    ``fsync=True`` it is also forced to the disk, which survives a power cut too but costs a
    disk round trip per entry. If the file does not end with a newline (an earlier write was
    torn), the new entry starts a fresh line. New files are readable by their owner only:
    conversations may hold secrets.

    Reading skips, with a ``session_record_line_skipped`` warning naming the path and line, a
    torn last line (the process stopped mid-write) and any corrupt line in the middle (invalid
    JSON or UTF-8, an unknown ``type`` or ``v``, a malformed entry): one bad line never loses
    the rest of a session. A last line that is a complete entry but lost only its newline is
    kept.

    One store and process should write a given session at a time; within one store, appends to
    a session are serialized. All file I/O runs in worker threads.

    Args:
        directory: where the session files live.
        fsync: force every append to the disk (``os.fsync``) before it returns.
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
        """The file that holds (or will hold) the record of ``session_id``.

        Raises:
            TypeError: if ``session_id`` is not a string.
        """
        _check_session_id(session_id)
        return self.directory / _record_file_name(session_id)

    async def open(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``. Nothing touches the disk until the first append.

        Raises:
            TypeError: if ``session_id`` is not a string.
        """
        path = self.path_for(session_id)
        await anyio.lowlevel.checkpoint()
        record = self._records.get(path)
        if record is None:
            record = _JsonlRecord(path, fsync=self._fsync)
            self._records[path] = record
        return record

    async def exists(self, session_id: str) -> bool:
        """Whether the session's file exists.

        Raises:
            TypeError: if ``session_id`` is not a string.
        """
        path = self.path_for(session_id)
        return await anyio.to_thread.run_sync(path.is_file)


def _encode(entry: RecordEntry) -> bytes:
    kind = "header" if isinstance(entry, HeaderEntry) else "history"
    document = {"v": _FORMAT_VERSION, "type": kind, **entry.to_json()}
    # ASCII-only (non-ASCII as \u escapes): the file is valid UTF-8 whatever the strings hold,
    # lone surrogates included, and a torn write can never split a multi-byte character.
    text = json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return (text + "\n").encode("ascii")


def _append_line(path: Path, line: bytes, fsync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags, 0o600)
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
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
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
        except (TypeError, ValueError) as error:
            skipped.append((line_number, f"corrupt line: {error}"))
    if tail.strip():
        try:
            # A proper prefix of a JSON object never parses, so if this parses the write was
            # complete and only its newline is missing.
            entries.append(_decode_line(tail))
        except (TypeError, ValueError):
            skipped.append(
                (len(lines) + 1, "torn last line: the writer stopped in the middle of an entry")
            )
    return entries, skipped


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _decode_line(raw: bytes) -> RecordEntry:
    # UnicodeDecodeError and JSONDecodeError are both ValueErrors.
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
    if reason not in _REASONS:
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
