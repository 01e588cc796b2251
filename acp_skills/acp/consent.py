"""Trust at the session layer (contract §13): what one session may offer, and asking for more.

The registry still finds every skill; `TrustedRegistry` is the view the catalog, the tool, the
commands and `/name` see. It filters each snapshot by the stored decisions, the mode and the
running session's own answers (`SessionTrust`, bound to the turn's context), and puts back a
user skill that a withheld project skill had shadowed.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from acp.schema import PermissionOption, ToolCallUpdate

from ..errors import Refusal
from ..model import SkillCandidate, SkillLookupOptions, SkillSnapshot
from ..quiet_log import get_logger
from ..registry import SkillRegistry
from ..text import one_line, shorten_description
from ..trust import (
    Decision,
    ServerSource,
    ShownItem,
    StoredTrust,
    TrustFileError,
    TrustMode,
    TrustSource,
    TrustState,
    TrustStates,
    TrustStore,
    shown_items,
    sources_for,
    trust_states,
)
from ..trust_question import (
    CHANGES,
    OPTIONS,
    Withheld,
    admitting_command,
    lasting_sources,
    question_options,
    question_text,
    question_title,
)
from .wire import ClientLink, text_tool_content, tool_call_progress, tool_call_start

_log = get_logger(__name__)

ADMITTED: Final = frozenset({"trusted", "session"})
_VIEWS_KEPT = 16


@dataclass(slots=True)
class SessionTrust:
    """One session instance's answers: ``grants``, what its once-answers admitted, by source
    key (`acp_skills.trust.shown_items` of each skill its question showed); ``asked`` once the
    question was put (never twice per instance)."""

    grants: dict[str, frozenset[ShownItem]] = field(default_factory=dict)
    asked: bool = False
    warned: bool = False

    def admit(self, shown: list[Withheld]) -> None:
        """Admit for this instance exactly what the question showed of ``shown``."""
        for withheld in shown:
            key, items = withheld.source.key, shown_items(withheld.skill, withheld.source)
            self.grants[key] = self.grants.get(key, frozenset()) | items


_current: ContextVar[SessionTrust | None] = ContextVar("acp_skills_session_trust", default=None)


@contextlib.contextmanager
def bound(trust: SessionTrust) -> Iterator[None]:
    """Lookups made inside see ``trust``'s answers (a turn, a commands refresh)."""
    token = _current.set(trust)
    try:
        yield
    finally:
        _current.reset(token)


@dataclass(frozen=True, slots=True)
class TrustView:
    """A snapshot as one session sees it: ``snapshot`` holds what it offers; ``states`` every
    winner's state (by name); ``withheld`` the winners it does not offer, by name."""

    snapshot: SkillSnapshot
    states: Mapping[str, TrustState]
    withheld: Mapping[str, Withheld]

    def pending(self) -> list[Withheld]:
        return [w for w in self.withheld.values() if w.state == "pending"]


def trust_error(name: str, withheld: Withheld) -> str:
    """The `skill` tool's answer for a withheld skill, by exact name."""
    quoted = f'"{one_line(name)}"'
    state = "is waiting for trust" if withheld.state == "pending" else "is not trusted"
    if isinstance(withheld.source, ServerSource):
        return f'Error: skill {quoted} from MCP server "{one_line(withheld.source.label)}" {state}'
    return f"Error: skill {quoted} {state} in this project"


def command_note(name: str, withheld: Withheld) -> str:
    """The one line a person gets for a `/NAME` of a withheld skill. It comes after the
    session's one question (or instead of it), so it never says "when asked"."""
    opening = f"`/{one_line(name)}` comes from {_label(withheld.source)}"
    if withheld.state == "pending":
        waiting = "which is waiting for trust: it was not run, and this session will not ask again"
        return f"{opening}, {waiting}. {_how_to_admit([withheld])}"
    command = _admitting_command(withheld)
    return f"{opening}, which is not trusted: it was not run. To undo a refusal, run `{command}`."


def waiting_note(view: TrustView) -> str | None:
    """What a person should know about this session's pending skills, once its question has
    been put (the session asks no more): how many wait, from where, and how to admit them.
    ``None`` when nothing waits. Counts and places only: no text of a withheld skill."""
    if not (pending := view.pending()):
        return None
    by_source: dict[str, list[Withheld]] = {}
    for withheld in pending:
        by_source.setdefault(withheld.source.key, []).append(withheld)
    parts = [
        f"{len(group)} skill{'' if len(group) == 1 else 's'} from {_label(group[0].source)}"
        for group in sorted(by_source.values(), key=lambda group: _order(group[0].source))
    ]
    waits = "waits" if len(pending) == 1 else "wait"
    opening = f"{_joined(parts)} {waits} for trust, and this session will not ask again."
    return f"{opening} {_how_to_admit(pending)}"


