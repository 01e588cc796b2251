"""``session/list`` on the wire, and the session capabilities an agent advertises (contract
§15): the store's pages (`acp_skills.session_index`) as ACP's `SessionInfo` values."""

from __future__ import annotations

from acp import RequestError
from acp.schema import (
    ListSessionsResponse,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

from ..record import SessionStore
from ..session_index import InvalidCursor, ListedSessionStore
from .sessions import describe_os_error
from .wire import check_cwd


def session_capabilities(store: SessionStore) -> SessionCapabilities:
    """``list`` when ``store`` lists its sessions; ``resume``, ``close`` and
    ``additionalDirectories`` always (editors send that field only to an agent that says it
    takes it)."""
    listed = SessionListCapabilities() if isinstance(store, ListedSessionStore) else None
    return SessionCapabilities(
        list=listed,
        resume=SessionResumeCapabilities(),
        close=SessionCloseCapabilities(),
        additional_directories=SessionAdditionalDirectoriesCapabilities(),
    )


async def listed_sessions(store: SessionStore, cwd: object, cursor: object) -> ListSessionsResponse:
    """One page of ``store``'s sessions (none when it does not list them). Invalid params for
    a relative ``cwd`` or a cursor no listing handed out; internal error when the store cannot
    be listed at all."""
    directory = check_cwd(cwd) if cwd is not None else None
    if cursor is not None and not isinstance(cursor, str):
        raise RequestError.invalid_params({"cursor": cursor, "reason": "cursor must be a string"})
    if not isinstance(store, ListedSessionStore):
        return ListSessionsResponse(sessions=[])
    try:
        page = await store.list_sessions(cwd=directory, cursor=cursor)
    except InvalidCursor as error:
        raise RequestError.invalid_params({"cursor": cursor, "reason": str(error)}) from None
    except OSError as error:
        reason = f"the session records cannot be listed: {describe_os_error(error)}"
        raise RequestError.internal_error({"reason": reason}) from None
    return ListSessionsResponse(
        sessions=[
            SessionInfo(
                session_id=summary.session_id,
                cwd=summary.cwd,
                title=summary.title,
                updated_at=summary.updated_at_text,
                additional_directories=list(summary.additional_directories) or None,
            )
            for summary in page.sessions
        ],
        next_cursor=page.next_cursor,
    )
