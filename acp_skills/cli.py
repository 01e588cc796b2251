"""``acp-skills`` (also ``python -m acp_skills``): see what the agent sees, and why.

    acp-skills list [--all]       the skills resolved for --cwd (and, with --all, the shadowed)
    acp-skills show NAME          exactly the text the ``skill`` tool returns
    acp-skills catalog            exactly the catalog message the model receives, and its size
    acp-skills validate PATH...   the runtime's diagnostics, or the specification's (--strict)
    acp-skills doctor             every root, skipped file, shadowed skill, and the catalog size

Every command reads the skills the way the demo agent does (the same provider, registry, tool
and catalog contributor, with ``ACP_SKILLS_DIRS`` standing in for ``--skills-dir`` as it does
there) and takes ``--json`` for scripts. Output is aligned and coloured on a terminal (unless
``NO_COLOR`` is set), plain when piped. Exit status: 0 fine; 1 problems found (an error or a
warning from ``validate`` or ``doctor``, or an error result from ``show``); 2 usage error.

An edge of the library: it uses the core modules only, never the ACP SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Final

import structlog

from .catalog import SKILL_TOOL_NAME, CatalogFit, SkillCatalogContributor, describe_catalog_fit
from .diagnostics import Diagnostic, counts_as_problem, shadow_diagnostic, skipped
from .local import LocalDiscovery, LocalSkillProvider
from .model import (
    PrefixContext,
    PrefixMessage,
    ShadowedSkill,
    SkillCandidate,
    SkillLookupOptions,
    is_skill_name,
)
from .registry import SkillRegistry
from .text import (
    remove_unsafe_characters,
    replace_lone_surrogates,
    replace_lone_surrogates_in_json,
    shorten_description,
)
from .tool import SkillTool
from .validation import validate_paths

__all__ = ["main"]

PROG: Final = "acp-skills"

_OK: Final = 0
_PROBLEMS: Final = 1
_USAGE: Final = 2

# The session id the catalog is composed for: the contributor only uses the cwd and the tools.
_CLI_SESSION: Final = "acp-skills-cli"
_LIST_DESCRIPTION_WIDTH: Final = 60


# -- output ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Style:
    """ANSI styling, or none at all (piped output, ``NO_COLOR``, a dumb terminal)."""

    enabled: bool

    def paint(self, text: str, *codes: str) -> str:
        if not self.enabled or not codes or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def bold(self, text: str) -> str:
        return self.paint(text, "1")

    def dim(self, text: str) -> str:
        return self.paint(text, "2")

    def severity(self, severity: str) -> str:
        label = "note" if severity == "info" else severity
        codes = {"error": ("1", "31"), "warning": ("1", "33"), "info": ("36",)}
        return self.paint(label, *codes.get(severity, ()))


def _style_for(stream: Any) -> _Style:
    isatty = getattr(stream, "isatty", None)
    terminal = bool(isatty()) if callable(isatty) else False
    # https://no-color.org: present and not empty disables colour.
    wanted = not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return _Style(enabled=terminal and wanted)


def _table(
    rows: Sequence[Sequence[str]],
    *,
    right: frozenset[int] = frozenset(),
    paint: Callable[[int, int, str], str] | None = None,
) -> list[str]:
    """Rows of cells aligned in columns (the first row is the header); the last column is not
    padded. ``paint(row, column, padded_text)`` styles a cell after it has been padded, so
    escape sequences never disturb the alignment."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = []
        for column, cell in enumerate(row):
            last = column == len(row) - 1
            padded = (
                cell
                if last
                else (cell.rjust(widths[column]) if column in right else cell.ljust(widths[column]))
            )
            cells.append(paint(index, column, padded) if paint is not None else padded)
        lines.append("  ".join(cells).rstrip())
    return lines


def _clean(text: str) -> str:
    """Text from disk, fit for a terminal: no control characters, no lone surrogates."""
    return remove_unsafe_characters(text)


def _one_line(text: str, width: int) -> str:
    return shorten_description(text, width)


