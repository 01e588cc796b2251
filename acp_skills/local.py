"""LocalSkillProvider: skills found on disk, in project and user directories.

Five kinds of root are scanned, in this order, which is also the rank order (lower wins a name
clash in the registry)::

    rank  source           root
    100   project-dsh      <project root>/.dsh/skills
    200   project-agents   <project root>/.agents/skills
    300   custom           each of custom_skill_dirs, in the order given
    400   user-dsh         <dsh_home>/skills          (its `.system` child is skipped)
    500   user-agents      <agents_home>/skills

Inside a root, a directory ``X`` is a bundle (``X/SKILL.md``) and a file ending in ``.md`` is a
flat skill; everything else is ignored. Entries are taken in code-point order of their names, so
``foo/`` comes before ``foo.md`` and, because the registry breaks rank ties by position in a
provider's list, the bundle wins a clash inside one root.

A discovery costs a constant number of filesystem round trips however many skills there are:
one ``exists`` per directory searched for ``.git``, one ``list_dir`` per root (all roots
concurrently), and one ``digest_files`` batch (read and parse) for every skill file found.

A bad file never fails a request: it is logged as ``skill_file_skipped`` (with ``path`` and
``reason``) and left out.

While registered, the provider watches its roots (`acp_skills.watch`) and invalidates its
registration when a skill is added, changed, renamed or removed on disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import anyio
import structlog

from .frontmatter import ParsedSkill, SkillFileProblem, decode_skill_bytes, parse_skill_file
from .fs import DirEntry, FileReadError, LocalFileSystem, SkillFileSystem
from .model import (
    SKILL_FILE_NAME,
    DirectoryResource,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    require_positive_int,
)
from .provider import ProviderHandle
from .watch import RootWatch, WatchedRoot

__all__ = ["LocalSkillProvider", "SkillRoot"]

_log = structlog.get_logger(__name__)

_PROJECT_DSH: Final = "project-dsh"
_PROJECT_AGENTS: Final = "project-agents"
_CUSTOM: Final = "custom"
_USER_DSH: Final = "user-dsh"
_USER_AGENTS: Final = "user-agents"

# Only the user's own dsh root has a `.system` child to skip: it holds skills the tool itself
# installs and manages, which are not meant to be discovered as ordinary user skills. A
# project may legitimately name a skill directory `.system`, so other roots keep it.
_SYSTEM_DIR: Final = ".system"
_FLAT_SUFFIX: Final = ".md"


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


@dataclass(frozen=True, slots=True)
class _SkillFile:
    """A file discovery will read: where it is and what it would become."""

    root: SkillRoot
    path: str
    resource_dir: str


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
        watch: Watch the roots for changes while registered (live reload). Only the local disk
            is watched: with another ``fs`` this does nothing.

    Environment variables are read here, at construction. Empty or whitespace-only variables
    count as unset. Every directory has ``~`` expanded and is made absolute (relative paths
    against the current working directory, now); symbolic links are not resolved.

    Raises:
        ValueError: ``max_file_bytes`` is not a positive integer, ``name`` is empty, or an
            explicitly given directory is an empty string.
        TypeError: ``custom_skill_dirs`` is a single path instead of a sequence of paths.
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
        # Roots that do not depend on the caller's cwd, already in rank order.
        self._fixed_roots = (
            *(SkillRoot(path=path, source=_CUSTOM, rank=300) for path in self._custom_skill_dirs),
            SkillRoot(path=os.path.join(self._dsh_home, "skills"), source=_USER_DSH, rank=400),
            SkillRoot(
                path=os.path.join(self._agents_home, "skills"), source=_USER_AGENTS, rank=500
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
    def max_file_bytes(self) -> int:
        """The size above which a skill file is skipped."""
        return self._max_file_bytes

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
        candidates.extend(self._fixed_roots)
        seen: set[str] = set()
        unique: list[SkillRoot] = []
        for root in candidates:
            key = os.path.normcase(root.path)
            if key not in seen:
                seen.add(key)
                unique.append(root)
        return tuple(unique)

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Discover every well-formed skill for ``options.cwd``.

        Returns:
            Candidates ordered by root (rank order), then by entry name (code points) within
            a root. Names may repeat; the registry resolves clashes.
        """
        roots = await self.roots(options)
        if self._watch is not None:
            # Watched before scanning, so nothing that changes after the scan goes unseen.
            await self._watch.cover(
                options.cwd,
                [
                    WatchedRoot(root.path)
                    for root in roots
                    if root.source in (_PROJECT_DSH, _PROJECT_AGENTS)
                ],
            )
        listings = await self._list_roots(roots)
        files = [
            skill_file
            for root, entries in zip(roots, listings, strict=True)
            for skill_file in self._skill_files(root, entries)
        ]
        # Parsed as they are read (in the worker thread, for the local disk): only the
        # frontmatter is kept, never a thousand bodies at once.
        contents = await self._fs.digest_files(
            [f.path for f in files], self._max_file_bytes, _parse_for_listing
        )
        if len(contents) != len(files):
            raise RuntimeError(
                f"the filesystem returned {len(contents)} results for {len(files)} files"
            )
        candidates: list[SkillCandidate] = []
        for skill_file, content in zip(files, contents, strict=True):
            parsed = self._parse_discovered(skill_file, content)
            if parsed is not None:
                candidates.append(self._candidate(skill_file, parsed))
        return candidates

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
            name=parsed.name,
            description=parsed.description,
            when_to_use=parsed.when_to_use,
            disable_model_invocation=parsed.disable_model_invocation,
            user_invocable=parsed.user_invocable,
            # Where the skill lives has not changed since `list`; only the file's text may have.
            source=candidate.source,
            provider=self._name,
            resource_base=candidate.resource_base,
            content=parsed.body,
            path=path,
            metadata=parsed.metadata,
            argument_hint=parsed.argument_hint,
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

    async def _list_roots(self, roots: Sequence[SkillRoot]) -> Sequence[Sequence[DirEntry]]:
        # Concurrently: cheap on the local disk, and a big saving on a remote workspace's
        # filesystem, where every call is a round trip.
        listings: list[Sequence[DirEntry]] = [() for _ in roots]
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

    async def _list_root(self, root: SkillRoot) -> Sequence[DirEntry]:
        try:
            entries = await self._fs.list_dir(root.path)
        except OSError as exc:
            self._skip(root.path, f"cannot read directory: {exc.strerror or exc}")
            return ()
        # A missing root is normal (most people have no project skills): no warning.
        return () if entries is None else entries

    def _skill_files(self, root: SkillRoot, entries: Sequence[DirEntry]) -> Iterable[_SkillFile]:
        # Code-point order of names; the registry's tie-break depends on this order.
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name == _SYSTEM_DIR and root.source == _USER_DSH:
                continue
            entry_path = os.path.join(root.path, entry.name)
            if entry.kind == "dir":
                yield _SkillFile(
                    root=root,
                    path=os.path.join(entry_path, SKILL_FILE_NAME),
                    resource_dir=entry_path,
                )
            elif entry.kind == "file":
                if entry.name.endswith(_FLAT_SUFFIX):
                    yield _SkillFile(root=root, path=entry_path, resource_dir=root.path)
            elif entry.kind == "broken_link":
                self._skip(entry_path, "broken symbolic link")

    def _parse_discovered(
        self, skill_file: _SkillFile, content: ParsedSkill | SkillFileProblem | FileReadError
    ) -> ParsedSkill | None:
        if isinstance(content, FileReadError) and content.not_found:
            # A directory without SKILL.md is not a mistake: a root may hold shared helper
            # directories. (A flat file can also vanish between listing and reading.)
            _log.debug(
                "skill_file_absent", provider=self._name, path=skill_file.path, reason="not found"
            )
            return None
        parsed = _parse_read(content) if isinstance(content, FileReadError) else content
        if not isinstance(parsed, ParsedSkill):
            self._skip(skill_file.path, parsed.reason)
            return None
        for note in parsed.notes:
            _log.warning(
                "skill_field_ignored",
                provider=self._name,
                skill=parsed.name,
                path=skill_file.path,
                reason=note,
            )
        return parsed

    def _candidate(self, skill_file: _SkillFile, parsed: ParsedSkill) -> SkillCandidate:
        return SkillCandidate(
            name=parsed.name,
            description=parsed.description,
            when_to_use=parsed.when_to_use,
            disable_model_invocation=parsed.disable_model_invocation,
            user_invocable=parsed.user_invocable,
            source=skill_file.root.source,
            provider=self._name,
            resource_base=DirectoryResource(path=skill_file.resource_dir),
            rank=skill_file.root.rank,
            # The path is all `get` needs to find the file again.
            locator=skill_file.path,
            path=skill_file.path,
            metadata=parsed.metadata,
            argument_hint=parsed.argument_hint,
        )

    def _skip(self, path: str, reason: str) -> None:
        _log.warning("skill_file_skipped", provider=self._name, path=path, reason=reason)


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
