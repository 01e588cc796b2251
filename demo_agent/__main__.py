"""``python -m demo_agent`` / ``acp-skills-demo``: the demo ACP agent over stdio.

stdout carries only protocol frames: logs go to stderr, and file descriptor 1 itself is pointed
at stderr once the protocol has its own private copy of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.lowlevel
import structlog

from acp_skills import JsonlSessionStore, LocalSkillProvider, SkillRegistry
from acp_skills.acp import AcpSkills
from acp_skills.cli import settings
from acp_skills.cli.settings import (
    EXAMPLE_SKILLS,
    SettingError,
    expand_path,
    extra_install_hint,
    from_env,
    positive_float,
    positive_int,
)

from . import __version__
from .agent import DemoAgent
from .logs import LOG_FORMATS, LOG_LEVELS, configure_logging
from .models import ChatModel
from .models.offline import OfflineModel
from .models.openai_chat import (
    DEFAULT_BASE_URL,
    DEFAULT_KEY_VARIABLE,
    DEFAULT_MODEL,
    OpenAIChatModel,
)
from .start_files import NotARegularFile, open_log_file, read_key_file

_LEVELS = LOG_LEVELS
_env = settings.env


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _switch_from_env(variable: str) -> bool:
    """A switch that is on unless ``variable`` turns it off; `SettingError` for other text."""
    value = (_env(variable) or "1").lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingError(f"{variable} must be 1 or 0 (true/false, yes/no, on/off), not {value!r}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse flags, then fill the rest from the environment, checked as flags are.

    A bad flag is argparse's usage error; a bad variable is one line naming the variable
    (status 2 either way).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _settings_from_env(args)
    except SettingError as error:
        print(f"acp-skills-demo: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return args


def _settings_from_env(args: argparse.Namespace) -> None:
    # argparse checks `choices` only for flags, so the variables are checked here.
    if args.model is None:
        args.model = _env("ACP_SKILLS_MODEL") or "offline"
        if args.model not in ("offline", "openai"):
            raise SettingError(f"ACP_SKILLS_MODEL must be offline or openai, not {args.model!r}")
    for flag, variable, choices, default in (
        ("log_level", "ACP_SKILLS_LOG_LEVEL", _LEVELS, "warning"),
        ("log_format", "ACP_SKILLS_LOG_FORMAT", LOG_FORMATS, "console"),
    ):
        if getattr(args, flag) is None:
            value = (_env(variable) or default).lower()
            if value not in choices:
                known = ", ".join(choices)
                raise SettingError(f"{variable} must be one of {known}, not {value!r}")
            setattr(args, flag, value)
    if args.max_steps is None:
        args.max_steps = from_env("ACP_SKILLS_MAX_STEPS", positive_int, 8)
    if args.max_tokens is None:
        args.max_tokens = from_env("ACP_SKILLS_MAX_TOKENS", positive_int, None)
    if args.timeout is None:
        args.timeout = from_env("ACP_SKILLS_TIMEOUT", positive_float, 120.0)
    if args.watch is None:
        args.watch = _switch_from_env("ACP_SKILLS_WATCH")
    if args.mcp_session_servers is None:
        args.mcp_session_servers = _switch_from_env("ACP_SKILLS_MCP_SESSION_SERVERS")
    else:
        args.mcp_session_servers = args.mcp_session_servers == "on"
    # Refused now, not at the first session: an --mcp-server without the mcp extra, too.
    args.settings = settings.resolve(args, agent=True)
    for flag, variable in (
        ("log_file", "ACP_SKILLS_LOG_FILE"),
        ("api_key_file", "ACP_SKILLS_API_KEY_FILE"),
    ):
        if getattr(args, flag) is None and (path := _env(variable)) is not None:
            setattr(args, flag, expand_path(path))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-skills-demo",
        description="A demo ACP agent with skills, speaking the Agent Client Protocol on stdio.",
        epilog=_SKILL_LOOKUP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model",
        choices=("offline", "openai"),
        default=None,
        help="offline: rule-based stand-in, no network (default). openai: any OpenAI-compatible "
        "Chat Completions endpoint, DeepSeek by default. Env: ACP_SKILLS_MODEL.",
    )
    parser.add_argument(
        "--base-url",
        default=_env("ACP_SKILLS_BASE_URL") or DEFAULT_BASE_URL,
        help=f"endpoint base URL (default {DEFAULT_BASE_URL}). Env: ACP_SKILLS_BASE_URL.",
    )
    parser.add_argument(
        "--model-name",
        default=_env("ACP_SKILLS_MODEL_NAME") or DEFAULT_MODEL,
        help=f"model name (default {DEFAULT_MODEL}). Env: ACP_SKILLS_MODEL_NAME.",
    )
    parser.add_argument(
        "--api-key-env",
        default=_env("ACP_SKILLS_API_KEY_ENV") or DEFAULT_KEY_VARIABLE,
        help=f"the environment variable holding the API key (default {DEFAULT_KEY_VARIABLE}). "
        "Env: ACP_SKILLS_API_KEY_ENV.",
    )
    parser.add_argument(
        "--api-key-file",
        type=expand_path,
        default=None,
        metavar="PATH",
        help="read the API key from this file instead (surrounding whitespace ignored), so "
        "an editor's settings can name the file rather than hold the key. "
        "Env: ACP_SKILLS_API_KEY_FILE.",
    )
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        # Unset flags are filled from the variables after parsing, so that an error names them.
        default=None,
        help="model requests allowed per prompt turn (default 8). Env: ACP_SKILLS_MAX_STEPS.",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=None,
        help="the model's reply token limit (default: the endpoint's). Env: ACP_SKILLS_MAX_TOKENS.",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        help="seconds per model request (default 120). Env: ACP_SKILLS_TIMEOUT.",
    )
    settings.add_arguments(parser)
    parser.add_argument(
        "--no-watch",
        dest="watch",
        action="store_false",
        default=None,
        help="do not watch the skill directories: skills edited, added or removed on disk then "
        "show up only after a restart or a _skills/reload (by default they show up within a "
        "fraction of a second). Env: ACP_SKILLS_WATCH=0.",
    )
    parser.add_argument(
        "--log-level",
        choices=_LEVELS,
        default=None,
        help="log level (default warning). Env: ACP_SKILLS_LOG_LEVEL.",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=None,
        help="console: one readable line per event (default); json: one JSON object per "
        "line. Env: ACP_SKILLS_LOG_FORMAT.",
    )
    parser.add_argument(
        "--log-file",
        type=expand_path,
        default=None,
        metavar="PATH",
        help="append logs to this file instead of stderr. Env: ACP_SKILLS_LOG_FILE.",
    )
    parser.add_argument(
        "--mcp-session-servers",
        choices=("on", "off"),
        default=None,
        help="on (default): the MCP servers the editor forwards with each session (Zed's "
        "context servers) are started, and their skills offered; off: they are left alone, "
        "never started (--mcp-server ones still count). Env: ACP_SKILLS_MCP_SESSION_SERVERS.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    return parser


def build_model(args: argparse.Namespace) -> ChatModel:
    if args.model == "offline":
        return OfflineModel()
    return OpenAIChatModel(
        base_url=args.base_url,
        model=args.model_name,
        api_key=getattr(args, "api_key", None) or _env(args.api_key_env),
        key_variable=args.api_key_env,
        timeout=args.timeout,
        max_tokens=args.max_tokens,
    )


def build_provider(args: argparse.Namespace) -> LocalSkillProvider:
    """The skills on disk: the project's and the user's, and ``--skills-dir`` in between."""
    given: settings.Settings = args.settings
    return given.provider(watch=args.watch)


def build_agent(args: argparse.Namespace, provider: LocalSkillProvider) -> DemoAgent:
    """The agent over ``provider`` (the skills on disk) and ``args.mcp``, the `McpSkillProvider`
    of ``--mcp-server`` (and, when the mcp extra is installed and ``--mcp-session-servers`` is
    on, of the sessions' own servers). A caller may set ``args.mcp`` to a provider of its own,
    one that reaches its servers through another transport (``transport=``, docs/mcp.md)."""
    registry = SkillRegistry()
    registry.register_provider(provider)
    # MCP skills (rank 600, after the local roots): --mcp-server for every session, and each
    # session's own `mcpServers`, whenever the mcp extra is installed.
    given: settings.Settings = args.settings
    forwarded = args.mcp_session_servers
    wanted = given.mcp_servers or (forwarded and importlib.util.find_spec("mcp"))
    if getattr(args, "mcp", None) is None and wanted:
        args.mcp = given.mcp_provider()
    if getattr(args, "mcp", None) is not None:
        registry.register_provider(args.mcp)
    skills = AcpSkills(
        registry,
        store=JsonlSessionStore(given.state_dir / "sessions"),
        catalog_max_length=given.catalog_max_length,
        catalog_budget=given.catalog_budget,
        pinned_skills=given.pinned,
        hidden_skills=given.hidden,
        max_requests_per_turn=args.max_steps,
        expand_arguments="claude" in given.compat,
        mcp=getattr(args, "mcp", None),
        trust=given.trust,
    )
    return DemoAgent(skills, build_model(args), session_servers=forwarded)


async def serve(
    agent: DemoAgent, provider: LocalSkillProvider | None = None, *, mcp: Any = None
) -> None:
    """Serve ACP on stdio until stdin closes or SIGTERM/SIGINT arrives.

    A ``--skills-dir`` that does not exist (or cannot be read) is a warning first: a typo in
    it must not go unnoticed behind an agent that silently shows fewer skills.
    """
    # anyio loads its event-loop backend on first use: load it now, at start-up, rather than
    # in the first discovery (20 ms, and a read of the installation mid-session).
    await anyio.lowlevel.checkpoint()
    if provider is not None:
        await provider.check_custom_dirs()
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, main.cancel if main else (lambda: None))
    try:
        await agent.skills.serve(agent)
    except asyncio.CancelledError:
        structlog.get_logger(__name__).info("agent_stopping", reason="signal")
    finally:
        if mcp is not None:
            await mcp.aclose()  # every MCP server the agent started stops with it


def closed_stdio() -> str | None:
    """``"stdin"`` or ``"stdout"`` if the process was started with it closed, else ``None``.

    Checked before anything opens a file: a file opened now would take the free descriptor
    and receive the protocol's frames (or be read as the client's).
    """
    for name, fd in (("stdin", 0), ("stdout", 1)):
        if getattr(sys, name) is None:  # Python's own verdict at start-up
            return name
        try:
            os.fstat(fd)
        except OSError:
            return name
    return None


# -- start-up: logs, key file, the terminal hint ---------------------------------------------

_SKILL_LOOKUP_HELP = f"""\
where skills are looked up (the first skill of a name wins):
  1. <project>/.dsh/skills      the project is the nearest ancestor of the session's
  2. <project>/.agents/skills   working directory that contains .git
     then the same two of each additional directory's project, in the order the
     editor gives them (the other roots of a multi-root workspace)
  3. each --skills-dir, in order, then the bundled examples with --examples:
     {EXAMPLE_SKILLS}
  4. $DSH_HOME/skills           (default ~/.dsh/skills)
  5. $DSH_AGENTS_HOME/skills    (default ~/.agents/skills)
  with --compat claude, after those:
  6. <project>/.claude/skills
  7. $CLAUDE_CONFIG_DIR/skills  (default ~/.claude/skills)
