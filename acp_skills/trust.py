"""Which skills a session may offer (contract §13, §13a): trust sources, the decisions stored,
and `view`, the one rule that judges a skill (what a person reads of the rest: `trust_text`)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio.to_thread

from .diagnostics import SHADOW_CODES, Diagnostic, log_diagnostic, shadow_diagnostic
from .diagnostics import trust_file_unreadable as unreadable
from .errors import ReadError
from .fs import read_local_file, replace_file
from .json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from .model import ShadowedSkill, SkillCandidate, SkillLookupOptions, SkillSnapshot
from .project import PROJECT_SKILL_DIRS, Project, find_project
from .quiet_log import get_logger
from .registry import SkillRegistry

_log = get_logger(__name__)

TrustMode: TypeAlias = Literal["ask", "all", "none"]
TrustState: TypeAlias = Literal["trusted", "session", "pending", "refused"]
Decision: TypeAlias = Literal["trusted", "refused"]
TRUST_MODES: tuple[str, ...] = get_args(TrustMode)
# What a question shows of a skill, so what "Trust for this session" admits: an MCP skill's
# (uri, digest) pairs ("dynamic" for a dynamic skill's SKILL.md), a project skill's (path, name).
ShownItem: TypeAlias = tuple[str, str]
SERVER_KEY_PREFIX: Final = "mcp:"  # a server's decision is stored under it, a project's by path
# Far above any person's decisions (a thousand projects take about 100 KiB), far below memory.
MAX_TRUST_FILE_BYTES: Final = 16 * 1024 * 1024


def trust_mode(value: str | None) -> TrustMode:
    """``value`` (a flag or ``ACP_SKILLS_TRUST``) as a mode; empty or missing means ``ask``."""
    if (text := (value or "").strip().lower() or "ask") in TRUST_MODES:
        return cast(TrustMode, text)
    raise ValueError(f"trust: unknown mode {value!r} (known: {', '.join(TRUST_MODES)})")


@dataclass(frozen=True, slots=True)
class ProjectSource:
    """A project by ``key``, the real path its decision is stored under; ``label``, its name."""

    key: str
    # Values, not properties: whoever words a source reads them without calling back here.
    label: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", os.path.basename(self.key) or self.key)


@dataclass(frozen=True, slots=True)
class ServerSource:
    """An MCP server by its identity, with the pairs to trust it with (none to refuse it)."""

    label: str
    endpoint: str
    items: frozenset[ShownItem] = frozenset()
    uri: str = ""  # the skill's own SKILL.md, for the question
    key: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", SERVER_KEY_PREFIX + self.endpoint)


TrustSource: TypeAlias = ProjectSource | ServerSource


@runtime_checkable
class ServedLocator(Protocol):
    """What an MCP skill's locator tells trust (not imported from `mcp`: its SDK is optional)."""

    server_label: str
    server_identity: str
    skill_uri: str
    served: frozenset[ShownItem]


def sources_at(projects: Sequence[Project]) -> Callable[[SkillCandidate], TrustSource | None]:
    """The source each skill needs trust from: its project among ``projects``, or its server;
    ``None`` for an own root."""

    def source_of(skill: SkillCandidate) -> TrustSource | None:
        if skill.source in PROJECT_SKILL_DIRS and projects:
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
        return ServerSource(skill.source, skill.source)  # nothing to compare: fails closed

    return source_of


def shown_items(skill: SkillCandidate, source: TrustSource) -> frozenset[ShownItem]:
    """What a question shows of ``skill``, and so what a once-answer admits (`ShownItem`)."""
    if isinstance(source, ServerSource):
        return source.items
    return frozenset({(skill.path or "", skill.name)})


# -- the decisions stored ---------------------------------------------------------------------


def default_trust_file() -> str:
    """``$ACP_SKILLS_TRUST_FILE`` (absolute, else `ValueError`), else under an absolute
    ``$XDG_CONFIG_HOME`` or ``~/.config``: ``acp-skills/trust.json``."""
    if override := os.environ.get("ACP_SKILLS_TRUST_FILE", "").strip():
        if not os.path.isabs(path := os.path.expanduser(override)):
            raise ValueError(
                f"ACP_SKILLS_TRUST_FILE must be an absolute path (or start with ~), not "
                f"{override!r}: a relative one would be read from the directory the agent "
                "was started in, usually a project"
            )
        return os.path.normpath(path)
    config = os.path.expanduser(os.environ.get("XDG_CONFIG_HOME", "").strip())
    if not os.path.isabs(config):
        config = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(os.path.normpath(config), "acp-skills", "trust.json")


class TrustFileError(Exception):
    """The trust file exists but cannot be read as decisions (it is left untouched)."""


@dataclass(frozen=True, slots=True)
class StoredTrust:
    """A decision per source key, and the pairs each trusted server was trusted with."""

    decisions: Mapping[str, Decision] = field(default_factory=dict)
    served: Mapping[str, frozenset[ShownItem]] = field(default_factory=dict)

    def decided(self, source: TrustSource, decision: Decision | None) -> StoredTrust:
        """These decisions with ``decision`` for ``source`` (``None`` forgets it): a trusted
        server's pairs replace those it had for the same uris."""
        return _folded(self, [(source, decision)])


