"""What installing acp-skills costs: the wheel's size, and the time, disk space and packages of
each install command the README gives. Prints a Markdown block; ``--write-readme`` puts it in
README.md between the ``install-cost`` marker comments.

    .venv/bin/python bench/install_cost.py [--runs 3] [--uv PATH] [--write-readme]

What it does:

1. Builds the wheel from this tree with ``python -m build`` (the sdist, then the wheel from
   the sdist, so files a ``build/`` directory kept from an earlier build cannot slip in), and
   takes its size in bytes.
2. Fills a temporary directory, once and untimed, with everything the installs need: the
   wheel's dependencies with the ``openai`` extra, and the build backend that ``uv tool
   install .`` builds the tree with. Downloads go through pip as this machine configures it.
3. Runs each install ``--runs`` times, each run in a fresh environment with a cold cache,
   taking packages from that directory alone (``--no-index``), so network time is not in the
   figures: ``uv tool install .`` and ``'.[openai]'`` (which build the wheel from the tree
   first), then ``pip install WHEEL`` and ``'WHEEL[openai]'`` in a new venv.
   Time is the wall-clock time of the install command alone. Size is what it adds on disk,
   counted like ``du`` (a pip venv's growth; a uv tool's whole environment, its cache left
   out). Packages are the distributions it adds, acp-skills included.

uv is taken from ``--uv``, else from PATH; without it the uv rows say they were not measured.
Only the standard library and ``build`` (a dev dependency) are needed.

The wheel carries README.md (its long description), so writing the block changes the wheel:
its size is given to the nearest hundred bytes, and with ``--write-readme`` the wheel is built
again after writing, until that figure is the one of the wheel built from the README that says
it. The exact size of that last wheel is printed on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import ensurepip
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import tomllib
import venv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- install-cost: begin (bench/install_cost.py --write-readme writes this part) -->"
END = "<!-- install-cost: end -->"
# A wheel rebuilt this many times without its size settling is reported, not looped on.
_SETTLE_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class Cost:
    """One run of one install command."""

    seconds: float
    bytes_added: int
    packages_added: int


@dataclass(frozen=True, slots=True)
class Row:
    """An install command as the README shows it, and its runs (none: not measured, and why)."""

    command: str
    runs: tuple[Cost, ...] = ()
    missing: str | None = None


@dataclass(frozen=True, slots=True)
class Report:
    """Everything the block says."""

    wheel_bytes: int
    rows: tuple[Row, ...]
    runs: int
    machine: str


def disk_usage(path: Path) -> int:
    """Bytes ``path`` takes on disk, as ``du`` counts them: allocated blocks, each file once
    however many hard links it has inside ``path`` (uv links its tools' files from its cache)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for directory, subdirectories, files in os.walk(path):
        for name in [*subdirectories, *files]:
            stat = os.lstat(os.path.join(directory, name))
            if (stat.st_dev, stat.st_ino) in seen:
                continue
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_blocks * 512
    return total


def distribution_count(environment: Path) -> int:
    """The distributions installed in ``environment`` (its ``*.dist-info`` directories), for
    the Python running this script (``lib64`` is often a link to ``lib``: counted once)."""
    where = {"base": str(environment), "platbase": str(environment)}
    site = Path(sysconfig.get_path("purelib", "venv", vars=where))
    return sum(1 for _ in site.glob("*.dist-info"))


def shown_size(wheel_bytes: int) -> int:
    """The wheel's size as the README gives it: to the nearest hundred bytes. The wheel carries
    the README, so a byte-exact figure changes the size it states (200,505 written gives a
    wheel of 200,506 bytes, and 200,506 one of 200,505); a rounded one settles."""
    return round(wheel_bytes, -2)


def render(report: Report) -> str:
    """The Markdown block: how it was measured, then one table row per command."""
    runs = f"{report.runs} times" if report.runs != 1 else "once"
    prose = (
        f"The wheel built from this tree is about {shown_size(report.wheel_bytes):,} bytes "
        "(`python -m build`; to the nearest hundred, since the wheel carries this "
        "README and its exact size moves by a few bytes as the figure is written). The table "
        f"is written by `bench/install_cost.py --write-readme` ({report.machine}). Each "
        f"command ran {runs}, each time in a fresh environment with a cold cache, taking "
        "packages from a local directory filled beforehand, so no network time is in it "
        "(expect more over a network). Time is the range of the runs, size what the install "
        "adds on disk, packages the distributions it adds (acp-skills included). The `uv` rows "
        "build the wheel from the tree first and do not compile bytecode; `pip` does."
    )
    lines = [
        # Wrapped as the rest of the README is.
        textwrap.fill(prose, width=96, break_long_words=False, break_on_hyphens=False),
        "",
        "| command | time | size | packages |",
        "|---|---|---|---|",
    ]
    for row in report.rows:
        if not row.runs:
            lines.append(f"| {row.command} | not measured: {row.missing} | | |")
            continue
        seconds = [run.seconds for run in row.runs]
        low, high = min(seconds), max(seconds)
        took = f"{low:.1f} s" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f} to {high:.1f} s"
        size = statistics.median(run.bytes_added for run in row.runs) / 2**20
        counts = sorted({run.packages_added for run in row.runs})
        packages = " or ".join(str(count) for count in counts)
        lines.append(f"| {row.command} | {took} | {size:.1f} MiB | {packages} |")
    return "\n".join(lines) + "\n"


