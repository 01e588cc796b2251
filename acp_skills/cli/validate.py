"""``acp-skills validate``: skills on disk as the runtime reads them, or by the specification."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

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
from ..fs import misnamed_skill_file
from ..local import SkillRoot, unreadable_root
from ..model import SKILL_FILE_NAME, ShadowedSkill
from .output import Outcome, Style, status_of
from .skills import look

MAX_NAME_LENGTH = 64
_MAX_FILE_BYTES = 1_048_576  # the local provider's default
# What the runtime only mentions but the specification forbids.
_ERRORS_WHEN_STRICT = frozenset({"name-mismatch", "unknown-key", "field-ignored"})


def under_strict_rules(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The runtime's records with the severity strict validation gives them."""
    return tuple(
        replace(d, severity="error") if d.code in _ERRORS_WHEN_STRICT else d for d in diagnostics
    )


def strict_diagnostics(path: str, parsed: ParsedSkill) -> tuple[Diagnostic, ...]:
    """One record per specification rule a well-formed skill file breaks (an ``error``; a
    flat skill, which this runtime reads, only a note)."""
    name, fields = parsed.name, parsed.fields
    found: dict[str, str] = {}  # by code: each rule is broken once at most

    def over(code: str, what: str, value: str, limit: int) -> None:
        if len(value) > limit:
            found[code] = f"{what} is {len(value)} characters, over the specification's {limit}"

    over("name-too-long", "name", name, MAX_NAME_LENGTH)
    over("description-too-long", "description", parsed.description, 1024)
    if "compatibility" in fields:
        if not isinstance(value := fields["compatibility"], str):
            found["compatibility-invalid"] = "'compatibility' must be a string"
        elif not value.strip():
            found["compatibility-invalid"] = "'compatibility' is empty (leave it out instead)"
        else:
            over("compatibility-invalid", "'compatibility'", value, 500)
    metadata = fields.get("metadata")
    # A metadata that is no mapping (or has non-string keys) is already a `field-ignored`.
    if isinstance(metadata, Mapping) and all(isinstance(key, str) for key in metadata):
        offending = [repr(key) for key, value in metadata.items() if not isinstance(value, str)]
        if offending:
            message = "metadata values must be strings (quote them); not a string: "
            found["metadata-invalid"] = message + ", ".join(offending)
    tools = fields.get("allowed-tools", "")
    # The frontmatter reader turns YAML sequences into tuples.
    if not isinstance(tools, str | tuple | list) or not all(isinstance(t, str) for t in tools):
        message = "'allowed-tools' must be a space-separated string or a list of strings"
        found["allowed-tools-invalid"] = message
    if os.path.basename(path) != SKILL_FILE_NAME:
        found["flat-skill"] = (
            "a single-file skill: the Agent Skills specification knows only a directory "
            f"holding {SKILL_FILE_NAME}, so other tools may not read it (to share it, move it "
            f"to {name}/{SKILL_FILE_NAME})"
        )
    return tuple(
        diagnostic(Problem(code, message), path, skill=name) for code, message in found.items()
    )