@dataclass(slots=True)
class _Outcome:
    """What a command produced: JSON for ``--json``, text otherwise, and the exit status."""

    payload: dict[str, Any]
    text: list[str] = field(default_factory=list)
    status: int = _OK
    # Said on stderr in text mode, so stdout stays exactly the command's output.
    remarks: list[str] = field(default_factory=list)
    # Said on stderr whatever the mode: something the person must not miss.
    warnings: list[str] = field(default_factory=list)


# -- setting up what the agent would see -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Skills:
    cwd: str
    provider: LocalSkillProvider
    registry: SkillRegistry

    @property
    def options(self) -> SkillLookupOptions:
        return SkillLookupOptions(cwd=self.cwd)


def _skills_from(args: argparse.Namespace) -> _Skills:
    custom_dirs = list(args.skills_dir or [])
    if not custom_dirs:
        # As the demo agent: the variable stands in for the flag.
        variable = os.environ.get("ACP_SKILLS_DIRS", "").strip()
        custom_dirs = [d for d in variable.split(os.pathsep) if d]
    provider = LocalSkillProvider(
        dsh_home=args.dsh_home, agents_home=args.agents_home, custom_skill_dirs=custom_dirs
    )
    registry = SkillRegistry()
    registry.register_provider(provider)
    return _Skills(cwd=args.cwd, provider=provider, registry=registry)


async def _custom_dir_warnings(skills: _Skills) -> list[str]:
    """A ``--skills-dir`` that does not exist or cannot be read, said as the agent says it."""
    return [
        f"warning: {_clean(problem.path or '')}: {_clean(problem.message)}"
        for problem in await skills.provider.check_custom_dirs()
    ]


async def _catalog_fit(
    skills: _Skills,
    *,
    budget: int | None = None,
    pinned: Sequence[str] = (),
    hidden: Sequence[str] = (),
) -> CatalogFit:
    """The catalog exactly as a session of the agent composes it, with its budget outcome."""
    fits: list[CatalogFit] = []
    contributor = SkillCatalogContributor(
        skills.registry,
        budget=budget,
        pinned_skills=pinned,
        hidden_skills=hidden,
        on_fit=lambda _context, fit: fits.append(fit),
    )
    context = PrefixContext(
        session_id=_CLI_SESSION, cwd=skills.cwd, tool_names=frozenset({SKILL_TOOL_NAME})
    )

    async def nothing_after() -> Sequence[PrefixMessage]:
        return ()

    await contributor(context, nothing_after)
    return fits[-1]


async def _catalog_text(skills: _Skills) -> str | None:
    """The catalog message exactly as a session of the agent composes it (no budget)."""
    return (await _catalog_fit(skills)).text


def _skill_name(text: str) -> str:
    if not is_skill_name(text):
        raise argparse.ArgumentTypeError(f"not a skill name: {text!r}")
    return text


