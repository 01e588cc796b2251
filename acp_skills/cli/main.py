"""``acp-skills``: the parser, `main`, and ``list``, ``show``, ``catalog`` and ``doctor``: what a
session at ``--cwd`` sees, built as the demo agent builds it."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import structlog

from .. import LocalSkillProvider, SkillCandidate, SkillLookupOptions, SkillRegistry, SkillTool
from ..catalog import CatalogFit, fit_catalog
from ..diagnostics import (
    by_severity,
    describe_catalog_fit,
    diagnostic_json,
    diagnostic_line,
    plural,
    server_json,
    server_line,
    skipped,
    tally,
)
from ..model import rank_text
from ..text import terminal_safe as clean
from ..trust import ServedLocator, SessionView, TrustStore, session_view
from ..trust_text import how_to_admit, why_withheld, withheld_parts
from . import settings
from .output import BOLD, OK, PROBLEMS, PROG, USAGE, Outcome, Style, emit, status_of, table
from .settings import Settings
from .trust import trust
from .validate import validate


@dataclass(frozen=True, slots=True)
class Look:
    """What every command that looks from ``--cwd`` builds, as the agent does."""

    settings: Settings
    provider: LocalSkillProvider
    registry: SkillRegistry
    options: SkillLookupOptions
    mcp: Any  # the `McpSkillProvider` of --mcp-server (made by `main`), or None

    @classmethod
    def at(cls, args: argparse.Namespace, given: Settings) -> Look:
        mcp = given.mcp_provider() if given.mcp_servers else None
        # One look, so nothing to watch.
        provider = given.provider(watch=False, dsh_home=args.dsh_home, agents_home=args.agents_home)
        registry = SkillRegistry()
        for each in (provider, mcp) if mcp is not None else (provider,):
            registry.register_provider(each)
        return cls(given, provider, registry, SkillLookupOptions(cwd=args.cwd), mcp)

    async def view(self) -> tuple[SessionView, CatalogFit]:
        """What the session is offered, and the catalog the demo agent would freeze for it."""
        given = self.settings
        view = await session_view(self.registry, self.options, given.trust, TrustStore())
        fit = fit_catalog(
            view.offered.skills,
            max_length=given.catalog_max_length,
            budget=given.catalog_budget,
            pinned=given.pinned,
            hidden=given.hidden,
        )
        return view, fit

    async def warnings(self, view: SessionView, *, skipped_files: bool = True) -> list[str]:
        """A missing ``--skills-dir``, how many files were skipped, each MCP server's problem,
        and what ``view`` was made despite (a trust file that cannot be read)."""
        problems = await self.provider.diagnose(self.options)  # the one discovery's
        missing = [d for d in problems if d.code == "root-missing"]
        found = [f"warning: {clean(d.path or '')}: {clean(d.message)}" for d in missing]
        if skipped_files and (left_out := skipped(problems)):
            were = "was" if len(left_out) == 1 else "were"
            said = f"{plural(len(left_out), 'skill file')} {were} skipped"
            found.append(f"warning: {said}; `{PROG} doctor` says which and why.")
        served = await self.mcp.diagnose(self.options) if self.mcp is not None else ()
        return found + [f"warning: {clean(d.message)}" for d in (*served, *view.problems)]


def unknown_name_warnings(fit: CatalogFit) -> list[str]:
    """One line per pinned or hidden name no skill has (a typo, a skill since removed)."""
    return [
        f"warning: {setting} names no skill: {clean(name)} ({variable})"
        for setting, variable, names in (
            ("--pin", "ACP_SKILLS_PIN", fit.unknown_pinned),
            ("--hide", "ACP_SKILLS_HIDE", fit.unknown_hidden),
        )
        for name in names
    ]


def served_uri(skill: SkillCandidate) -> str | None:
    """The ``skill://`` uri of a skill an MCP server serves (it has no path)."""
    return skill.locator.skill_uri if isinstance(skill.locator, ServedLocator) else None


def skill_json(skill: SkillCandidate, view: SessionView) -> dict[str, Any]:
    """One skill as `list --json` and `doctor --json` give it."""
    served = {"uri": uri} if (uri := served_uri(skill)) is not None else {}
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
        "trust": view.state(skill),
    }


