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

While registered, the provider watches its roots (`acp_skills.watch`) and invalidates its
registration when a skill is added, changed, renamed or removed on disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeAlias

import anyio
import structlog

from .diagnostics import Diagnostic, diagnostic, file_diagnostics, log_diagnostic, root_missing
from .errors import Problem
from .frontmatter import ParsedSkill, decode_skill_bytes, parse_skill_file
from .fs import DirEntry, FileReadError, LocalFileSystem, SkillFileSystem, read_local_file
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
    "unreadable_root",
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
_BROKEN_LINK: Final = Problem("broken-link", "broken symbolic link")

# What one discovery met, in order (inside the class, `list` names the method).
_Report: TypeAlias = list[Diagnostic]
_Listing: TypeAlias = Sequence[DirEntry] | Problem | None
_SOURCE_RANKS: Final = {
    _PROJECT_DSH: 100,
    _PROJECT_AGENTS: 200,
    _CUSTOM: 300,
    _USER_DSH: 400,
    _USER_AGENTS: 500,
    _PROJECT_CLAUDE: 600,
    _USER_CLAUDE: 700,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillRoot:
    """A directory the local provider scans: its absolute path (links not resolved), what
    kind of root it is (``project-dsh``, ``custom``, ...) and the rank its skills get."""

    path: str
    source: str
    rank: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RootReport:
    """What one discovery found in one root: whether it is a directory (an unreadable one
    still is) and how many valid skills it gave, shadowed ones included."""

    root: SkillRoot
    exists: bool
    skills: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalDiscovery:
    """One discovery: every root considered (rank order), the valid skills (by root, then
    entry name) and one diagnostic per problem (roots, then entries, then files)."""

    roots: tuple[RootReport, ...]
    candidates: tuple[SkillCandidate, ...]
    diagnostics: tuple[Diagnostic, ...]


class _SkillFile(NamedTuple):
    """A file discovery will read, and the name its location suggests (its bundle's, or a
    flat file's). A named tuple: one per file listed, several times cheaper to build."""

    root: SkillRoot
    path: str
    resource_dir: str
    expected_name: str


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
        fixed = [(path, _CUSTOM) for path in self._custom_skill_dirs]
        fixed += [(self._dsh_home, _USER_DSH), (self._agents_home, _USER_AGENTS)]
        if self._claude_home is not None:
            fixed.append((self._claude_home, _USER_CLAUDE))
        self._fixed_roots = tuple(
            _root(path if source == _CUSTOM else os.path.join(path, "skills"), source)
            for path, source in fixed
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
        ``off`` (not watching: ``watch=False``, not registered, or closed)."""
        return "off" if self._watch is None else self._watch.mode

    def on_register(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` whenever a relevant change is seen on disk (registry hook)."""
        if self._watch is not None:
            self._watch.attach(handle)

    def on_dispose(self, handle: ProviderHandle) -> None:
        """Forget ``handle``; the last registration disposed stops watching (registry hook)."""
        if self._watch is not None:
            self._watch.detach(handle)

    def cacheable(self, options: SkillLookupOptions) -> bool:
        """Whether the registry may cache what `list` returned for ``options`` (registry hook).

        Without watching, yes (as before live reload: an explicit invalidation refreshes). While
        watching, only when the roots for ``options.cwd`` are being watched right now.
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
        if self._watch is not None:
            # Watched before scanning, so nothing that changes after the scan goes unseen.
            await self._watch.cover(
                options.cwd,
                [WatchedRoot(root.path) for root in roots if root.source in _PROJECT_SOURCES],
            )
        return await self.scan(roots)

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
            if isinstance(listing, Problem):
                problems.append(diagnostic(listing, root.path))
            elif listing is None:
                problems.append(root_missing(root.path))
        for problem in problems:
            log_diagnostic(_log, problem, level="warning", provider=self._name)
        return tuple(problems)

    async def scan(self, roots: Sequence[SkillRoot]) -> LocalDiscovery:
        """Discover the skills in ``roots`` (as `roots` returns them, or any others)."""
        report: list[Diagnostic] = []
        files: list[_SkillFile] = []
        listings = await self._list_roots(roots)
        for root, listing in zip(roots, listings, strict=True):
            if isinstance(listing, Problem):
                report.append(diagnostic(listing, root.path))
            elif listing is None and root.source == _CUSTOM:
                # A missing root is normal (most people have no project skills); only one
                # that was asked for by name is worth a word.
                report.append(root_missing(root.path))
            elif listing is not None:
                files.extend(_skill_files(root, listing, report))
        outcomes = await self._read_and_parse([f.path for f in files])
        candidates: list[SkillCandidate] = []
        found = dict.fromkeys(roots, 0)
        for skill_file, outcome in zip(files, outcomes, strict=True):
            # A directory without SKILL.md is no mistake (shared helpers; a flat file can
            # vanish between listing and reading): that record is an `info`.
            report.extend(
                file_diagnostics(skill_file.path, outcome, expected_name=skill_file.expected_name)
            )
            if isinstance(outcome, ParsedSkill):
                root = skill_file.root
                candidates.append(
                    SkillCandidate(
                        **self._fields(
                            outcome, root.source, skill_file.resource_dir, skill_file.path
                        ),
                        rank=root.rank,
                        locator=skill_file.path,  # all `get` needs to find the file again
                    )
                )
                found[root] += 1
        return LocalDiscovery(
            roots=tuple(
                RootReport(root=root, exists=listing is not None, skills=found[root])
                for root, listing in zip(roots, listings, strict=True)
            ),
            candidates=tuple(candidates),
            diagnostics=tuple(report),
        )

    async def _read_and_parse(
        self, paths: Sequence[str]
    ) -> Sequence[ParsedSkill | Problem | FileReadError]:
        """Each file's frontmatter, parsed off the event loop (a thousand take tens of ms),
        after the filesystem's batch, never inside it."""
        if type(self._fs) is LocalFileSystem:
            # One hop, each file parsed as soon as it is read: a thousand files' bytes held at
            # once cost fresh memory (page faults) that rivals the reads themselves.
            return await anyio.to_thread.run_sync(_read_local, paths, self._max_file_bytes)
        contents = await self._fs.read_files(paths, self._max_file_bytes)
        if len(contents) != len(paths):
            raise RuntimeError(
                f"the filesystem returned {len(contents)} results for {len(paths)} files"
            )
        return await anyio.to_thread.run_sync(_parse_all, contents)

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
        parsed = _parse(content, with_body=True)
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
        fields = self._fields(parsed, candidate.source, candidate.resource_base, path)
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

    async def _list_roots(self, roots: Sequence[SkillRoot]) -> Sequence[_Listing]:
        """Each root's entries, ``None`` when it does not exist, or why it cannot be read.

        Concurrently: cheap on the local disk, a big saving where every call is a round trip.
        Each outcome has its own slot, so reports come out in root order.
        """
        listings: list[_Listing] = [None for _ in roots]
        failures: list[Exception | None] = [None for _ in roots]

        async def list_into(index: int, path: str) -> None:
            try:
                listings[index] = await self._fs.list_dir(path)
            except OSError as exc:
                listings[index] = unreadable_root(exc)
            except Exception as exc:
                # The seam itself is broken. Re-raised below, outside the task group, so the
                # caller sees this exception rather than a group, the first root's winning.
                failures[index] = exc

        async with anyio.create_task_group() as group:
            for index, root in enumerate(roots):
                group.start_soon(list_into, index, root.path)
        for failure in failures:
            if failure is not None:
                raise failure
        return listings

    def _fields(
        self, parsed: ParsedSkill, source: str, base: ResourceBase | str | None, path: str
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
            "resource_base": DirectoryResource(path=base) if isinstance(base, str) else base,
            "path": path,
            "metadata": parsed.metadata,
            "argument_hint": parsed.argument_hint,
        }


def _root(path: str, source: str) -> SkillRoot:
    return SkillRoot(path=path, source=source, rank=_SOURCE_RANKS[source])


def _skill_files(
    root: SkillRoot, entries: Sequence[DirEntry], report: _Report
) -> Iterable[_SkillFile]:
    # Entry names hold no separator: joining is concatenation (os.path.join per entry shows
    # when there are thousands).
    prefix = os.path.join(root.path, "")
    bundle_suffix = os.sep + SKILL_FILE_NAME
    # Code-point order of names; the registry's tie-break depends on this order.
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name == _SYSTEM_DIR and root.source == _USER_DSH:
            continue
        path = prefix + entry.name
        if entry.kind == "dir":
            yield _SkillFile(root, path + bundle_suffix, path, entry.name)
        elif entry.kind == "file" and entry.name.endswith(_FLAT_SUFFIX):
            yield _SkillFile(root, path, root.path, entry.name.removesuffix(_FLAT_SUFFIX))
        elif entry.kind == "broken_link":
            report.append(diagnostic(_BROKEN_LINK, path))


def unreadable_root(error: OSError) -> Problem:
    """The problem of a skill root (or a directory to validate) that cannot be listed."""
    return Problem("root-unreadable", f"cannot read directory: {error.strerror or error}")


def _parse(
    content: bytes | FileReadError, *, with_body: bool = False
) -> ParsedSkill | Problem | FileReadError:
    if isinstance(content, FileReadError):
        return content
    text = decode_skill_bytes(content)
    return text if isinstance(text, Problem) else parse_skill_file(text, with_body=with_body)


def _parse_all(
    contents: Sequence[bytes | FileReadError],
) -> list[ParsedSkill | Problem | FileReadError]:
    return [_parse(content) for content in contents]  # discovery keeps no bodies


def _read_local(
    paths: Sequence[str], max_bytes: int
) -> list[ParsedSkill | Problem | FileReadError]:
    return [_parse(read_local_file(path, max_bytes)) for path in paths]


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
