"""Trust at the session layer (contract §13): what one session may offer, and asking for more.

The registry still finds every skill; `TrustedRegistry` is the view the catalog, the tool, the
commands and `/name` see. It filters each snapshot by the stored decisions, the mode and the
running session's own answers (`SessionTrust`, bound to the turn's context), and puts back a
user skill that a withheld project skill had shadowed.
"""

from __future__ import annotations

import contextlib
import shlex
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from acp.helpers import start_tool_call, text_block, tool_content, update_tool_call
from acp.schema import PermissionOption, ToolCallUpdate

from ..model import SkillCandidate, SkillLookupOptions, SkillSnapshot
from ..quiet_log import get_logger
from ..registry import SkillRegistry
from ..text import remove_unsafe_characters, shorten_description
from ..trust import (
    Decision,
    ProjectSource,
    ServerChange,
    ServerSource,
    StoredTrust,
    TrustFileError,
    TrustMode,
    TrustSource,
    TrustState,
    TrustStates,
    TrustStore,
    sources_for,
    trust_states,
)
from .wire import ClientLink

_log = get_logger(__name__)

ADMITTED: Final = frozenset({"trusted", "session"})
# The four answers of the question, by option id (the id is the kind: one of each).
OPTIONS: Final = (
    ("allow_once", "Trust for this session"),
    ("allow_always", "Trust this project"),
    ("reject_once", "Not now"),
    ("reject_always", "Never for this project"),
)
_VIEWS_KEPT = 16


@dataclass(slots=True)
class SessionTrust:
    """One session instance's answers: ``grants`` by source key (``True`` allow once, ``False``
    not now); ``asked`` once the question was put (never twice per instance)."""

    grants: dict[str, bool] = field(default_factory=dict)
    asked: bool = False
    warned: bool = False


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
class Withheld:
    """A skill a session does not offer, and why (``change``: new or changed on the server)."""

    skill: SkillCandidate
    state: TrustState
    source: TrustSource
    change: ServerChange | None = None


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
    quoted = f'"{remove_unsafe_characters(name)}"'
    state = "is waiting for trust" if withheld.state == "pending" else "is not trusted"
    if isinstance(withheld.source, ServerSource):
        label = remove_unsafe_characters(withheld.source.label)
        return f'Error: skill {quoted} from MCP server "{label}" {state}'
    return f"Error: skill {quoted} {state} in this project"


def command_note(name: str, withheld: Withheld) -> str:
    """The one line a person gets for a `/NAME` of a withheld skill."""
    opening, command = (
        f"`/{name}` comes from {_label(withheld.source)}",
        _admitting_command(withheld),
    )
    if withheld.state == "pending":
        how = f", or run `{command}`" if command else " in a new session"
        return f"{opening}, which is waiting for trust: it was not run. Trust it when asked{how}."
    return f"{opening}, which is not trusted: it was not run. To undo a refusal, run `{command}`."


def _label(source: TrustSource) -> str:
    if isinstance(source, ServerSource):
        return f'MCP server "{remove_unsafe_characters(source.label)}"'
    return f"project `{remove_unsafe_characters(source.label)}`"


def _admitting_command(withheld: Withheld) -> str | None:
    # A project is trusted from the command line; a server only by answering its question (the
    # answer stores the digests it lists), so the command line can only forget its refusal.
    key = shlex.quote(remove_unsafe_characters(withheld.source.key))
    if isinstance(withheld.source, ProjectSource):
        return f"acp-skills trust {key}"
    return None if withheld.state == "pending" else f"acp-skills trust --forget {key}"


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
        if trust is None:
            trust = _current.get()
        grants = dict(trust.grants) if trust is not None else {}
        skills = [*raw.skills, *(shadowed.skill for shadowed in raw.shadowed)]
        source_of = await sources_for(options.cwd, skills)  # the project found off the loop
        sources = {id(skill): source_of(skill) for skill in skills}  # each found once
        stored = StoredTrust()
        if self.mode == "ask" and any(source is not None for source in sources.values()):
            stored = await anyio.to_thread.run_sync(self._stored)
        states = trust_states(skills, lambda skill: sources[id(skill)], stored, self.mode, grants)
        key = (id(raw), tuple((states[s], states.change(s)) for s in skills))
        if (kept := self._views.get(key)) is not None and kept[0] is raw:
            self._views.move_to_end(key)
            return kept[1]
        view = _filter(raw, states)
        self._views[key] = (raw, view)
        while len(self._views) > _VIEWS_KEPT:
            self._views.popitem(last=False)
        return view

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


