"""What a recording ACP client received, read back by session: one set of queries for the
in-process rig's client (`tests.acp_peer`) and the process tests' (`tests.agent_client`)."""

from __future__ import annotations

from typing import Any


class SessionUpdates:
    """Queries over ``self.updates``: ``(session id, update)`` pairs in arrival order."""

    updates: list[tuple[str, Any]]

    def session_updates(self, session_id: str, since: int = 0) -> list[Any]:
        """The updates for ``session_id``, from position ``since`` of `updates` on."""
        return [update for sid, update in self.updates[since:] if sid == session_id]

    def kinds(self, session_id: str, since: int = 0) -> list[str]:
        """The ``sessionUpdate`` discriminators of a session's updates, in order."""
        return [update.session_update for update in self.session_updates(session_id, since)]

    def agent_chunks(self, session_id: str, since: int = 0) -> list[str]:
        """The texts of the session's ``agent_message_chunk`` updates."""
        return [
            update.content.text
            for update in self.session_updates(session_id, since)
            if update.session_update == "agent_message_chunk"
        ]

    def agent_text(self, session_id: str, since: int = 0) -> str:
        """The session's agent message chunks joined."""
        return "".join(self.agent_chunks(session_id, since))

    def tool_updates(self, session_id: str, since: int = 0) -> list[Any]:
        """The session's ``tool_call`` and ``tool_call_update`` updates."""
        return [
            update
            for update in self.session_updates(session_id, since)
            if update.session_update in ("tool_call", "tool_call_update")
        ]
