"""Asking for trust (contract §13): a session instance's answers and its one question."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
from acp.schema import PermissionOption, ToolCallStart, ToolCallUpdate

from .. import trust
from ..model import SkillLookupOptions
from ..quiet_log import get_logger
from ..registry import SkillRegistry
from ..trust import (
    Decision,
    SessionView,
    ShownItem,
    StoredTrust,
    TrustFileError,
    TrustMode,
    TrustStore,
    Withheld,
)
from ..trust_text import OPTIONS, question_options, question_text, question_title, whom_asked
from .wire import CANCEL_REPORT_SECONDS, ClientLink, text_tool_content, tool_call_update

_log = get_logger(__name__)


@dataclass(slots=True)
class SessionTrust:
    """One instance's answers: what "Trust for this session" admitted, and whether it asked."""

    grants: dict[str, frozenset[ShownItem]] = field(default_factory=dict)
    asked: bool = False

    def admit(self, shown: Sequence[Withheld]) -> None:
        """Admit for this instance what the question showed of ``shown``."""
        for withheld in shown:
            key, items = withheld.source.key, trust.shown_items(withheld.skill, withheld.source)
            self.grants[key] = self.grants.get(key, frozenset()) | items


@dataclass(frozen=True, slots=True)
class TrustGate:
    """How this agent decides trust."""

    registry: SkillRegistry
    mode: TrustMode
    store: TrustStore

    async def view(self, options: SkillLookupOptions, answers: SessionTrust | None) -> SessionView:
        """What a lookup with ``options`` offers now, with a session instance's ``answers``."""
        grants = answers.grants if answers is not None else {}
        return await trust.session_view(self.registry, options, self.mode, self.store, grants)

    async def turn_view(
        self, link: ClientLink, session_id: str, options: SkillLookupOptions, answers: SessionTrust
    ) -> SessionView:
        """A turn's view; an instance's first turn first puts its one question, if one is due."""
        seen = await self.view(options, answers)
        if answers.asked or self.mode != "ask":
            return seen
        answers.asked = True  # once per instance, before its prefix is composed
        if not seen.pending or (stored := await self._ask(link, session_id, answers, seen)) is None:
            return seen
        # What the answer admitted: the same snapshot judged again, nothing read again (what the
        # first view was made despite, an unreadable trust file, still holds).
        return trust.view(
            seen.found, seen.source_of, stored, self.mode, answers.grants, seen.problems
        )

    async def _ask(
        self, link: ClientLink, session_id: str, answers: SessionTrust, seen: SessionView
    ) -> StoredTrust | None:
        """Ask about ``seen``'s pending skills (no chosen option: "not now"); the decisions
        that hold if the answer admitted them, else ``None``."""
        pending, stored = seen.pending, seen.stored
        project, count = whom_asked(pending), len(pending)
        event = "skills_waiting_for_trust"
        _log.warning(event, session_id=session_id, project=project, count=count)
        call_id, title = f"trust-{uuid.uuid4().hex}", question_title(pending)
        start = ToolCallStart(
            session_update="tool_call",
            tool_call_id=call_id,
            title=title,
            kind="read",
            status="pending",
            content=text_tool_content(question_text(pending)),
        )
        choice = "reject_once"
        try:
            await link.send(session_id, start)
            options = [
                PermissionOption(option_id=kind, name=label, kind=kind)  # type: ignore[arg-type]
                for kind, label in question_options(pending)
            ]
            tool_call = ToolCallUpdate(tool_call_id=call_id, title=title, kind="read")
            answer = await link.client.request_permission(
                session_id=session_id, tool_call=tool_call, options=options
            )
            if getattr(answer.outcome, "outcome", None) == "selected":
                picked = getattr(answer.outcome, "option_id", "")
                choice = picked if picked in dict(OPTIONS) else "reject_once"
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_REPORT_SECONDS):
                await link.send(session_id, tool_call_update(call_id, "failed"))
            raise
        except Exception as error:
            _log.warning("trust_question_failed", session_id=session_id, error=repr(error))
        admitted = choice in ("allow_once", "allow_always")
        if choice == "allow_once":
            answers.admit(pending)
        elif choice.endswith("_always"):
            for withheld in pending:  # a server's pairs add up, skill by skill
                decision: Decision = "trusted" if admitted else "refused"
                try:
                    await anyio.to_thread.run_sync(self.store.decide, withheld.source, decision)
                    stored = stored.decided(withheld.source, decision)
                except (TrustFileError, OSError) as error:
                    # Not stored: a trust still holds for this session, for what it showed.
                    _log.warning("trust_not_stored", path=self.store.path, error=str(error))
                    if admitted:
                        answers.admit([withheld])
        _log.info("trust_answered", session_id=session_id, answer=choice, count=count)
        ended = tool_call_update(call_id, "completed" if admitted else "failed")
        await link.send(session_id, ended)
        return stored if admitted else None
