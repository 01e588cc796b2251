"""Which skills a session may offer (contract §13, docs/trust.md): the trust source each skill
needs, and `view`, the one pure rule that turns a snapshot, the stored decisions
(`acp_skills.trust_store`), the mode and a session's own answers into what it offers and
withholds. A turn computes it once (`session_view`), and again after an answer on the same
snapshot and decisions (the view keeps them); the command line calls the same function.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio.to_thread

from .model import SkillCandidate, SkillLookupOptions, SkillSnapshot
from .project import PROJECT_SKILL_DIRS, Project, find_project
from .quiet_log import get_logger
from .registry import SkillRegistry
from .trust_store import SERVER_KEY_PREFIX, Pair, StoredTrust, TrustFileError
from .trust_store import TrustStore as TrustStore  # where docs/integration.md names it

_log = get_logger(__name__)

TrustMode: TypeAlias = Literal["ask", "all", "none"]
TrustState: TypeAlias = Literal["trusted", "session", "pending", "refused"]
# Why a skill of a trusted server is pending again: a uri it did not serve, or another digest.
ServerChange: TypeAlias = Literal["new", "changed"]
TRUST_MODES: tuple[str, ...] = get_args(TrustMode)
# The local provider's sources found from a session's working directory (contract §5).
PROJECT_SOURCES: Final = frozenset(PROJECT_SKILL_DIRS)


def trust_mode(value: str | None) -> TrustMode:
    """``value`` (a flag or ``ACP_SKILLS_TRUST``) as a mode; empty or missing means ``ask``."""
    if (text := (value or "").strip().lower() or "ask") in TRUST_MODES:
        return cast(TrustMode, text)
    raise ValueError(f"trust: unknown mode {value!r} (known: {', '.join(TRUST_MODES)})")


# ``key`` and ``label`` are values set once made, so the wording and the store read them and
# call nothing back here.
@dataclass(frozen=True, slots=True)
class ProjectSource:
    """A project: ``key`` is the real path decisions are stored under, ``label`` its name."""

    key: str
    label: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", os.path.basename(self.key) or self.key)


@dataclass(frozen=True, slots=True)
class ServerSource:
    """An MCP server by its identity (``endpoint``), with the (uri, digest) pairs to trust it
    with (none to refuse or forget it) and the skill's own ``SKILL.md`` uri, if one."""

    label: str
    endpoint: str
    items: frozenset[Pair] = field(default_factory=frozenset)
    uri: str = ""
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", SERVER_KEY_PREFIX + self.endpoint)


TrustSource: TypeAlias = ProjectSource | ServerSource
# What a question shows of one skill, and so what "Trust for this session" admits of it.
ShownItem: TypeAlias = tuple[str, str]


@runtime_checkable
class ServedLocator(Protocol):
    """What a skill served by an MCP server tells trust (the MCP provider's locator; trust does
    not import that provider, whose SDK is optional)."""

    server_label: str
    server_identity: str
    skill_uri: str
    served: frozenset[Pair]


def sources_at(projects: Sequence[Project]) -> Callable[[SkillCandidate], TrustSource | None]:
    """The trust source each skill needs (``None``: an own root): a project skill, its project
    among ``projects`` (the session's directory's, then each additional one's); an MCP skill,
    its server."""

    def source_of(skill: SkillCandidate) -> TrustSource | None:
        if skill.source in PROJECT_SOURCES and projects:
            # A listing cached before the project changed (a `.git` made or removed since) may
            # hold skills of another root: they never take a project's decision.
            path = skill.path or ""
            for project in projects:
                if path.startswith(os.path.join(project.skill_root(skill.source), "")):
                    return ProjectSource(project.key)
            return ProjectSource(os.path.dirname(path) or projects[0].root)
        if skill.provider != "mcp":
            return None
        if isinstance(at := skill.locator, ServedLocator):
            return ServerSource(at.server_label, at.server_identity, at.served, at.skill_uri)
        return ServerSource(label=skill.source, endpoint=skill.source)  # fail closed

    return source_of


