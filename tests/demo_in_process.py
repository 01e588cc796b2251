"""The demo agent in this process, built from a command line as ``python -m demo_agent`` builds
it: no process is started.

* `run_agent`: ``demo_agent.__main__.main(argv)`` with the environment and working directory
  asked for, for the start-up checks that end it with a status before it serves. Its stdin is
  a text stream with no file descriptor, so a run that went on to serve would fail at once
  rather than read this process's own stdin; stdout and stderr are captured. Afterwards the
  environment, the working directory, the standard library's logging and structlog's
  configuration are as they were.
* `demo_args`, `build_demo_agent`, `serve_demo`: the agent made by the entry point's own
  `parse_args`, `build_provider` and `build_agent` from its options, serving ACP through
  `GuardedTransport` until its input ends, exactly as the entry point serves stdio; only the
  process around it is missing (what only a process shows is tested with real processes,
  ``tests/conformance/test_faults.py``). The one place the demo agent is built and served in
  process: the SDK client's rig (`tests.acp_peer.demo_peer`) and the raw-lines rigs
  (`serve_demo_agent` on a socket: ``tests/raw_agent.py``, ``tests/conformance/harness.py``)
  all go through it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import socket
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from acp_skills import LocalSkillProvider
from acp_skills.acp import GuardedTransport
from demo_agent.__main__ import build_agent, build_provider, main, parse_args
from demo_agent.agent import DemoAgent
from tests.cli_runner import (
    Result,
    captured_stream,
    environment,
    outside_the_event_loop,
    written,
)

__all__ = [
    "DemoAgentBuild",
    "agent_environment",
    "build_demo_agent",
    "demo_args",
    "environment",
    "logging_as_it_was",
    "run_agent",
    "serve_demo",
    "serve_demo_agent",
]

# The reader's buffer, as `open_stdio` reads stdin (longer lines are still read, in pieces).
READ_LIMIT = 1024 * 1024


def agent_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The agent's whole environment, as a process started with ``env=`` gets it: ``PATH``
    from the test's, then ``extra`` (nothing else of the test's leaks in)."""
    return {"PATH": os.environ.get("PATH", os.defpath), **extra}


@contextmanager
def logging_as_it_was() -> Iterator[None]:
    """The agent configures the standard library's logging and structlog for its process;
    this one goes on with its own afterwards."""
    root, watchfiles = logging.getLogger(), logging.getLogger("watchfiles")
    handlers, level, watch_level = list(root.handlers), root.level, watchfiles.level
    show = warnings.showwarning
    configured, config = structlog.is_configured(), structlog.get_config()
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()  # a log file the agent opened
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
        watchfiles.setLevel(watch_level)
        logging.captureWarnings(False)
        warnings.showwarning = show
        if configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()


def run_agent(
    *argv: str, env: Mapping[str, str] | None = None, cwd: str | Path | None = None
) -> Result:
    """``acp-skills-demo ARGV`` in this process, with exactly ``env`` (default: this process's
    environment) and ``cwd``; its exit status and what it wrote."""

    def once() -> Result:
        stdout, stderr = captured_stream(), captured_stream()
        with (
            logging_as_it_was(),
            environment(dict(os.environ) if env is None else env, cwd),
            redirect_stdout(stdout),
            redirect_stderr(stderr),
        ):
            saved_stdin, sys.stdin = sys.stdin, io.StringIO()
            try:
                status = main(list(argv))
            except SystemExit as exit:  # argparse's usage errors, --help, --version
                status = exit.code if isinstance(exit.code, int) else 2
            finally:
                sys.stdin = saved_stdin
        return Result(status, written(stdout), written(stderr))

    result: Result = outside_the_event_loop(once)
    return result


def demo_args(argv: Sequence[str]) -> argparse.Namespace:
    """The agent's options from ``argv`` and the environment, as its entry point reads them.

    Raises:
        AssertionError: a bad setting (the entry point would exit with status 2).
    """
    try:
        return parse_args(list(argv))
    except SystemExit as refused:  # raised in a task, it would stop the event loop itself
        raise AssertionError(f"the demo agent refuses {list(argv)!r}: {refused.code}") from None


@dataclass(frozen=True)
class DemoAgentBuild:
    """The demo agent as its entry point builds it: its options, its skills on disk, itself."""

    args: argparse.Namespace
    provider: LocalSkillProvider
    agent: DemoAgent


def build_demo_agent(args: argparse.Namespace, *, mcp_transport: Any = None) -> DemoAgentBuild:
    """`build_provider` and `build_agent` of ``args``. With ``mcp_transport`` (a transport
    factory, ``tests/mcp_memory.py``), the agent's MCP provider reaches its servers, the
    ``--mcp-server`` ones and the sessions' own, through it: `build_agent` takes a provider
    the caller made as ``args.mcp``."""
    if mcp_transport is not None:
        args.mcp = args.settings.mcp_provider(mcp_transport)
    provider = build_provider(args)
    return DemoAgentBuild(args, provider, build_agent(args, provider))


async def serve_demo(
    built: DemoAgentBuild, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve ACP on ``reader`` and ``writer`` until the input ends, as the entry point serves
    stdio (its signal handlers aside), then let go of what it holds as ``main`` does: its MCP
    servers, its watcher, and the output (closed, so the peer reads its end)."""
    try:
        await built.provider.check_custom_dirs()
        await built.agent.skills.serve(built.agent, GuardedTransport(reader, writer))
    finally:
        try:
            if (mcp := getattr(built.args, "mcp", None)) is not None:
                await mcp.aclose()
        finally:
            writer.close()
            built.provider.close()


async def serve_demo_agent(options: Sequence[str], sock: socket.socket) -> None:
    """Serve ACP on ``sock`` until its input ends, as the demo agent serves stdio; ``sock`` is
    closed at the end, however it ends, so the peer reads the end of the output.

    Raises:
        AssertionError: ``options`` or the environment hold a bad setting (the entry point
            would exit with status 2).
    """
    with sock:
        args = demo_args(options)
        reader, writer = await asyncio.open_connection(sock=sock, limit=READ_LIMIT)
        await serve_demo(build_demo_agent(args), reader, writer)
