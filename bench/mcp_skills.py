"""Benchmark: skills from an MCP server over stdio (FastMCP 4.2.3's SkillsDirectoryProvider).
Named mcp_skills.py: the bench scripts run as top-level modules, so a bench/mcp.py would
shadow the `mcp` package.

    python bench/mcp_skills.py [--sizes 10 100 1000] [--runs 7]

For each size, one server process with that many skills; in the same run, alternating:
1. listing: `McpSkillProvider.list` (every page of ``skills/list`` and the candidates) against
   the FastMCP client's ``list_skills()``, both on a warm connection; medians of ``--runs``.
   Target: ours <= 1.25x the FastMCP client.
2. loading one skill: `SkillRegistry.load` (one verified ``resources/read``) against the FastMCP
   client's ``read_resource``; and the count of ``resources/read`` requests the server received
   per load (from its method record). Target: exactly one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.skills import SkillsClientExtension

from acp_skills import SkillLookupOptions, SkillRegistry
from acp_skills.mcp import McpServer, McpSkillProvider

SERVER = str(Path(__file__).resolve().parent.parent / "tests" / "mcp_skills_server.py")


def make_skills(root: Path, count: int) -> None:
    for index in range(count):
        folder = root / f"skill-{index:04d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{index:04d}\ndescription: Benchmark skill number {index}.\n---\n"
            + "Steps to follow.\n" * 20,
            encoding="utf-8",
        )


async def measure(count: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as temp:
        root, record = Path(temp) / "skills", Path(temp) / "methods.txt"
        make_skills(root, count)
        args = [SERVER, str(root), "--record", str(record)]
        server = McpServer(label="bench", command=sys.executable, args=tuple(args))
        provider = McpSkillProvider(timeout=120)
        registry = SkillRegistry()
        registry.register_provider(provider)
        options = SkillLookupOptions(servers=(server,))
        transport = StdioTransport(command=sys.executable, args=args)
        client = Client(transport, extensions=[SkillsClientExtension()])
        ours_list, theirs_list, ours_load, theirs_load, reads = [], [], [], [], []
        async with client:
            await client.list_skills()
            first = (await registry.snapshot(options)).skills[0]
            for _ in range(runs):
                started = time.perf_counter()
                listed = await provider.list(options)
                ours_list.append(time.perf_counter() - started)
                assert len(listed) == count
                started = time.perf_counter()
                assert len(await client.list_skills()) == count
                theirs_list.append(time.perf_counter() - started)
                before = record.read_text().split().count("resources/read")
                started = time.perf_counter()
                assert await registry.load(first, options) is not None
                ours_load.append(time.perf_counter() - started)
                reads.append(record.read_text().split().count("resources/read") - before)
                started = time.perf_counter()
                await client.read_resource(f"skill://{first.name}/SKILL.md")
                theirs_load.append(time.perf_counter() - started)
        await provider.aclose()
    return {
        "ours_list_ms": statistics.median(ours_list) * 1000,
        "fastmcp_list_ms": statistics.median(theirs_list) * 1000,
        "ours_load_ms": statistics.median(ours_load) * 1000,
        "fastmcp_load_ms": statistics.median(theirs_load) * 1000,
        "reads_per_load": max(reads),
    }


async def main() -> None:
    # The library's debug records (one per load) would interleave with the table.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(
        "| skills | listing, ours | listing, FastMCP client | ratio | load, ours | "
        "load, FastMCP client | resources/read per load |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for count in args.sizes:
        m = await measure(count, args.runs)
        ratio = m["ours_list_ms"] / m["fastmcp_list_ms"]
        print(
            f"| {count} | {m['ours_list_ms']:.1f} ms | {m['fastmcp_list_ms']:.1f} ms | "
            f"{ratio:.2f}x | {m['ours_load_ms']:.1f} ms | {m['fastmcp_load_ms']:.1f} ms | "
            f"{m['reads_per_load']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