def project_of(path: str | os.PathLike[str]) -> ProjectSource:
    """The project ``path``'s skills need trust from (`acp_skills.project.find_project`'s
    decision key). Blocking: `session_view` finds projects in a worker thread."""
    return ProjectSource(find_project(path).key)


def shown_items(skill: SkillCandidate, source: TrustSource) -> frozenset[ShownItem]:
    """What a question shows of ``skill``, and so what a once-answer admits: an MCP skill's
    (uri, digest) pairs as listed; a project skill's file and the name it was shown under."""
    if isinstance(source, ServerSource):
        return source.items
    return frozenset({(skill.path or "", skill.name)})


@dataclass(frozen=True, slots=True)
class Withheld:
    """A skill a session does not offer, and why (``change``: new or changed on the server)."""

    skill: SkillCandidate
    state: TrustState
    source: TrustSource
    change: ServerChange | None = None


@dataclass(frozen=True, slots=True)
class SessionView:
    """A snapshot as one session sees it: what it offers (``found`` itself when nothing is
    withheld), each winner it withholds by name, ``pending``, those a question would ask about,
    each skill's state (read `state`), ``judged``, the same rule for a skill not in ``found``
    (one named by its uri), and the sources and decisions it was made of, for `view` again."""

    found: SkillSnapshot
    offered: SkillSnapshot
    withheld: Mapping[str, Withheld]
    pending: tuple[Withheld, ...]
    states: Mapping[int, TrustState] = field(repr=False)
    judged: Callable[[SkillCandidate], Awaitable[Withheld | None]] = field(
        repr=False, compare=False
    )
    source_of: Callable[[SkillCandidate], TrustSource | None] = field(repr=False, compare=False)
    stored: StoredTrust = field(repr=False, compare=False)

    def state(self, skill: SkillCandidate) -> TrustState:
        """The state of ``skill``, a winner or a shadowed skill of ``found``."""
        return self.states.get(id(skill), "trusted")


def view(
    found: SkillSnapshot,
    source_of: Callable[[SkillCandidate], TrustSource | None],
    stored: StoredTrust,
    mode: TrustMode,
    grants: Mapping[str, frozenset[ShownItem]] | None = None,
    previous: SessionView | None = None,
) -> SessionView:
    """What a session offers of ``found``, as a pure function. ``grants``: what its
    once-answers admitted, by source key (`shown_items`); a skill is ``session`` while all it is
    now is among them, and a trusted server's skill trusted while all its pairs are ones the
    server was trusted with. ``previous`` is returned when nothing differs, so the session
    keeps one ``offered`` snapshot, and the caches keyed by it."""
    granted = grants or {}

    def judge(skill: SkillCandidate) -> tuple[TrustState, Withheld | None]:
        if mode == "all" or (source := source_of(skill)) is None:
            return "trusted", None
        decision = stored.decisions.get(source.key)
        if mode == "none" or decision == "refused":
            return "refused", Withheld(skill, "refused", source)
        change: ServerChange | None = None
        if decision == "trusted":
            if not isinstance(source, ServerSource):
                return "trusted", None
            if _covered(source.items, stored.served.get(source.key)):
                return "trusted", None
            known = {uri for uri, _ in stored.served.get(source.key, ())}
            change = "changed" if any(uri in known for uri, _ in source.items) else "new"
        if _covered(shown_items(skill, source), granted.get(source.key)):
            return "session", None
        return "pending", Withheld(skill, "pending", source, change)

    async def judged(skill: SkillCandidate) -> Withheld | None:
        return judge(skill)[1]

    states: dict[int, TrustState] = {}
    withheld: dict[str, Withheld] = {}
    for skill in found.skills:
        state, held = judge(skill)
        if state != "trusted":
            states[id(skill)] = state
        if held is not None:
            withheld[skill.name] = held
    for lost in found.shadowed:
        if (state := judge(lost.skill)[0]) != "trusted":
            states[id(lost.skill)] = state
    if (
        previous is not None
        and previous.found is found
        and (previous.states, previous.withheld) == (states, withheld)
    ):
        return previous
    pending = tuple(held for held in withheld.values() if held.state == "pending")
    offered = found
    if withheld:
        kept = [skill for skill in found.skills if skill.name not in withheld]
        taken = {skill.name for skill in kept}
        for lost in found.shadowed:  # in resolution order: the first admitted one stands
            name, state = lost.skill.name, states.get(id(lost.skill), "trusted")
            if name in withheld and name not in taken and state in ("trusted", "session"):
                kept.append(lost.skill)
                taken.add(name)
        ids = {id(skill) for skill in kept}
        offered = SkillSnapshot(
            skills=tuple(sorted(kept, key=lambda skill: skill.name)),
            complete=found.complete,
            shadowed=tuple(lost for lost in found.shadowed if id(lost.skill) not in ids),
        )
    return SessionView(found, offered, withheld, pending, states, judged, source_of, stored)


