"""Benchmark: a stdio MCP server the editor forwards, from `session/new` to the first prompt's
catalog, side by side with the same server started by hand.

    python bench/session_servers.py [--runs 7] [--skills 10] [--pause 0] [--agent-flag=FLAG ...]

One FastMCP 4.2.3 skills server (tests/mcp_skills_server.py) serving ``--skills`` skills; in
the same run, alternating, ``--runs`` times each:
1. by hand: spawn the server, `server/discover` (its handshake answer), then one `skills/list`
   (every page), over the MCP SDK's own stdio client: the server's start-up time;
2. the demo agent (a fresh process, offline model, ``--trust all``): after `initialize`, the time
   from sending `session/new` with the server in ``mcpServers`` to the answer of a first
   `session/prompt` sent as soon as `session/new` is answered (or ``--pause`` seconds later, a
   pause left out of the figure; the prompt's own time is printed too); the catalog that
   prompt froze (`_skills/prefix`) must name every served skill (or the catalog budget must
   have left it out).
Target (without a pause): the agent's median <= the server's own median + 10 %.
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
from pathlib import Path

from acp.schema import McpServerStdio, TextContentBlock
from agent_cells import agent_env, demo_argv, initialized_agent
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from acp_skills.mcp.transport import list_skills

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "mcp_skills_server.py")
QUIET = open(os.devnull, "w")  # noqa: SIM115 (the servers' stderr, for the whole run)


def make_skills(root: Path, count: int) -> list[str]:
    names = [f"served-{index:03d}" for index in range(count)]
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Served skill {name}.\n---\nSteps.\n",
            encoding="utf-8",
        )
    return names


async def by_hand(root: Path, count: int) -> float:
    """Spawn -> handshake answer -> one whole listing, in seconds."""
    started = time.perf_counter()
    params = StdioServerParameters(command=sys.executable, args=[SERVER, str(root)])
    async with (
        stdio_client(params, errlog=QUIET) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.discover()
        listing = await list_skills(session)
        elapsed = time.perf_counter() - started
    assert len(listing.skills) == count, listing
    return elapsed


async def through_the_agent(
    scratch: Path, root: Path, names: list[str], flags: list[str], pause: float
) -> tuple[float, float]:
    """`session/new` sent -> the first prompt answered (the pause before the prompt left out),
    and that prompt alone, in seconds; checks its catalog."""
    home = scratch / "home"
    env = agent_env(home, HOME=str(home), ACP_SKILLS_TRUST_FILE=str(scratch / "trust.json"))
    argv = demo_argv(scratch, "--trust", "all", *flags)
    entry = McpServerStdio(name="team", command=sys.executable, args=[SERVER, str(root)], env=[])
    async with initialized_agent(argv, env) as conn:
        started = time.perf_counter()
        created = await conn.new_session(cwd=str(scratch), mcp_servers=[entry])
        answered = time.perf_counter()
        await asyncio.sleep(pause)  # the person types
        prompted = time.perf_counter()
        await conn.prompt(
            session_id=created.session_id, prompt=[TextContentBlock(type="text", text="hello")]
        )
        ended = time.perf_counter()
        prefix = await conn.ext_method("skills/prefix", {"sessionId": created.session_id})
    # Every served skill is in the catalog, or left out of it by the catalog budget.
    catalog, omitted = json.dumps(prefix["messages"]), (prefix["budget"] or {}).get("omitted", [])
    missing = [name for name in names if f"`{name}`" not in catalog and name not in omitted]
    assert not missing, f"the first prompt's catalog lacks {missing[:3]}"
    return (answered - started) + (ended - prompted), ended - prompted


async def measure(
    runs: int, count: int, flags: list[str], pause: float
) -> tuple[list[float], list[float], list[float]]:
    hand: list[float] = []
    agent: list[float] = []
    prompt: list[float] = []
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "skills"
        names = make_skills(root, count)
        for run in range(runs):
            hand.append(await by_hand(root, count))
            scratch = Path(temp) / f"agent-{run}"
            scratch.mkdir()
            total, alone = await through_the_agent(scratch, root, names, flags, pause)
            agent.append(total)
            prompt.append(alone)
    return hand, agent, prompt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--skills", type=int, default=10)
    parser.add_argument(
        "--agent-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="one more argument for the demo agent (repeatable), e.g. --agent-flag=--no-watch",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="send the first prompt this long after session/new is answered (default 0)",
    )
    args = parser.parse_args()
    hand, agent, prompt = asyncio.run(measure(args.runs, args.skills, args.agent_flag, args.pause))
    hand_ms, agent_ms = statistics.median(hand) * 1000, statistics.median(agent) * 1000
    flags = " ".join(args.agent_flag)
    print(
        f"one stdio MCP server with {args.skills} skills, medians of {args.runs}"
        + (f", the agent with {flags}" if flags else "")
        + (f", the prompt {args.pause:g} s after session/new:" if args.pause else ":")
    )
    print(f"  by hand: spawn -> handshake -> listing      : {hand_ms:7.1f} ms")
    print(
        f"  demo agent: session/new -> first catalog   : {agent_ms:7.1f} ms  "
        f"({agent_ms / hand_ms:.2f}x; target <= 1.10x)"
    )
    print(
        f"  the first prompt alone                     : {statistics.median(prompt) * 1000:7.1f} ms"
    )
    print("  runs, by hand (ms): " + " ".join(f"{t * 1000:.0f}" for t in hand))
    print("  runs, agent (ms)  : " + " ".join(f"{t * 1000:.0f}" for t in agent))


if __name__ == "__main__":
    main()
