"""Validate skills on disk, outside any session: what ``acp-skills validate`` runs.

Each path is a skill directory (it holds ``SKILL.md``), a skill file (``SKILL.md`` or a flat
``<name>.md``) or a root holding skills (scanned exactly as the local provider scans a skill
directory, with the same diagnostics). Lenient by default: the runtime's own diagnostics, so a
clean result means the agent will show the skill. Strict adds the Agent Skills specification's
rules (`acp_skills.strict`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .diagnostics import CODES, Diagnostic, diagnostic, file_diagnostics, shadow_diagnostic
from .errors import Problem
from .frontmatter import ParsedSkill, decode_skill_bytes, parse_skill_file
from .fs import FileReadError, LocalFileSystem, SkillFileSystem
from .local import LocalSkillProvider, SkillRoot, unreadable_root
from .model import SKILL_FILE_NAME, ShadowedSkill, SkillCandidate
from .strict import strict_diagnostics, under_strict_rules

__all__ = ["ValidationReport", "validate_paths"]

_FLAT_SUFFIX = ".md"
# Skills validated from a root get the rank and source of a custom directory; neither shows.
_VALIDATED_ROOT_RANK = 300
_VALIDATED_ROOT_SOURCE = "custom"


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationReport:
    """What validating some paths found.

    Attributes:
        diagnostics: Every record, in the order of the paths given.
        files: How many skill files were examined.
        accepted: How many of them the runtime accepts (strict errors aside).
    """

    diagnostics: tuple[Diagnostic, ...]
    files: int
    accepted: int


@dataclass(slots=True)
class _Tally:
    diagnostics: list[Diagnostic]
    files: int = 0
    accepted: int = 0


async def validate_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    strict: bool = False,
    max_file_bytes: int = 1_048_576,
    fs: SkillFileSystem | None = None,
) -> ValidationReport:
    """Validate each path (a skill directory, a skill file or a root of skills).

    Args:
        paths: What to validate; relative paths are taken from the current directory.
        strict: Apply the Agent Skills specification too (`acp_skills.strict`).
        max_file_bytes: Skill files larger than this are refused, as the runtime does.
        fs: The filesystem to read; the local disk by default.

    Returns:
        The records and the counts.

    Raises:
        ValueError: ``max_file_bytes`` is not a positive integer.
    """
    disk = LocalFileSystem() if fs is None else fs
    scanner = LocalSkillProvider(max_file_bytes=max_file_bytes, fs=disk)
    tally = _Tally(diagnostics=[])
    for given in paths:
        # String work, plus one getcwd() for a relative path: no disk access to speak of.
        path = os.path.abspath(os.fspath(given))  # noqa: ASYNC240
        await _validate_one(path, tally, strict, scanner, disk, max_file_bytes)
    return ValidationReport(
        diagnostics=tuple(tally.diagnostics), files=tally.files, accepted=tally.accepted
    )


async def _validate_one(
    path: str,
    tally: _Tally,
    strict: bool,
    scanner: LocalSkillProvider,
    fs: SkillFileSystem,
    max_file_bytes: int,
) -> None:
    try:
        entries = await fs.list_dir(path)
    except OSError as error:
        tally.diagnostics.append(diagnostic(unreadable_root(error), path))
        return
    if entries is None:
        if not await fs.exists(path):
            tally.diagnostics.append(_record("not-found", path, "no such file or directory"))
            return
        name = os.path.basename(path)
        if name == SKILL_FILE_NAME:
            expected = os.path.basename(os.path.dirname(path))
        elif name.endswith(_FLAT_SUFFIX):
            expected = name.removesuffix(_FLAT_SUFFIX)
        else:
            tally.diagnostics.append(
                _record(
                    "not-a-skill",
                    path,
                    f"not a skill file: the runtime reads {SKILL_FILE_NAME} in a skill "
                    f"directory, or a flat <name>{_FLAT_SUFFIX} in a skills directory",
                )
            )
            return
        await _validate_file(path, expected, tally, strict, fs, max_file_bytes)
        return
    if any(entry.name == SKILL_FILE_NAME for entry in entries):
        skill_file = os.path.join(path, SKILL_FILE_NAME)
        await _validate_file(skill_file, os.path.basename(path), tally, strict, fs, max_file_bytes)
        return
    await _validate_root(path, tally, strict, scanner, fs, max_file_bytes)


async def _validate_file(
    path: str,
    expected_name: str,
    tally: _Tally,
    strict: bool,
    fs: SkillFileSystem,
    max_file_bytes: int,
) -> None:
    (content,) = await fs.read_files([path], max_file_bytes)
    outcome = content if isinstance(content, FileReadError) else _parse(content)
    found = file_diagnostics(path, outcome, expected_name=expected_name)
    tally.files += 1
    if isinstance(outcome, ParsedSkill):
        tally.accepted += 1
        if strict:
            found = (*found, *strict_diagnostics(path, outcome))
    tally.diagnostics.extend(under_strict_rules(found) if strict else found)


async def _validate_root(
    path: str,
    tally: _Tally,
    strict: bool,
    scanner: LocalSkillProvider,
    fs: SkillFileSystem,
    max_file_bytes: int,
) -> None:
    root = SkillRoot(path=path, source=_VALIDATED_ROOT_SOURCE, rank=_VALIDATED_ROOT_RANK)
    discovery = await scanner.scan([root])
    found: list[Diagnostic] = list(discovery.diagnostics)
    found.extend(_duplicates(discovery.candidates))
    if strict:
        # The scan keeps no frontmatter fields: read the accepted files again for the rules
        # only strict validation needs.
        candidate_paths = [c.path for c in discovery.candidates if c.path is not None]
        contents = await fs.read_files(candidate_paths, max_file_bytes)
        for candidate_path, content in zip(candidate_paths, contents, strict=True):
            parsed = content if isinstance(content, FileReadError) else _parse(content)
            if isinstance(parsed, ParsedSkill):
                found.extend(strict_diagnostics(candidate_path, parsed))
    files = len(discovery.candidates) + sum(1 for d in found if _is_file_problem(d))
    if files == 0:
        found.append(
            _record(
                "no-skills",
                path,
                f"no skills here: a skill is <name>/{SKILL_FILE_NAME} or <name>{_FLAT_SUFFIX} "
                "directly in this directory (one level deep)",
            )
        )
    tally.files += files
    tally.accepted += len(discovery.candidates)
    tally.diagnostics.extend(under_strict_rules(found) if strict else found)


def _duplicates(candidates: Sequence[SkillCandidate]) -> list[Diagnostic]:
    # One directory, one provider, one rank: the runtime keeps the first of each name.
    first: dict[str, SkillCandidate] = {}
    found = []
    for candidate in candidates:
        kept = first.setdefault(candidate.name, candidate)
        if kept is not candidate:
            found.append(shadow_diagnostic(ShadowedSkill(skill=candidate, winner=kept)))
    return found


def _is_file_problem(diagnostic: Diagnostic) -> bool:
    spec = CODES.get(diagnostic.code)
    return spec is not None and spec.skipped and diagnostic.code != "root-unreadable"


def _parse(data: bytes) -> ParsedSkill | Problem:
    text = decode_skill_bytes(data)
    return text if isinstance(text, Problem) else parse_skill_file(text, with_body=False)


def _record(code: str, path: str, message: str) -> Diagnostic:
    return diagnostic(Problem(code, message), path)