def _how_to_admit(pending: list[Withheld]) -> str:
    # A new session's question admits anything; a command where one fits (`admitting_command`).
    commands = sorted({c for w in pending if (c := _admitting_command(w)) is not None})
    them = "it" if len(pending) == 1 else "them"
    how = f"To admit {them}, start a new session and answer its question"
    if not commands:
        return how + "."
    return how + ", or run " + " and ".join(f"`{c}`" for c in commands) + "."


def _label(source: TrustSource) -> str:
    if isinstance(source, ServerSource):
        return f'MCP server "{one_line(source.label)}"'
    return f"project `{one_line(source.label)}`"


def _order(source: TrustSource) -> tuple[bool, str]:
    return isinstance(source, ServerSource), source.label  # the project first


def _joined(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _admitting_command(withheld: Withheld) -> str | None:
    return admitting_command(withheld.source, withheld.state)


class TrustedRegistry:
    """The registry as sessions see it under ``mode`` (everything else is the registry's)."""

    def __init__(self, registry: SkillRegistry, mode: TrustMode, store: TrustStore) -> None:
        self._registry, self.mode, self.store = registry, mode, store
        self._views: OrderedDict[tuple[int, tuple[Any, ...]], tuple[SkillSnapshot, TrustView]]
        self._views = OrderedDict()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._registry, name)

    async def snapshot(self, options: SkillLookupOptions | None = None) -> SkillSnapshot:
        """What the bound session offers (every skill under ``all``)."""
        return (await self.view(options)).snapshot

    async def view(
        self, options: SkillLookupOptions | None = None, trust: SessionTrust | None = None
    ) -> TrustView:
        """The registry's snapshot for ``options`` filtered for ``trust`` (else the bound one)."""
        options = options or SkillLookupOptions()
        raw = await self._registry.snapshot(options)
        skills = [*raw.skills, *(shadowed.skill for shadowed in raw.shadowed)]
        states = await self._states(skills, options, trust)
        key = (id(raw), tuple((states[s], states.change(s)) for s in skills))
        if (kept := self._views.get(key)) is not None and kept[0] is raw:
            self._views.move_to_end(key)
            return kept[1]
        view = _filter(raw, states)
        self._views[key] = (raw, view)
        while len(self._views) > _VIEWS_KEPT:
            self._views.popitem(last=False)
        return view

    async def find_uri(
        self, uri: str, options: SkillLookupOptions | None = None
    ) -> SkillCandidate | None:
        """The registry's skill at ``uri`` (`SkillRegistry.find_uri`) if the bound session may
        load it; a withheld one is a `Refusal` with the tool's trust error. A skill its server
        confirmed by uri is new to every decision, so it waits until a session's question names
        it (it joins the server's skills at later lookups)."""
        options = options or SkillLookupOptions()
        found = await self._registry.find_uri(uri, options)
        if found is None:
            return None
        states = await self._states([found], options, None)
        state, source = states[found], states.source(found)
        if state in ADMITTED or source is None:
            return found
        raise Refusal(trust_error(uri, Withheld(found, state, source, states.change(found))))

    async def _states(
        self,
        skills: list[SkillCandidate],
        options: SkillLookupOptions,
        trust: SessionTrust | None,
    ) -> TrustStates:
        # Each skill's state for ``trust`` (else the bound session's answers).
        if trust is None:
            trust = _current.get()
        grants = dict(trust.grants) if trust is not None else {}
        # The projects (the session's, its additional directories') found off the loop.
        source_of = await sources_for(options.cwd, skills, options.additional_directories)
        sources = {id(skill): source_of(skill) for skill in skills}  # each found once
        stored = StoredTrust()
        if self.mode == "ask" and any(source is not None for source in sources.values()):
            stored = await anyio.to_thread.run_sync(self._stored)
        return trust_states(skills, lambda skill: sources[id(skill)], stored, self.mode, grants)

    def _stored(self) -> StoredTrust:
        try:
            return self.store.read()
        except TrustFileError as error:
            # Fail closed: an unreadable file grants nothing, and is left for the person to fix.
            _log.warning("trust_file_unreadable", path=self.store.path, error=str(error))
            return StoredTrust()


