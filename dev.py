#!/usr/bin/env python3
"""Set up the project's virtual environment and run its jobs.

    python3 dev.py demo             set everything up, then run the scripted demonstration
    python3 dev.py check            set everything up, then run lint, type checks and the tests
    python3 dev.py check-interop    the slow interop tier: the built wheel, the TypeScript SDK
    python3 dev.py check-thorough   the Hypothesis tests with ten times the examples

`check` runs the default tier of the tests; `.ci/run` runs all three (docs/testing.md).

Only the standard library is used here, so this works on a fresh clone with nothing but
Python 3.11+ on PATH. The environment lives in `.venv/` and is reinstalled whenever
`pyproject.toml` changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".installed-from"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def _run(*argv: str | Path, env: dict[str, str] | None = None) -> int:
    print("+", " ".join(str(arg) for arg in argv), file=sys.stderr, flush=True)
    return subprocess.call([str(arg) for arg in argv], cwd=ROOT, env=env)


def ensure_environment() -> None:
    """Create `.venv` and install the project with its dev extras, unless already current."""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted and PYTHON.exists():
        return
    if not PYTHON.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    steps: list[tuple[str | Path, ...]] = [
        (PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip"),
        (PYTHON, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"),
    ]
    for step in steps:
        if _run(*step) != 0:
            sys.exit("dev.py: installing the environment failed (see the pip output above)")
    STAMP.write_text(wanted)


def check() -> int:
    """Lint, type-check and test; stop at the first failing step."""
    steps: list[tuple[str | Path, ...]] = [
        (PYTHON, "-m", "ruff", "check", "."),
        (PYTHON, "-m", "ruff", "format", "--check", "."),
        (PYTHON, "-m", "mypy"),
        (PYTHON, "-m", "pytest", *sys.argv[2:]),
    ]
    for step in steps:
        code = _run(*step)
        if code != 0:
            return code
    return 0


def check_interop() -> int:
    """The interop tier: the wheel built and installed, the official TypeScript SDK's client."""
    return _run(PYTHON, "-m", "pytest", "-m", "interop", *sys.argv[2:])


def check_thorough() -> int:
    """The Hypothesis tests under the ``thorough`` profile (ten times the examples)."""
    env = {**os.environ, "HYPOTHESIS_PROFILE": "thorough"}
    # Ten times the examples: the hang guard (pytest's timeout) gets ten times the room too.
    room = ("--timeout", "1200")
    return _run(PYTHON, "-m", "pytest", "-m", "hypothesis", *room, *sys.argv[2:], env=env)


def demo() -> int:
    return _run(PYTHON, "-m", "demo_agent.demo", *sys.argv[2:])


def main() -> int:
    jobs = {
        "check": check,
        "check-interop": check_interop,
        "check-thorough": check_thorough,
        "demo": demo,
    }
    if len(sys.argv) < 2 or sys.argv[1] not in jobs:
        print(__doc__, file=sys.stderr)
        return 2
    ensure_environment()
    return jobs[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
