"""``acp-skills validate``: skills on disk as the runtime reads them, or by the specification."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace

import anyio.to_thread

from .. import Diagnostic, LocalFileSystem, LocalSkillProvider, SkillCandidate
from ..diagnostics import (
    diagnostic,
    diagnostic_json,
    diagnostic_line,
    file_diagnostics,
    plural,
    shadow_diagnostic,
    skipped,
    tally,
)
from ..errors import Problem
from ..frontmatter import ParsedSkill, parse_skill_bytes
from ..fs import why_no_skill_file
from ..local import DEFAULT_MAX_FILE_BYTES, SkillRoot, unreadable_root
from ..model import SKILL_FILE_NAME, ShadowedSkill
from .output import Outcome, Style, status_of

# What the runtime only mentions but the specification forbids.
_ERRORS_WHEN_STRICT = frozenset({"name-mismatch", "unknown-key", "field-ignored"})
_Found = tuple[list[Diagnostic], int]  # the records, and how many skill files were checked


def strict_diagnostics(path: str, parsed: ParsedSkill) -> list[Diagnostic]:
    """One record per specification rule a well-formed skill file breaks."""
    name, fields = parsed.name, parsed.fields
    found: dict[str, str] = {}  # by code: each rule is broken once at most
    compatibility = fields.get("compatibility", "-")
    for code, what, value, limit in (
        ("name-too-long", "name", name, 64),
        ("description-too-long", "description", parsed.description, 1024),
        ("compatibility-invalid", "'compatibility'", compatibility, 500),
    ):
        if isinstance(value, str) and len(value) > limit:
            found[code] = f"{what} is {len(value)} characters, over the specification's {limit}"
    if not isinstance(compatibility, str) or not compatibility.strip():
        found["compatibility-invalid"] = "'compatibility' must be a non-empty string"
    metadata = fields.get("metadata")
    # A metadata that is no mapping (or has non-string keys) is already a `field-ignored`.
    if isinstance(metadata, Mapping) and all(isinstance(key, str) for key in metadata):
        offending = [repr(k) for k, value in metadata.items() if not isinstance(value, str)]
        if offending:
            said = "metadata values must be strings (quote them); not a string: "
            found["metadata-invalid"] = said + ", ".join(offending)
    tools = fields.get("allowed-tools", "")
    # The frontmatter reader turns YAML sequences into tuples.
    if not isinstance(tools, str | tuple) or not all(isinstance(t, str) for t in tools):
        found["allowed-tools-invalid"] = "'allowed-tools' must be a string or a list of strings"
    if os.path.basename(path) != SKILL_FILE_NAME:
        found["flat-skill"] = (
            "a single-file skill: the Agent Skills specification knows only a directory "
            f"holding {SKILL_FILE_NAME}, so other tools may not read it (to share it, move it "
            f"to {name}/{SKILL_FILE_NAME})"
        )
    return [diagnostic(Problem(code, said), path, skill=name) for code, said in found.items()]


def under_strict_rules(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The runtime's records with the severity strict validation gives them."""
    strict = _ERRORS_WHEN_STRICT
    return [replace(d, severity="error") if d.code in strict else d for d in diagnostics]


async def _path(fs: LocalFileSystem, path: str, strict: bool) -> _Found:
    """A skill directory, a skill file or a skills directory, told apart as the runtime would."""
    try:
        entries = await fs.list_dir(path)
    except OSError as error:
        return [diagnostic(unreadable_root(error), path)], 0
    name = os.path.basename(path)
    if SKILL_FILE_NAME in {entry.name for entry in entries or ()}:
        return await _file(fs, os.path.join(path, SKILL_FILE_NAME), name, strict)
    # A bundle the agent would not load: the warning `doctor` gives; a root is scanned below.
    if why := await anyio.to_thread.run_sync(lambda: why_no_skill_file(path, nested=False)):
        return [diagnostic(why, os.path.join(path, SKILL_FILE_NAME))], 1
    if entries is not None:
        return await _root(fs, path, strict)
    if not await fs.exists(path):
        return [diagnostic(Problem("not-found", "no such file or directory"), path)], 0
    if name == SKILL_FILE_NAME:
        return await _file(fs, path, os.path.basename(os.path.dirname(path)), strict)
    if name.endswith(".md"):
        return await _file(fs, path, name.removesuffix(".md"), strict)
    message = (
        f"not a skill file: the runtime reads {SKILL_FILE_NAME} in a skill directory, or a flat "
        "<name>.md in a skills directory"
    )
    return [diagnostic(Problem("not-a-skill", message), path)], 0


