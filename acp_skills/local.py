"""LocalSkillProvider: skills found on disk, in project and user directories.

Roots are scanned in rank order (lower wins a name clash in the registry)::

    100 project-dsh     <project>/.dsh/skills        400 user-dsh     <dsh_home>/skills
    200 project-agents  <project>/.agents/skills     500 user-agents  <agents_home>/skills
    300 custom          each of custom_skill_dirs    (user-dsh's `.system` child is skipped)

With ``compat=("claude",)``, ``<project>/.claude/skills`` (600, project-claude) and
``<claude_home>/skills`` (700, user-claude) follow, so our own roots win a clash.

Inside a root, a directory ``X`` is a bundle (``X/SKILL.md``) and a file ending in ``.md`` is a
flat skill; nothing else counts. Entries are taken in code-point order of their names, so
``foo/`` comes before ``foo.md`` and (the registry breaking rank ties by position) the bundle
wins a clash inside one root.

A discovery costs a constant number of filesystem calls however many skills there are: one
``exists`` per directory searched for ``.git``, one ``list_dir`` per root (concurrently) and
one ``read_files`` batch; the files are parsed off the event loop, never inside that batch. A
bad file never fails a request: it is left out, and what discovery met is one `Diagnostic` each
(``list`` logs them, ``discover`` returns them with every root and its count).

While registered, from its first lookup on, the provider watches its roots (`acp_skills.watch`)
and invalidates its registration when a skill is added, changed, renamed or removed on disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import Final

import structlog

from ._scan import (
    CUSTOM,
    USER_DSH,
    LocalDiscovery,
    RootReport,
    SkillRoot,
    list_roots,
    parse_file,
    scan,
    skill_fields,
    unreadable_root,
)
from .diagnostics import Diagnostic, diagnostic, log_diagnostic, root_missing
from .errors import Problem
from .frontmatter import ParsedSkill
from .fs import FileReadError, LocalFileSystem, SkillFileSystem
from .model import (
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    require_positive_int,
)
from .provider import ProviderHandle
from .watch import RootWatch, WatchedRoot

__all__ = [
    "COMPAT_CLAUDE",
    "DEFAULT_MAX_SKILL_FILE_BYTES",
    "LocalDiscovery",
    "LocalSkillProvider",
    "RootReport",
    "SkillRoot",
    "unreadable_root",
]

DEFAULT_MAX_SKILL_FILE_BYTES = 1_048_576

_log = structlog.get_logger(__name__)

_PROJECT_DSH: Final = "project-dsh"
_PROJECT_AGENTS: Final = "project-agents"
_USER_AGENTS: Final = "user-agents"
_PROJECT_CLAUDE: Final = "project-claude"
# The roots found from a session's cwd (watched per project, with a bound).
_PROJECT_SOURCES: Final = (_PROJECT_DSH, _PROJECT_AGENTS, _PROJECT_CLAUDE)
_USER_CLAUDE: Final = "user-claude"

COMPAT_CLAUDE: Final = "claude"
"""The ``compat`` value that adds Claude Code's skill directories (``.claude/skills``)."""
_COMPAT_VALUES: Final = (COMPAT_CLAUDE,)


_SOURCE_RANKS: Final = {
    _PROJECT_DSH: 100,
    _PROJECT_AGENTS: 200,
    CUSTOM: 300,
    USER_DSH: 400,
    _USER_AGENTS: 500,
    _PROJECT_CLAUDE: 600,
    _USER_CLAUDE: 700,
}


