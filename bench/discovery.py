"""Benchmark: cold discovery, warm list() and the raw file read of 1,000 skill bundles.

    python bench/discovery.py [--skills 1000] [--runs 7]

Each bundle's SKILL.md is about 12 KB with about 300 bytes of frontmatter. All three numbers are
medians over ``--runs`` runs in the same process, so the ratios compare like with like; the page
cache is warm for all of them (the first, unmeasured pass fills it).
Targets: cold discovery <= 5x the raw read; a warm (cached) list() <= 1 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry

FRONTMATTER = """---
name: {name}
description: >-
  Reviews pull requests for correctness, style and security issues; use it when the
  user asks for a careful review of a diff or a branch before it is merged.
whenToUse: When a diff or a pull request needs a careful review
argument-hint: "[branch]"
metadata:
  owner: platform-team
  version: "1.2"
  tags: [review, git]
---
"""
BODY_LINE = "Check every changed line against the checklist and report findings by severity.\n"


def make_skills(root: Path, count: int) -> list[Path]:
    body = BODY_LINE * (12_000 // len(BODY_LINE))
    files = []
    for index in range(count):
        bundle = root / f"skill-{index:04d}"
        bundle.mkdir()
        path = bundle / "SKILL.md"
        path.write_text(FRONTMATTER.format(name=f"skill-{index:04d}") + body)
        files.append(path)
    return files


def raw_read(files: list[Path]) -> float:
    started = time.perf_counter()
    for path in files:
        with open(path, "rb") as handle:
            handle.read()
    return time.perf_counter() - started


async def cold_discovery(root: Path, homes: Path, expected: int) -> float:
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(
            dsh_home=str(homes / "dsh"),
            agents_home=str(homes / "agents"),
            custom_skill_dirs=[str(root)],
            watch=False,  # scanning only: bench/reload.py measures the watcher
        )
    )
    started = time.perf_counter()
    skills = await registry.list(SkillLookupOptions(cwd=None))
    elapsed = time.perf_counter() - started
    assert len(skills) == expected, len(skills)
    return elapsed


async def warm_list(root: Path, homes: Path, repeats: int = 200) -> float:
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(
            dsh_home=str(homes / "dsh"),
            agents_home=str(homes / "agents"),
            custom_skill_dirs=[str(root)],
            watch=False,  # scanning only: bench/reload.py measures the watcher
        )
    )
    await registry.list()
    started = time.perf_counter()
    for _ in range(repeats):
        await registry.list()
    return (time.perf_counter() - started) / repeats


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "skills"
        homes = Path(scratch) / "homes"
        root.mkdir()
        homes.mkdir()
        files = make_skills(root, args.skills)
        raw_read(files)  # fill the page cache before measuring anything
        await cold_discovery(root, homes, args.skills)
        raw, cold, warm = [], [], []
        for _ in range(args.runs):
            raw.append(raw_read(files))
            cold.append(await cold_discovery(root, homes, args.skills))
            warm.append(await warm_list(root, homes))
    raw_ms, cold_ms, warm_ms = (statistics.median(x) * 1000 for x in (raw, cold, warm))
    print(f"skills: {args.skills}, runs: {args.runs} (medians)")
    print(f"raw read of the files : {raw_ms:8.2f} ms")
    print(f"cold discovery        : {cold_ms:8.2f} ms  ({cold_ms / raw_ms:.2f}x raw; target <= 5x)")
    print(f"warm list()           : {warm_ms:8.4f} ms  (target <= 1 ms)")


if __name__ == "__main__":
    anyio.run(main)
