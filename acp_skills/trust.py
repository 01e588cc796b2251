"""Trust decisions: which sources of skills a person has admitted (contract §13, docs/trust.md).

A *trust source* is where skills come from that the person did not put there: a project (by the
real path of its repository, shared by its git worktrees) or an MCP server (by label and command
or url; a trusted server's decision also holds the ``{uri, digest}`` pairs it served, so a skill
it adds or changes is asked about again). Decisions live in one JSON file outside any project, so
nothing a repository ships can grant itself trust.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio.to_thread

from .errors import ReadError
from .fs import read_local_file
from .json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from .model import SkillCandidate
from .project import PROJECT_SKILL_DIRS, Project, find_project

TrustMode: TypeAlias = Literal["ask", "all", "none"]
Decision: TypeAlias = Literal["trusted", "refused"]
TrustState: TypeAlias = Literal["trusted", "session", "pending", "refused"]
# Why a skill of a trusted server is pending again: a uri it did not serve, or another digest.
ServerChange: TypeAlias = Literal["new", "changed"]
Pair: TypeAlias = tuple[str, str]  # (resource uri, "sha256:..." digest, or "dynamic" for a
# dynamic skill's own SKILL.md) as a server listed it
TRUST_MODES: tuple[str, ...] = get_args(TrustMode)
# The local provider's sources found from a session's working directory (contract §5).
PROJECT_SOURCES = frozenset(PROJECT_SKILL_DIRS)
# Server decisions are stored under this prefix; a project key is an absolute path.
SERVER_KEY_PREFIX = "mcp:"
# Far above any person's decisions (a thousand projects take about 100 KiB), far below memory.
MAX_TRUST_FILE_BYTES: Final = 16 * 1024 * 1024


def trust_mode(value: str | None) -> TrustMode:
    """``value`` (a flag or ``ACP_SKILLS_TRUST``) as a mode; empty or missing means ``ask``."""
    if (text := (value or "").strip().lower() or "ask") in TRUST_MODES:
        return cast(TrustMode, text)
    raise ValueError(f"trust: unknown mode {value!r} (known: {', '.join(TRUST_MODES)})")


@dataclass(frozen=True, slots=True)
class ProjectSource:
    """A project: ``key`` is the real path decisions are stored under, ``label`` its name."""

    key: str

    @property
    def label(self) -> str:
        return os.path.basename(self.key) or self.key


@dataclass(frozen=True, slots=True)
class ServerSource:
    """An MCP server: ``endpoint`` is its identity (label and command line or url); ``items``
    the (uri, digest) pairs to trust it with (those of one skill, or of every skill a question
    named; none to refuse or forget it); ``uri`` the skill's own ``SKILL.md`` uri, if one."""

    label: str
    endpoint: str
    items: frozenset[Pair] = field(default_factory=frozenset)
    uri: str = ""

    @property
    def key(self) -> str:
        return SERVER_KEY_PREFIX + self.endpoint


TrustSource: TypeAlias = ProjectSource | ServerSource


@runtime_checkable
class ServedLocator(Protocol):
    """What a skill served by an MCP server tells trust (the MCP provider's locator; trust does
    not import that provider, whose SDK is optional)."""

    @property
    def server_label(self) -> str: ...

    @property
    def server_identity(self) -> str: ...

    @property
    def skill_uri(self) -> str: ...

    @property
    def served(self) -> frozenset[Pair]: ...


def sources_at(
    cwd: str | None,
    projects: Sequence[Project] | None = None,
    additional_directories: Sequence[str] = (),
) -> Callable[[SkillCandidate], TrustSource | None]:
    """The trust source each skill of a session at ``cwd`` needs (``None``: an own root,
    always trusted); a project skill needs its own project's decision (``cwd``'s, or an
    additional directory's). The projects are ``projects`` if given (`find_project` of each
    directory), else found at the first project skill (async code awaits `sources_for`)."""
    found: list[Project] = list(projects) if projects is not None else []

    def source_of(skill: SkillCandidate) -> TrustSource | None:
        if skill.source in PROJECT_SOURCES and cwd:
            if not found:
                found.extend(_projects_of(cwd, additional_directories))
            return _project_source(skill, found)
        if skill.provider == "mcp":
            locator = skill.locator
            if isinstance(locator, ServedLocator):
                return ServerSource(
                    locator.server_label, locator.server_identity, locator.served, locator.skill_uri
                )
            return ServerSource(label=skill.source, endpoint=skill.source)  # fail closed
        return None

    return source_of


