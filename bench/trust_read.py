"""Benchmark: `TrustStore.read` over trust files of many decisions, for one or more checkouts.

    python bench/trust_read.py [--entries 2000 20000] [--runs 7] [--tree DIR ...]

Each trust file holds ``--entries`` decisions: a third projects, the rest MCP servers with
three (uri, digest) pairs each, trusted and refused, each key decided about ten times over (a
file written by hand, or merged from several machines: the store itself writes one entry per
key). Each run is a fresh process that imports `acp_skills.trust` from a ``--tree`` (a
checkout of this repository; by default this one) and times one ``read``; the checkouts take
turns run by run, and each must read the same decisions. The table gives each one's median
and its ratio to the first ``--tree``'s.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMES = "\u00d7"  # the multiplication sign, for ratios

# One read in a fresh interpreter: argv[1] is the checkout, argv[2] the file; prints the
# milliseconds it took and a digest of what it read.
ONE_RUN = """
import hashlib, sys, time
sys.path.insert(0, sys.argv[1])
from acp_skills.trust import TrustStore
store = TrustStore(sys.argv[2])
started = time.perf_counter()
stored = store.read()
took = time.perf_counter() - started
served = sorted((key, sorted(pairs)) for key, pairs in stored.served.items())
read = repr((sorted(stored.decisions.items()), served)).encode()
print(took * 1000, hashlib.sha256(read).hexdigest())
"""


def trust_file(path: Path, entries: int) -> None:
    rng = random.Random(entries)
    keys = max(1, entries // 10)
    projects: list[object] = []
    servers: list[object] = []
    for _ in range(entries):
        decision = rng.choice(("trusted", "trusted", "refused"))
        key = rng.randrange(keys)
        if key % 3 == 0:
            projects.append({"path": f"/home/me/src/project-{key}", "decision": decision})
            continue
        uris = [f"skill://s{key}-{rng.randrange(20)}/SKILL.md" for _ in range(3)]
        resources = [{"uri": uri, "digest": f"sha256:{rng.randrange(4)}"} for uri in uris]
        server = f"s{key}=uvx team-skills"
        servers.append({"server": server, "decision": decision, "resources": resources})
    path.write_text(json.dumps({"projects": projects, "servers": servers}), encoding="utf-8")


def one_run(tree: Path, path: Path) -> tuple[float, str]:
    command = [sys.executable, "-c", ONE_RUN, str(tree), str(path)]
    took, digest = subprocess.run(
        command, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(took), digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    args = parser.parse_args()
    trees = [path.resolve() for path in args.tree or [HERE.parent]]
    print(f"median of {args.runs} fresh processes each")
    print("| entries | file | checkout | median | ÷ first |")
    print("|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        for entries in args.entries:
            path = Path(scratch) / f"trust-{entries}.json"
            trust_file(path, entries)
            size = f"{path.stat().st_size / 1024:,.0f} KiB"
            read = {one_run(tree, path)[1] for tree in trees}  # unmeasured: the same decisions
            assert len(read) == 1, "the checkouts read different decisions"
            timings: dict[Path, list[float]] = {tree: [] for tree in trees}
            for _ in range(args.runs):
                for tree in trees:
                    timings[tree].append(one_run(tree, path)[0])
            first = statistics.median(timings[trees[0]])
            for tree in trees:
                median = statistics.median(timings[tree])
                row = f"| {entries:,} | {size} | {tree.name} | {median:,.1f} ms"
                print(f"{row} | {median / first:.2f}{TIMES} |", flush=True)


if __name__ == "__main__":
    main()