A skill is a directory with a SKILL.md, or a single NAME.md file, in one of them."""

TERMINAL_HINT = (
    "acp-skills-demo speaks the Agent Client Protocol (JSON-RPC) on stdin and stdout, for an "
    "editor such as Zed to start (https://github.com/acp-skills/acp-skills/blob/main/docs/"
    "zed.md); to see your skills, run `acp-skills list`. Still serving here: Ctrl-D quits."
)
"""The one line a person who starts the agent at a terminal reads on stderr."""


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


def _start_logging(args: argparse.Namespace) -> str | None:
    """Configure logging as the flags say; why not, when the log file cannot be opened."""
    stream = None
    if args.log_file:
        path = Path(args.log_file).expanduser()
        try:
            stream = open_log_file(path)
        except NotARegularFile as error:
            return f"cannot use the log file: {error}"
        except OSError as error:
            return f"cannot open the log file {path}: {error.strerror or error}"
    configure_logging(args.log_level, log_format=args.log_format, stream=stream)
    return None


def _read_api_key(args: argparse.Namespace) -> str | None:
    """Read ``--api-key-file`` into ``args.api_key``; why not, when it cannot be used."""
    args.api_key = None
    if not args.api_key_file or args.model != "openai":
        return None
    path = Path(args.api_key_file).expanduser()
    try:
        key = read_key_file(path).strip()
    except NotARegularFile as error:
        return f"cannot use the API key file: {error}"
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        return f"cannot read the API key file {path}: {reason}"
    if not key:
        return f"the API key file {path} is empty"
    args.api_key = key
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    closed = closed_stdio()
    if closed is not None:
        if sys.stderr is not None:
            print(
                f"acp-skills-demo: {closed} is closed; the agent speaks ACP over stdin and stdout",
                file=sys.stderr,
            )
        return 2
    problem = _start_logging(args)
    if problem is None and args.model == "openai" and importlib.util.find_spec("openai") is None:
        # Said now, before the key is looked at: a key cannot help without the package.
        problem = f"the openai model needs the `openai` package: {extra_install_hint('openai')}"
    if problem is None:
        problem = _read_api_key(args)
    if problem is not None:
        print(f"acp-skills-demo: {problem}", file=sys.stderr)
        return 2
    # Checked before serving: an editor shows a failed start, not a session that silently
    # saves nothing. One line, no traceback, the usage-error status.
    if (unusable := args.settings.unusable_state_dir()) is not None:
        print(f"acp-skills-demo: unusable state directory: {unusable}", file=sys.stderr)
        return 2
    if _stdin_is_terminal():
        print(TERMINAL_HINT, file=sys.stderr, flush=True)
    provider = build_provider(args)
    agent = build_agent(args, provider)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(agent, provider, mcp=getattr(args, "mcp", None)))
    finally:
        # Stops the watcher thread and closes its inotify descriptor before the process ends.
        provider.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
