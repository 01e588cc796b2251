"""``acp-skills``: the skills an agent finds, as the demo agent finds them, and why."""

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
    LocalFileSystem,
    LocalSkillProvider,
    SkillCandidate,
    SkillLookupOptions,
    SkillRegistry,
    SkillTool,
)
from ..catalog import CatalogFit, describe_catalog_fit, fit_catalog
from ..diagnostics import Diagnostic, root_misnamed, shadow_diagnostic, skipped
from ..model import SKILL_FILE_NAME, SkillSnapshot, rank_text
from ..report import diagnostic_line, plural, server_json, server_line, tally
from ..text import replace_lone_surrogates
from ..text import terminal_safe as clean
from ..trust import ServedLocator, TrustState
from . import settings
from .checkup import checkup
from .new import new
from .output import (
    BOLD,
    DIM,
    OK,
    PROBLEMS,
    USAGE,
    Outcome,
    Style,
    emit,
    mcp_warnings,
    status_of,
    table,
)
from .trust import as_a_session_sees_it, trust, trust_of, withheld_lines
from .validate import validate

PROG = "acp-skills"
_Command = Callable[[argparse.Namespace, Style], Awaitable[Outcome]]
_Skills = tuple[LocalSkillProvider, SkillRegistry, SkillLookupOptions]


def _skills_from(args: argparse.Namespace) -> _Skills:
    # The demo agent's own settings build the provider; one look, so nothing to watch.
    provider = settings.build_provider(
        args, watch=False, dsh_home=args.dsh_home, agents_home=args.agents_home
    )
    registry = SkillRegistry()
    registry.register_provider(provider)
    if (mcp := getattr(args, "mcp", None)) is not None:  # --mcp-server, made by `main`
        registry.register_provider(mcp)
    return provider, registry, SkillLookupOptions(cwd=args.cwd)


def _agent_catalog(args: argparse.Namespace, snapshot: SkillSnapshot) -> CatalogFit:
    """The catalog the demo agent would freeze for a session, with the same settings."""
    return fit_catalog(
        snapshot.skills,
        settings.CATALOG_MAX_LENGTH,
        budget=args.catalog_budget,
        pinned=args.pin,
        hidden=args.hide,
    )


def _unknown_name_warnings(fit: CatalogFit) -> list[str]:
    """One line per pinned or hidden name no skill has (a typo, a skill since removed)."""
    return [
        f"warning: {setting} names no skill: {clean(name)} ({env})"
        for setting, env, names in (
            ("--pin", "ACP_SKILLS_PIN", fit.unknown_pinned),
            ("--hide", "ACP_SKILLS_HIDE", fit.unknown_hidden),
        )
        for name in names
    ]


async def _skipped_warnings(
    provider: LocalSkillProvider, options: SkillLookupOptions, *, named: str | None = None
) -> list[str]:
    """Each skipped file of the skill ``named`` with its reason, else how many were skipped."""
    left_out = skipped((await provider.discover(options)).diagnostics)
    if hers := [d for d in left_out if named is not None and _named_by_place(d) == named]:
        return [f"warning: {clean(d.path or '')} was skipped: {clean(d.message)}" for d in hers]
    if not left_out:
        return []
    what = plural(len(left_out), "skill file") + (" was" if len(left_out) == 1 else " were")
    return [f"warning: {what} skipped; `{PROG} doctor` says which and why."]


def _named_by_place(diagnostic: Diagnostic) -> str | None:
    # A bundle is named by its directory, a flat file by its name without `.md`.
    if diagnostic.path is None:
        return None
    head, tail = os.path.split(diagnostic.path)
    if tail == SKILL_FILE_NAME:
        return os.path.basename(head)
    return tail[:-3] if tail.endswith(".md") else None


async def _run(args: argparse.Namespace, style: Style) -> Outcome:
    try:
        return await args.run(args, style)  # type: ignore[no-any-return]
    finally:
        if (mcp := getattr(args, "mcp", None)) is not None:
            await mcp.aclose()  # no server process outlives the command


async def _custom_dir_warnings(provider: LocalSkillProvider) -> list[str]:
    return [
        f"warning: {clean(problem.path or '')}: {clean(problem.message)}"
        for problem in await provider.check_custom_dirs()
    ]


def _location(skill: SkillCandidate) -> dict[str, Any]:
    return {"source": skill.source, "path": skill.path}


