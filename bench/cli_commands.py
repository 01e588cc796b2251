"""Benchmark: ``acp-skills doctor`` and ``list`` on a large tree, for one or more checkouts.

    python bench/cli_commands.py [--skills 1000] [--runs 7] [--tree DIR ...]

A tree of ``--skills`` bundles (`trees.make_tree`) is the one ``--skills-dir``, with empty
homes and a project directory as ``--cwd``. Each run of a command is a fresh process that
imports the command line of a ``--tree`` (a checkout of this repository; by default this one)
and times `acp_skills.cli.main.main` alone (its imports left out), its output discarded. The
checkouts take turns run by run, so a change in the machine's load falls on each alike; the
table gives each one's median and its ratio to the first ``--tree``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from trees import make_tree

HERE = Path(__file__).resolve().parent
COMMANDS = ("doctor", "list")
TIMES = "\u00d7"  # the multiplication sign, for ratios

# One command in a fresh interpreter: argv[1] is the checkout, argv[2] the command line's
# arguments (JSON); prints the milliseconds `main` took.
ONE_RUN = """
import contextlib, io, json, sys, time
sys.path.insert(0, sys.argv[1])
from acp_skills.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    started = time.perf_counter()
    main(json.loads(sys.argv[2]))
    took = time.perf_counter() - started
print(took * 1000)
"""


def one_run(tree: Path, argv: list[str], env: dict[str, str]) -> float:
    command = [sys.executable, "-c", ONE_RUN, str(tree), json.dumps(argv)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    args = parser.parse_args()
    trees = [path.resolve() for path in args.tree or [HERE.parent]]
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        make_tree(base / "skills", args.skills)
        (base / "project").mkdir()
        where = ["--cwd", str(base / "project"), "--skills-dir", str(base / "skills")]
        where += ["--dsh-home", str(base / "dsh"), "--agents-home", str(base / "agents")]
        env = {key: value for key, value in os.environ.items() if not key.startswith("ACP_")}
        env["ACP_SKILLS_TRUST_FILE"] = str(base / "trust.json")
        env.pop("PYTHONPATH", None)
        timings: dict[tuple[str, Path], list[float]] = {}
        for command in COMMANDS:
            for tree in trees:
                one_run(tree, [command, *where], env)  # unmeasured: the files in the page cache
            for _ in range(args.runs):
                for tree in trees:
                    took = one_run(tree, [command, *where], env)
                    timings.setdefault((command, tree), []).append(took)
    print(f"{args.skills:,} skills, median of {args.runs} fresh processes each")
    print("| command | checkout | median | ÷ first |")
    print("|---|---|---:|---:|")
    for command in COMMANDS:
        first = statistics.median(timings[command, trees[0]])
        for tree in trees:
            median = statistics.median(timings[command, tree])
            print(f"| `{command}` | {tree.name} | {median:,.0f} ms | {median / first:.2f}{TIMES} |")


if __name__ == "__main__":
    main()
