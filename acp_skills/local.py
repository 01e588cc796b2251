"""LocalSkillProvider: skills on disk, in project, custom and user roots (contract §5), read
through the filesystem seam; while registered, it watches its roots (`watch`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias, cast

import anyio.to_thread

from .diagnostics import Diagnostic, diagnostic, file_diagnostics, log_diagnostic, root_missing
from .errors import Problem, ReadError
from .frontmatter import ParsedSkill, build_skill, parse_skill_bytes
from .fs import DirEntry, LocalFileSystem, SkillFileSystem, read_local_file, why_no_skill_file
from .model import (
    SKILL_FILE_NAME,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    require_positive_int,
)
from .project import PROJECT_SKILL_DIRS, find_project
from .quiet_log import get_logger
from .watch import RootWatch, fresh_problems

if TYPE_CHECKING:  # a type only: the registry is the layer above
    from .registry import ProviderHandle

__all__ = ["LocalDiscovery", "LocalSkillProvider", "RootReport", "SkillRoot", "unreadable_root"]

_log = get_logger(__name__)

CUSTOM: Final = "custom"
USER_DSH: Final = "user-dsh"
COMPAT_CLAUDE: Final = "claude"  # the `compat` value that adds Claude Code's `.claude/skills`
_PROJECT_SOURCES: Final = tuple(PROJECT_SKILL_DIRS)  # found from a lookup's cwd
# Examples (an agent's bundled skills) rank with the custom roots, after them.
_SOURCE_RANKS: Final = {"project-dsh": 100, "project-agents": 200, CUSTOM: 300, "examples": 300}
_SOURCE_RANKS.update({USER_DSH: 400, "user-agents": 500, "project-claude": 600, "user-claude": 700})
# An additional directory's project roots: after the cwd's project's, before the custom roots,
# in the order the directories were given (stable sort); its `.claude/skills` at the cwd's rank.
_ADDITIONAL_RANKS: Final = {"project-dsh": 250, "project-agents": 250, "project-claude": 600}
DEFAULT_MAX_FILE_BYTES: Final = 1_048_576  # a skill file larger than this is skipped
_SYSTEM_DIR: Final = ".system"  # the user dsh root's managed skills, skipped
_BROKEN_LINK: Final = Problem("broken-link", "broken symbolic link")
# Markdown that sits beside skills in a root and is never one (compared upper-cased).
_DOCS: Final = ("README", "LICENSE", "CHANGELOG", "CONTRIBUTING", "CODE_OF_CONDUCT", "SECURITY")
_NOT_SKILLS: Final = frozenset(f"{name}.MD" for name in _DOCS)
_Listing: TypeAlias = Sequence[DirEntry] | Problem | None
# A file to read: its root's index, its path, its resource directory, the name its place gives.
_SkillFile: TypeAlias = tuple[int, str, str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillRoot:
    """A directory the local provider scans, its kind (``custom``, ...) and its skills' rank."""

    path: str
    source: str
    rank: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RootReport:
    """One root in one discovery: whether it is a directory and its valid skills' count."""

    root: SkillRoot
    exists: bool
    skills: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalDiscovery:
    """One discovery: every root, the valid skills and one diagnostic per problem."""

    roots: tuple[RootReport, ...]
    candidates: tuple[SkillCandidate, ...]
    diagnostics: tuple[Diagnostic, ...]


