"""``acp-skills``: the skills an agent finds, exactly as it sees them, and why (docs/cli.md);
built as the demo agent builds them, from the core alone, never the ACP SDK."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from argparse import ArgumentParser
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import Any

import structlog

from .. import (
    LocalSkillProvider,
    SkillCandidate,
    SkillLookupOptions,
    SkillRegistry,
    SkillTool,
    is_skill_name,
)
from ..catalog import describe_catalog_fit, fit_catalog
from ..diagnostics import shadow_diagnostic, skipped
from ..model import ShadowedSkill
from ..text import remove_unsafe_characters as clean
from ..text import replace_lone_surrogates
from ..trust import TRUST_MODES
from .output import (
    BOLD,
    DIM,
    OK,
    PROBLEMS,
    USAGE,
    Outcome,
    Style,
    diagnostic_lines,
    emit,
    plural,
    rank_text,
    status_of,
    table,
    tally,
)
from .trust import add_trust_arguments, trust, trust_of
from .validate import validate

PROG = "acp-skills"
_Command = Callable[[argparse.Namespace, Style], Awaitable[Outcome]]
_Skills = tuple[LocalSkillProvider, SkillRegistry, SkillLookupOptions]


def _skills_from(args: argparse.Namespace) -> _Skills:
    if not (custom_dirs := list(args.skills_dir or [])):
        # As for the demo agent: the variable stands in for the flag.
        variable = os.environ.get("ACP_SKILLS_DIRS", "").strip()
        custom_dirs = [d for d in variable.split(os.pathsep) if d]
    # One look, so nothing to watch.
    provider = LocalSkillProvider(
        args.dsh_home, args.agents_home, custom_skill_dirs=custom_dirs, watch=False
    )
    registry = SkillRegistry()
    registry.register_provider(provider)
    return provider, registry, SkillLookupOptions(cwd=args.cwd)


async def _custom_dir_warnings(provider: LocalSkillProvider) -> list[str]:
    return [
        f"warning: {clean(problem.path or '')}: {clean(problem.message)}"
        for problem in await provider.check_custom_dirs()
    ]


def _location(skill: SkillCandidate) -> dict[str, Any]:
    return {"source": skill.source, "path": skill.path}


async def _list(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = _skills_from(args)
    snapshot = await registry.snapshot(options)
    losers: dict[str, list[ShadowedSkill]] = {}
    for shadowed in snapshot.shadowed if args.all else ():
        losers.setdefault(shadowed.skill.name, []).append(shadowed)
    entries: list[tuple[SkillCandidate, SkillCandidate | None]] = []
    states = trust_of(args, [*snapshot.skills, *(lost.skill for lost in snapshot.shadowed)])
    for skill in snapshot.skills:
        entries.append((skill, None))
        entries.extend((lost.skill, lost.winner) for lost in losers.get(skill.name, ()))
    listed = [
        {
            "name": skill.name,
            "description": skill.description,
            "source": skill.source,
            "rank": skill.rank,
            "provider": skill.provider,
            "path": skill.path,
            "modelInvocable": not skill.disable_model_invocation,
            "userInvocable": skill.user_invocable,
            "shadowedBy": _location(winner) if winner is not None else None,
            "trust": states[skill],
        }
        for skill, winner in entries
    ]
    outcome = Outcome({"skills": listed}, warnings=await _custom_dir_warnings(provider))
    if not entries:
        outcome.text.append(f"No skills found for {clean(args.cwd)}.")
        outcome.remarks.append(f"`{PROG} doctor` shows where skills were looked for.")
        return outcome
    rows = [["NAME", "SOURCE", "RANK", "MODEL", "USER", "PATH"]]
    for skill, winner in entries:
        path = clean(skill.path or f"({skill.provider})")
        if winner is not None:
            path += f"  (shadowed by {clean(winner.source)} {clean(winner.path or '')})"
        if (state := states[skill]) in ("pending", "refused"):
            path += "  (waiting for trust)" if state == "pending" else "  (trust refused)"
        model = "no" if skill.disable_model_invocation else "yes"
        user = "yes" if skill.user_invocable else "no"
        rows.append(
            [clean(skill.name), clean(skill.source), rank_text(skill.rank), model, user, path]
        )

    def paint(row: int, column: int, text: str) -> str:
        if row == 0 or (column == 0 and entries[row - 1][1] is None):
            return style(text, BOLD)
        return text if entries[row - 1][1] is None else style(text, DIM)

    outcome.text.extend(table(rows, frozenset({2}), paint))
    if not args.all and snapshot.shadowed:
        hidden = plural(len(snapshot.shadowed), "shadowed skill")
        outcome.remarks.append(f"{hidden} not shown (--all shows them).")
    return outcome


async def _show(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, _ = _skills_from(args)
    arguments = {"name": args.name} | ({} if args.path is None else {"path": args.path})
    result = await SkillTool(registry).call(arguments, cwd=args.cwd)
    # The agent replaces lone surrogates before anything reaches the editor or the model.
    text = replace_lone_surrogates(result.text)
    return Outcome(
        {"name": args.name, "text": text, "isError": result.is_error},
        [text],
        PROBLEMS if result.is_error else OK,
        warnings=await _custom_dir_warnings(provider),
    )


async def _catalog(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = _skills_from(args)
    snapshot = await registry.snapshot(options)
    fit = fit_catalog(snapshot.skills, budget=args.budget, pinned=args.pin, hidden=args.hide)
    characters = len(fit.text or "")
    budget = dict(limit=fit.limit, used=fit.used, shortened=fit.shortened, omitted=fit.omitted)
    outcome = Outcome(
        {"text": fit.text, "characters": characters, "budget": budget},
        warnings=await _custom_dir_warnings(provider),
    )
    if fit.text is None:
        outcome.remarks.append(
            f"No catalog: no skill the model may load for {clean(args.cwd)} (0 characters)."
        )
    elif args.budget is None and not args.pin and not args.hide:
        outcome.text.append(fit.text)
        outcome.remarks.append(f"{characters} characters, {plural(len(fit.listed), 'skill')}.")
    else:
        outcome.text.append(fit.text)
        outcome.remarks.extend(clean(line) for line in describe_catalog_fit(fit).splitlines())
    return outcome


async def _doctor(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = _skills_from(args)
    discovery = await provider.discover(options)
    snapshot = await registry.snapshot(options)
    fit = fit_catalog(snapshot.skills)
    characters = len(fit.text or "")
    problems = (*discovery.diagnostics, *map(shadow_diagnostic, snapshot.shadowed))
    left_out = skipped(problems)
    roots = discovery.roots
    payload = {
        "roots": [
            {"path": r.root.path, "source": r.root.source, "rank": r.root.rank}
            | {"exists": r.exists, "skills": r.skills}
            for r in roots
        ],
        "skipped": [d.to_json() for d in left_out],
        "shadowed": [
            {"name": s.skill.name, "winner": _location(s.winner), "loser": _location(s.skill)}
            for s in snapshot.shadowed
        ],
        "catalogCharacters": characters,
        # Beyond the skipped and the shadowed: every record, as `_skills/list` has them.
        "problems": [d.to_json() for d in problems],
    }
    lines = [f"{style('Skills for', BOLD)} {clean(args.cwd)}", ""]
    lines.append(
        style("Roots", BOLD) + style(" (in precedence order: the first of a name wins)", DIM)
    )
    rows = [["RANK", "SOURCE", "SKILLS", "PATH"]]
    for r in roots:
        count, state = (str(r.skills), "") if r.exists else ("-", "  (missing)")
        rows.append([rank_text(r.root.rank), r.root.source, count, clean(r.root.path) + state])

    def paint(row: int, column: int, cell: str) -> str:
        if row == 0:
            return style(cell, BOLD)
        return cell if roots[row - 1].exists else style(cell, DIM)

    lines.extend("  " + line for line in table(rows, frozenset({0, 2}), paint))
    shadow_codes = {"skill-shadowed", "skill-duplicate"}
    sections = (
        ("Skipped", left_out),
        ("Shadowed", [d for d in problems if d.code in shadow_codes]),
        ("Other", [d for d in problems if d not in left_out and d.code not in shadow_codes]),
    )
    for title, found in sections:
        if found:
            lines += ["", style(f"{title} ({len(found)})", BOLD)]
            lines.extend("  " + line for line in diagnostic_lines(found, style))
    lines.append("")
    visible = plural(len(fit.listed), "skill")
    lines.append(f"{style('Catalog', BOLD)}: {characters} characters, {visible} for the model")
    lines.append(f"{style('Result', BOLD)}: {tally(problems)}")
    return Outcome(payload, lines, status_of(problems))


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
    for flag, help in (
        ("--cwd", "the working directory of the session to look from (default: the current one)"),
        ("--dsh-home", "default: $DSH_HOME, else ~/.dsh"),
        ("--agents-home", "default: $DSH_AGENTS_HOME, else ~/.agents"),
    ):
        roots.add_argument(flag, metavar="DIR", help=help)
    roots.add_argument(
        "--trust",
        choices=TRUST_MODES,
        help="ask (stored decisions), all or none, as the agent's (default: $ACP_SKILLS_TRUST)",
    )
    roots.add_argument(
        "--skills-dir",
        action="append",
        metavar="DIR",
        help="an extra skills directory (repeatable), as the agent's --skills-dir "
        "(default: $ACP_SKILLS_DIRS)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(run: _Command, help: str, *parents: ArgumentParser) -> ArgumentParser:
        name = run.__name__.lstrip("_")
        sub = commands.add_parser(name, parents=[*parents, as_json], help=help)
        sub.set_defaults(run=run)
        return sub

    command(_list, "the skills resolved for --cwd", roots).add_argument(
        "--all", action="store_true", help="also the shadowed skills, and what shadows them"
    )
    show = command(_show, "exactly what the skill tool returns for NAME", roots)
    show.add_argument("name", metavar="NAME")
    show.add_argument("--path", metavar="REL", help="a file of the skill, as the tool's `path`")
    catalog = command(
        _catalog, "exactly the catalog message the model receives, and its size", roots
    )
    catalog.add_argument(
        "--budget",
        type=_budget,
        metavar="N",
        help="the agent's catalog budget in characters (the demo agent's --catalog-budget); "
        "shows what it shortens and leaves out",
    )
    for flag, help in (
        ("--pin", "a skill listed in full, first (repeatable)"),
        ("--hide", "a skill never listed (repeatable)"),
    ):
        catalog.add_argument(
            flag, action="append", type=_skill_name, default=[], metavar="NAME", help=help
        )
    check = command(validate, "check skill directories, skill files or directories of skills")
    check.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a skill directory, a skill file (SKILL.md or NAME.md), or a directory of skills",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="also apply the Agent Skills specification (agentskills.io)",
    )
    command(_doctor, "every root, skipped file and shadowed skill, and the catalog's size", roots)
    add_trust_arguments(
        command(trust, "trust, refuse or forget a project's skills (docs/trust.md)")
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``acp-skills`` with ``argv``; return the exit status (0 fine, 1 problems, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if hasattr(args, "cwd"):
            args.cwd = os.path.abspath(args.cwd if args.cwd is not None else os.getcwd())
            if not os.path.isdir(args.cwd):
                parser.error(f"--cwd: not a directory: {args.cwd}")
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else USAGE
    # The commands report what the library would log; unconfigured structlog would also print
    # it to stdout, mixed into the output (and into the JSON).
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        getattr(stream, "reconfigure", lambda **_: None)(errors="backslashreplace")
    # https://no-color.org: present and not empty disables colour.
    colour = not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    style = Style(colour and sys.stdout.isatty())
    outcome: Outcome = asyncio.run(args.run(args, style))
    try:
        emit(outcome, args.json)
    except BrokenPipeError:
        # `acp-skills list | head -1`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return outcome.status
