"""One discovery of given roots, and its report. On the local disk, listing, reading and
parsing take one worker-thread hop; through a custom filesystem, one ``list_dir`` per root
(concurrently), one ``read_files`` batch, and the files parsed off the event loop after it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar

import anyio

from .diagnostics import Diagnostic, diagnostic, file_diagnostics, root_missing
from .errors import Problem, ReadError
from .frontmatter import ParsedSkill, decode_skill_bytes, parse_skill_file
from .fs import (
    DirEntry,
    LocalFileSystem,
    SkillFileSystem,
    list_local_dir,
    read_local_file,
)
from .model import SKILL_FILE_NAME, DirectoryResource, ResourceBase, SkillCandidate, SkillDefinition

CUSTOM: Final = "custom"
USER_DSH: Final = "user-dsh"
# Only the user's dsh root has a `.system` child to skip (the tool's own managed skills).
_SYSTEM_DIR: Final = ".system"
_BROKEN_LINK: Final = Problem("broken-link", "broken symbolic link")
_IN_BUNDLE: Final = os.sep + SKILL_FILE_NAME
_Listing: TypeAlias = Sequence[DirEntry] | Problem | None
_Skill = TypeVar("_Skill", SkillCandidate, SkillDefinition)
# A file to read: its root's index, its path, its resource directory and the name its place
# suggests.
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


async def scan(
    fs: SkillFileSystem, roots: Sequence[SkillRoot], provider: str, max_bytes: int
) -> LocalDiscovery:
    """Discover the skills in ``roots`` through ``fs`` (`LocalSkillProvider.scan`)."""
    if type(fs) is LocalFileSystem:
        # The local disk: every listing, read and parse in one worker-thread hop.
        def scan_local() -> LocalDiscovery:
            listings = [_local_listing(root.path) for root in roots]
            report: list[Diagnostic] = []
            files = _skill_files(roots, listings, report)
            return _judge(roots, listings, files, report, None, provider, max_bytes)

        return await anyio.to_thread.run_sync(scan_local)
    listings = await list_roots(fs, roots)
    report: list[Diagnostic] = []
    files = _skill_files(roots, listings, report)
    contents = await fs.read_files([path for _, path, _, _ in files], max_bytes)
    if len(contents) != len(files):
        raise RuntimeError(
            f"the filesystem returned {len(contents)} results for {len(files)} files"
        )
    return await anyio.to_thread.run_sync(
        _judge, roots, listings, files, report, contents, provider, max_bytes
    )


def _skill_files(
    roots: Sequence[SkillRoot], listings: Sequence[_Listing], report: list[Diagnostic]
) -> list[_SkillFile]:
    # The files of each root discovery reads, in order; what it skips with a word goes in report.
    files: list[_SkillFile] = []
    for index, (root, listing) in enumerate(zip(roots, listings, strict=True)):
        if isinstance(listing, Problem):
            report.append(diagnostic(listing, root.path))
        elif listing is not None:
            prefix = os.path.join(root.path, "")  # entry names hold no separator
            # Code-point order of names; the registry's tie-break depends on this order.
            for entry in sorted(listing, key=lambda e: e.name):
                name = entry.name
                if name == _SYSTEM_DIR and root.source == USER_DSH:
                    continue
                path = prefix + name
                if entry.kind == "dir":
                    files.append((index, path + _IN_BUNDLE, path, name))
                elif entry.kind == "file" and name.upper() in NOT_SKILLS:
                    report.append(diagnostic(not_a_skill_file(name), path))
                elif entry.kind == "file" and name.endswith(".md"):
                    files.append((index, path, root.path, name[:-3]))
                elif entry.kind == "broken_link":
                    report.append(diagnostic(_BROKEN_LINK, path))
        elif root.source == CUSTOM:
            # Most people have no project skills; only a root asked for by name is worth a word.
            report.append(root_missing(root.path))
    return files


def _judge(
    roots: Sequence[SkillRoot],
    listings: Sequence[_Listing],
    files: Sequence[_SkillFile],
    report: list[Diagnostic],
    contents: Sequence[bytes | ReadError] | None,
    provider: str,
    max_bytes: int,
) -> LocalDiscovery:
    # Off the event loop. Without ``contents`` (the local disk), each file is parsed as soon as
    # read: a thousand files' bytes held at once cost fresh memory (page faults) that rivals
    # the reads themselves.
    found = [0 for _ in roots]
    candidates = []
    for position, (index, path, resource_dir, expected) in enumerate(files):
        content = read_local_file(path, max_bytes) if contents is None else contents[position]
        outcome = parse_file(content)
        misnamed = contents is None and _lowercase_skill_file(outcome, resource_dir)
        nested = () if contents is not None else _nested_skill_dirs(outcome, resource_dir)
        if misnamed:
            report.append(diagnostic(misnamed_skill_file(), path))
        elif nested:
            report.append(diagnostic(nested_skill_dirs(nested), path))
        else:
            report.extend(file_diagnostics(path, outcome, expected_name=expected))
        if isinstance(outcome, ParsedSkill):
            root = roots[index]
            candidates.append(
                build_skill(
                    SkillCandidate,
                    provider,
                    outcome,
                    root.source,
                    resource_dir,
                    path,
                    rank=root.rank,
                    locator=path,  # all `get` needs to find the file again
                )
            )
            found[index] += 1
    return LocalDiscovery(
        roots=tuple(
            RootReport(root=root, exists=listing is not None, skills=count)
            for root, listing, count in zip(roots, listings, found, strict=True)
        ),
        candidates=tuple(candidates),
        diagnostics=tuple(report),
    )


def _local_listing(path: str) -> _Listing:
    try:
        return list_local_dir(path)
    except OSError as exc:
        return unreadable_root(exc)


async def list_roots(fs: SkillFileSystem, roots: Sequence[SkillRoot]) -> Sequence[_Listing]:
    """Each root's entries, ``None`` when it does not exist, or why it cannot be read."""
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


