"""The session prefix: messages composed once per session instance, ahead of the history.

    SessionPrefix     the registry of contributors; ``compose`` runs them as a waterfall
    PrefixedSession   one session instance: its frozen prefix, request headers and history

Waterfall order, written here because contributors depend on it: contributors run in
registration order, each one wrapping the rest. The first registered is outermost; its
``next()`` runs the second, and so on; the last one's ``next()`` returns ``()``. A contributor
that returns ``[mine, *await next()]`` therefore puts the contributions on the wire in
registration order (a contributor that appends after ``next()`` lands after the later ones, and
one that never calls ``next()`` drops them).

Every model request of a session instance is ``system + tools + message_prefix + history``. The
prefix is composed once, on the instance's first prompt turn, and then reused verbatim: skills
added or removed later do not change a running session. ``session/load`` opens a new instance,
which composes afresh. The prefix is recorded only inside request headers, never in the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import structlog

from .model import PrefixContext, PrefixContributor, PrefixMessage, PrefixNext
from .record import HeaderEntry, HeaderReason, HistoryEntry, RecordEntry, SessionRecord

__all__ = ["PrefixContributor", "PrefixNext", "PrefixedSession", "SessionPrefix"]

_log = structlog.get_logger(__name__)


class _Registration:
    """One ``add`` call. Identity matters: a remover only removes its own registration."""

    __slots__ = ("contributor",)

    def __init__(self, contributor: PrefixContributor) -> None:
        self.contributor = contributor


class SessionPrefix:
    """The registry of session-prefix contributors. An instance, never a global.

    Contributors run as a waterfall in registration order (see the module docstring).
    """

    def __init__(self) -> None:
        self._chain: list[_Registration] = []

    def add(self, contributor: PrefixContributor) -> Callable[[], None]:
        """Register ``contributor`` after every contributor registered before it.

        The same callable may be added more than once; each registration runs separately.

        Returns:
            A remover that takes this registration out (idempotent). Sessions that already
            composed their prefix keep it.

        Raises:
            TypeError: if ``contributor`` is not callable.
        """
        if not callable(contributor):
            raise TypeError(f"a session-prefix contributor must be callable, got {contributor!r}")
        registration = _Registration(contributor)
        self._chain.append(registration)

        def remove() -> None:
            if registration in self._chain:
                self._chain.remove(registration)

        return remove

    async def compose(self, context: PrefixContext) -> tuple[PrefixMessage, ...]:
        """Run the contributors for ``context`` and return their messages.

        The result is a new tuple: lists the contributors returned can change afterwards without
        touching it (the messages themselves are frozen values).

        Raises:
            TypeError: a contributor returned something other than a sequence of
                `PrefixMessage` with string ``role`` and ``text``.
            RuntimeError: a contributor called ``next()`` twice.
            Exception: whatever a contributor raised propagates, and so does cancellation.
        """
        # The chain as it is now: a contributor added or removed while this composition is
        # running affects the next session, not this one.
        return await _run_chain(tuple(self._chain), 0, context)


async def _run_chain(
    chain: tuple[_Registration, ...], index: int, context: PrefixContext
) -> tuple[PrefixMessage, ...]:
    if index == len(chain):
        return ()
    contributor = chain[index].contributor
    called = False

    async def next_messages() -> tuple[PrefixMessage, ...]:
        nonlocal called
        # Running the rest of the chain twice would query every later contributor (and the
        # registry behind them) twice and make the result depend on which answer was kept.
        if called:
            raise RuntimeError(
                f"session-prefix contributor {_describe(contributor)} called next() twice"
            )
        called = True
        return await _run_chain(chain, index + 1, context)

    return _checked_messages(await contributor(context, next_messages), contributor)


def _checked_messages(result: object, contributor: object) -> tuple[PrefixMessage, ...]:
    who = f"session-prefix contributor {_describe(contributor)}"
    # A str is a Sequence too, and iterating it would yield characters, not messages.
    if isinstance(result, str | bytes) or not isinstance(result, Sequence):
        raise TypeError(
            f"{who} returned a {type(result).__name__}, not a sequence of PrefixMessage"
        )
    messages = tuple(result)
    for position, message in enumerate(messages):
        # PrefixMessage validates its own fields; only the type is left to check.
        if not isinstance(message, PrefixMessage):
            raise TypeError(
                f"{who} returned {message!r} at position {position}, not a PrefixMessage"
            )
    return messages


def _describe(contributor: object) -> str:
    name = getattr(contributor, "__qualname__", None) or type(contributor).__qualname__
    return repr(name)


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

    @classmethod
    async def open(
        cls, prefix: SessionPrefix, context: PrefixContext, record: SessionRecord
    ) -> PrefixedSession:
        """Start a session instance over ``record``, loading its history and last header."""
        return cls(prefix, context, record, entries=await record.entries())

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