class LocalSkillProvider:
    """Discovers skills in project, custom and user directories on a (local) filesystem.

    A skill's identity is the ``name`` in its frontmatter. ``get`` re-reads and re-parses the
    file on every call, so an edited body needs no invalidation.

    Args:
        dsh_home: Defaults to ``$DSH_HOME``, else ``~/.dsh``.
        agents_home: Defaults to ``$DSH_AGENTS_HOME``, else ``~/.agents``.
        custom_skill_dirs: Extra skill roots, scanned in order, all with rank 300.
        name: The provider's name in a registry.
        max_file_bytes: Skill files larger than this are skipped with a warning.
        fs: The filesystem to read; defaults to the local disk.
        compat: Other tools whose skill directories are scanned too, after ours: only
            ``"claude"`` (`COMPAT_CLAUDE`) so far.
        claude_home: Defaults to ``$CLAUDE_CONFIG_DIR``, else ``~/.claude`` (with compat only).
        watch: Watch the roots for changes while registered (live reload); only the local disk
            is watched.

    Environment variables are read at construction; empty or blank ones count as unset. Every
    directory has ``~`` expanded and is made absolute now; symbolic links are not resolved.

    Raises:
        ValueError: ``max_file_bytes`` is not a positive integer, ``name`` is empty, an
            explicitly given directory is empty, or ``compat`` names an unknown tool.
        TypeError: ``custom_skill_dirs`` or ``compat`` is a single string, not a sequence.
    """

    def __init__(
        self,
        dsh_home: str | os.PathLike[str] | None = None,
        agents_home: str | os.PathLike[str] | None = None,
        custom_skill_dirs: Iterable[str | os.PathLike[str]] = (),
        name: str = "local",
        max_file_bytes: int = DEFAULT_MAX_SKILL_FILE_BYTES,
        fs: SkillFileSystem | None = None,
        *,
        compat: Iterable[str] = (),
        claude_home: str | os.PathLike[str] | None = None,
        watch: bool = True,
    ) -> None:
        require_positive_int("max_file_bytes", max_file_bytes)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if isinstance(custom_skill_dirs, str | bytes | os.PathLike):
            # A lone string would otherwise be scanned one character at a time.
            raise TypeError("custom_skill_dirs must be a sequence of paths, not a single path")
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
        fixed += [(self._dsh_home, USER_DSH), (self._agents_home, _USER_AGENTS)]
        if self._claude_home is not None:
            fixed.append((self._claude_home, _USER_CLAUDE))
        self._fixed_roots = tuple(
            _root(path if source == CUSTOM else os.path.join(path, "skills"), source)
            for path, source in fixed
        )
        self._watch: RootWatch | None = None
        if watch and isinstance(self._fs, LocalFileSystem):
            self._watch = RootWatch(
                [
                    WatchedRoot(root.path, skips_system=root.source == USER_DSH)
                    for root in self._fixed_roots
                ]
            )

    @property
    def name(self) -> str:
        """The provider's name in a registry."""
        return self._name

    @property
    def dsh_home(self) -> str:
        """The absolute dsh home directory (its ``skills`` child is the user-dsh root)."""
        return self._dsh_home

    @property
    def agents_home(self) -> str:
        """The absolute agents home directory (its ``skills`` child is the user-agents root)."""
        return self._agents_home

    @property
    def custom_skill_dirs(self) -> tuple[str, ...]:
        """The custom roots, absolute, in scanning order."""
        return self._custom_skill_dirs

    @property
    def compat(self) -> tuple[str, ...]:
        """The other tools whose skill directories are scanned too (``("claude",)`` or ``()``)."""
        return self._compat

    @property
    def watch_mode(self) -> str:
        """How the roots are watched: ``native``, ``polling``, ``failed``, ``starting`` or
        ``off`` (not watching: ``watch=False``, no lookup while registered yet, or closed)."""
        return "off" if self._watch is None else self._watch.mode

    def on_register(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` whenever a relevant change is seen on disk (registry hook).

        Starts nothing: watching starts with the first lookup while registered."""
        if self._watch is not None:
            self._watch.attach(handle)

    def on_dispose(self, handle: ProviderHandle) -> None:
        """Forget ``handle``; the last registration disposed stops watching (registry hook)."""
        if self._watch is not None:
            self._watch.detach(handle)

    def cacheable(self, options: SkillLookupOptions) -> bool:
        """Whether the registry may cache what `list` returned for ``options`` (registry hook).

        Without watching, yes (as before live reload: an explicit invalidation refreshes). While
        watching, only when the roots for ``options.cwd`` are watched, or are being set up to
        be (an invalidation follows as soon as they are), and watching has not failed.
        """
        return self._watch is None or self._watch.vouches_for(options.cwd)

    def close(self) -> None:
        """Stop watching for good and wait for the watcher to end. Idempotent.

        Disposing of the provider's last registration does the same, except that registering
        it again resumes watching. A closed provider still lists skills, uncached.
        """
        if self._watch is not None:
            self._watch.close()

    async def roots(self, options: SkillLookupOptions) -> tuple[SkillRoot, ...]:
        """Return the directories scanned for ``options.cwd``, in rank order.

        The project root is the nearest ancestor of ``cwd`` (itself included) that contains
        ``.git`` (a directory, or a file in a worktree), else ``cwd`` itself. Without a
        ``cwd`` (``None`` or empty) there are no project roots. A directory reachable as two
        roots (for example, when the project root is the home directory) is listed once,
        with its lower rank: the other copy could only ever be shadowed.
        """
        candidates = list(self._fixed_roots)
        if options.cwd:
            # abspath is string work, plus one getcwd() for a relative path; no disk access.
            project = await self._project_root(os.path.abspath(options.cwd))  # noqa: ASYNC240
            sources = [(".dsh", _PROJECT_DSH), (".agents", _PROJECT_AGENTS)]
            if self._claude_home is not None:
                sources.append((".claude", _PROJECT_CLAUDE))
            candidates += [_root(os.path.join(project, d, "skills"), s) for d, s in sources]
        # Stable, so custom roots keep their order; project-claude comes after our roots.
        candidates.sort(key=lambda root: root.rank)
        unique: dict[str, SkillRoot] = {}
        for root in candidates:
            unique.setdefault(os.path.normcase(root.path), root)
        return tuple(unique.values())

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Discover every well-formed skill for ``options.cwd``, logging what was wrong.

        Returns:
            Candidates ordered by root (rank order), then by entry name (code points) within
            a root. Names may repeat; the registry resolves clashes.
        """
        started = time.perf_counter()
        discovery = await self.discover(options)
        for record in discovery.diagnostics:
            log_diagnostic(_log, record, provider=self._name)
        # One event per discovery, never one per file: cheap even when debug is on.
        _log.debug(
            "skills_discovered",
            provider=self._name,
            cwd=options.cwd,
            roots=[report.root.path for report in discovery.roots],
            skills=[candidate.name for candidate in discovery.candidates],
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return list(discovery.candidates)

    async def discover(self, options: SkillLookupOptions) -> LocalDiscovery:
        """Discover the skills for ``options.cwd`` and report everything met (nothing logged)."""
        roots = await self.roots(options)
        if self._watch is None:
            return await self.scan(roots)
        # Never waited for: a lookup answered before its watch is live is caught up on by one
        # invalidation as soon as it is.
        project = [WatchedRoot(root.path) for root in roots if root.source in _PROJECT_SOURCES]
        self._watch.cover(options.cwd, project)
        discovery = await self.scan(roots)
        self._watch.start(options.cwd, project)
        return discovery

    async def diagnose(self, options: SkillLookupOptions) -> tuple[Diagnostic, ...]:
        """The problems a discovery for ``options.cwd`` meets now (`SkillRegistry.diagnose`)."""
        return (await self.discover(options)).diagnostics

    async def check_custom_dirs(self) -> tuple[Diagnostic, ...]:
        """Check that each custom directory exists and can be read, warning about each that
        does not (an agent calls this at start-up: a mistyped directory must not go unnoticed).

        Discovery reports a missing custom directory too, but only at debug level, since it
        would otherwise repeat the warning for every working directory.
        """
        custom = [root for root in self._fixed_roots if root.source == CUSTOM]
        problems: list[Diagnostic] = []
        for root, listing in zip(custom, await list_roots(self._fs, custom), strict=True):
            if isinstance(listing, Problem):
                problems.append(diagnostic(listing, root.path))
            elif listing is None:
                problems.append(root_missing(root.path))
        for problem in problems:
            log_diagnostic(_log, problem, level="warning", provider=self._name)
        return tuple(problems)

    async def scan(self, roots: Sequence[SkillRoot]) -> LocalDiscovery:
        """Discover the skills in ``roots`` (as `roots` returns them, or any others)."""
        return await scan(self._fs, roots, self._name, self._max_file_bytes)

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        """Re-read and re-parse a skill's file: the skill as it is now on disk, or ``None``
        when the file has vanished, cannot be read, or no longer parses (logged as
        ``skill_load_failed``).

        Raises:
            TypeError: The candidate did not come from a LocalSkillProvider's ``list``.
        """
        path = candidate.locator
        if not isinstance(path, str):
            raise TypeError(
                f"skill {candidate.name!r} was not listed by a LocalSkillProvider "
                f"(its locator is {type(path).__name__}, not a path)"
            )
        (content,) = await self._fs.read_files([path], self._max_file_bytes)
        parsed = parse_file(content, with_body=True)
        if not isinstance(parsed, ParsedSkill):
            reason = parsed.reason if isinstance(parsed, FileReadError) else parsed.message
            _log.warning(
                "skill_load_failed",
                provider=self._name,
                skill=candidate.name,
                path=path,
                reason=reason,
            )
            return None
        # Where the skill lives has not changed since `list`; only the file's text may have.
        fields = skill_fields(self._name, parsed, candidate.source, candidate.resource_base, path)
        return SkillDefinition(**fields, content=parsed.body)

    async def _project_root(self, cwd: str) -> str:
        directory = cwd
        while True:
            if await self._fs.exists(os.path.join(directory, ".git")):
                return directory
            parent = os.path.dirname(directory)
            if parent == directory:
                return cwd
            directory = parent


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
    explicit: str | os.PathLike[str] | None, parameter: str, variable: str, default: str
) -> str:
    if explicit is not None:
        return _absolute_dir(explicit, parameter)
    value = os.environ.get(variable, "")
    return _absolute_dir(value if value.strip() else default, variable)


def _absolute_dir(path: str | os.PathLike[str], what: str) -> str:
    text = os.fspath(path)
    if not text.strip():
        raise ValueError(f"{what}: a directory path must not be empty")
    return os.path.abspath(os.path.expanduser(text))