def build_skill(
    kind: type[_Skill],
    provider: str,
    parsed: ParsedSkill,
    source: str,
    base: ResourceBase | str | None,
    path: str | None,
    **extra: Any,
) -> _Skill:
    """A candidate or a definition of one parsed file."""
    return kind(
        name=parsed.name,
        description=parsed.description,
        when_to_use=parsed.when_to_use,
        disable_model_invocation=parsed.disable_model_invocation,
        user_invocable=parsed.user_invocable,
        source=source,
        provider=provider,
        resource_base=DirectoryResource(path=base) if isinstance(base, str) else base,
        path=path,
        metadata=parsed.metadata,
        argument_hint=parsed.argument_hint,
        **extra,
    )


# Markdown that sits beside skills in a root and is never one (compared upper-cased).
NOT_SKILLS: Final = frozenset(
    [
        "README.MD",
        "LICENSE.MD",
        "CHANGELOG.MD",
        "CONTRIBUTING.MD",
        "CODE_OF_CONDUCT.MD",
        "SECURITY.MD",
    ]
)
_LOWERCASE_SKILL_FILE: Final = SKILL_FILE_NAME.lower()


def not_a_skill_file(name: str) -> Problem:
    """The note for a README.md (or LICENSE.md, ...) in a skills directory: not a skill."""
    return Problem("markdown-ignored", f"{name} is documentation, not a skill (ignored)")


def misnamed_skill_file() -> Problem:
    """The warning for a bundle whose skill file is spelled ``skill.md``."""
    message = (
        f"this directory has {_LOWERCASE_SKILL_FILE} but no {SKILL_FILE_NAME}: the name is "
        f"case-sensitive, so the skill is not loaded; rename it to {SKILL_FILE_NAME}"
    )
    return Problem("skill-file-lowercase", message)


def _lowercase_skill_file(outcome: object, directory: str) -> bool:
    # Only a bundle whose SKILL.md is absent is worth one more look at the disk.
    return (
        isinstance(outcome, ReadError)
        and outcome.failure == "not_found"
        and os.path.isfile(os.path.join(directory, _LOWERCASE_SKILL_FILE))
    )


def nested_skill_dirs(names: Sequence[str]) -> Problem:
    """The warning for a directory of a root that holds skills one level too deep."""
    shown = ", ".join(f"{name}/{SKILL_FILE_NAME}" for name in names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    message = (
        f"no {SKILL_FILE_NAME} here, but {shown}{more} one level further down: discovery is "
        f"one level deep, so {'it is' if len(names) == 1 else 'they are'} not loaded; move "
        f"{'it' if len(names) == 1 else 'them'} up into the skills directory, or "
        "add this directory as a skills directory of its own (--skills-dir)"
    )
    return Problem("skill-nested-too-deep", message)


def _nested_skill_dirs(outcome: object, directory: str) -> tuple[str, ...]:
    # Only a directory without SKILL.md (helpers, or a group of skills) gets this look.
    if not (isinstance(outcome, ReadError) and outcome.failure == "not_found"):
        return ()
    try:
        with os.scandir(directory) as entries:
            children = sorted(e.name for e in entries if e.is_dir())
    except OSError:
        return ()
    return tuple(
        name
        for name in children
        if os.path.isfile(os.path.join(directory, name, SKILL_FILE_NAME))
        or os.path.isfile(os.path.join(directory, name, _LOWERCASE_SKILL_FILE))
    )


def unreadable_root(error: OSError) -> Problem:
    """The problem of a skill root (or a directory to validate) that cannot be listed."""
    return Problem("root-unreadable", f"cannot read directory: {error.strerror or error}")


def parse_file(
    content: bytes | ReadError, *, with_body: bool = False
) -> ParsedSkill | Problem | ReadError:
    if isinstance(content, ReadError):
        return content
    text = decode_skill_bytes(content)
    return text if isinstance(text, Problem) else parse_skill_file(text, with_body=with_body)
