"""Benchmark: a budgeted catalog and a skill search over 10,000 skills.

    python bench/catalog.py [--skills 10000] [--runs 9] [--budget 8000]

The skills are the 291 of ``tests/fixtures/search_corpus.json`` repeated with numbered names,
a varying team word in each description and ranks spread over the five local roots, so the
catalog and the index have the size and the word distribution of a big installation. All figures
are medians over ``--runs`` runs.

1. Rendering: `fit_catalog` with the budget (the demo agent's default, 8,000 characters), from
   the skills to the text and its outcome, as a session's first turn does. Target: <= 20 ms.
   For comparison: a budget that only shortens (everything listed) and no budget at all.
2. Search: building the index (once per registry revision and working directory), then one
   ``query`` against the built index, the median over every corpus query and run; and the same
   query through ``SkillTool.call``, index already built. Target: a query <= 5 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from acp_skills import SkillCandidate, SkillDefinition, SkillRegistry, SkillTool
from acp_skills.catalog import fit_catalog
from acp_skills.content import render_skill_matches
from acp_skills.search import SkillIndex

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "search_corpus.json"
TEAMS = ["platform", "payments", "growth", "data", "mobile", "infra", "support", "research"]
RANKS = [100, 200, 300, 400, 500]


def make_skills(count: int) -> tuple[list[SkillCandidate], list[str]]:
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    base = corpus["skills"]
    skills = []
    for i in range(count):
        entry = base[i % len(base)]
        copy = i // len(base)
        team = TEAMS[copy % len(TEAMS)]
        skills.append(
            SkillCandidate(
                name=f"{entry['name']}-{copy}" if copy else entry["name"],
                description=f"{entry['description']} Maintained by the {team} team.",
                when_to_use=entry["whenToUse"],
                source="bench",
                provider="bench",
                rank=RANKS[i % len(RANKS)],
            )
        )
    queries = [q["query"] for q in corpus["queries"] + corpus["heldout_queries"]]
    return skills, queries


def median_ms(action: Callable[[], object], runs: int) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


async def tool_query_ms(skills: list[SkillCandidate], queries: list[str], runs: int) -> float:
    registry = SkillRegistry()
    for skill in skills:
        registry.register(
            SkillDefinition(
                name=skill.name,
                description=skill.description,
                when_to_use=skill.when_to_use,
                content="",
            )
        )
    tool = SkillTool(registry)
    await tool.call({"query": "warm up"}, cwd="/bench", searchable=True)  # builds the index
    timings = []
    for _ in range(runs):
        for query in queries:
            started = time.perf_counter()
            result = await tool.call({"query": query}, cwd="/bench", searchable=True)
            timings.append(time.perf_counter() - started)
            assert not result.is_error, result.text
    return statistics.median(timings) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args()
    skills, queries = make_skills(args.skills)

    budgeted = fit_catalog(skills, budget=args.budget)
    render_ms = median_ms(lambda: fit_catalog(skills, budget=args.budget), args.runs)
    unlimited = fit_catalog(skills)
    # A budget a little under the whole catalog: descriptions shortened, every skill listed.
    roomy = unlimited.used * 9 // 10
    shortened = fit_catalog(skills, budget=roomy)
    shorten_ms = median_ms(lambda: fit_catalog(skills, budget=roomy), args.runs)
    unlimited_ms = median_ms(lambda: fit_catalog(skills), args.runs)

    build_ms = median_ms(lambda: SkillIndex(skills), max(3, args.runs // 3))
    index = SkillIndex(skills)
    timings = []
    for _ in range(args.runs):
        for query in queries:
            started = time.perf_counter()
            render_skill_matches(index.search(query))
            timings.append(time.perf_counter() - started)
    query_ms = statistics.median(timings) * 1000
    slowest_ms = max(timings) * 1000
    through_tool_ms = anyio.run(tool_query_ms, skills, queries, max(1, args.runs // 3))

    print(f"skills: {len(skills)}, runs: {args.runs} (medians)")
    print(
        f"budgeted catalog ({args.budget:,} chars)  : {render_ms:8.2f} ms  (target <= 20 ms; "
        f"{len(budgeted.listed)} listed, {len(budgeted.omitted):,} omitted, "
        f"{budgeted.used:,} chars)"
    )
    print(
        f"shortening only ({roomy:,} chars): {shorten_ms:8.2f} ms  "
        f"(cap {shortened.description_cap}, {shortened.shortened:,} shortened)"
    )
    print(f"no budget ({unlimited.used:,} chars)   : {unlimited_ms:8.2f} ms")
    print(f"index build                       : {build_ms:8.2f} ms")
    print(
        f"query, index built                : {query_ms:8.3f} ms  (target <= 5 ms; slowest of "
        f"{len(timings)}: {slowest_ms:.2f} ms)"
    )
    print(f"query through SkillTool.call      : {through_tool_ms:8.3f} ms")


if __name__ == "__main__":
    main()