def _covered(items: frozenset[ShownItem], admitted: frozenset[ShownItem] | None) -> bool:
    # Nothing to compare (a server skill listed without pairs) is never covered: fail closed.
    return bool(items) and admitted is not None and items <= admitted


def lasting_sources(pending: Sequence[Withheld]) -> dict[str, TrustSource]:
    """What a lasting answer about ``pending`` decides, one source per key: a server's holds
    the pairs of every one of its skills the question named (`shown_items`)."""
    sources: dict[str, TrustSource] = {}
    for withheld in pending:
        source, known = withheld.source, sources.get(withheld.source.key)
        if isinstance(source, ServerSource) and isinstance(known, ServerSource):
            source = ServerSource(source.label, source.endpoint, known.items | source.items)
        sources[source.key] = source
    return sources


async def session_view(
    registry: SkillRegistry,
    options: SkillLookupOptions,
    mode: TrustMode,
    store: TrustStore,
    grants: Mapping[str, frozenset[ShownItem]] | None = None,
    previous: SessionView | None = None,
) -> SessionView:
    """`view` of the registry's snapshot for ``options``; the projects found and the decisions
    read in worker threads, each only when a skill needs it (one named by its uri: when
    ``judged`` is asked). A trust file that cannot be read grants nothing."""
    found = await registry.snapshot(options)
    skills = [*found.skills, *(lost.skill for lost in found.shadowed)]
    projects: list[Project] = []
    if mode != "all" and (cwd := options.cwd) and any(s.source in PROJECT_SOURCES for s in skills):
        directories = (cwd, *options.additional_directories)
        projects = await anyio.to_thread.run_sync(lambda: [find_project(d) for d in directories])
    source_of, stored = sources_at(projects), StoredTrust()
    if read := mode == "ask" and any(source_of(s) is not None for s in skills):
        stored = await anyio.to_thread.run_sync(_stored, store)
    made = view(found, source_of, stored, mode, grants, previous)
    if mode != "ask" or read:
        return made

    async def judged(skill: SkillCandidate) -> Withheld | None:
        # Nothing listed needed the decisions, but this skill may: they are read for it now.
        if source_of(skill) is None:
            return None
        fresh = await anyio.to_thread.run_sync(_stored, store)
        alone = SkillSnapshot(skills=(skill,), complete=True)
        return view(alone, source_of, fresh, mode, grants).withheld.get(skill.name)

    return replace(made, judged=judged)


def _stored(store: TrustStore) -> StoredTrust:
    try:
        return store.read()
    except TrustFileError as error:
        # Fail closed: an unreadable file grants nothing, and is left for the person to fix.
        _log.warning("trust_file_unreadable", path=store.path, error=str(error))
        return StoredTrust()
