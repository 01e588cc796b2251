"""`PrefixedSession`: one session instance: its frozen prefix, request headers and history."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import anyio

from .model import PrefixContext, PrefixMessage, SkillSnapshot
from .prefix import SessionPrefix
from .quiet_log import get_logger
from .record import HeaderEntry, HeaderReason, HistoryEntry, RecordEntry, SessionStore

_log = get_logger(__name__)


class PrefixedSession:
    """One session instance over its record; a store's `OSError` stops nothing (`save_error` says
    why the record is behind). ``last_header``: the record's last, maybe a previous instance's."""

    def __init__(self, prefix: SessionPrefix, context: PrefixContext, store: SessionStore) -> None:
        self._contributors, self._store, self.context = prefix, store, context
        self._history: list[HistoryEntry] = []
        self.last_header: HeaderEntry | None = None
        self._own_header: HeaderEntry | None = None
        self._frozen: tuple[PrefixMessage, ...] | None = None
        self.composed = False  # a plain attribute: read on every turn
        self._write_lock = anyio.Lock()  # every append under it: the history in record order
        self._unsaved: list[RecordEntry] = []
        self.save_error: OSError | None = None

    @classmethod
    async def open(
        cls,
        prefix: SessionPrefix,
        context: PrefixContext,
        store: SessionStore,
        *,
        replacing: PrefixedSession | None = None,
    ) -> PrefixedSession:
        """A new instance over the record, taking over what ``replacing`` has not written."""
        session = cls(prefix, context, store)
        if replacing is not None:
            # Lock and queue shared (its turn may still record): each entry read or taken once.
            session._write_lock, session._unsaved = replacing._write_lock, replacing._unsaved
            session.save_error = replacing.save_error
        async with session._write_lock:
            await session._save()
            entries = [*await store.entries(context.session_id), *session._unsaved]
        session._history = [entry for entry in entries if isinstance(entry, HistoryEntry)]
        headers = (entry for entry in reversed(entries) if isinstance(entry, HeaderEntry))
        session.last_header = next(headers, None)
        return session

    @property
    def unsaved(self) -> int:
        """How many entries the record has not taken yet."""
        return len(self._unsaved)

    @property
    def messages(self) -> tuple[PrefixMessage, ...]:
        """The frozen prefix, or ``()`` while it has not been composed."""
        return self._frozen or ()

    @property
    def history(self) -> tuple[dict[str, Any], ...]:
        """The conversation so far, oldest first, as copies: changing one changes nothing."""
        return tuple(copy.deepcopy(dict(entry.message)) for entry in self._history)

    async def prefix(self, skills: SkillSnapshot | None = None) -> tuple[PrefixMessage, ...]:
        """Compose the prefix once with ``skills`` (nothing is kept if that fails); return it."""
        if self._frozen is None:
            context = self.context if skills is None else replace(self.context, skills=skills)
            self._frozen = await self._contributors.compose(context)
            self.composed = True
        return self._frozen

    def discard_unused_prefix(self) -> None:
        """Forget a composed prefix no request has used yet (a cancelled turn's)."""
        if self._own_header is None:
            self._frozen, self.composed = None, False

    async def flush(self) -> OSError | None:
        """Try once more to write every entry the record has not taken; why some still wait."""
        async with self._write_lock:
            await self._save()
        return self.save_error

    async def advance(
        self,
        messages: list[Mapping[str, Any] | HistoryEntry],
        request: Mapping[str, Any] | None = None,
        skills: SkillSnapshot | None = None,
    ) -> list[dict[str, Any]]:
        """Record ``messages``, each taken out of the list once recorded; for a ``request``
        (``config``, ``system``, ``tools``), also compose the prefix with ``skills``, record a new
        or changed header, and return the request's messages (fresh copies)."""
        if request is not None:
            message_prefix = await self.prefix(skills)
        while messages:
            entry = messages[0]
            entry = entry if isinstance(entry, HistoryEntry) else HistoryEntry(message=entry)
            async with self._write_lock:
                await self._save(entry)
                self._history.append(entry)
            del messages[0]
        if request is None:
            return []
        async with self._write_lock:
            previous = self._own_header
            reason: HeaderReason = (
                "change" if previous else "resume" if self.last_header else "initial"
            )
            header = HeaderEntry(reason=reason, message_prefix=message_prefix, **request)
            if previous is None or not previous.same_request_as(header):
                await self._save(header)
                self._own_header = self.last_header = header
        prefix = [{"role": message.role, "content": message.text} for message in self.messages]
        return [*prefix, *self.history]

    async def _save(self, entry: RecordEntry | None = None) -> None:
        # What waits goes first, in order: the record never holds a conversation with holes.
        session_id, waiting = self.context.session_id, self._unsaved
        waiting += [entry] if entry is not None else []
        try:
            while waiting:
                await self._store.append(session_id, waiting[0])
                del waiting[0]
        except OSError as error:
            if self.save_error is None:
                behind = {"error": str(error), "unsaved": len(waiting)}
                _log.warning("session_record_write_failed", session_id=session_id, **behind)
            self.save_error = error
            return
        except BaseException:
            # Not a storage failure: this entry is dropped, as if never appended. (A cancelled
            # write the record had already finished stays there: nobody can say.)
            if entry is not None:
                waiting.pop()
            raise
        if self.save_error is not None:
            _log.info("session_record_caught_up", session_id=session_id)
            self.save_error = None
