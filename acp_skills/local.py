"""LocalSkillProvider: skills found on disk, in project and user directories.

Five kinds of root are scanned, in this order, which is also the rank order (lower wins a name
clash in the registry)::

    rank  source           root
    100   project-dsh      <project root>/.dsh/skills
    200   project-agents   <project root>/.agents/skills
    300   custom           each of custom_skill_dirs, in the order given
    400   user-dsh         <dsh_home>/skills          (its `.system` child is skipped)
    500   user-agents      <agents_home>/skills

With ``compat=("claude",)``, two more roots follow ours, so a skill in one of our own roots
always wins a name clash with a Claude Code skill::

    600   project-claude   <project root>/.claude/skills
    700   user-claude      <claude_home>/skills

Inside a root, a directory ``X`` is a bundle (``X/SKILL.md``) and a file ending in ``.md`` is a
flat skill; everything else is ignored. Entries are taken in code-point order of their names, so
``foo/`` comes before ``foo.md`` and, because the registry breaks rank ties by position in a
provider's list, the bundle wins a clash inside one root.

A discovery costs a constant number of filesystem round trips however many skills there are:
one ``exists`` per directory searched for ``.git``, one ``list_dir`` per root (all roots
concurrently), and one ``read_and_parse`` batch (read and parse) for every skill file found.

A bad file never fails a request: it is left out, and what discovery met is one
`acp_skills.diagnostics.Diagnostic` record each (a skipped file, an unreadable root, a name that
differs from its directory, an unknown frontmatter key, ...). ``list`` logs those records
(``skill_file_skipped`` with ``path`` and ``reason``, and so on); ``discover`` returns them, with
every root and how many skills it gave, for the command line and the agent to show.

While registered, from its first lookup on, the provider watches its roots (`acp_skills.watch`)
and invalidates its registration when a skill is added, changed, renamed or removed on disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeAlias

import anyio
import structlog

from ._collector import collection_paused
from .diagnostics import (
    Diagnostic,
    file_diagnostics,
    log_diagnostic,
    root_missing,
    root_unreadable,
)
from .frontmatter import ParsedSkill, SkillFileProblem, decode_skill_bytes, parse_skill_file
from .fs import DirEntry, FileReadError, LocalFileSystem, SkillFileSystem
from .model import (
    SKILL_FILE_NAME,
    DirectoryResource,
    ResourceBase,
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
]

DEFAULT_MAX_SKILL_FILE_BYTES = 1_048_576

_log = structlog.get_logger(__name__)

_PROJECT_DSH: Final = "project-dsh"
_PROJECT_AGENTS: Final = "project-agents"
_CUSTOM: Final = "custom"
_USER_DSH: Final = "user-dsh"
_USER_AGENTS: Final = "user-agents"
_PROJECT_CLAUDE: Final = "project-claude"
# The roots found from a session's cwd (watched per project, with a bound).
_PROJECT_SOURCES: Final = (_PROJECT_DSH, _PROJECT_AGENTS, _PROJECT_CLAUDE)
_USER_CLAUDE: Final = "user-claude"

COMPAT_CLAUDE: Final = "claude"
"""The ``compat`` value that adds Claude Code's skill directories (``.claude/skills``)."""
_COMPAT_VALUES: Final = (COMPAT_CLAUDE,)

# Only the user's own dsh root has a `.system` child to skip: it holds skills the tool itself
# installs and manages, which are not meant to be discovered as ordinary user skills. A
# project may legitimately name a skill directory `.system`, so other roots keep it.
_SYSTEM_DIR: Final = ".system"
_FLAT_SUFFIX: Final = ".md"

# What one discovery met, in order (inside the class, `list` names the method).
_Report: TypeAlias = list[Diagnostic]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillRoot:
    """A directory the local provider scans.

    Attributes:
        path: The absolute directory path (symbolic links not resolved).
        source: What kind of root it is (``project-dsh``, ``custom``, ``user-agents``, ...).
        rank: The rank its skills get; lower wins a name clash.
    """

    path: str
    source: str
    rank: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RootReport:
    """What one discovery found in one root.

    Attributes:
        root: The root.
        exists: Whether it is a directory (a root that cannot be read still exists).
        skills: How many valid skills it gave, shadowed ones included.
    """

    root: SkillRoot
    exists: bool
    skills: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalDiscovery:
    """One discovery, with everything it met.

    Attributes:
        roots: Every root considered, in rank order.
        candidates: What ``list`` returns: the valid skills, by root then entry name.
        diagnostics: One record per problem, roots first, then entries, then files.
    """

    roots: tuple[RootReport, ...]
    candidates: tuple[SkillCandidate, ...]
    diagnostics: tuple[Diagnostic, ...]