def _projects_of(cwd: str, additional_directories: Sequence[str]) -> list[Project]:
    return [find_project(directory) for directory in (cwd, *additional_directories)]


def _project_source(skill: SkillCandidate, projects: Sequence[Project]) -> ProjectSource:
    # The provider lists a project's skills from `project.skill_root`, found by the same
    # `find_project` call. A listing cached before the project changed (a `.git` made or
    # removed since) may hold skills of another root: they never take a project's decision,
    # only an undecided one of their own.
    path = skill.path or ""
    for project in projects:
        if path.startswith(os.path.join(project.skill_root(skill.source), "")):
            return ProjectSource(project.key)
    return ProjectSource(os.path.dirname(path) or projects[0].root)


async def sources_for(
    cwd: str | None, skills: Iterable[SkillCandidate], additional_directories: Sequence[str] = ()
) -> Callable[[SkillCandidate], TrustSource | None]:
    """`sources_at` for ``skills``, the projects found first in a worker thread (only when one
    of them is a project's), so no read for trust runs on the event loop."""
    projects = None
    if cwd and any(skill.source in PROJECT_SOURCES for skill in skills):
        projects = await anyio.to_thread.run_sync(_projects_of, cwd, additional_directories)
    return sources_at(cwd, projects, additional_directories)


def project_of(path: str | os.PathLike[str]) -> ProjectSource:
    """The project ``path``'s skills need trust from: `acp_skills.project.find_project`'s
    decision key (the real path of the project, or of the main work tree a linked git worktree
    shares its decision with). Blocking: async code awaits `sources_for` instead."""
    return ProjectSource(find_project(path).key)


def default_trust_file() -> str:
    """``$ACP_SKILLS_TRUST_FILE``, else ``$XDG_CONFIG_HOME/acp-skills/trust.json`` (default
    ``~/.config``; a relative ``XDG_CONFIG_HOME`` counts as unset, as the XDG specification
    says).

    Raises:
        ValueError: ``ACP_SKILLS_TRUST_FILE`` is a relative path (it would be read from
            whatever directory the agent was started in, usually a project).
    """
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


@dataclass(slots=True)
class StoredTrust:
    """The trust file's contents: a decision per source key, and the (uri, digest) pairs each
    trusted server was trusted with."""

    decisions: dict[str, Decision] = field(default_factory=dict)
    served: dict[str, frozenset[Pair]] = field(default_factory=dict)


