"""A FastMCP 4.2.3 skills server (the independent peer): ``ROOT [--http FD] [--plain]``.

``--http FD`` serves streamable HTTP on the listening socket FD it inherits: the socket listens
before the server starts, so a client's first connection waits in its backlog for the server
instead of being refused, and nobody waits for the server to be ready.

``--reload`` rescans the folder on every request; ``--plain`` serves no skills extension (a
tool only); ``--pid-file FILE`` writes its pid; ``--ignore-eof`` ignores SIGTERM (only a kill
stops it); ``--record FILE`` appends every MCP method the server receives, one a line;
``--slow-reads PIPE`` holds every read of a file other than a ``SKILL.md`` for two minutes,
after writing its uri into the named pipe PIPE (so a test knows the read has reached the
server); ``--hold-listing PIPE`` answers ``skills/list`` only once a writer has opened and closed
the named pipe PIPE (so a test decides when a listing arrives; `tests.events.write_pipe`);
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
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
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
            uri = str(context.message.uri)
            # Opening the pipe waits for the test to read it: in a worker thread.
            await anyio.to_thread.run_sync(
                lambda: self._marker.write_text(uri, encoding="utf-8"), abandon_on_cancel=True
            )
            await anyio.sleep(120)  # the hold, ended by the client's cancellation
        return await call_next(context)


class _HeldListing(Middleware):
    def __init__(self, release: Path) -> None:
        self._release = release
        self._released = False
        self._lock = anyio.Lock()

    async def on_message(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        if context.method == "skills/list":
            async with self._lock:  # one reader of the pipe; the listings after it go on
                if not self._released:
                    # Reading the pipe ends when the test has opened and closed it.
                    await anyio.to_thread.run_sync(self._release.read_bytes, abandon_on_cancel=True)
                    self._released = True
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
        listening = socket.socket(fileno=args.http)
        port = listening.getsockname()[1]
        server.run(
            transport="http", host="127.0.0.1", port=port, sockets=[listening], show_banner=False
        )
    else:
        server.run(show_banner=False)
    sys.exit(0)


if __name__ == "__main__":
    main()