@dataclass(slots=True)
class _Validation:
    strict: bool
    fs: LocalFileSystem = field(default_factory=LocalFileSystem)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0

    def add(self, found: Iterable[Diagnostic], files: int = 0) -> None:
        self.diagnostics.extend(under_strict_rules(found) if self.strict else found)
        self.files += files

    def problem(self, code: str, message: str, path: str) -> None:
        self.add([diagnostic(Problem(code, message), path)])

    async def path(self, path: str) -> None:
        try:
            entries = await self.fs.list_dir(path)
        except OSError as error:
            self.add([diagnostic(unreadable_root(error), path)])
            return
        name = os.path.basename(path)
        names = {entry.name for entry in entries or ()}
        if SKILL_FILE_NAME in names:
            await self.file(os.path.join(path, SKILL_FILE_NAME), name)
        elif SKILL_FILE_NAME.lower() in names:
            # The agent would not load it: the same warning `doctor` gives for this bundle.
            self.add([diagnostic(misnamed_skill_file(), os.path.join(path, SKILL_FILE_NAME))], 1)
        elif entries is not None:
            await self.root(path)
        elif not await self.fs.exists(path):
            self.problem("not-found", "no such file or directory", path)
        elif name == SKILL_FILE_NAME:
            await self.file(path, os.path.basename(os.path.dirname(path)))
        elif name.endswith(".md"):
            await self.file(path, name.removesuffix(".md"))
        else:
            message = (
                f"not a skill file: the runtime reads {SKILL_FILE_NAME} in a skill "
                "directory, or a flat <name>.md in a skills directory"
            )
            self.problem("not-a-skill", message, path)

    async def file(self, path: str, expected_name: str) -> None:
        (content,) = await self.fs.read_files([path], _MAX_FILE_BYTES)
        outcome = parse_skill_bytes(content)
        found = file_diagnostics(path, outcome, expected_name=expected_name)
        if self.strict and isinstance(outcome, ParsedSkill):
            found += strict_diagnostics(path, outcome)
        self.add(found, 1)

    async def root(self, path: str) -> None:
        # Scanned exactly as the local provider scans a skills directory; the rank and source
        # of a custom directory show nowhere.
        provider = LocalSkillProvider(fs=self.fs, watch=False)
        discovery = await provider.scan([SkillRoot(path=path, source="custom", rank=300)])
        found = list(discovery.diagnostics)
        # One directory, one provider, one rank: the runtime keeps the first of each name.
        first: dict[str, SkillCandidate] = {}
        for candidate in discovery.candidates:
            if (kept := first.setdefault(candidate.name, candidate)) is not candidate:
                found.append(shadow_diagnostic(ShadowedSkill(skill=candidate, winner=kept)))
        if self.strict:
            # The scan keeps no frontmatter fields: read the accepted files again.
            paths = [c.path for c in discovery.candidates if c.path is not None]
            contents = await self.fs.read_files(paths, _MAX_FILE_BYTES)
            for skill_path, content in zip(paths, contents, strict=True):
                if isinstance(parsed := parse_skill_bytes(content), ParsedSkill):
                    found.extend(strict_diagnostics(skill_path, parsed))
        left_out = [d for d in skipped(found) if d.code != "root-unreadable"]
        files = len(discovery.candidates) + len(left_out)
        if files == 0:
            message = (
                f"no skills here: a skill is <name>/{SKILL_FILE_NAME} or <name>.md "
                "directly in this directory (one level deep)"
            )
            found.append(diagnostic(Problem("no-skills", message), path))
        self.add(found, files)


async def validate(args: argparse.Namespace, style: Style) -> Outcome:
    """Every record for the paths, or for each skills root a session at ``--cwd`` reads."""
    validation = _Validation(args.strict)
    if args.paths:
        # String work, plus one getcwd() for a relative path: no disk access to speak of.
        paths = [os.path.abspath(path) for path in args.paths]  # noqa: ASYNC240
    else:
        # The roots a session reads, exactly as for `doctor`.
        seen = look(args)
        roots = await seen.provider.roots(seen.options)
        paths = [root.path for root in roots if await validation.fs.exists(root.path)]
        if not paths:
            message = (
                "no skills roots here: a project keeps its skills in .agents/skills/ (see "
                "`acp-skills doctor` for every root looked at)"
            )
            validation.problem("no-skills", message, args.cwd)
    for path in paths:
        await validation.path(path)
    diagnostics = validation.diagnostics
    mode = "strict (Agent Skills specification)" if args.strict else "as the runtime reads them"
    summary = f"{plural(validation.files, 'skill file')} checked {mode}: {tally(diagnostics)}."
    return Outcome(
        {"diagnostics": [diagnostic_json(d) for d in diagnostics]},
        [*(diagnostic_line(d, style) for d in diagnostics), summary],
        status_of(diagnostics),
    )