def with_block(text: str, block: str) -> str:
    """``text`` with what lies between the marker lines replaced by ``block``.

    Raises:
        ValueError: the markers are missing, repeated or out of order.
    """
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.rstrip("\n") == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.rstrip("\n") == END]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        raise ValueError(f"expected one line {BEGIN!r} and, after it, one line {END!r}")
    return "".join([*lines[: begins[0] + 1], block, *lines[ends[0] :]])


def _run(command: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None) -> float:
    """Run ``command``; the seconds it took. A failure stops the measurement with its output."""
    started = time.perf_counter()
    try:
        subprocess.run(list(command), cwd=cwd, env=env, capture_output=True, text=True, check=True)
    except subprocess.CalledProcessError as error:
        output = f"{error.stdout}{error.stderr}"
        raise SystemExit(f"{' '.join(command)} failed ({error.returncode}):\n{output}") from None
    return time.perf_counter() - started


def build_wheel(work: Path) -> Path:
    """The wheel of this tree, built from its sdist into a new directory under ``work``."""
    dist = Path(tempfile.mkdtemp(prefix="dist-", dir=work))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    _run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        cwd=work,
        env=env,
    )
    (wheel,) = dist.glob("*.whl")
    return wheel


def fill_wheelhouse(wheel: Path, house: Path) -> None:
    """Download into ``house`` what every measured install needs, through pip as configured."""
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    build_requires = backend["build-system"]["requires"]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(house)]
    _run([*pip, f"{wheel}[openai]", *build_requires], cwd=house)


