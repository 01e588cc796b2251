"""`PrefixedSession`: one session instance, with its frozen prefix, request headers and history.

Every model request of a session instance is ``system + tools + message_prefix + history``. The
prefix is composed once, on the instance's first prompt turn, and then reused verbatim: skills
added or removed later do not change a running session. ``session/load`` opens a new instance,
which composes afresh. The prefix is recorded only inside request headers, never in the history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import structlog

from .catalog import CatalogFit
from .model import PrefixContext, PrefixMessage
from .prefix import SessionPrefix
from .record import HeaderEntry, HeaderReason, HistoryEntry, RecordEntry, SessionRecord

__all__ = ["PrefixedSession"]

_log = structlog.get_logger(__name__)


class PrefixedSession:
    """One session instance (``session/new``, or ``session/load``, which is a new instance).

    It owns the instance's frozen prefix, records a request header before model requests,
    and keeps the conversation history, all backed by the session's `SessionRecord`. Open it
    with `PrefixedSession.open`, which reads what the record already holds.

    A model request is built as ``system + tools + message_prefix + history``; the prefix never
    enters the history.

    A record that cannot be written (an `OSError`: a full disk, a permission, a record path
    that is not a file) does not stop the conversation. The entry is kept in this instance all
    the same, `save_error` says why the record is behind, and every later append first writes
    what is waiting, in order, so the record always holds the conversation up to some point and
    catches up once writing works again. Per turn, an agent typically does::

        await session.append_history({"role": "user", "content": text})
        await session.record_request(config=config, system=system, tools=tools)
        response = await model(system, tools, session.request_messages())
        await session.append_history(response_message)

    Args:
        prefix: the contributor registry to compose from.
        context: what the contributors learn about this session.
        record: the session's durable record.
        entries: what ``record`` already holds, oldest first (`open` reads them for you).
    """

    def __init__(
        self,
        prefix: SessionPrefix,
        context: PrefixContext,
        record: SessionRecord,
        *,
        entries: Sequence[RecordEntry],
    ) -> None:
        self._registry = prefix
        self._context = context
        self._record = record
        self._frozen: tuple[PrefixMessage, ...] | None = None
        self._compose_lock = anyio.Lock()
        # One lock for every append keeps the in-memory history and header state in the same
        # order as the record.
        self._write_lock = anyio.Lock()
        self._history = [entry for entry in entries if isinstance(entry, HistoryEntry)]
        headers = [entry for entry in entries if isinstance(entry, HeaderEntry)]
        self._last_header: HeaderEntry | None = headers[-1] if headers else None
        self._resumed = bool(headers)
        # The last header this instance recorded; the previous instance's does not count, since
        # a new instance always records its first header (reason "resume").
        self._own_header: HeaderEntry | None = None
        # Entries this instance holds that the record has not taken yet, oldest first, and why.
        self._unsaved: list[RecordEntry] = []
        self._save_error: OSError | None = None
        self._catalog_fit: CatalogFit | None = None

    @classmethod
    async def open(
        cls, prefix: SessionPrefix, context: PrefixContext, record: SessionRecord
    ) -> PrefixedSession:
        """Start a session instance over ``record``, loading its history and last header."""
        return cls(prefix, context, record, entries=await record.entries())

    @classmethod
    async def reopen(
        cls,
        prefix: SessionPrefix,
        context: PrefixContext,
        record: SessionRecord,
        *,
        requested: bool,
        catalog_fit: CatalogFit | None = None,
    ) -> PrefixedSession:
        """Bring back an instance that was released from memory while idle.

        Unlike `open`, this continues the same instance: when it had made a request
        (``requested``, from `requested` before the release), the prefix it froze is taken
        back from the last request header in its record, so the session never sees a new
        catalog, and no ``resume`` header is recorded, and ``catalog_fit`` is what its catalog
        budget did. Otherwise it composes on its next turn, as it would have.
        """
        session = await cls.open(prefix, context, record)
        header = session._last_header
        if requested and header is not None:
            session._frozen = header.message_prefix
            session._own_header = header
            session._catalog_fit = catalog_fit
        return session

    @property
    def context(self) -> PrefixContext:
        """What the contributors learn about this session."""
        return self._context

    @property
    def composed(self) -> bool:
        """Whether this instance's prefix has been composed (and frozen)."""
        return self._frozen is not None

    @property
    def messages(self) -> tuple[PrefixMessage, ...]:
        """The frozen prefix, or ``()`` while it has not been composed."""
        return self._frozen or ()

    @property
    def catalog_fit(self) -> CatalogFit | None:
        """What the catalog budget did to this instance's frozen catalog.

        ``None`` until the prefix is composed. The catalog contributor's listener sets it while
        composing (`SkillCatalogContributor` ``on_fit``); it is frozen with the prefix.
        """
        return self._catalog_fit if self._frozen is not None else None

    @catalog_fit.setter
    def catalog_fit(self, fit: CatalogFit | None) -> None:
        self._catalog_fit = fit

    @property
    def last_header(self) -> HeaderEntry | None:
        """The last header in the session's record.

        Before this instance's first request that is the previous instance's header (after
        ``session/load``), so it reports what the session's last model request was built from.
        """
        return self._last_header

    @property
    def save_error(self) -> OSError | None:
        """Why the record is behind this instance, or ``None`` when it holds everything.

        Set when an append fails with an `OSError`; cleared once a later append has written
        every entry that was waiting. An agent checks it at the end of a turn to tell the person
        that the conversation could not be saved.
        """
        return self._save_error

    @property
    def history(self) -> tuple[Mapping[str, object], ...]:
        """The conversation messages recorded so far, oldest first, read-only."""
        return tuple(entry.message for entry in self._history)

    async def prefix(self) -> tuple[PrefixMessage, ...]:
        """Compose the prefix on first use, then return the same frozen tuple every time.

        Concurrent first callers share one composition. If composition raises or is cancelled,
        nothing is kept: the next call composes again.

        Raises:
            Exception: whatever `SessionPrefix.compose` raised.
        """
        if self._frozen is not None:
            return self._frozen
        async with self._compose_lock:
            if self._frozen is None:
                # Assigned only once compose() has returned: an exception or a cancellation
                # leaves the instance uncomposed.
                self._frozen = await self._registry.compose(self._context)
            return self._frozen

    @property
    def requested(self) -> bool:
        """Whether this instance has recorded a request header (its prefix is then final)."""
        return self._own_header is not None

    def discard_unused_prefix(self) -> None:
        """Forget a composed prefix that no request of this instance has used yet.

        A cancelled turn calls this, so the next turn composes afresh instead of freezing a
        catalog the model never saw. Once a request header holds the prefix, it stays.
        """
        if not self.requested:
            self._frozen = None
            self._catalog_fit = None

    async def record_request(
        self,
        *,
        config: Mapping[str, object],
        system: str,
        tools: Sequence[Mapping[str, object]],
    ) -> HeaderEntry | None:
        """Record the header of the model request about to be sent, if it needs recording.

        Call it before every model request. It composes the prefix if that has not happened
        yet. The instance's first call appends a header with reason ``initial`` (or ``resume``
        when the record already held one); later calls append one with reason ``change`` only
        when config, system, tools or prefix differ from this instance's last header. A record
        that fails with an `OSError` keeps the header waiting (see `save_error`); any other
        failure leaves the state unchanged, and the next call tries again.

        Returns:
            The appended header, or ``None`` when nothing changed.

        Raises:
            TypeError: on a config or tool that is not JSON, or a system that is not a string.
            ValueError: on a non-finite number in config or tools.
            Exception: whatever composing the prefix raised, or appending to the record raised
                other than an `OSError`.
        """
        if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
            raise TypeError(f"tools must be a sequence of JSON objects, got {tools!r}")
        # Copied now, before anything awaits: a caller changing its config while composition
        # runs must not change what gets recorded.
        requested = HeaderEntry(
            reason="initial", config=config, system=system, tools=tuple(tools), message_prefix=()
        )
        message_prefix = await self.prefix()
        async with self._write_lock:
            previous = self._own_header
            reason: HeaderReason = "change"
            if previous is None:
                reason = "resume" if self._resumed else "initial"
            header = replace(requested, reason=reason, message_prefix=message_prefix)
            if previous is not None and previous.same_request_as(header):
                return None
            await self._save(header)
            self._own_header = header
            self._last_header = header
            return header

    async def append_history(self, message: Mapping[str, object]) -> HistoryEntry:
        """Append one conversation message to the record and to `history`.

        A record that fails with an `OSError` does not fail the call: the message joins
        `history` and waits to be written (see `save_error`).

        Returns:
            The recorded entry (its ``message`` is a read-only, well-formed deep copy).

        Raises:
            TypeError: if ``message`` is not a JSON object.
            ValueError: on a non-finite number inside it, or nesting too deep.
            Exception: whatever appending to the record raised other than an `OSError`;
                `history` is then unchanged.
        """
        entry = HistoryEntry(message=message)
        async with self._write_lock:
            await self._save(entry)
            self._history.append(entry)
        return entry

    async def _save(self, entry: RecordEntry) -> None:
        """Write what is waiting, then ``entry``, in order; the caller holds the write lock.

        Raises:
            Exception: a failure other than an `OSError` (or a cancellation) while writing:
                ``entry`` is then not kept, and older waiting entries stay waiting.
        """
        self._unsaved.append(entry)
        try:
            while self._unsaved:
                await self._record.append(self._unsaved[0])
                del self._unsaved[0]
        except OSError as error:
            if self._save_error is None:
                _log.warning(
                    "session_record_write_failed",
                    session_id=self._context.session_id,
                    error=str(error),
                    unsaved=len(self._unsaved),
                )
            self._save_error = error
            return
        except BaseException:
            # Not a storage failure: the caller sees the exception and keeps nothing of this
            # entry, as if it had never been appended. (A cancelled write that the record had
            # already finished stays in the record: the protocol cannot say.)
            self._unsaved.pop()
            raise
        if self._save_error is not None:
            _log.info("session_record_caught_up", session_id=self._context.session_id)
            self._save_error = None

    def request_messages(self) -> list[dict[str, Any]]:
        """The message list of the next model request: prefix, then history.

        Prefix messages become ``{"role": role, "content": text}``, the shape of OpenAI-style
        chat APIs; history messages are returned as recorded. Everything is a fresh, mutable
        copy. Agents whose model takes another shape build their own list from `messages` and
        `history`.

        Raises:
            RuntimeError: if the prefix has not been composed yet (call `prefix` or
                `record_request` first): a request without it would silently lose the catalog.
        """
        if self._frozen is None:
            raise RuntimeError(
                "the session prefix has not been composed yet; "
                "await prefix() or record_request() before building a request"
            )
        messages: list[dict[str, Any]] = [
            {"role": message.role, "content": message.text} for message in self._frozen
        ]
        messages.extend(entry.plain_message() for entry in self._history)
        return messages