def _served_uri(skill: SkillCandidate) -> str | None:
    """The ``skill://`` uri of a skill an MCP server serves (it has no path)."""
    locator = skill.locator
    return locator.skill_uri if isinstance(locator, ServedLocator) else None


def _skill_json(
    skill: SkillCandidate, winner: SkillCandidate | None, state: TrustState
) -> dict[str, Any]:
    """One skill as `list --json` and `doctor --json` give it (``winner``: what shadows it);
    a skill an MCP server serves also has its ``uri``."""
    served = {"uri": uri} if (uri := _served_uri(skill)) is not None else {}
    return {
        "name": skill.name,
        "description": skill.description,
        "source": skill.source,
        "rank": skill.rank,
        "provider": skill.provider,
        "path": skill.path,
        **served,
        "modelInvocable": not skill.disable_model_invocation,
        "userInvocable": skill.user_invocable,
        "shadowedBy": _location(winner) if winner is not None else None,
        "trust": state,
    }


async def _list(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = _skills_from(args)
    snapshot = await registry.snapshot(options)
    states = trust_of(args, [*snapshot.skills, *(lost.skill for lost in snapshot.shadowed)])
    # Each skill that stands, then (with --all) each it shadows, with what shadows it.
    lost_by_name: dict[str, list[tuple[SkillCandidate, SkillCandidate | None]]] = {}
    for lost in snapshot.shadowed if args.all else ():
        lost_by_name.setdefault(lost.skill.name, []).append((lost.skill, lost.winner))
    entries: list[tuple[SkillCandidate, SkillCandidate | None]] = []
    for skill in snapshot.skills:
        entries += [(skill, None), *lost_by_name.get(skill.name, ())]
    listed = [_skill_json(skill, winner, states[skill]) for skill, winner in entries]
    warnings = await _custom_dir_warnings(provider) + await _skipped_warnings(provider, options)
    warnings += await mcp_warnings(getattr(args, "mcp", None), options)
    outcome = Outcome({"skills": listed}, warnings=warnings)
    if not entries:
        outcome.text.append(f"No skills found for {clean(args.cwd)}.")
        outcome.remarks.append(f"`{PROG} doctor` shows where skills were looked for.")
        return outcome
    rows = [["NAME", "SOURCE", "RANK", "MODEL", "USER", "PATH"]]
    for skill, winner in entries:
        path = clean(skill.path or _served_uri(skill) or f"({skill.provider})")
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
    provider, registry, options = _skills_from(args)
    tool = SkillTool(registry)
    if args.invoke is not None:
        # What `/NAME ARGS` alone puts into the turn: the typed text, then the skill, its
        # placeholders filled as the agent fills them (only with --compat claude).
        typed = f"/{args.name} {args.invoke}".rstrip()
        fill = args.invoke.strip() if "claude" in args.compat else None
        result = await tool.invoke_for_user(args.name, cwd=args.cwd, arguments=fill)
        text = f"{typed}\n\n{result.text}" if not result.is_error else result.text
    else:
        arguments = {"name": args.name} | ({} if args.path is None else {"path": args.path})
        result = await tool.call(arguments, cwd=args.cwd)
        text = result.text
    # The agent replaces lone surrogates before anything reaches the editor or the model.
    text = replace_lone_surrogates(text)
    warnings = await _custom_dir_warnings(provider)
    named = args.name if result.is_error else None
    warnings += await _skipped_warnings(provider, options, named=named)
    warnings += await mcp_warnings(getattr(args, "mcp", None), options)
    _, withheld = as_a_session_sees_it(args, await registry.snapshot(options))
    if (held := withheld.get(args.name)) is not None:
        warnings += [f"warning: {clean(line)}" for line in withheld_lines({args.name: held})]
    return Outcome(
        {"name": args.name, "text": text, "isError": result.is_error},
        [text],
        PROBLEMS if result.is_error else OK,
        warnings=warnings,
    )


async def _catalog(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = _skills_from(args)
    snapshot, withheld = as_a_session_sees_it(args, await registry.snapshot(options))
    fit = _agent_catalog(args, snapshot)
    characters = len(fit.text or "")
    budget = dict(limit=fit.limit, used=fit.used, shortened=fit.shortened, omitted=fit.omitted)
    warnings = await _custom_dir_warnings(provider) + _unknown_name_warnings(fit)
    warnings += await mcp_warnings(getattr(args, "mcp", None), options)
    outcome = Outcome(
        {"text": fit.text, "characters": characters, "budget": budget}, warnings=warnings
    )
    if fit.text is None:
        outcome.remarks.append(
            f"No catalog: no skill the model may load for {clean(args.cwd)} (0 characters)."
        )
    else:
        outcome.text.append(fit.text)
        outcome.remarks.extend(clean(line) for line in describe_catalog_fit(fit).splitlines())
    outcome.remarks.extend(clean(line) for line in withheld_lines(withheld))
    return outcome


async def _doctor(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = _skills_from(args)
    discovery = await provider.discover(options)
    snapshot = await registry.snapshot(options)
    states = trust_of(args, [*snapshot.skills, *(lost.skill for lost in snapshot.shadowed)])
    offered, withheld = as_a_session_sees_it(args, snapshot, states)
    fit = _agent_catalog(args, offered)
    characters = len(fit.text or "")
    # A skipped MCP server and a listed skill left out are problems like a skipped file.
    mcp = getattr(args, "mcp", None)
    served = await mcp.diagnose(options) if mcp is not None else ()
    roots = discovery.roots
    # A few stats, a probe file and the package metadata: nothing here is worth a thread.
    install = checkup()
    problems = (
        *discovery.diagnostics,
        *served,
        *map(shadow_diagnostic, snapshot.shadowed),
        *await _misnamed_roots([r.root.path for r in roots if not r.exists]),
        *install.problems,
    )
    left_out = skipped(problems)
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
        "unknownPinned": list(fit.unknown_pinned),
        "unknownHidden": list(fit.unknown_hidden),
        # Beyond the skipped and the shadowed: every record, as `_skills/list` has them.
        "problems": [d.to_json() for d in problems],
        # Every skill that stands, as `list --json` has them: those a session withholds too.
        "skills": [_skill_json(skill, None, states[skill]) for skill in snapshot.skills],
    }
    servers = mcp.states(options) if mcp is not None else ()
    if mcp is not None:  # only with --mcp-server: the shape is kept otherwise
        payload["mcpServers"] = [server_json(state) for state in servers]
    payload["install"] = install.to_json()
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
            lines.extend(f"  {diagnostic_line(d, style)}" for d in found)
    if withheld:
        lines += ["", style(f"Waiting for trust or refused ({len(withheld)})", BOLD)]
        lines.extend("  " + clean(line) for line in withheld_lines(withheld))
    lines += ["", style("Install", BOLD)]
    lines.extend("  " + clean(line) for line in install.lines())
    lines.append("")
    if servers:
        lines.append(style(f"MCP servers ({len(servers)})", BOLD))
        lines.extend([*(f"  {server_line(state, style)}" for state in servers), ""])
    # What `catalog` says of the same fit, in the same words.
    fitted, *omitted = describe_catalog_fit(fit).splitlines()
    heading, _, rest = fitted.partition(":")
    lines.extend([f"{style(heading, BOLD)}:{rest}", *map(clean, omitted)])
    lines.append(f"{style('Result', BOLD)}: {tally(problems)}")
    unknown = _unknown_name_warnings(fit)
    # A name that matches nothing is a warning, and warnings make doctor exit with 1.
    status = PROBLEMS if unknown else status_of(problems)
    return Outcome(payload, lines, status, warnings=unknown)


async def _misnamed_roots(missing: Sequence[str]) -> list[Diagnostic]:
    """A directory beside a missing root whose name is the root's but for case or a final
    ``s`` (``.agents/skill``): skills a person put where the agent never looks."""
    fs, found = LocalFileSystem(), []
    for root in missing:
        parent, name = os.path.split(root)
        try:
            entries = await fs.list_dir(parent)
        except OSError:
            continue  # an unreadable parent hides nothing a person could fix here
        for entry in entries or ():
            if (
                entry.kind == "dir"
                and entry.name != name
                and entry.name.casefold()
                in (
                    name.casefold(),
                    name.casefold().removesuffix("s"),
                )
            ):
                found.append(root_misnamed(os.path.join(parent, entry.name), root))
    return found


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
        "Each problem reported carries a stable code (with --json: code, severity, path, line).",
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
        roots.add_argument(flag, type=settings.expand_path, metavar="DIR", help=help)
    # The demo agent's own flags, with its variables as defaults (ACP_SKILLS_DIRS, ...).
    settings.add_skill_arguments(roots)
    fitted = argparse.ArgumentParser(add_help=False)
    settings.add_catalog_arguments(fitted, "--budget", "--catalog-budget")
    settings.add_mcp_options(roots)
    settings.add_trust_argument(
        roots, "ask (stored decisions), all or none, as the agent's (default: $ACP_SKILLS_TRUST)"
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
    shown = show.add_mutually_exclusive_group()
    shown.add_argument("--path", metavar="REL", help="a file of the skill, as the tool's `path`")
    shown.add_argument(
        "--invoke",
        metavar="ARGS",
        help="what `/NAME ARGS` puts into the turn instead (also for a skill only a person "
        "may invoke); the placeholders are filled with --compat claude, as the agent fills them",
    )
    command(_catalog, "exactly the catalog message the model receives, and its size", roots, fitted)
    check = command(
        validate, "check skill directories, skill files or directories of skills", roots
    )
    check.add_argument(
        "paths",
        nargs="*",
        type=settings.expand_path,
        metavar="PATH",
        help="a skill directory, a skill file (SKILL.md or NAME.md), or a directory of skills "
        "(default: every skills root a session at --cwd reads, as doctor lists them)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="also apply the Agent Skills specification (agentskills.io)",
    )
    command(
        _doctor,
        "every root, skipped file and shadowed skill, and the catalog's size",
        roots,
        fitted,
    )
    write = command(new, "write a new skill to start from (it passes validate --strict)")
    write.add_argument("name", metavar="NAME", help="the skill's name, in kebab-case")
    write.add_argument(
        "--flat", action="store_true", help="a single NAME.md instead of NAME/SKILL.md"
    )
    write.add_argument(
        "--dir",
        type=settings.expand_path,
        metavar="DIR",
        help="the skills directory to write in (default: the project's .agents/skills)",
    )
    decide = command(
        trust, "trust, refuse or forget a project's or an MCP server's skills (docs/trust.md)"
    )
    decide.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="a path in the project (default: the current one), or a server's mcp:KEY from --list",
    )
    what = decide.add_mutually_exclusive_group()
    what.add_argument(
        "--refuse",
        action="store_true",
        help="never offer the project's (or the mcp:KEY server's) skills",
    )
    what.add_argument("--forget", action="store_true", help="drop the decision: ask again")
    what.add_argument("--list", action="store_true", help="every stored decision")
    settings.add_mcp_options(
        decide,
        "an MCP server to trust for the skills it lists now, asked once on the terminal, as a "
        "session's question asks (repeatable; with --refuse or --forget: by its identity, "
        "without starting it)",
    )
    decide.add_argument(
        "--yes",
        action="store_true",
        help="with --mcp-server: trust what it lists without asking (where no terminal is)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``acp-skills`` with ``argv``; return the exit status (0 fine, 1 problems, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if hasattr(args, "cwd"):
            # Links resolved before `..`, as a session's cwd is (`acp_skills.project`).
            args.cwd = os.path.realpath(args.cwd if args.cwd is not None else os.getcwd())
            if not os.path.isdir(args.cwd):
                parser.error(f"--cwd: not a directory: {args.cwd}")
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else USAGE
    try:
        if hasattr(args, "skills_dir"):
            settings.resolve_skill_settings(args)
        # Refused before anything runs: a malformed value, or no mcp extra installed.
        if getattr(args, "mcp_server", None):
            args.mcp = settings.mcp_provider_from(args.mcp_server, args.mcp_timeout)
        if hasattr(args, "trust") or args.run is trust:  # the commands that read trust.json
            settings.resolve_trust(args)
    except ValueError as error:
        # A variable the person set, or an --mcp-server that cannot be used: one line, no
        # usage block.
        print(f"{PROG}: {error}", file=sys.stderr)
        return USAGE
    # The commands report what the library would log; unconfigured structlog would also print
    # it to stdout, mixed into the output (and into the JSON).
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        # Not cached: a logger bound now would keep this set-up for the process's lifetime,
        # and main() may run more than once in one process (tests, embedding); one command
        # logs too little for caching to pay.
    )
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        getattr(stream, "reconfigure", lambda **_: None)(errors="backslashreplace")
    # https://no-color.org: present and not empty disables colour.
    colour = not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    style = Style(colour and sys.stdout.isatty())
    outcome: Outcome = asyncio.run(_run(args, style))
    try:
        emit(outcome, args.json)
    except BrokenPipeError:
        # `acp-skills list | head -1`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return outcome.status
