"""Benchmark: ``session/list`` over many recorded sessions (docs/sessions.md, "Listing").

    python bench/session_list.py [--sessions 1000 10000] [--projects 20] [--runs 9]

For each size, a `JsonlSessionStore` of that many sessions, spread over ``--projects``
working directories, each recorded and described as the agent records and describes them (one
history entry, then its summary). Then `AcpSkills.list_sessions`, as the demo agent answers
``session/list``, timed ``--runs`` times after a warm-up (the directory entries and inodes
cached, as they are on an agent that lists often): the first page of all sessions, the first
page of one project's, and every page of all sessions followed cursor by cursor (what Zed's
history panel asks for when it refreshes), each as the median and the largest run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from acp_skills import JsonlSessionStore
from acp_skills.acp import AcpSkills
from acp_skills.record import HistoryEntry, SessionDescription, session_title

PROMPT = "Please look at the deployment scripts and tell me why the staging job fails"


async def fill(store: JsonlSessionStore, root: Path, sessions: int, projects: int) -> list[Path]:
    directories = [root / f"project-{number:02}" for number in range(projects)]
    for directory in directories:
        directory.mkdir(parents=True)
    base = time.time() - sessions
    for number in range(sessions):
        session_id = f"{number:08x}-session"
        cwd = directories[number % projects]
        await store.append(session_id, HistoryEntry(message={"role": "user", "content": PROMPT}))
        description = SessionDescription(
            session_id=session_id, cwd=str(cwd), title=session_title(f"{number}: {PROMPT}")
        )
        await store.describe_session(description)
        stamp = base + number  # one second apart: a clear order on any clock
        os.utime(store.path_for(session_id), (stamp, stamp))
    return directories


async def timed(call: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    await call()  # warm-up
    durations = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        durations.append(time.perf_counter() - started)
    return durations


async def every_page(skills: AcpSkills) -> int:
    pages, cursor = 0, None
    while True:
        answer = await skills.list_sessions(cursor=cursor)
        pages += 1
        if (cursor := answer.next_cursor) is None:
            return pages


async def measure(sessions: int, projects: int, runs: int) -> list[str]:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        store = JsonlSessionStore(root / "sessions")
        directories = await fill(store, root / "projects", sessions, projects)
        skills = AcpSkills(store=store)
        try:
            first = await skills.list_sessions()
            assert len(first.sessions) == min(sessions, 50)
            rows = []
            for what, call in (
                ("first page, all sessions", lambda: skills.list_sessions()),
                (
                    f"first page, one project ({sessions // projects:,} sessions)",
                    lambda: skills.list_sessions(cwd=str(directories[0])),
                ),
                ("every page, all sessions", lambda: every_page(skills)),
            ):
                durations = await timed(call, runs)
                median = statistics.median(durations) * 1000
                rows.append(
                    f"| {sessions:,} | {what} | {median:.1f} ms | {max(durations) * 1000:.1f} ms |"
                )
            return rows
        finally:
            await skills.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print("| sessions | request | p50 | max |")
    print("|---|---|---|---|")
    for count in args.sessions:
        for row in asyncio.run(measure(count, args.projects, args.runs)):
            print(row, flush=True)


if __name__ == "__main__":
    main()