class LocalSkillProvider:
    """Discovers skills in project, custom and user directories (contract §5)."""

    def __init__(
        self,
        dsh_home: str | os.PathLike[str] | None = None,
        agents_home: str | os.PathLike[str] | None = None,
        custom_skill_dirs: Iterable[str | os.PathLike[str]] = (),
        name: str = "local",
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        fs: SkillFileSystem | None = None,
        *,
        compat: Iterable[str] = (),
        claude_home: str | os.PathLike[str] | None = None,
        watch: bool = True,
        example_skill_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        require_positive_int("max_file_bytes", max_file_bytes)
        for given, what in ((custom_skill_dirs, "custom"), (example_skill_dirs, "example")):
            if isinstance(given, str | bytes | os.PathLike):  # else read a character at a time
                raise TypeError(f"{what}_skill_dirs must be a sequence of paths, not a single path")
        if isinstance(compat, str | bytes):
            raise TypeError('compat must be a sequence of names, such as ("claude",)')
        self.compat: Final = tuple(dict.fromkeys(compat))
        if unknown := [tool for tool in self.compat if tool != COMPAT_CLAUDE]:
            raise ValueError(f"compat: unknown tool {unknown[0]!r} (known: {COMPAT_CLAUDE})")
        self.name: Final = name
        self._max_file_bytes = max_file_bytes
        self._fs: SkillFileSystem = LocalFileSystem() if fs is None else fs
        self.dsh_home: Final = _home_dir(dsh_home, "dsh_home", "DSH_HOME", "~/.dsh")
        self.agents_home: Final = _home_dir(
            agents_home, "agents_home", "DSH_AGENTS_HOME", "~/.agents"
        )
        self.custom_skill_dirs: Final = tuple(
            _absolute_dir(path, "custom_skill_dirs") for path in custom_skill_dirs
        )
        # Roots that do not depend on the caller's cwd, already in rank order.
        fixed = [(path, CUSTOM) for path in self.custom_skill_dirs]
        fixed += [(_absolute_dir(p, "example_skill_dirs"), "examples") for p in example_skill_dirs]
        fixed += [(os.path.join(self.dsh_home, "skills"), USER_DSH)]
        fixed += [(os.path.join(self.agents_home, "skills"), "user-agents")]
        if COMPAT_CLAUDE in self.compat:
            claude = _home_dir(claude_home, "claude_home", "CLAUDE_CONFIG_DIR", "~/.claude")
            fixed.append((os.path.join(claude, "skills"), "user-claude"))
        self._fixed_roots = tuple(
            SkillRoot(path=p, source=s, rank=_SOURCE_RANKS[s]) for p, s in fixed
        )
        self._logged: dict[Diagnostic, None] = {}  # the problems logged, each once
        # See `discover`: the latest discovery, by when it began (a count of discoveries).
        self._latest: tuple[int, SkillLookupOptions, LocalDiscovery] | None = None
        self._begun = 0
        watching = watch and isinstance(self._fs, LocalFileSystem)  # only the local disk
        self._watch = RootWatch([r.path for r in self._fixed_roots], enabled=watching)

    @property
    def watch_mode(self) -> str:
        """``native``, ``polling``, ``failed``, ``starting`` or ``off`` (not watching)."""
        return self._watch.mode

    def on_register(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` on relevant changes, from the first lookup on."""
        self._watch.attach(handle)

    def on_dispose(self, handle: ProviderHandle) -> None:
        """Forget ``handle``; the last registration disposed stops watching."""
        self._watch.detach(handle)

    def cacheable(self, options: SkillLookupOptions) -> bool:
        """Whether the registry may cache `list` for ``options``."""
        return self._watch.vouches_for(options)

    def close(self) -> None:
        """Stop watching for good and wait for the watcher to end (idempotent)."""
        self._watch.close()

    async def roots(self, options: SkillLookupOptions) -> tuple[SkillRoot, ...]:
        """The directories scanned for ``options`` in rank order, each listed once."""
        extra = options.additional_directories
        return await anyio.to_thread.run_sync(self._roots_at, options.cwd, extra)

    def _roots_at(self, cwd: str | None, additional: tuple[str, ...]) -> tuple[SkillRoot, ...]:
        candidates = list(self._fixed_roots)
        sources = _PROJECT_SOURCES if COMPAT_CLAUDE in self.compat else _PROJECT_SOURCES[:2]
        # The projects trust judges (contract §13a), on the local disk whatever `fs` is.
        places = (
            [(cwd, _SOURCE_RANKS), *((d, _ADDITIONAL_RANKS) for d in additional)] if cwd else []
        )
        for directory, ranks in places:
            found = find_project(directory)
            candidates += [
                SkillRoot(path=found.skill_root(s), source=s, rank=ranks[s]) for s in sources
            ]
        # A directory reached as two roots is scanned once, as the person's own root first
        # (contract §13a: a project at $HOME). Stable sorts: custom roots keep their order.
        unique: dict[str, SkillRoot] = {}
        for root in sorted(candidates, key=lambda root: root.source in _PROJECT_SOURCES):
            unique.setdefault(os.path.normcase(os.path.realpath(root.path)), root)
        return tuple(sorted(unique.values(), key=lambda root: root.rank))

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Every well-formed skill for ``options.cwd`` (by root, then name), logging problems;
        a new discovery each time: the registry lists when what it holds may be stale."""
        self._latest = None
        discovery = await self.discover(options)
        roots = [report.root.path for report in discovery.roots]
        for record in fresh_problems(self._logged, discovery.diagnostics, roots):
            log_diagnostic(_log, record, provider=self.name)
        _log.debug(
            "skills_discovered",
            provider=self.name,
            cwd=options.cwd,
            roots=roots,
            skills=[candidate.name for candidate in discovery.candidates],
        )
        return list(discovery.candidates)

    async def discover(self, options: SkillLookupOptions) -> LocalDiscovery:
        """What discovery for ``options.cwd`` met (nothing logged): the latest discovery for
        ``options`` (that of the registry's catalog: `list` discovers anew) while `cacheable`
        vouches for it, as for the catalog; else a new one, kept unless one begun after it was."""
        latest = self._latest
        if latest is not None and latest[1] == options and self.cacheable(options):
            return latest[2]
        self._begun = begun = self._begun + 1
        roots = await self.roots(options)
        discovery = await self.scan(roots)
        if (latest := self._latest) is None or latest[0] < begun:
            self._latest = (begun, options, discovery)
        self._watch.start(options, [root.path for root in roots if root.source in _PROJECT_SOURCES])
        return discovery

    async def diagnose(self, options: SkillLookupOptions) -> tuple[Diagnostic, ...]:
        """The problems of the discovery for ``options.cwd`` (`discover`)."""
        return (await self.discover(options)).diagnostics

    async def check_custom_dirs(self) -> tuple[Diagnostic, ...]:
        """Warn about each custom directory that is missing or unreadable (for start-up)."""
        custom = [root for root in self._fixed_roots if root.source == CUSTOM]
        found = [_root_problem(root, await _list_root(self._fs, root.path)) for root in custom]
        problems = tuple(problem for problem in found if problem is not None)
        for problem in problems:
            log_diagnostic(_log, problem, level="warning", provider=self.name)
        return problems

    async def scan(self, roots: Sequence[SkillRoot]) -> LocalDiscovery:
        """Discover the skills in ``roots`` (as `roots` returns them, or any others)."""
        listings = [await _list_root(self._fs, root.path) for root in roots]
        report: list[Diagnostic] = []
        files = _skill_files(roots, listings, report)
        paths, max_bytes = [path for _, path, _, _ in files], self._max_file_bytes
        contents: Iterable[bytes | ReadError]
        if local := type(self._fs) is LocalFileSystem:
            # Read lazily in the parsing hop: all bytes held at once cost a sixth more.
            contents = (read_local_file(path, max_bytes) for path in paths)
        else:
            contents = await self._fs.read_files(paths, max_bytes)
        # Values only, never `self`: an idle worker keeps its last function, and the provider.
        judged = (self.name, roots, listings, files, report, contents, local)
        return await anyio.to_thread.run_sync(_judge, *judged)

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        """The skill as its file is now, or ``None`` (logged) when it no longer reads or parses."""
        path = cast("str", candidate.locator)
        (content,) = await self._fs.read_files([path], self._max_file_bytes)
        parsed = parse_skill_bytes(content, with_body=True)
        if not isinstance(parsed, ParsedSkill):
            reason = parsed.reason if isinstance(parsed, ReadError) else parsed.message
            what = {"provider": self.name, "skill": candidate.name, "path": path}
            _log.warning("skill_load_failed", **what, reason=reason)
            return None
        base = candidate.resource_base
        return build_skill(
            SkillDefinition, self.name, parsed, candidate.source, base, path, content=parsed.body
        )


def _judge(
    provider: str,
    roots: Sequence[SkillRoot],
    listings: Sequence[_Listing],
    files: Sequence[_SkillFile],
    report: list[Diagnostic],
    contents: Iterable[bytes | ReadError],
    local: bool,
) -> LocalDiscovery:
    # In a worker thread: parsing, on the local disk reading too (lazily, through `contents`).
    found = [0 for _ in roots]
    candidates = []
    for (index, path, resource_dir, expected), content in zip(files, contents, strict=True):
        outcome = parse_skill_bytes(content)
        absent = isinstance(outcome, ReadError) and outcome.failure == "not_found"
        if why := why_no_skill_file(resource_dir) if absent and local else None:
            report.append(diagnostic(why, path))
        else:
            report.extend(file_diagnostics(path, outcome, expected_name=expected))
        if isinstance(outcome, ParsedSkill):
            root = roots[index]
            found[index] += 1
            skill = (SkillCandidate, provider, outcome, root.source, resource_dir, path)
            candidates.append(build_skill(*skill, rank=root.rank, locator=path))  # for `get`
    return LocalDiscovery(
        roots=tuple(
            RootReport(root=root, exists=listing is not None, skills=count)
            for root, listing, count in zip(roots, listings, found, strict=True)
        ),
        candidates=tuple(candidates),
        diagnostics=tuple(report),
    )


def _skill_files(
    roots: Sequence[SkillRoot], listings: Sequence[_Listing], report: list[Diagnostic]
) -> list[_SkillFile]:
    # The files of each root to read, in order; what is skipped with a word goes in report.
    files: list[_SkillFile] = []
    for index, (root, listing) in enumerate(zip(roots, listings, strict=True)):
        if (problem := _root_problem(root, listing)) is not None:
            report.append(problem)
        elif listing is not None and not isinstance(listing, Problem):
            prefix = os.path.join(root.path, "")  # entry names hold no separator
            # Code-point order of names; the registry's tie-break depends on this order.
            for entry in sorted(listing, key=lambda e: e.name):
                name = entry.name
                if name == _SYSTEM_DIR and root.source == USER_DSH:
                    continue
                path = prefix + name
                if entry.kind == "dir":
                    files.append((index, path + os.sep + SKILL_FILE_NAME, path, name))
                elif entry.kind == "file" and name.upper() in _NOT_SKILLS:
                    ignored = f"{name} is documentation, not a skill (ignored)"
                    report.append(diagnostic(Problem("markdown-ignored", ignored), path))
                elif entry.kind == "file" and name.endswith(".md"):
                    files.append((index, path, root.path, name[:-3]))
                elif entry.kind == "broken_link":
                    report.append(diagnostic(_BROKEN_LINK, path))
    return files


def _root_problem(root: SkillRoot, listing: _Listing) -> Diagnostic | None:
    if isinstance(listing, Problem):
        return diagnostic(listing, root.path)
    # Most people have no project skills; only a root asked for by name is worth a word.
    return root_missing(root.path) if listing is None and root.source == CUSTOM else None


async def _list_root(fs: SkillFileSystem, path: str) -> _Listing:
    try:
        return await fs.list_dir(path)
    except OSError as exc:
        return unreadable_root(exc)


def unreadable_root(error: OSError) -> Problem:
    """The problem of a skill root (or a directory to validate) that cannot be listed."""
    return Problem("root-unreadable", f"cannot read directory: {error.strerror or error}")


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
