"""One discovery of given skill roots: list them, read and parse their skill files, report.

    scan(fs, roots, provider, max_bytes)   a `LocalDiscovery`: candidates, roots, diagnostics
    SkillRoot, RootReport, LocalDiscovery   what it takes and gives (`acp_skills.local` exports)

A discovery costs a constant number of filesystem calls however many skills there are: one
``list_dir`` per root (concurrently) and one ``read_files`` batch; the files are parsed off the
event loop, never inside that batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeAlias

import anyio

from .diagnostics import Diagnostic, diagnostic, file_diagnostics, root_missing
from .errors import Problem
from .frontmatter import ParsedSkill, decode_skill_bytes, parse_skill_file
from .fs import DirEntry, FileReadError, LocalFileSystem, SkillFileSystem, read_local_file
from .model import SKILL_FILE_NAME, DirectoryResource, ResourceBase, SkillCandidate

__all__ = [
    "CUSTOM",
    "USER_DSH",
    "LocalDiscovery",
    "RootReport",
    "SkillRoot",
    "list_roots",
    "parse_file",
    "scan",
    "skill_fields",
    "unreadable_root",
]

CUSTOM: Final = "custom"
USER_DSH: Final = "user-dsh"
# Only the user's own dsh root has a `.system` child to skip: it holds skills the tool itself
# installs and manages, not ordinary user skills. A project may name a skill `.system`.
_SYSTEM_DIR: Final = ".system"
_FLAT_SUFFIX: Final = ".md"
_BROKEN_LINK: Final = Problem("broken-link", "broken symbolic link")
_Report: TypeAlias = list[Diagnostic]
_Listing: TypeAlias = Sequence[DirEntry] | Problem | None


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


async def scan(
    fs: SkillFileSystem, roots: Sequence[SkillRoot], provider: str, max_bytes: int
) -> LocalDiscovery:
    """Discover the skills in ``roots`` through ``fs`` (`LocalSkillProvider.scan`)."""
    report: list[Diagnostic] = []
    files: list[_SkillFile] = []
    listings = await list_roots(fs, roots)
    for root, listing in zip(roots, listings, strict=True):
        if isinstance(listing, Problem):
            report.append(diagnostic(listing, root.path))
        elif listing is None and root.source == CUSTOM:
            # A missing root is normal (most people have no project skills); only one
            # that was asked for by name is worth a word.
            report.append(root_missing(root.path))
        elif listing is not None:
            files.extend(_skill_files(root, listing, report))
    outcomes = await _read_and_parse(fs, [f.path for f in files], max_bytes)
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
                    **skill_fields(
                        provider, outcome, root.source, skill_file.resource_dir, skill_file.path
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
    fs: SkillFileSystem, paths: Sequence[str], max_bytes: int
) -> Sequence[ParsedSkill | Problem | FileReadError]:
    """Each file's frontmatter, parsed off the event loop (a thousand take tens of ms),
    after the filesystem's batch, never inside it."""
    if type(fs) is LocalFileSystem:
        # One hop, each file parsed as soon as it is read: a thousand files' bytes held at
        # once cost fresh memory (page faults) that rivals the reads themselves.
        return await anyio.to_thread.run_sync(_read_local, paths, max_bytes)
    contents = await fs.read_files(paths, max_bytes)
    if len(contents) != len(paths):
        raise RuntimeError(
            f"the filesystem returned {len(contents)} results for {len(paths)} files"
        )
    return await anyio.to_thread.run_sync(_parse_all, contents)


async def list_roots(fs: SkillFileSystem, roots: Sequence[SkillRoot]) -> Sequence[_Listing]:
    """Each root's entries, ``None`` when it does not exist, or why it cannot be read.

    Concurrently: cheap on the local disk, a big saving where every call is a round trip.
    Each outcome has its own slot, so reports come out in root order.
    """
    listings: list[_Listing] = [None for _ in roots]
    failures: list[Exception | None] = [None for _ in roots]

    async def list_into(index: int, path: str) -> None:
        try:
            listings[index] = await fs.list_dir(path)
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


def skill_fields(
    provider: str, parsed: ParsedSkill, source: str, base: ResourceBase | str | None, path: str
) -> dict[str, Any]:
    """What a candidate and a definition of one parsed file have in common."""
    return {
        "name": parsed.name,
        "description": parsed.description,
        "when_to_use": parsed.when_to_use,
        "disable_model_invocation": parsed.disable_model_invocation,
        "user_invocable": parsed.user_invocable,
        "source": source,
        "provider": provider,
        "resource_base": DirectoryResource(path=base) if isinstance(base, str) else base,
        "path": path,
        "metadata": parsed.metadata,
        "argument_hint": parsed.argument_hint,
    }


def _skill_files(
    root: SkillRoot, entries: Sequence[DirEntry], report: _Report
) -> Iterable[_SkillFile]:
    # Entry names hold no separator: joining is concatenation (os.path.join per entry shows
    # when there are thousands).
    prefix = os.path.join(root.path, "")
    bundle_suffix = os.sep + SKILL_FILE_NAME
    # Code-point order of names; the registry's tie-break depends on this order.
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name == _SYSTEM_DIR and root.source == USER_DSH:
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


def parse_file(
    content: bytes | FileReadError, *, with_body: bool = False
) -> ParsedSkill | Problem | FileReadError:
    if isinstance(content, FileReadError):
        return content
    text = decode_skill_bytes(content)
    return text if isinstance(text, Problem) else parse_skill_file(text, with_body=with_body)


def _parse_all(
    contents: Sequence[bytes | FileReadError],
) -> list[ParsedSkill | Problem | FileReadError]:
    return [parse_file(content) for content in contents]  # discovery keeps no bodies


def _read_local(
    paths: Sequence[str], max_bytes: int
) -> list[ParsedSkill | Problem | FileReadError]:
    return [parse_file(read_local_file(path, max_bytes)) for path in paths]