class _SkillFile(NamedTuple):
    """A file discovery will read: where it is and what it would become.

    A named tuple, not a frozen dataclass: one is built per file listed, and a tuple is built
    several times faster.
    """

    root: SkillRoot
    path: str
    resource_dir: str
    # The name the file's location suggests: its bundle directory's, or a flat file's.
    expected_name: str


# Filled in by one discovery (inside the class, `list` names the method).
_Flags: TypeAlias = list[bool]
_Files: TypeAlias = list[_SkillFile]


class LocalSkillProvider:
    """Discovers skills in project, custom and user directories on a (local) filesystem.

    The skill's identity is the ``name`` in its frontmatter, never its file or directory name.
    ``get`` re-reads and re-parses the file on every call, so an edited body needs no
    invalidation.

    Args:
        dsh_home: The dsh home directory; defaults to ``$DSH_HOME``, else ``~/.dsh``.
        agents_home: The agents home directory; defaults to ``$DSH_AGENTS_HOME``, else
            ``~/.agents``.
        custom_skill_dirs: Extra skill roots, scanned in order, all with rank 300.
        name: The provider's name in a registry.
        max_file_bytes: Skill files larger than this are skipped with a warning.
        fs: The filesystem to read; defaults to the local disk.
        compat: Other tools whose skill directories are scanned too, after ours: only
            ``"claude"`` (`COMPAT_CLAUDE`) so far, which adds ``<project>/.claude/skills``
            (rank 600, source ``project-claude``) and ``<claude_home>/skills`` (rank 700,
            source ``user-claude``).
        claude_home: Claude Code's home directory; defaults to ``$CLAUDE_CONFIG_DIR``, else
            ``~/.claude``. Only used with ``compat=("claude",)``.
        watch: Watch the roots for changes while registered (live reload). Only the local disk
            is watched: with another ``fs`` this does nothing.

    Environment variables are read here, at construction. Empty or whitespace-only variables
    count as unset. Every directory has ``~`` expanded and is made absolute (relative paths
    against the current working directory, now); symbolic links are not resolved.

    Raises:
        ValueError: ``max_file_bytes`` is not a positive integer, ``name`` is empty, or an
            explicitly given directory is an empty string.
        ValueError: ``compat`` names a tool other than ``"claude"``.
        TypeError: ``custom_skill_dirs`` or ``compat`` is a single string instead of a
            sequence.
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
        self._fixed_roots = (
            *(SkillRoot(path=path, source=_CUSTOM, rank=300) for path in self._custom_skill_dirs),
            SkillRoot(path=os.path.join(self._dsh_home, "skills"), source=_USER_DSH, rank=400),
            SkillRoot(
                path=os.path.join(self._agents_home, "skills"), source=_USER_AGENTS, rank=500
            ),
        )
        if self._claude_home is not None:
            self._fixed_roots += (
                SkillRoot(
                    path=os.path.join(self._claude_home, "skills"), source=_USER_CLAUDE, rank=700
                ),
            )
        self._watch: RootWatch | None = None
        if watch and isinstance(self._fs, LocalFileSystem):
            self._watch = RootWatch(
                [
                    WatchedRoot(root.path, skips_system=root.source == _USER_DSH)
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
        candidates: list[SkillRoot] = []
        if options.cwd:
            # abspath is string work, plus one getcwd() for a relative path; no disk access.
            cwd = os.path.abspath(options.cwd)  # noqa: ASYNC240
            project = await self._project_root(cwd)
            candidates.append(
                SkillRoot(
                    path=os.path.join(project, ".dsh", "skills"), source=_PROJECT_DSH, rank=100
                )
            )
            candidates.append(
                SkillRoot(
                    path=os.path.join(project, ".agents", "skills"),
                    source=_PROJECT_AGENTS,
                    rank=200,
                )
            )
            if self._claude_home is not None:
                candidates.append(
                    SkillRoot(
                        path=os.path.join(project, ".claude", "skills"),
                        source=_PROJECT_CLAUDE,
                        rank=600,
                    )
                )
        candidates.extend(self._fixed_roots)
        # Rank order (stable, so custom roots keep theirs): project-claude, found with the
        # project, comes after every root of ours.
        candidates.sort(key=lambda root: root.rank)
        seen: set[str] = set()
        unique: list[SkillRoot] = []
        for root in candidates:
            key = os.path.normcase(root.path)
            if key not in seen:
                seen.add(key)
                unique.append(root)
        return tuple(unique)

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Discover every well-formed skill for ``options.cwd``, logging what was wrong.

        Returns:
            Candidates ordered by root (rank order), then by entry name (code points) within
            a root. Names may repeat; the registry resolves clashes.
        """
        started = time.perf_counter()
        discovery = await self.discover(options)
        for diagnostic in discovery.diagnostics:
            log_diagnostic(_log, diagnostic, provider=self._name)
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
        custom = [root for root in self._fixed_roots if root.source == _CUSTOM]
        problems: list[Diagnostic] = []
        for root, listing in zip(custom, await self._list_roots(custom), strict=True):
            if isinstance(listing, Diagnostic):
                problems.append(listing)
            elif listing is None:
                problems.append(root_missing(root.path))
        for problem in problems:
            log_diagnostic(_log, problem, level="warning", provider=self._name)
        return tuple(problems)

    async def scan(self, roots: Sequence[SkillRoot]) -> LocalDiscovery:
        """Discover the skills in ``roots`` (as `roots` returns them, or any others)."""
        listings = await self._list_roots(roots)
        report: list[Diagnostic] = []
        exists: list[bool] = []
        files: list[_SkillFile] = []
        # Synchronous, and one value per file listed: no collector passes meanwhile.
        with collection_paused():
            self._files_of(roots, listings, report, exists, files)
        # Parsed as they are read (in the worker thread, for the local disk): only the
        # frontmatter is kept, never a thousand bodies at once.
        contents = await self._fs.read_and_parse(
            [f.path for f in files], self._max_file_bytes, _parse_for_listing
        )
        if len(contents) != len(files):
            raise RuntimeError(
                f"the filesystem returned {len(contents)} results for {len(files)} files"
            )
        candidates: list[SkillCandidate] = []
        found: dict[SkillRoot, int] = {}
        # Thousands of small values are built here at once: the collector would rescan them
        # again and again for nothing (see _collector.py).
        with collection_paused():
            for skill_file, content in zip(files, contents, strict=True):
                parsed = self._parse_discovered(skill_file, content, report)
                if parsed is not None:
                    candidates.append(self._candidate(skill_file, parsed))
                    found[skill_file.root] = found.get(skill_file.root, 0) + 1
        return LocalDiscovery(
            roots=tuple(
                RootReport(root=root, exists=root_exists, skills=found.get(root, 0))
                for root, root_exists in zip(roots, exists, strict=True)
            ),
            candidates=tuple(candidates),
            diagnostics=tuple(report),
        )

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        """Re-read and re-parse a skill's file, returning the skill as it is now on disk.

        Returns:
            The definition (its ``content`` is the body), or ``None`` when the file has
            vanished, cannot be read, or no longer parses (logged as ``skill_load_failed``).

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
        parsed = _parse_read(content)
        if not isinstance(parsed, ParsedSkill):
            _log.warning(
                "skill_load_failed",
                provider=self._name,
                skill=candidate.name,
                path=path,
                reason=parsed.reason,
            )
            return None
        return SkillDefinition(
            # Where the skill lives has not changed since `list`; only the file's text may have.
            **self._fields(parsed, candidate.source, candidate.resource_base, path),
            content=parsed.body,
        )

    async def _project_root(self, cwd: str) -> str:
        directory = cwd
        while True:
            if await self._fs.exists(os.path.join(directory, ".git")):
                return directory
            parent = os.path.dirname(directory)
            if parent == directory:
                return cwd
            directory = parent

    def _files_of(
        self,
        roots: Sequence[SkillRoot],
        listings: Sequence[Sequence[DirEntry] | Diagnostic | None],
        report: _Report,
        exists: _Flags,
        files: _Files,
    ) -> None:
        """Collect the skill files of each root's listing, and whether each root exists."""
        for root, listing in zip(roots, listings, strict=True):
            entries: Sequence[DirEntry] = ()
            if isinstance(listing, Diagnostic):
                report.append(listing)
            elif listing is None:
                # A missing root is normal (most people have no project skills); only one
                # that was asked for by name is worth a word.
                if root.source == _CUSTOM:
                    report.append(root_missing(root.path))
            else:
                entries = listing
            exists.append(listing is not None)
            files.extend(self._skill_files(root, entries, report))

    async def _list_roots(
        self, roots: Sequence[SkillRoot]
    ) -> Sequence[Sequence[DirEntry] | Diagnostic | None]:
        # Concurrently: cheap on the local disk, and a big saving on a remote workspace's
        # filesystem, where every call is a round trip. Each root's outcome is kept in its own
        # slot, so what is reported comes out in root order whichever listing finished first.
        listings: list[Sequence[DirEntry] | Diagnostic | None] = [None for _ in roots]
        failures: list[Exception | None] = [None for _ in roots]

        async def list_into(index: int, root: SkillRoot) -> None:
            try:
                listings[index] = await self._list_root(root)
            except Exception as exc:
                # Not an OSError, so the seam itself is broken. Re-raised below, outside the
                # task group, so the caller sees this exception rather than a group of them,
                # and the first root's failure wins whatever order the tasks finished in.
                failures[index] = exc

        async with anyio.create_task_group() as group:
            for index, root in enumerate(roots):
                group.start_soon(list_into, index, root)
        for failure in failures:
            if failure is not None:
                raise failure
        return listings

    async def _list_root(self, root: SkillRoot) -> Sequence[DirEntry] | Diagnostic | None:
        """The root's entries, ``None`` when it does not exist, or why it cannot be read."""
        try:
            return await self._fs.list_dir(root.path)
        except OSError as exc:
            return root_unreadable(root.path, f"cannot read directory: {exc.strerror or exc}")

    def _skill_files(
        self, root: SkillRoot, entries: Sequence[DirEntry], report: _Report
    ) -> Iterable[_SkillFile]:
        # Entry names hold no separator, so joining is concatenation (os.path.join per entry
        # shows when there are thousands).
        root_prefix = os.path.join(root.path, "")
        bundle_suffix = os.sep + SKILL_FILE_NAME
        # Code-point order of names; the registry's tie-break depends on this order.
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name == _SYSTEM_DIR and root.source == _USER_DSH:
                continue
            entry_path = root_prefix + entry.name
            if entry.kind == "dir":
                yield _SkillFile(root, entry_path + bundle_suffix, entry_path, entry.name)
            elif entry.kind == "file":
                if entry.name.endswith(_FLAT_SUFFIX):
                    yield _SkillFile(
                        root, entry_path, root.path, entry.name.removesuffix(_FLAT_SUFFIX)
                    )
            elif entry.kind == "broken_link":
                report.extend(
                    file_diagnostics(entry_path, FileReadError(reason="broken symbolic link"))
                )

    def _parse_discovered(
        self,
        skill_file: _SkillFile,
        content: ParsedSkill | SkillFileProblem | FileReadError,
        report: _Report,
    ) -> ParsedSkill | None:
        # A directory without SKILL.md is no mistake (a root may hold shared helper
        # directories; a flat file can vanish between listing and reading): that record is an
        # `info`, logged at debug level.
        diagnostics = file_diagnostics(
            skill_file.path, content, expected_name=skill_file.expected_name
        )
        if diagnostics:
            report.extend(diagnostics)
        return content if isinstance(content, ParsedSkill) else None

    def _candidate(self, skill_file: _SkillFile, parsed: ParsedSkill) -> SkillCandidate:
        # The fields of `_fields`, given directly: a dict per skill shows with thousands.
        root = skill_file.root
        path = skill_file.path
        return SkillCandidate(
            name=parsed.name,
            description=parsed.description,
            when_to_use=parsed.when_to_use,
            disable_model_invocation=parsed.disable_model_invocation,
            user_invocable=parsed.user_invocable,
            source=root.source,
            provider=self._name,
            resource_base=DirectoryResource(path=skill_file.resource_dir),
            path=path,
            metadata=parsed.metadata,
            argument_hint=parsed.argument_hint,
            rank=root.rank,
            # The path is all `get` needs to find the file again.
            locator=path,
        )

    def _fields(
        self, parsed: ParsedSkill, source: str, base: ResourceBase | None, path: str
    ) -> dict[str, Any]:
        """What a candidate and a definition of one parsed file have in common."""
        return {
            "name": parsed.name,
            "description": parsed.description,
            "when_to_use": parsed.when_to_use,
            "disable_model_invocation": parsed.disable_model_invocation,
            "user_invocable": parsed.user_invocable,
            "source": source,
            "provider": self._name,
            "resource_base": base,
            "path": path,
            "metadata": parsed.metadata,
            "argument_hint": parsed.argument_hint,
        }


def _parse_read(
    content: bytes | FileReadError, *, with_body: bool = True
) -> ParsedSkill | SkillFileProblem:
    if isinstance(content, FileReadError):
        return SkillFileProblem(reason=content.reason)
    text = decode_skill_bytes(content)
    if isinstance(text, SkillFileProblem):
        return text
    return parse_skill_file(text, with_body=with_body)


def _parse_for_listing(data: bytes) -> ParsedSkill | SkillFileProblem:
    # Discovery needs only the frontmatter: no body is kept.
    return _parse_read(data, with_body=False)


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