def _folded(
    stored: StoredTrust, steps: Iterable[tuple[TrustSource, Decision | None]]
) -> StoredTrust:
    """``stored`` with each decision in turn, `StoredTrust.decided`'s rule (a call of it is one
    step), in time linear in the steps and their pairs."""
    decisions = dict(stored.decisions)
    by_uri = {key: _by_uri(pairs) for key, pairs in stored.served.items()}
    for source, decision in steps:
        decisions.pop(source.key, None)
        pairs = by_uri.pop(source.key, {})
        if decision is not None:
            decisions[source.key] = decision
        if decision == "trusted" and isinstance(source, ServerSource):
            pairs.update(_by_uri(source.items))  # in place: its own, popped above
            by_uri[source.key] = pairs
    served = {key: frozenset().union(*groups.values()) for key, groups in by_uri.items()}
    return StoredTrust(decisions, served)


def _by_uri(pairs: Iterable[ShownItem]) -> dict[str, set[ShownItem]]:
    """``pairs`` grouped by uri: a trusted server's new pairs replace its pairs of their uris."""
    groups: dict[str, set[ShownItem]] = {}
    for pair in pairs:
        groups.setdefault(pair[0], set()).add(pair)
    return groups


class TrustStore:
    """The decisions in a JSON file outside any project (docs/trust.md, "The trust file")."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else default_trust_file()

    def read(self) -> StoredTrust:
        """Every decision, none for a missing file; `TrustFileError` if it is no decisions."""
        cannot = f"{self.path}: cannot read trust decisions"
        content = read_local_file(self.path, MAX_TRUST_FILE_BYTES)
        if isinstance(content, ReadError):
            if content.failure in ("not_found", "broken_link"):
                return StoredTrust()
            raise TrustFileError(f"{cannot}: {content.reason}")
        deep = f"nested more than {MAX_NESTING_DEPTH} levels deep"
        try:
            data = json.loads(content.decode("utf-8"))
            if nests_deeper_than(data, MAX_NESTING_DEPTH):
                raise ValueError(deep)
            projects, servers = data["projects"], data.get("servers", [])
            if not isinstance(projects, list) or not isinstance(servers, list):
                raise TypeError('expected {"projects": [...], "servers": [...]}')
            entries = [*projects, *servers]
        except RecursionError:  # the decoder's own limit, far below 100,000 brackets
            raise TrustFileError(f"{cannot}: {deep}") from None
        except (ValueError, LookupError, TypeError) as error:  # not decisions
            raise TrustFileError(f"{cannot}: {error!s}") from None
        steps: list[tuple[TrustSource, Decision]] = []
        for entry in (entry for entry in entries if isinstance(entry, dict)):
            if (decision := entry.get("decision")) not in ("trusted", "refused"):
                continue
            if isinstance(path := entry.get("path"), str):
                steps.append((ProjectSource(path), decision))
            elif isinstance(server := entry.get("server"), str):
                resources = listed if isinstance(listed := entry.get("resources"), list) else []
                pairs = [(r.get("uri"), r.get("digest")) for r in resources if isinstance(r, dict)]
                items = {(u, d) for u, d in pairs if isinstance(u, str) and isinstance(d, str)}
                steps.append((ServerSource("", server, frozenset(items)), decision))
        return _folded(StoredTrust(), steps)  # in one pass: folding `decided` in is quadratic

    def decide(self, source: TrustSource, decision: Decision | None) -> bool:
        """Store ``decision`` for ``source`` (`StoredTrust.decided`); whether anything changed."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        # A lock beside the file, which each write replaces: no writer overwrites another.
        with open(self.path + ".lock", "a") as lock:  # closing it releases the lock
            fcntl.flock(lock, fcntl.LOCK_EX)  # held per open file: threads of one process wait
            if (after := (stored := self.read()).decided(source, decision)) == stored:
                return False
            projects, servers = [], []
            for key, value in sorted(after.decisions.items()):
                if not key.startswith(SERVER_KEY_PREFIX):
                    projects.append({"path": key, "decision": value})
                    continue
                entry: dict[str, object] = {"server": key.removeprefix(SERVER_KEY_PREFIX)}
                entry["decision"] = value
                if value == "trusted":
                    pairs = sorted(after.served.get(key, ()))
                    entry["resources"] = [{"uri": uri, "digest": digest} for uri, digest in pairs]
                servers.append(entry)
            data = {"projects": projects} | ({"servers": servers} if servers else {})
            # A symbolic link at the path (a dotfiles repository's) stays: its target is rewritten.
            target = os.path.realpath(self.path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            text = json.dumps(data, indent=2) + "\n"
            replace_file(target, text.encode(), prefix=".trust-", sync=True)
            return True


# -- what a session offers --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Withheld:
    """A skill a session does not offer, and why (``change``: new or changed on its server)."""

    skill: SkillCandidate
    state: TrustState
    source: TrustSource
    change: Literal["new", "changed"] | None = None


@dataclass(frozen=True, slots=True)
class SessionView:
    """A snapshot as one session sees it: what it offers (``found`` itself when nothing is
    withheld), each winner it withholds by name, and what it was made of, to judge again."""

    found: SkillSnapshot
    offered: SkillSnapshot
    withheld: Mapping[str, Withheld]
    source_of: Callable[[SkillCandidate], TrustSource | None]
    stored: StoredTrust
    judge: Callable[[SkillCandidate], tuple[TrustState, Withheld | None]]
    problems: tuple[Diagnostic, ...] = ()  # what the view was made despite (the trust file)
    # The withheld skills a question asks about: a value, read without calling back here.
    pending: tuple[Withheld, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        pending = tuple(held for held in self.withheld.values() if held.state == "pending")
        object.__setattr__(self, "pending", pending)

    def state(self, skill: SkillCandidate) -> TrustState:
        """The state of ``skill``: a winner, a shadowed skill, or one named by its uri."""
        return self.judge(skill)[0]

    def judged(self, skill: SkillCandidate) -> Withheld | None:
        """Whether ``skill`` is withheld, and why."""
        return self.judge(skill)[1]

    def seen(self, diagnosed: Sequence[Diagnostic]) -> tuple[Diagnostic, ...]:
        """The registry's problems (``diagnosed``) as this session meets them: what loses to
        the skills it offers, not to the ones it withholds; then the view's own."""
        if self.offered is not self.found:
            kept = (d for d in diagnosed if d.code not in SHADOW_CODES)
            diagnosed = (*kept, *map(shadow_diagnostic, self.offered.shadowed))
        return (*diagnosed, *self.problems)


def view(
    found: SkillSnapshot,
    source_of: Callable[[SkillCandidate], TrustSource | None],
    stored: StoredTrust,
    mode: TrustMode,
    grants: Mapping[str, frozenset[ShownItem]] | None = None,
    problems: tuple[Diagnostic, ...] = (),
) -> SessionView:
    """What a session offers of ``found``; ``grants``: what its once-answers admitted, by source
    key; ``problems``: what it is made despite. A trusted server's skill is trusted while all
    it shows is pairs it was trusted with."""

    def judge(skill: SkillCandidate) -> tuple[TrustState, Withheld | None]:
        if mode == "all" or (source := source_of(skill)) is None:
            return "trusted", None
        if mode == "none" or (decision := stored.decisions.get(source.key)) == "refused":
            return "refused", Withheld(skill, "refused", source)
        shown, served = shown_items(skill, source), stored.served.get(source.key)
        if decision == "trusted" and (isinstance(source, ProjectSource) or _covered(shown, served)):
            return "trusted", None
        if _covered(shown, (grants or {}).get(source.key)):
            return "session", None
        if decision != "trusted":
            return "pending", Withheld(skill, "pending", source)
        known = {uri for uri, _ in served or ()}  # a skill of a trusted server: new, or changed?
        changed = any(uri in known for uri, _ in shown)
        return "pending", Withheld(skill, "pending", source, "changed" if changed else "new")

    withheld = {s.name: held for s in found.skills if (held := judge(s)[1]) is not None}
    offered = found
    if withheld:
        kept = {skill.name: skill for skill in found.skills if skill.name not in withheld}
        for lost in found.shadowed:  # in resolution order: the first admitted one stands
            if lost.skill.name in withheld and judge(lost.skill)[1] is None:
                kept.setdefault(lost.skill.name, lost.skill)
        offered = SkillSnapshot(
            skills=tuple(sorted(kept.values(), key=lambda skill: skill.name)),
            complete=found.complete,
            # What still loses, to what the session offers in the withheld winner's place.
            shadowed=tuple(
                ShadowedSkill(skill=lost.skill, winner=kept.get(lost.skill.name, lost.winner))
                for lost in found.shadowed
                if kept.get(lost.skill.name) is not lost.skill
            ),
        )
    return SessionView(found, offered, withheld, source_of, stored, judge, problems)


def _covered(items: frozenset[ShownItem], admitted: frozenset[ShownItem] | None) -> bool:
    # Nothing to compare (a server skill listed without pairs) is never covered: fail closed.
    return bool(items) and admitted is not None and items <= admitted


async def session_view(
    registry: SkillRegistry,
    options: SkillLookupOptions,
    mode: TrustMode,
    store: TrustStore,
    grants: Mapping[str, frozenset[ShownItem]] | None = None,
) -> SessionView:
    """`view` of the registry's snapshot, projects and decisions read in worker threads; a
    trust file that cannot be read grants nothing."""
    found, projects, stored = await registry.snapshot(options), list[Project](), StoredTrust()
    if mode != "all" and options.cwd:
        places = (options.cwd, *options.additional_directories)
        projects = await anyio.to_thread.run_sync(lambda: [find_project(p) for p in places])
    problems: tuple[Diagnostic, ...] = ()
    if mode == "ask":
        try:
            stored = await anyio.to_thread.run_sync(store.read)
        except TrustFileError as error:  # left for the person to mend: nothing trusted till then
            problems = (unreadable(str(error)),)
            log_diagnostic(_log, problems[0])
    return view(found, sources_at(projects), stored, mode, grants, problems)