def _budget(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


# -- commands ----------------------------------------------------------------------------------


def _location(skill: SkillCandidate) -> dict[str, Any]:
    return {"source": skill.source, "path": skill.path}


def _listed(skill: SkillCandidate, winner: SkillCandidate | None) -> dict[str, Any]:
    return {
        "name": skill.name,
        "description": skill.description,
        "source": skill.source,
        "rank": skill.rank,
        "provider": skill.provider,
        "path": skill.path,
        "modelInvocable": not skill.disable_model_invocation,
        "userInvocable": skill.user_invocable,
        "shadowedBy": _location(winner) if winner is not None else None,
    }


def _rank(rank: int | float) -> str:
    return str(int(rank)) if float(rank).is_integer() else str(rank)


async def _list(args: argparse.Namespace, style: _Style) -> _Outcome:
    skills = _skills_from(args)
    snapshot = await skills.registry.snapshot(skills.options)
    losers: dict[str, list[ShadowedSkill]] = {}
    if args.all:
        for shadowed in snapshot.shadowed:
            losers.setdefault(shadowed.skill.name, []).append(shadowed)
    entries: list[tuple[SkillCandidate, SkillCandidate | None]] = []
    for skill in snapshot.skills:
        entries.append((skill, None))
        entries.extend((lost.skill, lost.winner) for lost in losers.get(skill.name, ()))
    outcome = _Outcome(
        payload={"skills": [_listed(s, w) for s, w in entries]},
        warnings=await _custom_dir_warnings(skills),
    )
    if not entries:
        outcome.text.append(f"No skills found for {_clean(skills.cwd)}.")
        outcome.remarks.append(f"`{PROG} doctor` shows where skills were looked for.")
        return outcome
    header = ["NAME", "SOURCE", "RANK", "MODEL", "USER", "PATH"]
    rows = [header]
    for skill, winner in entries:
        path = _clean(skill.path or f"({skill.provider})")
        if winner is not None:
            path += f"  (shadowed by {_clean(winner.source)} {_clean(winner.path or '')})"
        rows.append(
            [
                _clean(skill.name),
                _clean(skill.source),
                _rank(skill.rank),
                "no" if skill.disable_model_invocation else "yes",
                "yes" if skill.user_invocable else "no",
                path.rstrip(),
            ]
        )

    def paint(row: int, column: int, text: str) -> str:
        if row == 0:
            return style.bold(text)
        if entries[row - 1][1] is not None:
            return style.dim(text)
        return style.bold(text) if column == 0 else text

    outcome.text.extend(_table(rows, right=frozenset({2}), paint=paint))
    if not args.all and snapshot.shadowed:
        count = len(snapshot.shadowed)
        outcome.remarks.append(
            f"{count} shadowed skill{'' if count == 1 else 's'} not shown (--all shows them)."
        )
    return outcome


async def _show(args: argparse.Namespace, style: _Style) -> _Outcome:
    skills = _skills_from(args)
    arguments: dict[str, Any] = {"name": args.name}
    if args.path is not None:
        arguments["path"] = args.path
    result = await SkillTool(skills.registry).call(arguments, cwd=skills.cwd)
    # The agent replaces lone surrogates before anything reaches the editor or the model.
    text = replace_lone_surrogates(result.text)
    return _Outcome(
        payload={"name": args.name, "text": text, "isError": result.is_error},
        text=[text],
        status=_PROBLEMS if result.is_error else _OK,
        warnings=await _custom_dir_warnings(skills),
    )


async def _catalog(args: argparse.Namespace, style: _Style) -> _Outcome:
    skills = _skills_from(args)
    fit = await _catalog_fit(skills, budget=args.budget, pinned=args.pin, hidden=args.hide)
    text = fit.text
    characters = len(text) if text is not None else 0
    outcome = _Outcome(
        payload={
            "text": text,
            "characters": characters,
            # The same report as `_skills/prefix` gives for a session's frozen catalog.
            "budget": {
                "limit": fit.limit,
                "used": fit.used,
                "shortened": fit.shortened,
                "omitted": list(fit.omitted),
            },
        },
        warnings=await _custom_dir_warnings(skills),
    )
    if text is None:
        outcome.remarks.append(
            f"No catalog: no skill the model may load for {_clean(skills.cwd)} (0 characters)."
        )
        return outcome
    outcome.text.append(text)
    if args.budget is None and not args.pin and not args.hide:
        visible = len(await skills.registry.list(skills.options))
        outcome.remarks.append(
            f"{characters} characters, {visible} skill{'' if visible == 1 else 's'}."
        )
    else:
        outcome.remarks.extend(_clean(line) for line in describe_catalog_fit(fit).splitlines())
    return outcome


def _diagnostic_lines(diagnostics: Sequence[Diagnostic], style: _Style) -> list[str]:
    lines = []
    for d in diagnostics:
        where = _clean(d.path) if d.path is not None else "-"
        if d.line is not None:
            where += f":{d.line}"
        lines.append(
            f"{style.bold(where)}: {style.severity(d.severity)} "
            f"{style.dim(d.code)}: {_clean(d.message)}"
        )
    return lines


def _tally(diagnostics: Sequence[Diagnostic]) -> str:
    parts = []
    for severity, label in (("error", "error"), ("warning", "warning"), ("info", "note")):
        count = sum(1 for d in diagnostics if d.severity == severity)
        if count:
            parts.append(f"{count} {label}{'' if count == 1 else 's'}")
    return ", ".join(parts) if parts else "no problems"


async def _validate(args: argparse.Namespace, style: _Style) -> _Outcome:
    report = await validate_paths(args.paths, strict=args.strict)
    diagnostics = report.diagnostics
    outcome = _Outcome(
        payload={"diagnostics": [d.to_json() for d in diagnostics]},
        text=_diagnostic_lines(diagnostics, style),
        status=_PROBLEMS if any(counts_as_problem(d) for d in diagnostics) else _OK,
    )
    files = f"{report.files} skill file{'' if report.files == 1 else 's'}"
    mode = "strict (Agent Skills specification)" if args.strict else "as the runtime reads them"
    outcome.text.append(f"{files} checked {mode}: {_tally(diagnostics)}.")
    return outcome


def _shadow_entry(shadowed: ShadowedSkill) -> dict[str, Any]:
    return {
        "name": shadowed.skill.name,
        "winner": _location(shadowed.winner),
        "loser": _location(shadowed.skill),
    }


async def _doctor(args: argparse.Namespace, style: _Style) -> _Outcome:
    skills = _skills_from(args)
    discovery: LocalDiscovery = await skills.provider.discover(skills.options)
    snapshot = await skills.registry.snapshot(skills.options)
    text = await _catalog_text(skills)
    characters = len(text) if text is not None else 0
    # What `SkillRegistry.diagnose` gathers, from the discovery already made here.
    problems = (
        *discovery.diagnostics,
        *(shadow_diagnostic(shadowed) for shadowed in snapshot.shadowed),
    )
    left_out = skipped(problems)
    payload = {
        "roots": [
            {
                "path": report.root.path,
                "source": report.root.source,
                "rank": report.root.rank,
                "exists": report.exists,
                "skills": report.skills,
            }
            for report in discovery.roots
        ],
        "skipped": [d.to_json() for d in left_out],
        "shadowed": [_shadow_entry(s) for s in snapshot.shadowed],
        "catalogCharacters": characters,
        # Beyond the skipped and the shadowed: every record, as `_skills/list` has them.
        "problems": [d.to_json() for d in problems],
    }
    outcome = _Outcome(
        payload=payload,
        status=_PROBLEMS if any(counts_as_problem(d) for d in problems) else _OK,
    )
    lines = outcome.text
    lines.append(f"{style.bold('Skills for')} {_clean(skills.cwd)}")
    lines.append("")
    lines.append(
        style.bold("Roots") + style.dim(" (in precedence order: the first of a name wins)")
    )
    rows = [["RANK", "SOURCE", "SKILLS", "PATH"]]
    for report in discovery.roots:
        state = "" if report.exists else "  (missing)"
        rows.append(
            [
                _rank(report.root.rank),
                report.root.source,
                str(report.skills) if report.exists else "-",
                _clean(report.root.path) + state,
            ]
        )

    def paint_root(row: int, column: int, cell: str) -> str:
        if row == 0:
            return style.bold(cell)
        return cell if discovery.roots[row - 1].exists else style.dim(cell)

    lines.extend("  " + line for line in _table(rows, right=frozenset({0, 2}), paint=paint_root))
    shadow_codes = {"skill-shadowed", "skill-duplicate"}
    sections = (
        ("Skipped", left_out),
        ("Shadowed", [d for d in problems if d.code in shadow_codes]),
        ("Other", [d for d in problems if d not in left_out and d.code not in shadow_codes]),
    )
    for title, found in sections:
        if found:
            lines.append("")
            lines.append(style.bold(f"{title} ({len(found)})"))
            lines.extend("  " + line for line in _diagnostic_lines(found, style))
    lines.append("")
    visible = len(await skills.registry.list(skills.options))
    lines.append(
        f"{style.bold('Catalog')}: {characters} characters, "
        f"{visible} skill{'' if visible == 1 else 's'} for the model"
    )
    lines.append(f"{style.bold('Result')}: {_tally(problems)}")
    return outcome


# -- the command line --------------------------------------------------------------------------

_COMMANDS: Final = {
    "list": _list,
    "show": _show,
    "catalog": _catalog,
    "validate": _validate,
    "doctor": _doctor,
}


def _version() -> str:
    try:
        return metadata.version("acp-skills")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The ``acp-skills`` argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="See the skills an acp-skills agent finds, exactly as it will see them, "
        "and why a skill is missing.",
        epilog="Exit status: 0 fine, 1 problems found, 2 usage error. "
        "Diagnostic codes: docs/diagnostics.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")

    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON (a stable shape)")

    roots = argparse.ArgumentParser(add_help=False)
    roots.add_argument(
        "--cwd",
        default=None,
        metavar="DIR",
        help="the working directory of the session to look from (default: the current one)",
    )
    roots.add_argument(
        "--dsh-home", default=None, metavar="DIR", help="default: $DSH_HOME, else ~/.dsh"
    )
    roots.add_argument(
        "--agents-home",
        default=None,
        metavar="DIR",
        help="default: $DSH_AGENTS_HOME, else ~/.agents",
    )
    roots.add_argument(
        "--skills-dir",
        action="append",
        default=None,
        metavar="DIR",
        help="an extra skills directory (repeatable), as the agent's --skills-dir "
        "(default: $ACP_SKILLS_DIRS)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser(
        "list", parents=[roots, as_json], help="the skills resolved for --cwd"
    )
    listing.add_argument(
        "--all", action="store_true", help="also the shadowed skills, and what shadows them"
    )
    show = commands.add_parser(
        "show", parents=[roots, as_json], help="exactly what the skill tool returns for NAME"
    )
    show.add_argument("name", metavar="NAME")
    show.add_argument(
        "--path", default=None, metavar="REL", help="a file of the skill, as the tool's `path`"
    )
    catalog = commands.add_parser(
        "catalog",
        parents=[roots, as_json],
        help="exactly the catalog message the model receives, and its size",
    )
    catalog.add_argument(
        "--budget",
        type=_budget,
        default=None,
        metavar="N",
        help="the agent's catalog budget in characters (the demo agent's --catalog-budget); "
        "shows what it shortens and leaves out",
    )
    catalog.add_argument(
        "--pin",
        action="append",
        type=_skill_name,
        default=[],
        metavar="NAME",
        help="a skill listed in full, first (repeatable)",
    )
    catalog.add_argument(
        "--hide",
        action="append",
        type=_skill_name,
        default=[],
        metavar="NAME",
        help="a skill never listed (repeatable)",
    )
    validate = commands.add_parser(
        "validate",
        parents=[as_json],
        help="check skill directories, skill files or directories of skills",
    )
    validate.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a skill directory, a skill file (SKILL.md or NAME.md), or a directory of skills",
    )
    validate.add_argument(
        "--strict",
        action="store_true",
        help="also apply the Agent Skills specification (agentskills.io)",
    )
    commands.add_parser(
        "doctor",
        parents=[roots, as_json],
        help="every root, skipped file and shadowed skill, and the catalog's size",
    )
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if hasattr(args, "cwd"):
        cwd = os.path.abspath(args.cwd if args.cwd is not None else os.getcwd())
        if not os.path.isdir(cwd):
            parser.error(f"--cwd: not a directory: {cwd}")
        args.cwd = cwd
    return args