class TrustStore:
    """Stored decisions, one per source key, in a JSON file written atomically."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else default_trust_file()
        self._lock = threading.Lock()

    def read(self) -> StoredTrust:
        """Everything stored; a missing file (or a link to a missing file) means nothing.

        The read is bounded: opened without blocking, a regular file only, at most
        `MAX_TRUST_FILE_BYTES`, nested at most `MAX_NESTING_DEPTH` levels.

        Raises:
            TrustFileError: the file exists but cannot be read as decisions.
        """
        content = read_local_file(self.path, MAX_TRUST_FILE_BYTES)
        if isinstance(content, ReadError):
            if content.failure in ("not_found", "broken_link"):
                return StoredTrust()
            raise TrustFileError(f"{self.path}: cannot read trust decisions: {content.reason}")
        try:
            data = json.loads(content.decode("utf-8"))
            too_deep = nests_deeper_than(data, MAX_NESTING_DEPTH)
        except RecursionError:  # the decoder's own limit, far below 100,000 brackets
            too_deep = True
        except ValueError as error:  # not UTF-8, not JSON, a number too long to convert
            raise TrustFileError(f"{self.path}: cannot read trust decisions: {error}") from None
        if too_deep:
            raise TrustFileError(
                f"{self.path}: cannot read trust decisions: nested more than "
                f"{MAX_NESTING_DEPTH} levels deep"
            )
        projects = data.get("projects") if isinstance(data, dict) else None
        servers = data.get("servers", []) if isinstance(data, dict) else None
        if not isinstance(projects, list) or not isinstance(servers, list):
            raise TrustFileError(f'{self.path}: expected {{"projects": [...], "servers": [...]}}')
        stored = StoredTrust()
        for entry in projects:
            if isinstance(entry, dict) and isinstance(key := entry.get("path"), str):
                _take(stored, _current_key(key), entry)
        for entry in servers:
            if isinstance(entry, dict) and isinstance(server := entry.get("server"), str):
                key = SERVER_KEY_PREFIX + server
                if _take(stored, key, entry) == "trusted":
                    resources = entry.get("resources")
                    stored.served[key] = frozenset(
                        (item["uri"], item["digest"])
                        for item in (resources if isinstance(resources, list) else ())
                        if isinstance(item, dict)
                        and isinstance(item.get("uri"), str)
                        and isinstance(item.get("digest"), str)
                    )
        return stored

    def decisions(self) -> dict[str, Decision]:
        """Every stored decision by source key."""
        return self.read().decisions

    def decision(self, source: TrustSource) -> Decision | None:
        """The stored decision for ``source``, if any."""
        return self.decisions().get(source.key)

    def decide(self, source: TrustSource, decision: Decision | None) -> bool:
        """Store ``decision`` for ``source`` (``None`` forgets it); whether anything changed.
        Trusting a server adds the pairs of ``source.items``, in place of any it had stored
        for the same uris. Sessions, agents and the command line may decide at once: each
        read-modify-write holds a lock, so no decision overwrites another."""
        key = source.key
        with self._lock, _locked_beside(self.path):
            stored = self.read()
            before = (stored.decisions.get(key), stored.served.get(key))
            kept = stored.served.pop(key, frozenset())
            if decision is None:
                stored.decisions.pop(key, None)
            else:
                stored.decisions[key] = decision
            if decision == "trusted" and isinstance(source, ServerSource):
                replaced = {uri for uri, _ in source.items}
                kept = frozenset(pair for pair in kept if pair[0] not in replaced)
                stored.served[key] = kept | source.items
            if (stored.decisions.get(key), stored.served.get(key)) == before:
                return False
            self._write(stored)
            return True

    def _write(self, stored: StoredTrust) -> None:
        # A symbolic link at the path (a dotfiles repository's) stays: its target is rewritten.
        target = os.path.realpath(self.path)
        directory = os.path.dirname(target)
        os.makedirs(directory, exist_ok=True)
        projects, servers = [], []
        for key, value in sorted(stored.decisions.items()):
            if not key.startswith(SERVER_KEY_PREFIX):
                projects.append({"path": key, "decision": value})
                continue
            entry: dict[str, object] = {"server": key[len(SERVER_KEY_PREFIX) :], "decision": value}
            if value == "trusted":
                pairs = sorted(stored.served.get(key, ()))
                entry["resources"] = [{"uri": uri, "digest": digest} for uri, digest in pairs]
            servers.append(entry)
        data: dict[str, object] = {"projects": projects}
        if servers:
            data["servers"] = servers
        text = json.dumps(data, indent=2) + "\n"
        # Write beside the file and rename over it: a reader sees the old file or the new one.
        handle, temporary = tempfile.mkstemp(prefix=".trust-", suffix=".json", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise


@contextlib.contextmanager
def _locked_beside(path: str) -> Iterator[None]:
    # An advisory lock on a file beside the decisions (the decisions file itself is replaced by
    # each write, so a lock on it would not hold across writers).
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with _held(fd):
            yield
    finally:
        os.close(fd)


try:
    import fcntl
except ImportError:  # Windows (not supported, docs/architecture.md): importing still works

    @contextlib.contextmanager
    def _held(fd: int) -> Iterator[None]:
        # Writers at the very same moment may lose one decision; each write stays atomic
        # (docs/trust.md).
        yield

else:

    @contextlib.contextmanager
    def _held(fd: int) -> Iterator[None]:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _current_key(key: str) -> str:
    # Server decisions were once stored among the projects as "mcp:LABEL:LABEL=WHERE"; read
    # them under today's key, so that a refusal made then still holds.
    label, separator, endpoint = key.removeprefix(SERVER_KEY_PREFIX).partition(":")
    if key.startswith(SERVER_KEY_PREFIX) and separator and endpoint.startswith(label + "="):
        return SERVER_KEY_PREFIX + endpoint
    return key


def _take(stored: StoredTrust, key: str, entry: Mapping[str, object]) -> Decision | None:
    decision = entry.get("decision")
    if decision == "trusted" or decision == "refused":
        stored.decisions[key] = decision
        return decision
    return None


# What a question shows of one skill, and so what "Trust for this session" admits of it.
ShownItem: TypeAlias = tuple[str, str]


def shown_items(skill: SkillCandidate, source: TrustSource) -> frozenset[ShownItem]:
    """What the question shows of ``skill`` from ``source``, and what a once-answer admits: an
    MCP skill's (uri, digest) pairs as listed (its files and frontmatter); a project skill's
    file and the name it was shown under (path, name). Another body on the server, another
    file or another name is not what the person saw."""
    if isinstance(source, ServerSource):
        return source.items
    return frozenset({(skill.path or "", skill.name)})


_Held: TypeAlias = tuple[SkillCandidate, TrustState, TrustSource | None, ServerChange | None]


class TrustStates:
    """Each skill's trust state (and source) for one session, looked up by the skill itself: a
    candidate holds mappings (its metadata), so it cannot be a dict key; the skill is kept, so
    its id stays its own."""

    __slots__ = ("_states",)

    def __init__(self, held: Iterable[_Held] = ()) -> None:
        self._states = {id(entry[0]): entry for entry in held}

    def __getitem__(self, skill: SkillCandidate) -> TrustState:
        return self._states[id(skill)][1]

    def source(self, skill: SkillCandidate) -> TrustSource | None:
        """Where ``skill`` needs trust from (``None``: an own root)."""
        return self._states[id(skill)][2]

    def change(self, skill: SkillCandidate) -> ServerChange | None:
        """For a pending skill of a trusted server: whether it is new there or changed."""
        return self._states[id(skill)][3]


def trust_states(
    skills: Iterable[SkillCandidate],
    source_of: Callable[[SkillCandidate], TrustSource | None],
    stored: StoredTrust,
    mode: TrustMode,
    session_grants: Mapping[str, frozenset[ShownItem]] | None = None,
) -> TrustStates:
    """Each skill's trust state for one session, as a pure function.

    ``source_of`` gives a skill's trust source (``None``: an own root, always trusted);
    ``session_grants`` holds what this session's once-answers admitted, by source key: the
    `shown_items` of each skill its question showed. A skill is ``session`` only while all it
    is now is among them, so a skill added later, or changed on its server, waits. Likewise a
    trusted server's skill stays trusted only while every pair it is listed with is one the
    server was trusted with."""
    grants = session_grants or {}
    held: list[_Held] = []
    for skill in skills:
        source = source_of(skill)
        decision = stored.decisions.get(source.key) if source is not None else None
        change: ServerChange | None = None
        state: TrustState
        if source is None or mode == "all":
            state = "trusted"
        elif mode == "none" or decision == "refused":
            state = "refused"
        elif decision == "trusted" and _still_served(source, stored):
            state = "trusted"
        else:
            if decision == "trusted" and isinstance(source, ServerSource):
                known = {uri for uri, _ in stored.served.get(source.key, ())}
                change = "changed" if any(uri in known for uri, _ in source.items) else "new"
            admitted = _covered(shown_items(skill, source), grants.get(source.key))
            state = "session" if admitted else "pending"
        held.append((skill, state, source, change))
    return TrustStates(held)


def _covered(items: frozenset[ShownItem], admitted: frozenset[ShownItem] | None) -> bool:
    # Nothing to compare (a server skill listed without pairs) is never covered: fail closed.
    return bool(items) and admitted is not None and items <= admitted


def _still_served(source: TrustSource, stored: StoredTrust) -> bool:
    if not isinstance(source, ServerSource):
        return True
    return _covered(source.items, stored.served.get(source.key))
