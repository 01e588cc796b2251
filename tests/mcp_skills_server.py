"""A FastMCP 4.2.3 skills server (the independent peer): ``ROOT [--http PORT] [--plain]``.

``--reload`` rescans the folder on every request; ``--plain`` serves no skills extension (a
tool only); ``--tool`` serves that tool (``ping``) beside the skills; ``--pid-file FILE``
writes its pid; ``--ignore-eof`` ignores SIGTERM (only a kill stops it); ``--record FILE``
appends every MCP method the server receives, one a line; ``--slow-reads FILE`` holds every
read of a file other than a ``SKILL.md`` for two minutes, after writing FILE (so a test knows
the read has reached the server); ``--hold-listing FILE`` answers each ``skills/list`` only
once FILE exists (so a test decides when a listing arrives).

`build` makes the same server from the same arguments without running it, for a test that
serves it in its own process (tests/mcp_memory.py); the options about the process itself
(``--http``, ``--pid-file``, ``--ignore-eof``) are then the caller's."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.skills.provider import SkillsDirectoryProvider


class _Recorder(Middleware):
    def __init__(self, path: Path) -> None:
        self._path = path

    async def on_message(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        with self._path.open("a", encoding="utf-8") as out:
            out.write(f"{context.method}\n")
        return await call_next(context)


class _SlowReads(Middleware):
    def __init__(self, marker: Path) -> None:
        self._marker = marker

    async def on_read_resource(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        if not str(context.message.uri).endswith("/SKILL.md"):
            self._marker.write_text(str(context.message.uri), encoding="utf-8")
            await anyio.sleep(120)
        return await call_next(context)


class _HeldListing(Middleware):
    def __init__(self, release: Path) -> None:
        self._release = release

    async def on_message(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        if context.method == "skills/list":
            # The release comes from another process, as a file: polled, no clock decides.
            while not self._release.exists():  # noqa: ASYNC110
                await anyio.sleep(0.02)
        return await call_next(context)


def build(argv: Sequence[str]) -> tuple[FastMCP, argparse.Namespace]:
    """The server the arguments describe, and the arguments read."""
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--http", type=int)
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--tool", action="store_true")
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--record", type=Path)
    parser.add_argument("--slow-reads", type=Path)
    parser.add_argument("--hold-listing", type=Path)
    args = parser.parse_args(argv)
    server = FastMCP("team-skills")
    if args.plain or args.tool:

        @server.tool
        def ping() -> str:
            return "pong"

    if not args.plain:
        server.add_provider(SkillsDirectoryProvider(roots=args.root, reload=args.reload))
    if args.record is not None:
        server.add_middleware(_Recorder(args.record))
    if args.slow_reads is not None:
        server.add_middleware(_SlowReads(args.slow_reads))
    if args.hold_listing is not None:
        server.add_middleware(_HeldListing(args.hold_listing))
    return server, args


def main() -> None:
    server, args = build(sys.argv[1:])
    if args.pid_file is not None:
        args.pid_file.write_text(str(os.getpid()), encoding="utf-8")
    if args.ignore_eof:  # a server that outlives the end of its input unless it is killed
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.http is not None:
        server.run(transport="http", host="127.0.0.1", port=args.http, show_banner=False)
    else:
        server.run(show_banner=False)
    sys.exit(0)


if __name__ == "__main__":
    main()
