"""Trust decisions: which sources of skills a person has admitted (contract §13, docs/trust.md).

A *trust source* is where skills come from that the person did not put there: a project (by the
real path of its repository, shared by its git worktrees) or, later, an MCP server (by label and
command or url, with the set of resources it served). Decisions live in one JSON file outside any
project, so nothing a repository ships can grant itself trust.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, get_args

from .model import SkillCandidate

TrustMode: TypeAlias = Literal["ask", "all", "none"]
Decision: TypeAlias = Literal["trusted", "refused"]
TrustState: TypeAlias = Literal["trusted", "session", "pending", "refused"]
TRUST_MODES: tuple[str, ...] = get_args(TrustMode)
# The local provider's sources found from a session's working directory (contract §5).
PROJECT_SOURCES = frozenset({"project-dsh", "project-agents", "project-claude"})


def trust_mode(value: str | None) -> TrustMode:
    """``value`` (a flag or ``ACP_SKILLS_TRUST``) as a mode; empty or missing means ``ask``."""
    text = (value or "").strip().lower() or "ask"
    modes: dict[str, TrustMode] = {"ask": "ask", "all": "all", "none": "none"}
    if text in modes:
        return modes[text]
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
    """An MCP server: identified by label and command or url; ``items`` is its (uri, digest)
    set, so a server that starts serving other text is asked about again."""

    label: str
    endpoint: str
    items: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    @property
    def key(self) -> str:
        return f"mcp:{self.label}:{self.endpoint}"


TrustSource: TypeAlias = ProjectSource | ServerSource


def _read_gitdir_pointer(dot_git: str) -> str | None:
    # A worktree's (or submodule's) `.git` is a file: "gitdir: PATH".
    try:
        with open(dot_git, encoding="utf-8") as file:
            first = file.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("gitdir:"):
        return None
    target = first[len("gitdir:") :].strip()
    return os.path.normpath(os.path.join(os.path.dirname(dot_git), target)) if target else None


def _common_dir(gitdir: str) -> str:
    # A linked worktree's gitdir names the repository's common directory in `commondir`.
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as file:
            common = file.readline().strip()
    except (OSError, UnicodeDecodeError):
        return gitdir
    return os.path.normpath(os.path.join(gitdir, common)) if common else gitdir


def project_of(path: str | os.PathLike[str]) -> ProjectSource:
    """The project ``path`` belongs to: the nearest enclosing directory with ``.git`` (as the
    local provider finds it), by real path; worktrees of one repository map to the repository's
    main directory. A path outside any repository is its own project. Git is never run."""
    start = os.path.realpath(os.fspath(path))
    if not os.path.isdir(start):
        start = os.path.dirname(start)
    directory, parent = start, ""
    while parent != directory:
        dot_git = os.path.join(directory, ".git")
        if os.path.isdir(dot_git):
            return ProjectSource(directory)
        if os.path.isfile(dot_git):
            gitdir = _read_gitdir_pointer(dot_git)
            if gitdir is None:
                return ProjectSource(directory)
            common = os.path.realpath(_common_dir(gitdir))
            # A normal repository's common directory is `<main>/.git`; a bare one is itself.
            main = os.path.dirname(common) if os.path.basename(common) == ".git" else common
            return ProjectSource(main)
        directory, parent = os.path.dirname(directory), directory
    return ProjectSource(start)


def default_trust_file() -> str:
    """``$ACP_SKILLS_TRUST_FILE``, else ``$XDG_CONFIG_HOME/acp-skills/trust.json`` (default
    ``~/.config``)."""
    if override := os.environ.get("ACP_SKILLS_TRUST_FILE", "").strip():
        return os.path.abspath(os.path.expanduser(override))
    config = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
    return os.path.join(os.path.abspath(config), "acp-skills", "trust.json")


class TrustFileError(Exception):
    """The trust file exists but cannot be read as decisions (it is left untouched)."""


class TrustStore:
    """Stored decisions, one per source key, in a JSON file written atomically."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else default_trust_file()

    def decisions(self) -> dict[str, Decision]:
        """Every stored decision by source key; a missing file means none."""
        try:
            with open(self.path, encoding="utf-8") as file:
                data = json.load(file)
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise TrustFileError(f"{self.path}: cannot read trust decisions: {error}") from None
        projects = data.get("projects") if isinstance(data, dict) else None
        if not isinstance(projects, list):
            raise TrustFileError(f'{self.path}: expected {{"projects": [...]}}')
        found: dict[str, Decision] = {}
        for entry in projects:
            if not isinstance(entry, dict):
                continue
            key, decision = entry.get("path"), entry.get("decision")
            if isinstance(key, str) and decision in ("trusted", "refused"):
                found[key] = "trusted" if decision == "trusted" else "refused"
        return found

    def decision(self, source: TrustSource) -> Decision | None:
        """The stored decision for ``source``, if any."""
        return self.decisions().get(source.key)

    def decide(self, source: TrustSource, decision: Decision | None) -> None:
        """Store ``decision`` for ``source`` (``None`` forgets it)."""
        decisions = self.decisions()
        if decision is None:
            decisions.pop(source.key, None)
        else:
            decisions[source.key] = decision
        self._write(decisions)

    def _write(self, decisions: Mapping[str, Decision]) -> None:
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        entries = [{"path": key, "decision": value} for key, value in sorted(decisions.items())]
        text = json.dumps({"projects": entries}, indent=2) + "\n"
        # Write beside the file and rename over it: a reader sees the old file or the new one.
        handle, temporary = tempfile.mkstemp(prefix=".trust-", suffix=".json", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise


def needs_trust(skill: SkillCandidate) -> bool:
    """Whether ``skill`` comes from a root the person did not choose (a project root)."""
    return skill.source in PROJECT_SOURCES


class TrustStates:
    """Each skill's trust state, looked up by the skill itself: a candidate holds mappings (its
    metadata), so it cannot be a dict key; the skill is kept, so its id stays its own."""

    __slots__ = ("_states",)

    def __init__(self) -> None:
        self._states: dict[int, tuple[SkillCandidate, TrustState]] = {}

    def __setitem__(self, skill: SkillCandidate, state: TrustState) -> None:
        self._states[id(skill)] = (skill, state)

    def __getitem__(self, skill: SkillCandidate) -> TrustState:
        return self._states[id(skill)][1]


def trust_states(
    skills: Iterable[SkillCandidate],
    source_of: Mapping[str, TrustSource | None],
    decisions: Mapping[str, Decision],
    mode: TrustMode,
    session_grants: Mapping[str, bool] | None = None,
) -> TrustStates:
    """Each skill's trust state for one session, as a pure function.

    ``source_of`` maps a skill's ``source`` to its trust source (``None`` or absent: an own root,
    always trusted); ``session_grants`` holds the once-answers of this session by source key
    (``True`` allow once, ``False`` not now)."""
    grants = session_grants or {}
    states = TrustStates()
    for skill in skills:
        source = source_of.get(skill.source)
        if source is None or mode == "all":
            states[skill] = "trusted"
        elif mode == "none":
            states[skill] = "refused"
        elif (stored := decisions.get(source.key)) is not None:
            states[skill] = stored
        elif grants.get(source.key):
            states[skill] = "session"
        else:
            states[skill] = "pending"
    return states