async def list_skills(args: argparse.Namespace, style: Style) -> Outcome:
    seen: Look = args.look
    view, _ = await seen.view()
    listed = [skill_json(skill, view) for skill in view.found.skills]
    outcome = Outcome({"skills": listed}, warnings=await seen.warnings(view))
    if not listed:
        outcome.text.append(f"No skills found for {clean(args.cwd)}.")
        outcome.remarks.append(f"`{PROG} doctor` shows where skills were looked for.")
        return outcome
    rows = [["NAME", "SOURCE", "RANK", "MODEL", "USER", "PATH"]]
    marks = {"pending": "  (waiting for trust)", "refused": "  (trust refused)"}
    for said in listed:
        path = said["path"] or said["uri"]  # a local skill's file, or an MCP server's uri
        yes_no = ["yes" if said[key] else "no" for key in ("modelInvocable", "userInvocable")]
        cells = [said["name"], said["source"], rank_text(said["rank"]), *yes_no]
        rows.append([*map(clean, cells), clean(path) + marks.get(said["trust"], "")])
    outcome.text.extend(table(rows, {2}, style))
    if view.found.shadowed:
        hidden = plural(len(view.found.shadowed), "shadowed skill")
        outcome.remarks.append(f"{hidden} not shown (`{PROG} doctor` shows them).")
    return outcome


async def show(args: argparse.Namespace, style: Style) -> Outcome:
    seen: Look = args.look
    arguments = {"name": args.name} | ({} if args.path is None else {"path": args.path})
    result = await SkillTool(seen.registry).call(arguments, cwd=args.cwd)
    # After the call: a uri its server confirmed is among the server's skills from then on,
    # and a skill named by its uri is told about by its name.
    view, _ = await seen.view()
    warnings = await seen.warnings(view)
    name = next((s.name for s in view.found.skills if served_uri(s) == args.name), args.name)
    if (held := view.withheld.get(name)) is not None:
        said = f"{why_withheld(name, held)}: a session does not offer it."
        warnings.append(f"warning: {said} {how_to_admit([held])}")
    payload = {"name": args.name, "text": result.text, "isError": result.is_error}
    status = PROBLEMS if result.is_error else OK
    return Outcome(payload, [result.text], status, warnings=warnings)


def _withheld(view: SessionView, style: Style) -> list[tuple[str, list[str]]]:
    """The parts of a report on the skills that wait for trust or are refused."""
    parts = withheld_parts(view.withheld.values(), style)
    return [(f"{title} ({len(items)})", [*items, how]) for title, items, how in parts]


async def catalog(args: argparse.Namespace, style: Style) -> Outcome:
    seen: Look = args.look
    view, fit = await seen.view()
    budget = dict(limit=fit.limit, used=fit.used, shortened=fit.shortened, omitted=fit.omitted)
    warnings = await seen.warnings(view, skipped_files=False) + unknown_name_warnings(fit)
    payload = {"text": fit.text, "characters": fit.used, "budget": budget}
    outcome = Outcome(payload, [] if fit.text is None else [fit.text], warnings=warnings)
    outcome.remarks.extend(describe_catalog_fit(fit).splitlines())
    for title, body in _withheld(view, style):
        outcome.remarks.extend((title, *body))
    return outcome


async def doctor(args: argparse.Namespace, style: Style) -> Outcome:
    seen: Look = args.look
    view, fit = await seen.view()
    roots = (await seen.provider.discover(seen.options)).roots  # the discovery the view made
    # Each provider's problems (a skipped file or MCP server alike), the shadowed skills among
    # those found (as `shadowed` and `skills`, and `_skills/list`), then the view's own.
    problems = (*await seen.registry.diagnose(seen.options), *view.problems)
    payload: dict[str, Any] = {
        "roots": [asdict(r.root) | {"exists": r.exists, "skills": r.skills} for r in roots],
        "skipped": [diagnostic_json(d) for d in skipped(problems)],
        "shadowed": [
            {
                "name": s.skill.name,
                "winner": {"source": s.winner.source, "path": s.winner.path},
                "loser": {"source": s.skill.source, "path": s.skill.path},
            }
            for s in view.found.shadowed
        ],
        "catalogCharacters": fit.used,
        "unknownPinned": list(fit.unknown_pinned),
        "unknownHidden": list(fit.unknown_hidden),
        "problems": [diagnostic_json(d) for d in problems],
        "skills": [skill_json(skill, view) for skill in view.found.skills],
    }
    rows = [["RANK", "SOURCE", "SKILLS", "PATH"]]
    for r in roots:
        count, state = (str(r.skills), "") if r.exists else ("-", "  (missing)")
        rows.append([rank_text(r.root.rank), r.root.source, count, clean(r.root.path) + state])
    parts = [("Roots (in precedence order: the first wins)", table(rows, {0, 2}, style))]
    if problems:
        found = [diagnostic_line(d, style) for d in by_severity(problems)]
        parts.append((f"Problems ({len(problems)})", found))
    parts += _withheld(view, style)
    if seen.mcp is not None:  # only with --mcp-server: the JSON's shape is kept otherwise
        servers = seen.mcp.states(seen.options)  # each of --mcp-server's, so never none
        payload["mcpServers"] = [server_json(state) for state in servers]
        parts.append((f"MCP servers ({len(servers)})", [server_line(s, style) for s in servers]))
    lines = [f"{style('Skills for', BOLD)} {clean(args.cwd)}"]
    for title, body in parts:
        lines += ["", style(title, BOLD), *("  " + line for line in body)]
    heading, _, rest = describe_catalog_fit(fit).partition(":")
    lines += ["", f"{style(heading, BOLD)}:{rest}", f"{style('Result', BOLD)}: {tally(problems)}"]
    unknown = unknown_name_warnings(fit)
    # A name that matches nothing is a warning, and warnings make doctor exit with 1.
    return Outcome(payload, lines, PROBLEMS if unknown else status_of(problems), warnings=unknown)


