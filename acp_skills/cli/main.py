"""``acp-skills``: the skills an agent finds, as the demo agent finds them, and why."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import os
import sys
from collections.abc import Sequence

import structlog

from . import settings
from .output import USAGE, Outcome, Style, emit
from .skills import PROG, catalog, doctor, list_skills, show
from .trust import trust
from .validate import validate


async def _run(args: argparse.Namespace, style: Style) -> Outcome:
    try:
        return await args.run(args, style)  # type: ignore[no-any-return]
    finally:
        if args.mcp is not None:
            await args.mcp.aclose()  # no server process outlives the command


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
    for flag, help in (
        ("--cwd", "the working directory of the session to look from (default: the current one)"),
        ("--dsh-home", "default: $DSH_HOME, else ~/.dsh"),
        ("--agents-home", "default: $DSH_AGENTS_HOME, else ~/.agents"),
    ):
        roots.add_argument(flag, type=settings.expand_path, metavar="DIR", help=help)
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

    listing = command("list", list_skills, "the skills resolved for --cwd", roots)
    listing.add_argument("--all", action="store_true", help="also the shadowed skills")
    showing = command("show", show, "exactly what the skill tool returns for NAME", roots)
    showing.add_argument("name", metavar="NAME", help="a skill's name, or a server's skill:// uri")
    shown = showing.add_mutually_exclusive_group()
    shown.add_argument("--path", metavar="REL", help="a file of the skill, as the tool's `path`")
    shown.add_argument("--invoke", metavar="ARGS", help="what `/NAME ARGS` puts into the turn")
    command("catalog", catalog, "exactly the catalog message the model receives", roots, fitted)
    check = command("validate", validate, "check skills, skill files or skills directories", roots)
    check.add_argument(
        "--strict", action="store_true", help="also the Agent Skills specification's rules"
    )
    check.add_argument(
        "paths",
        nargs="*",
        type=settings.expand_path,
        metavar="PATH",
        help="a skill directory, a skill file or a skills directory (default: --cwd's roots)",
    )
    command("doctor", doctor, "every root, skipped file and shadowed skill", roots, fitted)
    decide = command("trust", trust, "trust, refuse or forget a project's or a server's skills")
    decide.add_argument(
        "path", nargs="?", metavar="PATH", help="a path in the project, or a server's mcp:KEY"
    )
    what = decide.add_mutually_exclusive_group()
    what.add_argument("--refuse", action="store_true", help="never offer its skills")
    what.add_argument("--forget", action="store_true", help="drop the decision: ask again")
    what.add_argument("--list", action="store_true", help="every stored decision")
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
        # A bad variable, a malformed --mcp-server or no mcp extra: refused before anything runs.
        args.settings = settings.resolve(args)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else USAGE
    except settings.SettingError as error:
        print(f"{PROG}: {error}", file=sys.stderr)  # one line, no usage block
        return USAGE
    args.mcp = args.settings.mcp_provider() if args.settings.mcp_servers else None
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
