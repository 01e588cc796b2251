"""``python -m demo_agent`` / ``acp-skills-demo``: the demo ACP agent over stdio.

stdout carries only protocol frames: logs go to stderr, and file descriptor 1 itself is pointed
at stderr once the protocol has its own private copy of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import structlog

from acp_skills import JsonlSessionStore, LocalSkillProvider, SkillRegistry
from acp_skills.acp import AcpSkills

from . import __version__
from .agent import DemoAgent
from .models import ChatModel
from .models.offline import OfflineModel
from .models.openai_chat import (
    DEFAULT_BASE_URL,
    DEFAULT_KEY_VARIABLE,
    DEFAULT_MODEL,
    OpenAIChatModel,
)

_LEVELS = ("debug", "info", "warning", "error")


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/acp-skills-demo`` (``~/.local/state/acp-skills-demo`` when unset)."""
    base = _env("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "acp-skills-demo"


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir) if args.state_dir else default_state_dir()


def unusable_state_dir(state_dir: Path) -> str | None:
    """Why session records cannot be kept under ``state_dir``, or ``None`` when they can.

    Creates ``state_dir/sessions`` if needed and proves it writable by creating (and removing)
    a file in it: permission bits alone do not tell (root, read-only mounts, ACLs).
    """
    sessions = state_dir / "sessions"
    try:
        for directory in (state_dir, sessions):
            if directory.exists() and not directory.is_dir():
                return f"{directory} is not a directory"
        sessions.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create {sessions}: {error.strerror or error}"
    try:
        descriptor, probe = tempfile.mkstemp(dir=sessions, prefix=".write-check-")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        return f"cannot write in {sessions}: {error.strerror or error}"
    return None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _watch_default() -> bool | str:
    """``ACP_SKILLS_WATCH`` as a boolean (unset: on); the raw text when it is neither."""
    value = (_env("ACP_SKILLS_WATCH") or "1").lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse flags; values taken from the environment are checked like flags (exit 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # argparse checks `choices` only for values given as flags, not for defaults.
    if args.model not in ("offline", "openai"):
        parser.error(f"ACP_SKILLS_MODEL must be offline or openai, not {args.model!r}")
    if args.log_level not in _LEVELS:
        parser.error(f"ACP_SKILLS_LOG_LEVEL must be one of {', '.join(_LEVELS)}")
    if not isinstance(args.watch, bool):
        parser.error(
            f"ACP_SKILLS_WATCH must be 1 or 0 (true/false, yes/no, on/off), not {args.watch!r}"
        )
    return args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-skills-demo",
        description="A demo ACP agent with skills, speaking the Agent Client Protocol on stdio.",
    )
    parser.add_argument(
        "--model",
        choices=("offline", "openai"),
        default=_env("ACP_SKILLS_MODEL") or "offline",
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
        "--max-steps",
        type=_positive_int,
        # A string default goes through `type`, so a bad variable is a usage error too.
        default=_env("ACP_SKILLS_MAX_STEPS") or "8",
        help="model requests allowed per prompt turn (default 8). Env: ACP_SKILLS_MAX_STEPS.",
    )
    parser.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=None,
        help="the model's reply token limit (default: the endpoint's).",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=_env("ACP_SKILLS_TIMEOUT") or "120",
        help="seconds per model request (default 120). Env: ACP_SKILLS_TIMEOUT.",
    )
    parser.add_argument(
        "--skills-dir",
        action="append",
        default=None,
        metavar="DIR",
        help="an extra skills directory (repeatable), after the project's and before the "
        "user's. Env: ACP_SKILLS_DIRS (separated by the OS path separator).",
    )
    parser.add_argument(
        "--no-watch",
        dest="watch",
        action="store_false",
        default=_watch_default(),
        help="do not watch the skill directories: skills edited, added or removed on disk then "
        "show up only after a restart or a _skills/reload (by default they show up within a "
        "fraction of a second). Env: ACP_SKILLS_WATCH=0.",
    )
    parser.add_argument(
        "--state-dir",
        default=_env("ACP_SKILLS_STATE_DIR"),
        help="where session records are kept (default $XDG_STATE_HOME/acp-skills-demo). "
        "Env: ACP_SKILLS_STATE_DIR.",
    )
    parser.add_argument(
        "--log-level",
        choices=_LEVELS,
        default=(_env("ACP_SKILLS_LOG_LEVEL") or "warning").lower(),
        help="stderr log level (default warning). Env: ACP_SKILLS_LOG_LEVEL.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    return parser


def configure_logging(level: str) -> None:
    """structlog and the stdlib logger (used by the ACP SDK), both to stderr."""
    number = logging.getLevelName(level.upper())
    logging.basicConfig(
        stream=sys.stderr, level=number, format="%(levelname)s %(name)s %(message)s"
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def build_model(args: argparse.Namespace) -> ChatModel:
    if args.model == "offline":
        return OfflineModel()
    return OpenAIChatModel(
        base_url=args.base_url,
        model=args.model_name,
        api_key=_env(args.api_key_env),
        key_variable=args.api_key_env,
        timeout=args.timeout,
        max_tokens=args.max_tokens,
    )


def build_provider(args: argparse.Namespace) -> LocalSkillProvider:
    """The local provider: the project's, the custom and the user's skill directories."""
    custom_dirs = list(args.skills_dir or [])
    if not custom_dirs and _env("ACP_SKILLS_DIRS"):
        custom_dirs = [d for d in (_env("ACP_SKILLS_DIRS") or "").split(os.pathsep) if d]
    return LocalSkillProvider(custom_skill_dirs=custom_dirs, watch=args.watch)


def build_agent(args: argparse.Namespace, provider: LocalSkillProvider) -> DemoAgent:
    registry = SkillRegistry()
    registry.register_provider(provider)
    skills = AcpSkills(
        registry,
        store=JsonlSessionStore(_state_dir(args) / "sessions"),
        max_requests_per_turn=args.max_steps,
    )
    return DemoAgent(skills, build_model(args))


async def serve(agent: DemoAgent) -> None:
    """Serve ACP on stdio until stdin closes or SIGTERM/SIGINT arrives."""
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, main.cancel if main else (lambda: None))
    try:
        await agent.skills.serve(agent)
    except asyncio.CancelledError:
        structlog.get_logger(__name__).info("agent_stopping", reason="signal")


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
    configure_logging(args.log_level)
    # Checked before serving: an editor shows a failed start, not a session that silently
    # saves nothing. One line, no traceback, the usage-error status.
    problem = unusable_state_dir(_state_dir(args))
    if problem is not None:
        print(f"acp-skills-demo: unusable state directory: {problem}", file=sys.stderr)
        return 2
    provider = build_provider(args)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(build_agent(args, provider)))
    finally:
        # Stops the watcher thread and closes its inotify descriptor before the process ends.
        provider.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
