#!/usr/bin/env python3
"""Set up the project's virtual environment and run its jobs.

    python3 dev.py demo             set everything up, then run the scripted demonstration
    python3 dev.py check            set everything up, then run lint, type checks and the tests
    python3 dev.py check-interop    the slow interop tier: the built wheel, the TypeScript SDK
    python3 dev.py check-thorough   the Hypothesis tests with ten times the examples

`check` runs the default tier of the tests; `.ci/run` runs all three (docs/testing.md). `check`
also runs the ACP-facing tests (the `sdk` marker) on the newest 1.x line of the ACP SDK, in a
second environment, at the same time as the rest (docs/sdk-versions.md).

Only the standard library is used here, so this works on a fresh clone with nothing but
Python 3.11+ on PATH. The environments live in `.venv/` (with the lowest ACP SDK pyproject.toml
allows) and `.venv-acp1/` (with the SDK's newest 1.x), and are reinstalled whenever
`pyproject.toml` changes.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SDK = "agent-client-protocol"
# The ACP SDK's 1.x line as a user picks it (pre-releases until 1.0.0 is on the index).
ACP1_REQUIREMENT = f"{SDK}>=1.0.0rc3,<2"
# The tests that speak ACP, run again on the 1.x line (docs/testing.md).
ACP1_SELECTION = ("-m", "sdk and not interop")
NO_TESTS_COLLECTED = 5  # pytest's exit status when a selection holds none of the `sdk` tests


def _second_run_verdict(code: int, extra: list[str]) -> int:
    """A second run that collected no tests passes only when the person's own arguments chose
    tests it does not hold; with none, an empty run is a broken selection, and fails."""
    return 0 if code == NO_TESTS_COLLECTED and extra else code


def lowest_sdk() -> str:
    """The ACP SDK at the lowest version pyproject.toml allows (``agent-client-protocol==X``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for requirement in project["dependencies"]:
        name, _, floor = requirement.partition(">=")
        if name.strip() == SDK:
            return f"{SDK}=={floor.split(',')[0].strip()}"
    sys.exit(f"dev.py: pyproject.toml names no lower bound for {SDK}")


@dataclass(frozen=True)
class Environment:
    """A virtual environment with the project installed (editable, with its dev extras), then
    the ACP SDK it is for (``sdk``: pip's arguments)."""

    path: Path
    sdk: tuple[str, ...]

    @property
    def python(self) -> Path:
        return (
            self.path
            / ("Scripts" if os.name == "nt" else "bin")
            / ("python.exe" if os.name == "nt" else "python")
        )

    def ensure(self) -> None:
        """Create it and install everything, unless already current."""
        # What it was installed from: pyproject.toml and the SDK put on top.
        wanted = hashlib.sha256(
            (ROOT / "pyproject.toml").read_bytes() + "\n".join(self.sdk).encode()
        ).hexdigest()
        stamp = self.path / ".installed-from"
        if stamp.exists() and stamp.read_text() == wanted and self.python.exists():
            return
        if not self.python.exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(self.path)
        pip: tuple[str | Path, ...] = (self.python, "-m", "pip", "install", "--quiet")
        # The SDK in a step of its own: `--pre` must not reach the other dependencies.
        steps = [(*pip, "--upgrade", "pip"), (*pip, "-e", f"{ROOT}[dev]"), (*pip, *self.sdk)]
        for step in steps:
            if _run(*step) != 0:
                sys.exit(f"dev.py: installing {self.path.name} failed (see the pip output above)")
        stamp.write_text(wanted)


# The lowest supported SDK (0.12.x), and the newest 1.x the index has (docs/sdk-versions.md).
MAIN = Environment(ROOT / ".venv", (lowest_sdk(),))
ACP1 = Environment(ROOT / ".venv-acp1", ("--pre", ACP1_REQUIREMENT))
PYTHON = MAIN.python


def _show(argv: tuple[str | Path, ...]) -> list[str]:
    command = [str(arg) for arg in argv]
    print("+", shlex.join(command), file=sys.stderr, flush=True)
    return command


def _run(*argv: str | Path, env: dict[str, str] | None = None) -> int:
    return subprocess.call(_show(argv), cwd=ROOT, env=env)


def check() -> int:
    """Lint, type-check and test, and the ACP-facing tests on the SDK's 1.x line alongside;
    stop at the first failing step."""
    ACP1.ensure()
    extra = sys.argv[2:]
    # On its own core: a second pytest beside lint, types and the main run costs little time.
    with tempfile.TemporaryFile() as output:
        acp1 = (ACP1.python, "-m", "pytest", "-p", "no:cacheprovider", *ACP1_SELECTION)
        other = subprocess.Popen(
            _show((*acp1, *extra)),
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopped with its agents if a step fails
        )
        try:
            code = _steps(
                (PYTHON, "-m", "ruff", "check", "."),
                (PYTHON, "-m", "ruff", "format", "--check", "."),
                (PYTHON, "-m", "mypy"),
                (PYTHON, "-m", "pytest", *extra),
            )
        except BaseException:  # Ctrl-C: its own group does not get the terminal's signal
            _stop(other)
            raise
        if code != 0 and other.poll() is None:
            _stop(other)  # a step failed early: its verdict is not worth the wait
            return code
        other_code = _second_run_verdict(other.wait(), extra)
        output.seek(0)
        print(f"\n== the ACP-facing tests on {ACP1_REQUIREMENT} ({ACP1.path.name}) ==", flush=True)
        sys.stdout.buffer.write(output.read())
        sys.stdout.flush()
        return code or other_code


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` and whatever it started (its own process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    process.wait()


def _steps(*steps: tuple[str | Path, ...]) -> int:
    for step in steps:
        code = _run(*step)
        if code != 0:
            return code
    return 0


def check_interop() -> int:
    """The interop tier: the wheel built and installed, the official TypeScript SDK's client;
    then the TypeScript scenarios again against the agent on the SDK's 1.x line."""
    code = _run(PYTHON, "-m", "pytest", "-m", "interop", *sys.argv[2:])
    if code != 0:
        return code
    ACP1.ensure()
    typescript = ("tests/conformance/test_typescript_sdk.py", "-m", "interop")
    code = _run(ACP1.python, "-m", "pytest", "-p", "no:cacheprovider", *typescript, *sys.argv[2:])
    return _second_run_verdict(code, sys.argv[2:])


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
    MAIN.ensure()
    return jobs[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
