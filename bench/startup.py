"""Benchmark: spawn -> ``initialize`` response, and the first prompt turn with many skills.

    python bench/startup.py [--runs 9] [--skills 1000]

1. Spawn -> initialize: the demo agent against a bare agent on the same SDK that does nothing
   (``bench/bare_agent.py``), alternating, medians over ``--runs``. Target: <= 1.5x.
2. First prompt turn with ``--skills`` skills installed: ``session/new`` then the first
   ``session/prompt`` (discovery, catalog composition, the offline model, the tool call), median
   over ``--runs`` fresh agents; the second turn of the same session is shown for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from acp.helpers import text_block
from acp.schema import ClientCapabilities, Implementation
from acp.stdio import spawn_agent_process

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class QuietClient:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def read_text_file(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def write_text_file(self, **kwargs: Any) -> Any:
        raise NotImplementedError


def _env(scratch: Path) -> dict[str, str]:
    return {
        "DSH_HOME": str(scratch / "dsh"),
        "DSH_AGENTS_HOME": str(scratch / "agents"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }


async def time_initialize(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    async with spawn_agent_process(
        cast(Any, QuietClient()), sys.executable, *argv, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _process):
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="bench", version="0"),
        )
        return time.perf_counter() - started


async def time_first_turns(
    argv: list[str], env: dict[str, str], project: Path
) -> tuple[float, float]:
    async with spawn_agent_process(
        cast(Any, QuietClient()), sys.executable, *argv, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _process):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        started = time.perf_counter()
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("use skill-0500")])
        first = time.perf_counter() - started
        started = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[text_block("use skill-0501")])
        return first, time.perf_counter() - started


def make_skills(root: Path, count: int) -> None:
    body = "Follow these steps carefully.\n" * 400
    for index in range(count):
        bundle = root / f"skill-{index:04d}"
        bundle.mkdir(parents=True)
        (bundle / "SKILL.md").write_text(
            f"---\nname: skill-{index:04d}\ndescription: Skill number {index} of the benchmark, "
            f"for tasks of kind {index}.\n---\n{body}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--skills", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        env = _env(scratch)
        demo = ["-m", "demo_agent", "--state-dir", str(scratch / "state")]
        bare = [str(HERE / "bare_agent.py")]
        await time_initialize(demo, env)  # warm the file cache and bytecode
        await time_initialize(bare, env)
        demo_times, bare_times = [], []
        for _ in range(args.runs):
            demo_times.append(await time_initialize(demo, env))
            bare_times.append(await time_initialize(bare, env))
        demo_ms = statistics.median(demo_times) * 1000
        bare_ms = statistics.median(bare_times) * 1000
        print(f"spawn -> initialize, medians of {args.runs}:")
        print(f"  bare SDK agent : {bare_ms:7.1f} ms")
        print(f"  demo agent     : {demo_ms:7.1f} ms  ({demo_ms / bare_ms:.2f}x; target <= 1.5x)")

        skills = scratch / "skills"
        make_skills(skills, args.skills)
        project = scratch / "project"
        (project / ".git").mkdir(parents=True)
        with_skills = [*demo, "--skills-dir", str(skills)]
        firsts, seconds = [], []
        for _ in range(args.runs):
            first, second = await time_first_turns(with_skills, env, project)
            firsts.append(first)
            seconds.append(second)
        print(f"first prompt turn with {args.skills} skills installed, medians of {args.runs}:")
        print(f"  session/new + first turn : {statistics.median(firsts) * 1000:7.1f} ms")
        print(f"  second turn (cached)     : {statistics.median(seconds) * 1000:7.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
