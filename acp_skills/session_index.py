"""What ``session/list`` shows of a recorded session, and how its pages go (docs/sessions.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol, TypeAlias, TypeVar, runtime_checkable

from .text import shorten_description

PAGE_SIZE: Final = 50
TITLE_LENGTH: Final = 80

T = TypeVar("T")
# When the record last changed (ns since the epoch), a name unique in the store, and what the
# store loads the summary from.
Listed: TypeAlias = tuple[int, str, T]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDescription:
    """What the session layer tells a store of an instance, at its first recorded prompt."""

    session_id: str
    cwd: str
    additional_directories: tuple[str, ...] = ()
    title: str | None = None  # `session_title` of the record's first prompt


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary(SessionDescription):
    """One session as ``session/list`` shows it (``updated_at``: its record's last change)."""

    updated_at: datetime

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
    """A session store that lists its sessions; `OSError` when it cannot keep or list them."""

    async def describe_session(self, description: SessionDescription) -> None:
        """Keep what a listing shows of the session."""

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None
    ) -> SessionPage:
        """One page, newest first; ``cwd`` keeps the sessions whose cwd has its real path.
        Raises `InvalidCursor`."""


def session_title(prompt_text: str) -> str | None:
    """A prompt's text as a session title: one line of at most `TITLE_LENGTH` characters."""
    return shorten_description(prompt_text, TITLE_LENGTH) or None


def real_directory(path: str) -> str:
    """The real path a listing compares working directories by (blocking)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def summary_document(description: SessionDescription) -> dict[str, object]:
    """The summary of ``description``, as JSON."""
    return {
        "v": 1,
        "sessionId": description.session_id,
        "cwd": description.cwd,
        "title": description.title,
        "additionalDirectories": list(description.additional_directories),
    }


def summary_of(updated: int, document: object) -> SessionSummary | str:
    """The session a summary describes (its record changed at ``updated``), or why none."""
    if not isinstance(document, dict):
        return "not a session summary: not an object"
    session_id, cwd, title = document.get("sessionId"), document.get("cwd"), document.get("title")
    directories = document.get("additionalDirectories", [])
    if document.get("v") != 1:
        return f"unsupported format version {document.get('v')!r}"
    if not isinstance(session_id, str) or not isinstance(cwd, str) or not os.path.isabs(cwd):
        return "not a session summary: no session id or no absolute cwd"
    if not isinstance(directories, list) or not all(isinstance(d, str) for d in directories):
        return "not a session summary: additionalDirectories is not a list of paths"
    return SessionSummary(
        session_id=session_id,
        cwd=cwd,
        # Cleaned again: a summary on disk is a file a person may have edited.
        title=session_title(title) if isinstance(title, str) else None,
        updated_at=datetime.fromtimestamp(updated / 1e9, UTC),
        additional_directories=tuple(directories),
    )


def _newest_first(entry: Listed[Any]) -> tuple[int, str]:
    return -entry[0], entry[1]


def ordered_after(listed: Iterable[Listed[T]], cursor: str | None) -> list[Listed[T]]:
    """``listed`` newest first, then by name, from just after the entry ``cursor`` names."""
    ordered = sorted(listed, key=_newest_first)
    if cursor is None:
        return ordered
    try:
        version, updated, name = cursor.split(".", 2)  # as `page_of` writes it
        if version != "v1":
            raise ValueError(version)
        after = (-int(updated), name)
    except ValueError:
        raise InvalidCursor("the cursor was not handed out by a listing of this agent") from None
    return [entry for entry in ordered if _newest_first(entry) > after]


def page_of(
    ordered: list[Listed[T]], load: Callable[[int, T], SessionSummary | str | None]
) -> tuple[SessionPage, list[Listed[T]]]:
    """The first page of ``ordered`` (what ``load`` gives no summary for skipped) and what is
    left after it; the cursor names the last entry looked at."""
    found: list[SessionSummary] = []
    for looked, (updated, name, item) in enumerate(ordered, start=1):
        if isinstance(summary := load(updated, item), SessionSummary):
            found.append(summary)
        if len(found) == PAGE_SIZE and looked < len(ordered):
            return SessionPage(tuple(found), f"v1.{updated}.{name}"), ordered[looked:]
    return SessionPage(tuple(found)), []