async def _run(args: argparse.Namespace, style: Style) -> Outcome:
    try:
        return await args.run(args, style)  # type: ignore[no-any-return]
    finally:
        if args.look is not None and args.look.mcp is not None:
            await args.look.mcp.aclose()  # no server process outlives the command


def build_parser() -> argparse.ArgumentParser:
    """The ``acp-skills`` argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="See the skills an acp-skills agent finds, exactly as it will see them, "
        "and why a skill is missing.",
        epilog="Exit status: 0 fine, 1 problems found, 2 usage error. "
        "Each problem reported carries a stable code (with --json: code, severity, path, line).",
    )
    try:
        version = importlib.metadata.version("acp-skills")
    except importlib.metadata.PackageNotFoundError:  # a source checkout on the path
        version = "unknown"
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON (a stable shape)")
    roots = argparse.ArgumentParser(add_help=False)
    for flag, read, help in (
        ("--cwd", _directory, "the session's working directory to look from (default: this one)"),
        ("--dsh-home", settings.expand_path, "default: $DSH_HOME, else ~/.dsh"),
        ("--agents-home", settings.expand_path, "default: $DSH_AGENTS_HOME, else ~/.agents"),
    ):
        roots.add_argument(flag, type=read, metavar="DIR", help=help)
    # The demo agent's own flags, with its variables as defaults (ACP_SKILLS_DIRS, ...).
    settings.add_arguments(roots, "skills", "mcp", "trust")
    fitted = argparse.ArgumentParser(add_help=False)
    settings.add_arguments(fitted, "catalog")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, run: object, help: str, *parents: argparse.ArgumentParser
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[*parents, as_json], help=help)
        sub.set_defaults(run=run)
        return sub

    command("list", list_skills, "the skills resolved for --cwd", roots)
    showing = command("show", show, "exactly what the skill tool returns for NAME", roots)
    showing.add_argument("name", metavar="NAME", help="a skill's name, or a server's skill:// uri")
    showing.add_argument("--path", metavar="REL", help="a file of the skill, as the tool's `path`")
    command("catalog", catalog, "exactly the catalog message the model receives", roots, fitted)
    check = command("validate", validate, "check skills, skill files or skills directories", roots)
    check.add_argument("--strict", action="store_true", help="also the specification's rules")
    check.add_argument(
        "paths",
        nargs="*",
        type=settings.expand_path,
        metavar="PATH",
        help="a skill directory, a skill file or a skills directory (default: --cwd's roots)",
    )
    command("doctor", doctor, "every root, skipped file and shadowed skill", roots, fitted)
    decide = command("trust", trust, "trust, refuse or forget a project's or a server's skills")
    decide.add_argument("path", nargs="?", metavar="PATH", help="a project's path or mcp:KEY")
    what = decide.add_mutually_exclusive_group()
    what.add_argument("--refuse", action="store_true", help="never offer its skills")
    what.add_argument("--forget", action="store_true", help="drop the decision: ask again")
    what.add_argument("--list", action="store_true", help="every stored decision")
    return parser


def _directory(text: str) -> str:
    # Links resolved before `..`, as a session's cwd is (`acp_skills.project`).
    path = os.path.realpath(settings.expand_path(text))
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"not a directory: {path}")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``acp-skills`` with ``argv``; return the exit status (0 fine, 1 problems, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if hasattr(args, "cwd"):
            args.cwd = args.cwd or _directory(os.getcwd())
        # A bad variable, a malformed --mcp-server or no mcp extra: refused before anything runs.
        given = settings.resolve(args)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else USAGE
    except settings.SettingError as error:
        print(f"{PROG}: {error}", file=sys.stderr)  # one line, no usage block
        return USAGE
    args.look = Look.at(args, given) if hasattr(args, "cwd") else None  # the one set-up
    # The commands report what the library would log; unconfigured structlog would print it to
    # stdout, into the output. Not cached: main() may run more than once in one process.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character gets an escape, never a traceback.
        getattr(stream, "reconfigure", lambda **_: None)(errors="backslashreplace")
    # https://no-color.org: present and not empty disables colour.
    colour = not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    outcome = asyncio.run(_run(args, Style(colour and sys.stdout.isatty())))
    try:
        emit(outcome, args.json)
    except BrokenPipeError:
        # `acp-skills list | head -1`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return outcome.status