def _quiet_env(**extra: str) -> dict[str, str]:
    """This environment without the installers' own settings and without Python's (a
    ``PYTHONPATH`` naming this tree would make pip think acp-skills is installed already):
    every run alike, offline."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def pip_run(spec: str, house: Path, work: Path) -> Cost:
    """``pip install spec`` into a new venv, from ``house`` only, without a cache."""
    environment = Path(tempfile.mkdtemp(prefix="venv-", dir=work))
    venv.EnvBuilder(with_pip=True, clear=True).create(environment)
    before, count = disk_usage(environment), distribution_count(environment)
    python = environment / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-cache-dir"]
    seconds = _run(
        [*install, "--no-index", "--find-links", str(house), spec], cwd=work, env=_quiet_env()
    )
    return Cost(
        seconds=seconds,
        bytes_added=disk_usage(environment) - before,
        packages_added=distribution_count(environment) - count,
    )


def uv_run(uv: str, spec: str, house: Path, work: Path) -> Cost:
    """``uv tool install spec`` from this tree, with tool and cache directories of its own."""
    run = Path(tempfile.mkdtemp(prefix="uv-", dir=work))
    env = _quiet_env(
        UV_TOOL_DIR=str(run / "tools"),
        UV_TOOL_BIN_DIR=str(run / "bin"),
        UV_CACHE_DIR=str(run / "cache"),
        UV_PYTHON_DOWNLOADS="never",
        UV_NO_CONFIG="1",
    )
    install = [uv, "tool", "install", "--quiet", "--python", sys.executable]
    seconds = _run([*install, "--no-index", "--find-links", str(house), spec], cwd=ROOT, env=env)
    tool = run / "tools" / "acp-skills"
    return Cost(
        seconds=seconds, bytes_added=disk_usage(tool), packages_added=distribution_count(tool)
    )


def _uv_command(uv: str | None, spec: str, house: Path, work: Path) -> Callable[[], Cost] | None:
    """One run of ``uv tool install spec``, or ``None`` without a uv to run."""
    if uv is None:
        return None
    return lambda: uv_run(uv, spec, house, work)


def _version(command: Sequence[str]) -> str:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    return result.stdout.strip() or result.stderr.strip()


def measure(work: Path, runs: int, uv: str | None) -> Report:
    """Build, download, and run every install ``runs`` times (uv's only when ``uv`` is given)."""
    wheel = build_wheel(work)
    house = work / "wheelhouse"
    house.mkdir()
    fill_wheelhouse(wheel, house)
    shown = f"dist/{wheel.name}"
    commands: list[tuple[str, Callable[[], Cost] | None]] = [
        ("`uv tool install .`", _uv_command(uv, ".", house, work)),
        ("`uv tool install '.[openai]'`", _uv_command(uv, ".[openai]", house, work)),
        (f"`pip install {shown}` (in a new venv)", lambda: pip_run(str(wheel), house, work)),
        (
            f"`pip install '{shown}[openai]'` (in a new venv)",
            lambda: pip_run(f"{wheel}[openai]", house, work),
        ),
    ]
    rows = []
    for command, one_run in commands:
        if one_run is None:
            rows.append(Row(command, missing="uv was not found"))
            print(f"{command}: not measured, uv was not found (give --uv PATH)", file=sys.stderr)
            continue
        rows.append(Row(command, runs=tuple(one_run() for _ in range(runs))))
        print(f"{command}: measured", file=sys.stderr)
    # The pip a new venv gets (the one that ran the installs), not this environment's.
    pip_version = f"pip {ensurepip.version()}"
    # "uv 0.13.9 (x86_64-unknown-linux-gnu)": the name and version are enough.
    tools = [pip_version, *([" ".join(_version([uv, "--version"]).split()[:2])] if uv else [])]
    load = (
        f", load average {os.getloadavg()[0]:.1f} at the start" if hasattr(os, "getloadavg") else ""
    )
    machine = (
        f"on {datetime.date.today().isoformat()}: {platform.system()} {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores{load}, {', '.join(tools)}"
    )
    return Report(wheel_bytes=wheel.stat().st_size, rows=tuple(rows), runs=runs, machine=machine)


def write_settled(report: Report, work: Path) -> Report:
    """Write the block into README.md, then rebuild the wheel (it carries the README) until
    its size is the one written."""
    for _ in range(_SETTLE_ATTEMPTS):
        README.write_text(
            with_block(README.read_text(encoding="utf-8"), render(report)), encoding="utf-8"
        )
        size = build_wheel(work).stat().st_size
        if shown_size(size) == shown_size(report.wheel_bytes):
            return dataclasses.replace(report, wheel_bytes=size)
        report = dataclasses.replace(report, wheel_bytes=size)
    raise SystemExit(f"the wheel's size did not settle after {_SETTLE_ATTEMPTS} builds")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (default 3)")
    parser.add_argument("--uv", metavar="PATH", help="the uv to measure (default: uv on PATH)")
    parser.add_argument(
        "--write-readme", action="store_true", help="put the block in README.md between its markers"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    uv = args.uv or shutil.which("uv")
    if args.write_readme:
        # Checked before the minutes of measuring, not after.
        try:
            with_block(README.read_text(encoding="utf-8"), "")
        except ValueError as error:
            parser.error(f"README.md: {error}")
    with tempfile.TemporaryDirectory(prefix="install-cost-") as work:
        report = measure(Path(work), args.runs, uv)
        if args.write_readme:
            report = write_settled(report, Path(work))
    print(f"the wheel: {report.wheel_bytes:,} bytes", file=sys.stderr)
    print(render(report), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
