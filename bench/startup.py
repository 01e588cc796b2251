"""Quick check of the start-up ratio alone: spawn -> ``initialize`` response, the demo agent
against a bare agent on the same SDK (``bench/bare_agent.py``), medians of ``--runs``.

    .venv/bin/python bench/startup.py [--runs 9]

``bench/run.py`` measures this and everything else, and writes ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from agent_cells import startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    times = asyncio.run(startup(args.runs))
    demo_ms = statistics.median(times["demo"]) * 1000
    bare_ms = statistics.median(times["bare"]) * 1000
    print(f"spawn -> initialize, medians of {args.runs}:")
    print(f"  bare SDK agent : {bare_ms:7.1f} ms")
    print(f"  demo agent     : {demo_ms:7.1f} ms  ({demo_ms / bare_ms:.2f}x; target <= 1.25x)")


if __name__ == "__main__":
    main()
