"""The demo agent in this process, serving ACP on one end of a socket pair.

`serve_demo_agent` builds the agent as ``python -m demo_agent OPTIONS`` does (its own parser,
provider and agent) and serves it through `GuardedTransport` until its input ends, exactly as
the entry point serves stdio; only the process around it is missing. What only a process shows
(stdout purity, closed or broken pipes, signals, the exit status, start-up refusals) is tested
with real processes (``tests/conformance/test_faults.py``).

The agent reads its settings from ``os.environ``: `environment` sets it for the test's span.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from acp_skills.acp import GuardedTransport
from demo_agent.__main__ import build_agent, build_provider, parse_args

__all__ = ["environment", "serve_demo_agent"]

# The reader's buffer, as `open_stdio` reads stdin (longer lines are still read, in pieces).
READ_LIMIT = 1024 * 1024


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` is exactly ``env`` inside the block, and as it was after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


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
