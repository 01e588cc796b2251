"""One fresh-process measurement of acp-skills or of a baseline; prints one JSON line.

    python bench/cells.py ours ROOT [--warm-calls N]   cold discovery, then warm list() calls
    python bench/cells.py raw ROOT                     merely reading the same files' bytes
    python bench/cells.py pyyaml ROOT                  reading them and parsing the frontmatter
                                                       with PyYAML's C loader, nothing else
    python bench/cells.py handoff ROOT CHUNKS          read + parse in CHUNKS concurrent
                                                       worker-thread batches

Every timed region starts after the imports it needs, so each cell measures the work, in a
process that has done nothing else yet.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import resource
import time
from pathlib import Path
from typing import Any

from trees import catalog_digest

# No skills outside the tree being measured: the user roots point at directories that do not
# exist.
_NOWHERE = "/nonexistent-acp-skills-bench-home"


def _peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _skill_paths(root: Path) -> list[str]:
    return [
        os.path.join(entry.path, "SKILL.md")
        for entry in sorted(os.scandir(root), key=lambda entry: entry.name)
        if entry.is_dir()
    ]


def ours(root: Path, warm_calls: int) -> dict[str, Any]:
    import structlog

    from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry

    # As an agent does: warnings and above. Unconfigured, structlog would print the debug
    # summary of each discovery to stdout, in the timed region and into this cell's JSON line.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    async def measure() -> dict[str, Any]:
        registry = SkillRegistry()
        registry.register_provider(
            LocalSkillProvider(
                dsh_home=_NOWHERE,
                agents_home=_NOWHERE,
                custom_skill_dirs=[str(root)],
                # As the demo agent runs: watching on (the default).
            )
        )
        options = SkillLookupOptions(cwd=None)
        rss_before = _peak_rss_kib()
        collections_before = [generation["collections"] for generation in gc.get_stats()]
        started = time.perf_counter()
        skills = await registry.list(options)
        cold = time.perf_counter() - started
        collections = [
            generation["collections"] - before
            for generation, before in zip(gc.get_stats(), collections_before, strict=True)
        ]
        rss_after = _peak_rss_kib()
        started = time.perf_counter()
        for _ in range(warm_calls):
            await registry.list(options)
        warm = (time.perf_counter() - started) / warm_calls
        return {
            "seconds": cold,
            "warm_seconds": warm,
            "count": len(skills),
            "digest": catalog_digest((skill.name, skill.description) for skill in skills),
            "gc_collections": collections,
            "rss_before_kib": rss_before,
            "max_rss_kib": rss_after,
        }

    # asyncio.run, as an agent on the ACP SDK runs; creating the loop is not timed.
    return asyncio.run(measure())


def raw(root: Path) -> dict[str, Any]:
    started = time.perf_counter()
    paths = _skill_paths(root)
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            total += len(handle.read())
    return {"seconds": time.perf_counter() - started, "count": len(paths), "bytes": total}


def pyyaml(root: Path) -> dict[str, Any]:
    import yaml

    loader = yaml.CSafeLoader
    started = time.perf_counter()
    catalog = []
    for path in _skill_paths(root):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        end = text.index("\n---\n", 3)
        fields = yaml.load(text[4:end], Loader=loader)
        catalog.append((fields["name"], fields["description"]))
    return {
        "seconds": time.perf_counter() - started,
        "count": len(catalog),
        "digest": catalog_digest(catalog),
    }


def handoff(root: Path, chunks: int) -> dict[str, Any]:
    import anyio

    from acp_skills.frontmatter import parse_skill_bytes
    from acp_skills.fs import read_local_file

    def digest(path: str) -> object:
        return parse_skill_bytes(read_local_file(path, 1_048_576))

    def read_and_parse(batch: list[str]) -> list[object]:
        return [digest(path) for path in batch]

    async def measure() -> dict[str, Any]:
        started = time.perf_counter()
        paths = _skill_paths(root)
        size = -(-len(paths) // chunks)
        batches = [paths[start : start + size] for start in range(0, len(paths), size)]
        results: list[int] = [0] * len(batches)

        async def run(index: int, batch: list[str]) -> None:
            results[index] = len(await anyio.to_thread.run_sync(read_and_parse, batch))

        async with anyio.create_task_group() as group:
            for index, batch in enumerate(batches):
                group.start_soon(run, index, batch)
        return {"seconds": time.perf_counter() - started, "count": sum(results)}

    return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=("ours", "raw", "pyyaml", "handoff"))
    parser.add_argument("root", type=Path)
    parser.add_argument("chunks", nargs="?", type=int, default=1)
    parser.add_argument("--warm-calls", type=int, default=1000)
    args = parser.parse_args()
    if args.cell == "ours":
        result = ours(args.root, args.warm_calls)
    elif args.cell == "raw":
        result = raw(args.root)
    elif args.cell == "pyyaml":
        result = pyyaml(args.root)
    else:
        result = handoff(args.root, args.chunks)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