def _quiet_library_logs() -> None:
    # The commands report what the library would log; unconfigured structlog would also print
    # it to stdout, mixed into the output (and into the JSON).
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def _emit(outcome: _Outcome, as_json: bool) -> None:
    for warning in outcome.warnings:
        sys.stderr.write(replace_lone_surrogates(warning) + "\n")
    sys.stderr.flush()
    if as_json:
        well_formed = replace_lone_surrogates_in_json(outcome.payload)
        sys.stdout.write(json.dumps(well_formed, indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    for line in outcome.text:
        sys.stdout.write(replace_lone_surrogates(line) + "\n")
    sys.stdout.flush()
    for remark in outcome.remarks:
        sys.stderr.write(replace_lone_surrogates(remark) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``acp-skills`` with ``argv`` (default: the process's arguments).

    Returns:
        The exit status: 0 fine, 1 problems found, 2 usage error.
    """
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as exit:
        # argparse exits on --help (0) and on usage errors (2); a caller gets the status.
        return exit.code if isinstance(exit.code, int) else _USAGE
    _quiet_library_logs()
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            # A terminal that cannot show a character gets an escape, never a traceback.
            reconfigure(errors="backslashreplace")
    command = _COMMANDS[args.command]
    outcome = asyncio.run(command(args, _style_for(sys.stdout)))
    try:
        _emit(outcome, args.json)
    except BrokenPipeError:
        # `acp-skills list | head -1`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return outcome.status
