"""Measurements of the demo agent over real stdio; prints one JSON line.

    python bench/agent_cells.py startup --runs N
        spawn -> `initialize` response, the demo agent and the bare agent on the same SDK
        (bench/bare_agent.py) alternating, N fresh processes each
    python bench/agent_cells.py turns SKILLS PROJECT --runs N --turns K
        in N fresh demo agents: `session/new` + the first prompt turn, then K more turns of the
        same session (the prefix is frozen by then)
    python bench/agent_cells.py sessions SKILLS PROJECT --count 100
        one fresh demo agent, cold cache: COUNT `session/new` requests at once, until every
        session has its commands update; counts the discoveries the agent ran

The agents run with this script's interpreter and the offline model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from acp.schema import ClientCapabilities, Implementation, TextContentBlock
from acp.stdio import spawn_agent_process

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class Client:
    """Answers nothing but counts the commands updates each session receives."""

    def __init__(self) -> None:
        self.commands_updates: Counter[str] = Counter()
        self.updated = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", None) == "available_commands_update":
            self.commands_updates[session_id] += 1
            self.updated.set()

    async def request_permission(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def read_text_file(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def write_text_file(self, **kwargs: Any) -> Any:
        raise NotImplementedError


def agent_env(scratch: Path, **extra: str) -> dict[str, str]:
    # spawn_agent_process passes only a few variables on: give the agent what it needs.
    return {
        "DSH_HOME": str(scratch / "dsh"),
        "DSH_AGENTS_HOME": str(scratch / "agents"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
        **extra,
    }


def demo_argv(scratch: Path, *more: str) -> list[str]:
    return ["-m", "demo_agent", "--state-dir", str(scratch / "state"), *more]


@asynccontextmanager
async def initialized_agent(argv: list[str], env: dict[str, str]) -> AsyncIterator[Any]:
    """A fresh agent process of ``argv`` with this interpreter, initialized; the client's
    connection to it, until the block ends."""
    async with spawn_agent_process(
        cast(Any, Client()), sys.executable, *argv, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _process):
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="bench", version="0"),
        )
        yield conn


async def time_initialize(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    async with initialized_agent(argv, env):
        return time.perf_counter() - started


async def startup(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        env = agent_env(scratch)
        demo = demo_argv(scratch)
        bare = [str(HERE / "bare_agent.py")]
        # One unmeasured start each fills the file cache and writes the bytecode.
        await time_initialize(demo, env)
        await time_initialize(bare, env)
        demo_times, bare_times = [], []
        for _ in range(runs):
            demo_times.append(await time_initialize(demo, env))
            bare_times.append(await time_initialize(bare, env))
    return {"demo": demo_times, "bare": bare_times}


async def turns(skills: Path, project: Path, runs: int, later_turns: int) -> dict[str, Any]:
    firsts: list[float] = []
    later: list[float] = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        for run in range(runs + 1):
            async with spawn_agent_process(
                cast(Any, Client()),
                sys.executable,
                *demo_argv(scratch, "--skills-dir", str(skills)),
                env=agent_env(scratch),
                transport_kwargs={"stderr": None},
            ) as (conn, _process):
                await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
                started = time.perf_counter()
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                first_block = TextContentBlock(type="text", text="use skill-00005")
                await conn.prompt(session_id=session.session_id, prompt=[first_block])
                first = time.perf_counter() - started
                times = []
                for turn in range(later_turns):
                    started = time.perf_counter()
                    # Skills 0-9 exist in every tree measured.
                    text = f"use skill-{(turn + 6) % 10:05d}"
                    await conn.prompt(
                        session_id=session.session_id,
                        prompt=[TextContentBlock(type="text", text=text)],
                    )
                    times.append(time.perf_counter() - started)
            if run:  # the first agent only warms the file cache and the bytecode
                firsts.append(first)
                later.append(statistics.median(times))
    return {"first": firsts, "later": later}


async def sessions(skills: Path, project: Path, count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        log = scratch / "discoveries.log"
        client = Client()
        async with spawn_agent_process(
            cast(Any, client),
            sys.executable,
            str(HERE / "counting_agent.py"),
            *demo_argv(scratch, "--skills-dir", str(skills))[2:],
            env=agent_env(scratch, BENCH_DISCOVERY_LOG=str(log)),
            transport_kwargs={"stderr": None},
        ) as (conn, _process):
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
            started = time.perf_counter()
            opened = await asyncio.gather(
                *(conn.new_session(cwd=str(project), mcp_servers=[]) for _ in range(count))
            )
            ids = {session.session_id for session in opened}

            async def all_announced() -> None:
                while not ids <= set(client.commands_updates):
                    client.updated.clear()
                    await client.updated.wait()

            await asyncio.wait_for(all_announced(), timeout=120)
            seconds = time.perf_counter() - started
        discoveries = len(log.read_text().splitlines()) if log.exists() else 0
    return {"seconds": seconds, "sessions": len(ids), "discoveries": discoveries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=("startup", "turns", "sessions"))
    parser.add_argument("skills", nargs="?", type=Path)
    parser.add_argument("project", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    if args.cell == "startup":
        result = asyncio.run(startup(args.runs))
    elif args.skills is None or args.project is None:
        parser.error("this cell needs SKILLS and PROJECT")
    elif args.cell == "turns":
        result = asyncio.run(turns(args.skills, args.project, args.runs, args.turns))
    else:
        result = asyncio.run(sessions(args.skills, args.project, args.count))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