_CHANGES: Final[Mapping[ServerChange | None, str]] = {
    "new": " — new on the server since you trusted it",
    "changed": " — changed on the server since you trusted it",
}


def question_text(pending: list[Withheld]) -> str:
    """Every pending skill: name, description and path (or server and uri)."""
    lines = []
    for withheld in sorted(pending, key=lambda w: w.skill.name):
        skill = withheld.skill
        description = shorten_description(skill.description, 200)
        where = remove_unsafe_characters(skill.path or "")
        if isinstance(withheld.source, ServerSource):
            uri = remove_unsafe_characters(withheld.source.uri)
            where = f"MCP server {remove_unsafe_characters(withheld.source.label)}, {uri}"
        lines.append(f"- {skill.name}: {description} ({where}){_CHANGES.get(withheld.change, '')}")
    return "\n".join(lines)


async def ask(
    link: ClientLink, session_id: str, trust: SessionTrust, view: TrustView, store: TrustStore
) -> bool:
    """Put the question for ``view``'s pending skills; apply the answer. Whether it admitted
    skills. Anything but a chosen option (a cancelled outcome, an error answer, the turn's
    cancellation) counts as "not now"."""
    pending, client = view.pending(), link.client
    if not pending or client is None:
        return False
    call_id = f"trust-{uuid.uuid4().hex}"
    content = [tool_content(text_block(question_text(pending)))]
    labels = ", ".join(sorted({remove_unsafe_characters(w.source.label) for w in pending}))
    title = f"Trust {len(pending)} skill{'' if len(pending) == 1 else 's'} from {labels}?"
    start = start_tool_call(call_id, title, kind="read", status="pending", content=content)
    choice = "reject_once"
    try:
        await link.send(session_id, start)
        options = [PermissionOption(option_id=k, name=n, kind=k) for k, n in OPTIONS]  # type: ignore[arg-type]
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
            await link.send(session_id, update_tool_call(call_id, status="failed"))
        raise
    except Exception as error:
        _log.warning("trust_question_failed", session_id=session_id, error=repr(error))
    sources, admitted = _merged_sources(pending), choice in ("allow_once", "allow_always")
    for key, source in sources.items():
        if choice.endswith("_always"):
            decision: Decision = "trusted" if admitted else "refused"
            try:
                await anyio.to_thread.run_sync(store.decide, source, decision)
                continue
            except (TrustFileError, OSError) as error:
                # Not stored: the answer still holds for this session.
                _log.warning("trust_not_stored", path=store.path, error=str(error))
        trust.grants[key] = admitted
    _log.info("trust_answered", session_id=session_id, answer=choice, sources=len(sources))
    await link.send(
        session_id, update_tool_call(call_id, status="completed" if admitted else "failed")
    )
    return admitted


def _merged_sources(pending: list[Withheld]) -> dict[str, TrustSource]:
    # One decision per source: a server's holds the pairs of every skill the question named.
    sources: dict[str, TrustSource] = {}
    for withheld in pending:
        source, key = withheld.source, withheld.source.key
        known = sources.get(key)
        if isinstance(source, ServerSource) and isinstance(known, ServerSource):
            source = ServerSource(source.label, source.endpoint, known.items | source.items)
        sources[key] = source
    return sources


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
            where, change = _label(withheld.source), _CHANGES.get(withheld.change, "")
            lines.append(f"- `{withheld.skill.name}` — {description} ({where}){change}")
        commands = sorted({c for w in group if (c := _admitting_command(w)) is not None})
        listed = ", ".join(f"`{command}`" for command in commands)
        how = f"To undo a refusal, run {listed}."
        if state == "pending":
            how = "Answer the question at your next prompt in a new session"
            how += f", or run {listed}." if listed else "."
        lines += ["", how, ""]
    return lines
