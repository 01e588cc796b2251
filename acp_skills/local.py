"""LocalSkillProvider: skills on disk, in project, custom and user roots (contract §5).

While registered, from its first lookup on, the provider watches its roots (`acp_skills.watch`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable, Iterable, Sequence
from typing import Final

import anyio.to_thread

from . import _scan
from ._scan import CUSTOM, USER_DSH, LocalDiscovery, RootReport, SkillRoot, unreadable_root
from .diagnostics import Diagnostic, diagnostic, log_diagnostic, root_missing
from .errors import Problem, ReadError
from .frontmatter import ParsedSkill
from .fs import LocalFileSystem, SkillFileSystem
from .log_once import ReportedProblems
from .model import SkillCandidate, SkillDefinition, SkillLookupOptions, require_positive_int
from .project import PROJECT_SKILL_DIRS, find_project
from .provider import ProviderHandle
from .quiet_log import get_logger
from .watch import RootWatch, WatchedRoot

__all__ = ["LocalDiscovery", "LocalSkillProvider", "RootReport", "SkillRoot", "unreadable_root"]

_log = get_logger(__name__)

# The roots found from a session's cwd (watched per project, with a bound).
_PROJECT_SOURCES: Final = tuple(PROJECT_SKILL_DIRS)
_PROJECT_DSH, _PROJECT_AGENTS, _PROJECT_CLAUDE = _PROJECT_SOURCES
COMPAT_CLAUDE: Final = "claude"  # the `compat` value that adds Claude Code's `.claude/skills`
_COMPAT_VALUES: Final = (COMPAT_CLAUDE,)
# Examples rank with the custom roots, after them: an agent's bundled skills, labelled as such.
_EXAMPLES: Final = "examples"
_SOURCE_RANKS: Final = {_PROJECT_DSH: 100, _PROJECT_AGENTS: 200, CUSTOM: 300, _EXAMPLES: 300}
_SOURCE_RANKS[USER_DSH] = 400
_SOURCE_RANKS.update({"user-agents": 500, _PROJECT_CLAUDE: 600, "user-claude": 700})
# The project roots of a session's additional directories: after its own project's, before the
# custom roots; among themselves in the order the directories were given (ties keep the order).
# Under `--compat claude` their `.claude/skills` follow the session's own, at its rank.
_ADDITIONAL_RANKS: Final = {_PROJECT_DSH: 250, _PROJECT_AGENTS: 250, _PROJECT_CLAUDE: 600}


class LocalSkillProvider:
    """Discovers skills in project, custom and user directories on a (local) filesystem.

    Homes default to ``$DSH_HOME``, ``$DSH_AGENTS_HOME``, ``$CLAUDE_CONFIG_DIR`` (blank counts
    as unset), else ``~/.dsh``, ``~/.agents``, ``~/.claude``; directories are made absolute now.
    ``example_skill_dirs`` hold an agent's bundled examples (source ``examples``, after the
    custom roots at their rank). Raises ``ValueError`` for a bad ``max_file_bytes``, ``name``,
    empty directory or ``compat`` tool, ``TypeError`` when a list of directories or ``compat``
    is a single string.
    """

    def __init__(
        self,
        dsh_home: str | os.PathLike[str] | None = None,
        agents_home: str | os.PathLike[str] | None = None,
        custom_skill_dirs: Iterable[str | os.PathLike[str]] = (),
        name: str = "local",
        max_file_bytes: int = 1_048_576,
        fs: SkillFileSystem | None = None,
        *,
        compat: Iterable[str] = (),
        claude_home: str | os.PathLike[str] | None = None,
        watch: bool = True,
        example_skill_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        require_positive_int("max_file_bytes", max_file_bytes)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        for given, what in ((custom_skill_dirs, "custom"), (example_skill_dirs, "example")):
            if isinstance(given, str | bytes | os.PathLike):
                # A lone string would otherwise be scanned one character at a time.
                raise TypeError(f"{what}_skill_dirs must be a sequence of paths, not a single path")
        self._name = name
        self._max_file_bytes = max_file_bytes
        self._fs: SkillFileSystem = LocalFileSystem() if fs is None else fs
        self._dsh_home = _home_dir(dsh_home, "dsh_home", "DSH_HOME", "~/.dsh")
        self._agents_home = _home_dir(agents_home, "agents_home", "DSH_AGENTS_HOME", "~/.agents")
        self._custom_skill_dirs = tuple(
            _absolute_dir(path, "custom_skill_dirs") for path in custom_skill_dirs
        )
        self._compat = _compat_values(compat)
        self._claude_home = (
            _home_dir(claude_home, "claude_home", "CLAUDE_CONFIG_DIR", "~/.claude")
            if COMPAT_CLAUDE in self._compat
            else None
        )
        # Roots that do not depend on the caller's cwd, already in rank order.
        fixed = [(path, CUSTOM) for path in self._custom_skill_dirs]
        fixed += [(_absolute_dir(p, "example_skill_dirs"), _EXAMPLES) for p in example_skill_dirs]
        fixed += [(self._dsh_home, USER_DSH), (self._agents_home, "user-agents")]
        if self._claude_home is not None:
            fixed.append((self._claude_home, "user-claude"))
        self._fixed_roots = tuple(
            _root(path if source in (CUSTOM, _EXAMPLES) else os.path.join(path, "skills"), source)
            for path, source in fixed
        )
        self._reported = ReportedProblems()  # each problem logged once per change
        self._watch: RootWatch | None = None
        if watch and isinstance(self._fs, LocalFileSystem):
            fixed_watched = [WatchedRoot(r.path, r.source == USER_DSH) for r in self._fixed_roots]
            self._watch = RootWatch(fixed_watched)

    @property
    def name(self) -> str:
        """The provider's name in a registry."""
        return self._name

    @property
    def dsh_home(self) -> str:
        """The absolute dsh home directory."""
        return self._dsh_home

    @property
    def agents_home(self) -> str:
        """The absolute agents home directory."""
        return self._agents_home

    @property
    def custom_skill_dirs(self) -> tuple[str, ...]:
        """The custom roots, absolute, in scanning order."""
        return self._custom_skill_dirs

    @property
    def compat(self) -> tuple[str, ...]:
        """The other tools whose skill directories are scanned too."""
        return self._compat

    @property
    def watch_mode(self) -> str:
        """``native``, ``polling``, ``failed``, ``starting`` or ``off`` (not watching)."""
        return "off" if self._watch is None else self._watch.mode

    def on_register(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` on relevant changes, from the first lookup on (registry hook)."""
        if self._watch is not None:
            self._watch.attach(handle)

    def on_dispose(self, handle: ProviderHandle) -> None:
        """Forget ``handle``; the last registration disposed stops watching (registry hook)."""
        if self._watch is not None:
            self._watch.detach(handle)

    def cacheable(self, options: SkillLookupOptions) -> bool:
        """Whether the registry may cache `list` for ``options`` (a registry hook)."""
        return self._watch is None or self._watch.vouches_for(_watch_scope(options))

    def close(self) -> None:
        """Stop watching for good and wait for the watcher to end (idempotent)."""
        if self._watch is not None:
            self._watch.close()

    async def roots(self, options: SkillLookupOptions) -> tuple[SkillRoot, ...]:
        """The directories scanned for ``options.cwd`` and its additional directories, in rank
        order, each listed once."""
        extra = options.additional_directories
        return await anyio.to_thread.run_sync(self._roots_at, options.cwd, extra)

    def _roots_at(self, cwd: str | None, additional: tuple[str, ...] = ()) -> tuple[SkillRoot, ...]:
        candidates = list(self._fixed_roots)
        sources = [_PROJECT_DSH, _PROJECT_AGENTS]
        if self._claude_home is not None:
            sources.append(_PROJECT_CLAUDE)
        if cwd:
            # The project trust judges (the same call gives trust its decision key), found on
            # the local disk whatever `fs` reads the roots through (docs/trust.md).
            project = find_project(cwd)
            candidates += [_root(project.skill_root(source), source) for source in sources]
            for directory in additional:  # each one's project, judged by trust on its own
                found = find_project(directory)
                candidates += [
                    SkillRoot(path=found.skill_root(s), source=s, rank=_ADDITIONAL_RANKS[s])
                    for s in sources
                ]
        # A directory reached as two roots is scanned once. The person's own root comes first:
        # with the project at $HOME (a dotfiles repository), `~/.agents/skills` stays a user
        # root, never gated by trust. Stable sorts, so custom roots keep their order.
        unique: dict[str, SkillRoot] = {}
        for root in sorted(candidates, key=lambda root: root.source in _PROJECT_SOURCES):
            unique.setdefault(os.path.normcase(os.path.realpath(root.path)), root)
        return tuple(sorted(unique.values(), key=lambda root: root.rank))

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Every well-formed skill for ``options.cwd`` (by root, then name), logging problems."""
        started = time.perf_counter()
        discovery = await self.discover(options)
        roots = [report.root.path for report in discovery.roots]
        for record in self._reported.fresh(discovery.diagnostics, roots):
            log_diagnostic(_log, record, provider=self._name)
        _log.debug(
            "skills_discovered",
            provider=self._name,
            cwd=options.cwd,
            roots=roots,
            skills=[candidate.name for candidate in discovery.candidates],
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return list(discovery.candidates)

    async def discover(self, options: SkillLookupOptions) -> LocalDiscovery:
        """Discover the skills for ``options.cwd`` and report everything met (nothing logged)."""
        roots = await self.roots(options)
        if self._watch is None:
            return await self.scan(roots)
        discovery = await self.scan(roots)
        # Never waited for: one invalidation follows as soon as the watch is live.
        project = [WatchedRoot(root.path) for root in roots if root.source in _PROJECT_SOURCES]
        self._watch.start(_watch_scope(options), project)
        return discovery

    async def diagnose(self, options: SkillLookupOptions) -> tuple[Diagnostic, ...]:
        """The problems a discovery for ``options.cwd`` meets now (`SkillRegistry.diagnose`)."""
        return (await self.discover(options)).diagnostics

    async def check_custom_dirs(self) -> tuple[Diagnostic, ...]:
        """Warn about each custom directory that is missing or unreadable (for start-up)."""
        custom = [root for root in self._fixed_roots if root.source == CUSTOM]
        listings = zip(custom, await _scan.list_roots(self._fs, custom), strict=True)
        problems = [
            diagnostic(listing, root.path)
            if isinstance(listing, Problem)
            else root_missing(root.path)
            for root, listing in listings
            if listing is None or isinstance(listing, Problem)
        ]
        for problem in problems:
            log_diagnostic(_log, problem, level="warning", provider=self._name)
        return tuple(problems)

    async def scan(self, roots: Sequence[SkillRoot]) -> LocalDiscovery:
        """Discover the skills in ``roots`` (as `roots` returns them, or any others)."""
        return await _scan.scan(self._fs, roots, self._name, self._max_file_bytes)

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        """The skill as its file is now, or ``None`` (logged) when it no longer reads or parses."""
        path = candidate.locator
        if not isinstance(path, str):
            raise TypeError(
                f"skill {candidate.name!r} was not listed by a LocalSkillProvider "
                f"(its locator is {type(path).__name__}, not a path)"
            )
        (content,) = await self._fs.read_files([path], self._max_file_bytes)
        parsed = _scan.parse_file(content, with_body=True)
        if not isinstance(parsed, ParsedSkill):
            reason = parsed.reason if isinstance(parsed, ReadError) else parsed.message
            what = {"provider": self._name, "skill": candidate.name, "path": path}
            _log.warning("skill_load_failed", **what, reason=reason)
            return None
        base = candidate.resource_base
        return _scan.build_skill(
            SkillDefinition, self._name, parsed, candidate.source, base, path, content=parsed.body
        )


def _watch_scope(options: SkillLookupOptions) -> Hashable:
    # What the watch keeps the project roots of a lookup under: its cwd, with its additional
    # directories when it has some (they add project roots of their own).
    extra = options.additional_directories
    return (options.cwd, extra) if extra else options.cwd


def _root(path: str, source: str) -> SkillRoot:
    return SkillRoot(path=path, source=source, rank=_SOURCE_RANKS[source])


def _compat_values(compat: Iterable[str]) -> tuple[str, ...]:
    if isinstance(compat, str | bytes):
        # A lone string would otherwise be read one character at a time.
        raise TypeError('compat must be a sequence of names, such as ("claude",)')
    values: list[str] = []
    for value in compat:
        if value not in _COMPAT_VALUES:
            raise ValueError(f"compat: unknown tool {value!r} (known: {', '.join(_COMPAT_VALUES)})")
        if value not in values:
            values.append(value)
    return tuple(values)


def _home_dir(
    given: str | os.PathLike[str] | None, parameter: str, variable: str, default: str
) -> str:
    if given is not None:
        return _absolute_dir(given, parameter)
    value = os.environ.get(variable, "")
    return _absolute_dir(value if value.strip() else default, variable)


def _absolute_dir(path: str | os.PathLike[str], what: str) -> str:
    if not (text := os.fspath(path)).strip():
        raise ValueError(f"{what}: a directory path must not be empty")
    return os.path.abspath(os.path.expanduser(text))
