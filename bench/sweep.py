"""Benchmark: the live-reload safety sweep's cost (docs/reload.md, "The safety sweep").

    python bench/sweep.py [--skills 1000 10000] [--runs 9]

For each size, a root of that many bundles (`trees.make_tree`) and one ``fingerprint`` of it,
as the watcher thread takes every sweep interval, timed ``--runs`` times after a warm-up (the
directory entries and inodes cached, as they are for a root the agent reads): the median and
the largest, the interval the adaptive rule then uses (the larger of 5 s and 100 times the
sweep) and the share of the watcher thread's time the sweeps take at that interval.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from trees import make_tree

from acp_skills.sweep import SWEEP_COST_FACTOR, SWEEP_SECONDS, fingerprint


def time_sweeps(root: Path, runs: int) -> list[float]:
    roots = [(str(root), False)]
    fingerprint(roots)  # warm-up
    durations = []
    for _ in range(runs):
        started = time.perf_counter()
        fingerprint(roots)
        durations.append(time.perf_counter() - started)
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print("| bundles | one sweep, p50 | max | interval | share of the thread's time |")
    print("|---|---|---|---|---|")
    for count in args.skills:
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch) / "skills"
            make_tree(root, count)
            durations = time_sweeps(root, args.runs)
        median = statistics.median(durations)
        interval = max(SWEEP_SECONDS, SWEEP_COST_FACTOR * median)
        print(
            f"| {count:,} | {median * 1000:.1f} ms | {max(durations) * 1000:.1f} ms "
            f"| {interval:.1f} s | {median / interval:.2%} |"
        )


if __name__ == "__main__":
    main()