async def _file(fs: LocalFileSystem, path: str, expected_name: str, strict: bool) -> _Found:
    (content,) = await fs.read_files([path], DEFAULT_MAX_FILE_BYTES)
    outcome = parse_skill_bytes(content)
    found = list(file_diagnostics(path, outcome, expected_name=expected_name))
    if strict and isinstance(outcome, ParsedSkill):
        found += strict_diagnostics(path, outcome)
    return found, 1


async def _root(fs: LocalFileSystem, path: str, strict: bool) -> _Found:
    # Scanned exactly as the local provider scans a skills directory (its rank shows nowhere).
    provider = LocalSkillProvider(fs=fs, watch=False)
    discovery = await provider.scan([SkillRoot(path=path, source="custom", rank=300)])
    found = list(discovery.diagnostics)
    # One directory, one provider, one rank: the runtime keeps the first of each name.
    first: dict[str, SkillCandidate] = {}
    for candidate in discovery.candidates:
        if (kept := first.setdefault(candidate.name, candidate)) is not candidate:
            found.append(shadow_diagnostic(ShadowedSkill(skill=candidate, winner=kept)))
    if strict:
        # The scan keeps no frontmatter fields: read the accepted files again.
        paths = [c.path for c in discovery.candidates if c.path is not None]
        for skill_path, content in zip(
            paths, await fs.read_files(paths, DEFAULT_MAX_FILE_BYTES), strict=True
        ):
            if isinstance(parsed := parse_skill_bytes(content), ParsedSkill):
                found += strict_diagnostics(skill_path, parsed)
    files = len(discovery.candidates) + sum(d.code != "root-unreadable" for d in skipped(found))
    if files == 0:
        message = (
            f"no skills here: a skill is <name>/{SKILL_FILE_NAME} or <name>.md directly in this "
            "directory (one level deep)"
        )
        found.append(diagnostic(Problem("no-skills", message), path))
    return found, files


async def validate(args: argparse.Namespace, style: Style) -> Outcome:
    """Every record for the paths, or for each skills root a session at ``--cwd`` reads."""
    fs = LocalFileSystem()
    diagnostics: list[Diagnostic] = []
    files = 0
    # String work, plus one getcwd() for a relative path: no disk access to speak of.
    paths = [os.path.abspath(path) for path in args.paths]  # noqa: ASYNC240
    if not paths:
        # The roots a session reads, exactly as for `doctor`.
        seen = args.look
        roots = await seen.provider.roots(seen.options)
        paths = [root.path for root in roots if await fs.exists(root.path)]
        if not paths:
            message = (
                "no skills roots here: a project keeps its skills in .agents/skills/ (see "
                "`acp-skills doctor` for every root looked at)"
            )
            diagnostics.append(diagnostic(Problem("no-skills", message), args.cwd))
    for path in paths:
        found, checked = await _path(fs, path, args.strict)
        diagnostics += found
        files += checked
    if args.strict:
        diagnostics = under_strict_rules(diagnostics)
    mode = "strict (Agent Skills specification)" if args.strict else "as the runtime reads them"
    summary = f"{plural(files, 'skill file')} checked {mode}: {tally(diagnostics)}."
    return Outcome(
        {"diagnostics": [diagnostic_json(d) for d in diagnostics]},
        [*(diagnostic_line(d, style) for d in diagnostics), summary],
        status_of(diagnostics),
    )
