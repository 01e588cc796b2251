"""The demo agent in this process, built from a command line as ``python -m demo_agent`` builds
it: no process is started.

* `run_agent`: ``demo_agent.__main__.main(argv)`` with the environment and working directory
  asked for, for the start-up checks that end it with a status before it serves. Its stdin is
  a text stream with no file descriptor, so a run that went on to serve would fail at once
  rather than read this process's own stdin; stdout and stderr are captured. Afterwards the
  environment, the working directory, the standard library's logging and structlog's
  configuration are as they were.
* `serve_demo_agent`: the agent made by the entry point's own `parse_args`, `build_provider`
  and `build_agent` from its options, serving ACP on one end of a socket pair through
  `GuardedTransport` until its input ends, exactly as the entry point serves stdio; only the
  process around it is missing (what only a process shows is tested with real processes,
  ``tests/conformance/test_faults.py``).
* `served`: `serve_demo_agent` with an environment, talking to the official SDK client (a
  `RecordingClient`) on the other end, initialized.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import socket
import sys
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import structlog
from acp.core import ClientSideConnection

from acp_skills.acp import GuardedTransport
from demo_agent.__main__ import build_agent, build_provider, main, parse_args
from tests.agent_client import RecordingClient, initialize_agent
from tests.cli_runner import (
    Result,
    captured_stream,
    environment,
    outside_the_event_loop,
    written,
)

__all__ = ["Served", "environment", "run_agent", "serve_demo_agent", "served"]

# The reader's buffer, as `open_stdio` reads stdin (longer lines are still read, in pieces).
READ_LIMIT = 1024 * 1024


@contextmanager
def _logging_as_it_was() -> Iterator[None]:
    """The agent configures the standard library's logging and structlog for its process;
    this one goes on with its own."""
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
            _logging_as_it_was(),
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


async def serve_demo_agent(options: Sequence[str], sock: socket.socket) -> None:
    """Serve ACP on ``sock`` until its input ends, as the demo agent serves stdio; ``sock`` is
    closed at the end, however it ends, so the peer reads the end of the output.

    Raises:
        AssertionError: ``options`` or the environment hold a bad setting (the entry point
            would exit with status 2).
    """
    with sock:
        try:
            args = parse_args(list(options))
        except SystemExit as refused:  # raised in a task, it would stop the event loop itself
            raise AssertionError(f"the demo agent refuses {options!r}: {refused.code}") from None
        reader, writer = await asyncio.open_connection(sock=sock, limit=READ_LIMIT)
        provider = build_provider(args)
        try:
            agent = build_agent(args, provider)
            mcp = getattr(args, "mcp", None)
            try:
                await provider.check_custom_dirs()
                await agent.skills.serve(agent, GuardedTransport(reader, writer))
            finally:
                if mcp is not None:
                    await mcp.aclose()
        finally:
            writer.close()
            provider.close()


@dataclass(frozen=True)
class Served:
    """The client's side of an agent served in this process."""

    conn: ClientSideConnection
    client: RecordingClient


@asynccontextmanager
async def served(
    *argv: str,
    env: Mapping[str, str],
    cwd: str | Path | None = None,
    client: RecordingClient | None = None,
) -> AsyncIterator[Served]:
    """The demo agent of ``argv`` with ``env`` (``PATH`` added) as its environment for as long
    as it serves, and ``cwd`` as the working directory; ended by closing its input, as an
    editor ends it."""
    client = client if client is not None else RecordingClient()
    with environment({"PATH": os.environ.get("PATH", os.defpath), **env}, cwd):
        agent_end, client_end = socket.socketpair()
        client_reader, client_writer = await asyncio.open_connection(sock=client_end)
        conn = ClientSideConnection(
            cast(Any, client), client_writer, client_reader, observers=[client.observe]
        )
        async with anyio.create_task_group() as group:
            group.start_soon(serve_demo_agent, argv, agent_end)
            try:
                await initialize_agent(conn)
                yield Served(conn, client)
            finally:
                await conn.close()
                client_writer.close()  # the agent reads the end of its input and stops
