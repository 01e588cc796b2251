"""A FastMCP 4.2.3 skills server (the independent peer): ``ROOT [--http PORT] [--plain]``.

``--reload`` rescans the folder on every request; ``--plain`` serves no skills extension (a
tool only); ``--pid-file FILE`` writes its pid; ``--ignore-eof`` ignores SIGTERM (only a kill
stops it); ``--record FILE`` appends every MCP method the server receives, one a line;
``--slow-reads FILE`` holds every read of a file other than a ``SKILL.md`` for two minutes,
after writing FILE (so a test knows the read has reached the server); ``--hold-listing FILE``
answers each ``skills/list`` only once FILE exists (so a test decides when a listing arrives);
``--unlisted URI`` (repeatable) leaves that skill out of ``skills/list`` (a partial listing:
``skills/get`` still answers for it); ``--ttl-ms N`` and ``--cache-scope SCOPE`` are the
``ttlMs`` and ``cacheScope`` of every ``skills/list`` and ``skills/get`` answer (FastMCP's own:
0 and private); ``--page-size N`` pages ``skills/list`` by N skills, and ``--first-page-ttl-ms
N`` and ``--first-page-scope SCOPE`` then give its first page hints of its own.

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


class _Hints(Middleware):
    """Rewrites what the skills answers say of how long and how widely they may be kept, and
    leaves some skills out of the listing."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args

    async def on_message(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        result = await call_next(context)
        if context.method not in ("skills/list", "skills/get") or not isinstance(result, dict):
            return result
        args, result = self._args, dict(result)
        if args.ttl_ms is not None:
            result["ttlMs"] = args.ttl_ms
        if args.cache_scope is not None:
            result["cacheScope"] = args.cache_scope
        if context.method == "skills/list":
            result["skills"] = [s for s in result["skills"] if s["uri"] not in args.unlisted]
            params = context.message  # the request's params, as sent
            if not (isinstance(params, dict) and params.get("cursor")):  # the first page
                if args.first_page_ttl_ms is not None:
                    result["ttlMs"] = args.first_page_ttl_ms
                if args.first_page_scope is not None:
                    result["cacheScope"] = args.first_page_scope
        return result


def build(argv: Sequence[str]) -> tuple[FastMCP, argparse.Namespace]:
    """The server the arguments describe, and the arguments read."""
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--http", type=int)
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--record", type=Path)
    parser.add_argument("--slow-reads", type=Path)
    parser.add_argument("--hold-listing", type=Path)
    parser.add_argument("--unlisted", action="append", default=[])
    parser.add_argument("--ttl-ms", type=int)
    parser.add_argument("--cache-scope")
    parser.add_argument("--page-size", type=int)
    parser.add_argument("--first-page-ttl-ms", type=int)
    parser.add_argument("--first-page-scope")
    args = parser.parse_args(argv)
    server = FastMCP("team-skills", list_page_size=args.page_size)
    if args.plain:

        @server.tool
        def ping() -> str:
            return "pong"
    else:
        server.add_provider(SkillsDirectoryProvider(roots=args.root, reload=args.reload))
    if args.record is not None:
        server.add_middleware(_Recorder(args.record))
    if args.slow_reads is not None:
        server.add_middleware(_SlowReads(args.slow_reads))
    if args.hold_listing is not None:
        server.add_middleware(_HeldListing(args.hold_listing))
    server.add_middleware(_Hints(args))
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