def _filter(raw: SkillSnapshot, states: TrustStates) -> TrustView:
    offered = [skill for skill in raw.skills if states[skill] in ADMITTED]
    withheld: dict[str, Withheld] = {}
    taken = {skill.name for skill in offered}
    for skill in raw.skills:
        source = states.source(skill)
        if states[skill] in ADMITTED or source is None:
            continue
        withheld[skill.name] = Withheld(skill, states[skill], source, states.change(skill))
    # A withheld winner takes no part in resolution: the next admitted skill of its name stands.
    for shadowed in raw.shadowed:
        skill = shadowed.skill
        if skill.name in withheld and skill.name not in taken and states[skill] in ADMITTED:
            offered.append(skill)
            taken.add(skill.name)
    offered.sort(key=lambda skill: skill.name)
    snapshot = SkillSnapshot(
        skills=tuple(offered),
        complete=raw.complete,
        shadowed=tuple(s for s in raw.shadowed if s.skill not in offered),
    )
    by_name = {skill.name: states[skill] for skill in raw.skills}
    return TrustView(snapshot=snapshot, states=by_name, withheld=withheld)


async def ask(
    link: ClientLink, session_id: str, trust: SessionTrust, view: TrustView, store: TrustStore
) -> None:
    """Put the question for ``view``'s pending skills; apply the answer. Anything but a chosen
    option (a cancelled outcome, an error answer, the turn's cancellation) counts as "not now"."""
    pending, client = view.pending(), link.client
    if not pending or client is None:
        return
    call_id = f"trust-{uuid.uuid4().hex}"
    content = text_tool_content(question_text(pending))
    title = question_title(pending)
    start = tool_call_start(call_id, title, kind="read", status="pending", content=content)
    choice = "reject_once"
    try:
        await link.send(session_id, start)
        options = [
            PermissionOption(option_id=kind, name=label, kind=kind)  # type: ignore[arg-type]
            for kind, label in question_options(pending)
        ]
        tool_call = ToolCallUpdate(tool_call_id=call_id, title=start.title, kind="read")
        answer = await client.request_permission(  # type: ignore[attr-defined]
            session_id=session_id, tool_call=tool_call, options=options
        )
        outcome = answer.outcome
        if getattr(outcome, "outcome", None) == "selected":
            picked = getattr(outcome, "option_id", "")
            choice = picked if picked in dict(OPTIONS) else "reject_once"
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await link.send(session_id, tool_call_progress(call_id, status="failed"))
        raise
    except Exception as error:
        _log.warning("trust_question_failed", session_id=session_id, error=repr(error))
    sources, admitted = lasting_sources(pending), choice in ("allow_once", "allow_always")
    if choice == "allow_once":
        trust.admit(pending)
    elif choice.endswith("_always"):
        decision: Decision = "trusted" if admitted else "refused"
        for key, source in sources.items():
            try:
                await anyio.to_thread.run_sync(store.decide, source, decision)
            except (TrustFileError, OSError) as error:
                # Not stored: a trust still holds for this session, for what it showed.
                _log.warning("trust_not_stored", path=store.path, error=str(error))
                if admitted:
                    trust.admit([w for w in pending if w.source.key == key])
    _log.info("trust_answered", session_id=session_id, answer=choice, sources=len(sources))
    await link.send(
        session_id, tool_call_progress(call_id, status="completed" if admitted else "failed")
    )


def warn_once(session_id: str, trust: SessionTrust, view: TrustView) -> None:
    """One ``skills_waiting_for_trust`` warning per session instance with pending skills."""
    if trust.warned or not (pending := view.pending()):
        return
    trust.warned = True
    projects = ", ".join(sorted({w.source.label for w in pending}))
    _log.warning(
        "skills_waiting_for_trust", session_id=session_id, project=projects, count=len(pending)
    )


def report_lines(view: TrustView) -> list[str]:
    """The "Waiting for trust" and "Refused" parts of `/skills` (none when nothing is withheld)."""
    lines: list[str] = []
    for state, heading in (("pending", "Waiting for trust"), ("refused", "Refused")):
        group = sorted(
            (w for w in view.withheld.values() if w.state == state), key=lambda w: w.skill.name
        )
        if not group:
            continue
        lines += [f"**{heading}** ({len(group)})", ""]
        for withheld in group:
            description = shorten_description(withheld.skill.description, 120)
            where, change = _label(withheld.source), CHANGES.get(withheld.change, "")
            lines.append(f"- `{withheld.skill.name}` — {description} ({where}){change}")
        if state == "pending":
            how = _how_to_admit(group)
        else:
            commands = sorted({c for w in group if (c := _admitting_command(w)) is not None})
            how = "To undo a refusal, run " + ", ".join(f"`{c}`" for c in commands) + "."
        lines += ["", how, ""]
    return lines
