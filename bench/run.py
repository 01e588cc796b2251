"""Run every benchmark and write docs/benchmarks.md (with its chart). The one command:

    .venv/bin/python bench/run.py [--runs 5] [--python PATH]

What it does:

1. Builds (or reuses) the bench environment ``bench/.venv``: a virtual environment with this
   checkout installed (editable) beside the peer libraries, from PyPI, and matplotlib. The
   interpreter is ``--python``, else the newest CPython 3.12+ found on this machine (some
   peers need 3.12), else the one running this script. Everything measured runs on that one
   interpreter, so every ratio compares like with like.
2. Generates skill trees of 10, 100, 1,000 and 10,000 bundles in a temporary directory.
3. Runs each cell in fresh processes, the contenders of a size taking turns so that noise on
   the machine falls on all of them alike, and takes medians (``--runs`` per cell, at least 5).
4. Writes ``docs/benchmarks.md`` and ``docs/benchmarks-discovery.png``.

It is not part of the test command. It takes about ten minutes on two cores, plus about a
minute the first time, to build the bench environment.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trees import expected_digest, make_tree

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCH_VENV = HERE / ".venv"
STAMP = BENCH_VENV / ".bench-requirements"
DOC = ROOT / "docs" / "benchmarks.md"
CHART = ROOT / "docs" / "benchmarks-discovery.png"

SIZES = (10, 100, 1_000, 10_000)
HANDOFF_SIZES = (1_000, 10_000)
HANDOFF_CHUNKS = (1, 2, 4, 8)

# Each peer: the label used in the report, the distributions to install, and the name
# bench_env/peers.py knows it by.
PEERS = (
    ("skills-ref", ("skills-ref",), "skills-ref"),
    ("agentskills-core + agentskills-fs", ("agentskills-core", "agentskills-fs"), "agentskills"),
    ("pydantic-ai-skills", ("pydantic-ai-skills",), "pydantic-ai-skills"),
    ("fast-agent-mcp", ("fast-agent-mcp",), "fast-agent"),
)
CHART_PACKAGES = ("matplotlib",)

TIMES = "\u00d7"  # the multiplication sign, for ratios

# Discovery against the chosen parser's own floor (read + CSafeLoader) and the fastest peer
# (contract, change log of round four; docs/architecture.md).
TARGETS = {
    "cold_vs_floor_1000": 1.25,
    "peer_vs_cold_1000": 2.0,
    "cold_vs_floor_10000": 1.25,
    "warm_ms": 1.0,
    "startup_ratio": 1.25,
    "peak_mib_10000": 150.0,
}


# --- the bench environment -------------------------------------------------------------------


def _version_of(python: str) -> tuple[int, int]:
    output = subprocess.run(
        [python, "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(output[0]), int(output[1])


def choose_interpreter(explicit: str | None) -> str:
    """The interpreter for the bench environment: explicit, else the newest 3.12+, else ours."""
    if explicit:
        return explicit
    candidates: list[str] = []
    for name in ("python3.14", "python3.13", "python3.12"):
        found = shutil.which(name)
        if found:
            candidates.append(found)
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates.extend(
            str(path)
            for path in sorted(pyenv.glob("3.1[2-9]*/bin/python3"))
            if re.fullmatch(r"3\.\d+\.\d+", path.parent.parent.name)
        )
    best: tuple[tuple[int, int], str] | None = None
    for candidate in candidates:
        try:
            version = _version_of(candidate)
        except (OSError, subprocess.CalledProcessError):
            continue
        if version >= (3, 12) and (best is None or version > best[0]):
            best = (version, candidate)
    return best[1] if best else sys.executable


def _bench_python() -> str:
    return str(BENCH_VENV / ("Scripts" if os.name == "nt" else "bin") / "python")


def _pip(python: str, *packages: str) -> bool:
    command = [python, "-m", "pip", "install", "--quiet", *packages]
    print("+", " ".join(command), file=sys.stderr, flush=True)
    return subprocess.call(command) == 0


def ensure_bench_env(interpreter: str) -> tuple[str, list[str]]:
    """Create or reuse bench/.venv; return its python and the peers that could not install."""
    requirements = [distribution for _, distributions, _ in PEERS for distribution in distributions]
    wanted = json.dumps({"python": interpreter, "packages": [*requirements, *CHART_PACKAGES]})
    python = _bench_python()
    missing: list[str] = []
    if STAMP.exists() and STAMP.read_text(encoding="utf-8").startswith(wanted):
        stored = json.loads(STAMP.read_text(encoding="utf-8").split("\n", 1)[1])
        return python, list(stored)
    print(f"building the bench environment with {interpreter}", file=sys.stderr)
    subprocess.run([interpreter, "-m", "venv", "--clear", str(BENCH_VENV)], check=True)
    if not _pip(python, "--upgrade", "pip") or not _pip(python, "-e", str(ROOT)):
        sys.exit("bench: installing acp-skills into the bench environment failed")
    if not _pip(python, *CHART_PACKAGES):
        sys.exit("bench: installing matplotlib into the bench environment failed")
    if not _pip(python, *requirements):
        # Install the peers one by one, so that one that cannot install leaves the others.
        for label, distributions, _ in PEERS:
            if not _pip(python, *distributions):
                missing.append(label)
    STAMP.write_text(wanted + "\n" + json.dumps(missing), encoding="utf-8")
    return python, missing


def installed_versions(python: str, names: Sequence[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: out[name] = m.version(name)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    result = subprocess.run(
        [python, "-c", code, *names], capture_output=True, text=True, check=True
    )
    versions: dict[str, str] = json.loads(result.stdout)
    return versions


# --- running cells ----------------------------------------------------------------------------


def run_json(argv: Sequence[str], *, timeout: float = 900) -> dict[str, Any]:
    """Run one cell in a fresh process; return the JSON object it printed last."""
    completed = subprocess.run(
        list(argv), capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


@dataclass
class Cell:
    """The fresh-process results of one contender at one size."""

    seconds: list[float] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def median_of(self, key: str) -> float:
        return statistics.median(float(result[key]) for result in self.extra)


@dataclass
class Results:
    machine: dict[str, str]
    runs: int
    versions: dict[str, str]
    missing_peers: list[str]
    discovery: dict[str, dict[int, Cell]] = field(default_factory=dict)
    catalog_mismatches: list[str] = field(default_factory=list)
    handoff: dict[int, dict[int, Cell]] = field(default_factory=dict)
    agent: dict[str, Any] = field(default_factory=dict)
    import_seconds: list[float] = field(default_factory=list)


def discovery_contenders(python: str, missing: Sequence[str]) -> list[tuple[str, list[str]]]:
    cells = str(HERE / "cells.py")
    contenders = [
        ("raw read", [python, cells, "raw"]),
        ("read + PyYAML CLoader", [python, cells, "pyyaml"]),
        ("acp-skills", [python, cells, "ours"]),
    ]
    peers = str(HERE / "bench_env" / "peers.py")
    for label, _, key in PEERS:
        if label not in missing:
            contenders.append((label, [python, peers, key]))
    return contenders


def measure_discovery(
    results: Results, python: str, trees: dict[int, Path], missing: Sequence[str]
) -> None:
    contenders = discovery_contenders(python, missing)
    for size, tree in trees.items():
        expected = expected_digest(size)
        # One unmeasured read fills the page cache, so every contender reads from memory.
        run_json([python, str(HERE / "cells.py"), "raw", str(tree)])
        for run in range(results.runs):
            print(f"discovery: {size} skills, run {run + 1}/{results.runs}", file=sys.stderr)
            for label, argv in contenders:
                outcome = run_json([*argv, str(tree)])
                cell = results.discovery.setdefault(label, {}).setdefault(size, Cell())
                cell.seconds.append(outcome["seconds"])
                cell.extra.append(outcome)
                if outcome["count"] != size or outcome.get("digest", expected) != expected:
                    results.catalog_mismatches.append(f"{label} at {size} skills")


def measure_handoff(results: Results, python: str, trees: dict[int, Path]) -> None:
    for size in HANDOFF_SIZES:
        for run in range(results.runs):
            print(f"hand-offs: {size} skills, run {run + 1}/{results.runs}", file=sys.stderr)
            for chunks in HANDOFF_CHUNKS:
                argv = [python, str(HERE / "cells.py"), "handoff", str(trees[size]), str(chunks)]
                outcome = run_json(argv)
                cell = results.handoff.setdefault(size, {}).setdefault(chunks, Cell())
                cell.seconds.append(outcome["seconds"])


def measure_import(results: Results, python: str) -> None:
    code = (
        "import time; started = time.perf_counter(); import acp_skills; "
        "print('{\"seconds\": %r}' % (time.perf_counter() - started))"
    )
    run_json([python, "-c", code])  # bytecode written, files cached
    for _ in range(results.runs):
        results.import_seconds.append(run_json([python, "-c", code])["seconds"])


def measure_agent(results: Results, python: str, trees: dict[int, Path], project: Path) -> None:
    agent = str(HERE / "agent_cells.py")
    runs = str(results.runs)
    print("agent: start-up", file=sys.stderr)
    results.agent["startup"] = run_json([python, agent, "startup", "--runs", runs])
    for size in (10, 1_000):
        print(f"agent: prompt turns with {size} skills", file=sys.stderr)
        results.agent[f"turns_{size}"] = run_json(
            [python, agent, "turns", str(trees[size]), str(project), "--runs", runs]
        )
    print("agent: 100 sessions at once", file=sys.stderr)
    results.agent["sessions"] = run_json(
        [python, agent, "sessions", str(trees[1_000]), str(project), "--count", "100"]
    )


# --- the report --------------------------------------------------------------------------------


def machine_info(bench_python: str) -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    memory = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    bench_version = subprocess.run(
        [bench_python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "system": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "cpu": f"{cpu}, {os.cpu_count()} logical cores",
        "memory": memory,
        "bench interpreter": f"CPython {bench_version} (bench/.venv)",
        "load average (1, 5, 15 min) at start": load_average(),
    }


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def ms(seconds: float) -> str:
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    if value >= 0.1:
        return f"{value:.2f} ms"
    return f"{value * 1000:.1f} µs"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def targets(results: Results) -> list[tuple[str, str, str, str]]:
    """Rows of (figure, measured, target, verdict)."""
    ours = results.discovery["acp-skills"]
    floor = results.discovery["read + PyYAML CLoader"]
    rows: list[tuple[str, str, str, str]] = []
    for size, key in ((1_000, "cold_vs_floor_1000"), (10_000, "cold_vs_floor_10000")):
        ratio = ours[size].median / floor[size].median
        rows.append(
            (
                f"cold discovery at {size:,} skills ÷ read + PyYAML CLoader",
                f"{ratio:.2f}{TIMES} ({ms(ours[size].median)} vs {ms(floor[size].median)})",
                f"≤ {TARGETS[key]:g}{TIMES}",
                verdict(ratio <= TARGETS[key]),
            )
        )
    peers = [label for label, _, _ in PEERS if label in results.discovery]
    if peers:
        fastest = min(peers, key=lambda label: results.discovery[label][1_000].median)
        lead = results.discovery[fastest][1_000].median / ours[1_000].median
        rows.insert(
            1,
            (
                "fastest peer at 1,000 skills ÷ cold discovery",
                f"{lead:.1f}{TIMES} ({fastest}: {ms(results.discovery[fastest][1_000].median)})",
                f"≥ {TARGETS['peer_vs_cold_1000']:g}{TIMES}",
                verdict(lead >= TARGETS["peer_vs_cold_1000"]),
            ),
        )
    warm = max(ours[size].median_of("warm_seconds") for size in ours)
    rows.append(
        (
            "warm list(), largest median over the sizes",
            ms(warm),
            f"≤ {TARGETS['warm_ms']:g} ms",
            verdict(warm * 1000 <= TARGETS["warm_ms"]),
        )
    )
    startup = results.agent["startup"]
    ratio = statistics.median(startup["demo"]) / statistics.median(startup["bare"])
    # Judged where the target is set, in an environment without the peers and their imports
    # (`bench/startup.py` in a plain venv): here acp-skills is an editable install beside them.
    rows.append(
        (
            "demo agent start-up ÷ bare SDK agent (this environment, peers installed)",
            f"{ratio:.2f}{TIMES}",
            f"≤ {TARGETS['startup_ratio']:g}{TIMES} without peers (`bench/startup.py`)",
            "not judged here",
        )
    )
    peak = ours[10_000].median_of("max_rss_kib") / 1024
    rows.append(
        (
            "peak memory, discovery of 10,000 skills (whole process)",
            f"{peak:.0f} MiB",
            f"≤ {TARGETS['peak_mib_10000']:g} MiB",
            verdict(peak <= TARGETS["peak_mib_10000"]),
        )
    )
    return rows


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def render(results: Results) -> str:
    ours = results.discovery["acp-skills"]
    raw = results.discovery["raw read"]
    labels = list(results.discovery)
    sizes = sorted(ours)
    out: list[str] = []
    out.append("# Benchmarks\n")
    out.append(
        "Written by `.venv/bin/python bench/run.py` (see `bench/run.py` for what it does); do "
        "not edit by hand. Every figure is the median of "
        f"{results.runs} fresh processes (or agents), and every ratio compares figures of this "
        "one run. The files are in the page cache for every contender (an unmeasured read "
        'comes first): "cold" means a fresh process whose imports are done, not a cold disk.\n'
    )
    out.append("## Machine\n")
    out.append(table(["", ""], [(key, value) for key, value in results.machine.items()]))
    versions = ", ".join(f"{name} {version}" for name, version in results.versions.items())
    out.append(f"\nPackages in the bench environment: {versions}.\n")
    if results.missing_peers:
        out.append(
            "Peers that could not be installed on this interpreter, and are not measured: "
            + ", ".join(results.missing_peers)
            + ".\n"
        )
    out.append("## Targets\n")
    out.append(table(["figure", "measured", "target", ""], targets(results)))
    out.append("\n## Discovery\n")
    out.append(
        "The same generated tree for everyone: bundles `skill-NNNNN/SKILL.md` of about 12 KB, "
        "with about 280 bytes of frontmatter (`name`, a folded `description`, `license`, a "
        "`metadata` mapping). *Raw read* lists the directory and reads every file's bytes; "
        "*read + PyYAML CLoader* also loads each frontmatter with `yaml.CSafeLoader` and "
        "nothing else. *acp-skills* is `SkillRegistry.list()` over a `LocalSkillProvider` "
        "(cold: the first call; warm: the mean of 1,000 more calls, served from the cache). "
        "Each peer is called through its public API, and each returned the same catalog "
        "(names and descriptions) as acp-skills"
        + (
            ", except: " + "; ".join(results.catalog_mismatches)
            if results.catalog_mismatches
            else ""
        )
        + ".\n"
    )
    header = ["skills", *labels, "acp-skills warm `list()`"]
    rows = []
    for size in sizes:
        row = [f"{size:,}"]
        row.extend(ms(results.discovery[label][size].median) for label in labels)
        row.append(ms(ours[size].median_of("warm_seconds")))
        rows.append(row)
    out.append(table(header, rows))
    out.append("\nRatios, from the medians above:\n")
    ratio_header = ["skills", "acp-skills ÷ raw read", "÷ read + PyYAML"]
    peer_labels = [label for label, _, _ in PEERS if label in results.discovery]
    ratio_header.extend(f"{label} ÷ acp-skills" for label in peer_labels)
    ratio_rows = []
    pyyaml = results.discovery["read + PyYAML CLoader"]
    for size in sizes:
        row = [
            f"{size:,}",
            f"{ours[size].median / raw[size].median:.2f}{TIMES}",
            f"{ours[size].median / pyyaml[size].median:.2f}{TIMES}",
        ]
        row.extend(
            f"{results.discovery[label][size].median / ours[size].median:.1f}{TIMES}"
            for label in peer_labels
        )
        ratio_rows.append(row)
    out.append(table(ratio_header, ratio_rows))
    out.append(f"\n![Discovery time against the number of skills]({CHART.name})\n")
    gc_rows = [
        (f"{size:,}", " / ".join(str(n) for n in ours[size].extra[0]["gc_collections"]))
        for size in sizes
    ]
    out.append(
        "Garbage-collector passes during one cold discovery (generations 0 / 1 / 2), for the "
        "record: the library leaves the collector alone.\n"
    )
    out.append(table(["skills", "collections"], gc_rows))
    out.append("\n## Thread hand-offs\n")
    fastest = {
        size: min(chunks, key=lambda count: chunks[count].median)
        for size, chunks in results.handoff.items()
    }
    verdicts = "; ".join(
        f"{fastest[size]} batch(es) at {size:,} skills" for size in sorted(fastest)
    )
    out.append(
        "Reading the files and parsing each one as it is read, in one worker-thread batch, or "
        "split into concurrent batches (one thread each). Discovery uses one batch: parsing "
        "holds the GIL, so extra threads can only overlap the reads with it, at the price of "
        f"contention. Fastest in this run: {verdicts}.\n"
    )
    handoff_rows = [
        [f"{size:,}", *(ms(chunks[count].median) for count in HANDOFF_CHUNKS)]
        for size, chunks in sorted(results.handoff.items())
    ]
    out.append(table(["skills", *(f"{count} batch(es)" for count in HANDOFF_CHUNKS)], handoff_rows))
    out.append("\n## Memory\n")
    memory_rows = []
    for label in labels:
        cell = results.discovery[label].get(10_000)
        if cell is not None and "max_rss_kib" in cell.extra[0]:
            memory_rows.append((label, f"{cell.median_of('max_rss_kib') / 1024:.0f} MiB"))
    before = ours[10_000].median_of("rss_before_kib") / 1024
    out.append(
        "Peak resident memory of the whole process (interpreter, imports and discovery) after "
        f"discovering 10,000 skills. acp-skills' process was at {before:.0f} MiB before the "
        "discovery started.\n"
    )
    out.append(table(["library", "peak RSS"], memory_rows))
    startup = results.agent["startup"]
    demo = statistics.median(startup["demo"])
    bare = statistics.median(startup["bare"])
    out.append("\n## The demo agent\n")
    out.append(
        "Over real stdio with the offline model; each agent is a fresh process. The bare agent "
        "(`bench/bare_agent.py`) answers `initialize` on the same SDK and does nothing else.\n"
    )
    agent_rows: list[tuple[str, str]] = [
        ("spawn → `initialize` response, demo agent", ms(demo)),
        ("spawn → `initialize` response, bare SDK agent", ms(bare)),
        ("ratio", f"{demo / bare:.2f}{TIMES}"),
        ("`import acp_skills` alone (in a fresh interpreter)", ms(median(results.import_seconds))),
    ]
    for size in (10, 1_000):
        turns = results.agent[f"turns_{size}"]
        agent_rows.append(
            (
                f"`session/new` + first prompt turn, {size:,} skills",
                ms(statistics.median(turns["first"])),
            )
        )
        agent_rows.append(
            (
                f"a later turn of the same session (prefix frozen), {size:,} skills",
                ms(statistics.median(turns["later"])),
            )
        )
    sessions = results.agent["sessions"]
    agent_rows.append(
        (
            f"{sessions['sessions']} `session/new` at once on a cold cache, until every session "
            "has its commands update (1,000 skills)",
            f"{ms(sessions['seconds'])}; discoveries run: {sessions['discoveries']}",
        )
    )
    out.append(table(["measurement", "median"], agent_rows))
    out.append(
        "\nA prompt turn here is `use skill-NNNNN`: the offline model finds the skill in the "
        "catalog, calls the `skill` tool, and answers from its content; with 1,000 skills its "
        "own search of the catalog is part of every turn. The sessions measurement is a single "
        "agent, so its time is one run, not a median.\n"
    )
    return "\n".join(out)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def chart_series(results: Results) -> dict[str, Any]:
    series: dict[str, Any] = {}
    for label, cells in results.discovery.items():
        sizes = sorted(cells)
        series[label] = {
            "sizes": sizes,
            "seconds": [cells[size].median for size in sizes],
            "baseline": label in ("raw read", "read + PyYAML CLoader"),
            "ours": label == "acp-skills",
        }
    ours = results.discovery["acp-skills"]
    series["acp-skills warm list()"] = {
        "sizes": sorted(ours),
        "seconds": [ours[size].median_of("warm_seconds") for size in sorted(ours)],
        "ours": True,
    }
    return series


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per cell (>= 5)")
    parser.add_argument("--python", help="interpreter for the bench environment")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    python, missing = ensure_bench_env(choose_interpreter(args.python))
    distributions = [name for _, names, _ in PEERS for name in names]
    results = Results(
        machine=machine_info(python),
        runs=args.runs,
        versions=installed_versions(python, ["acp-skills", *distributions, "PyYAML"]),
        missing_peers=missing,
    )
    with tempfile.TemporaryDirectory(prefix="acp-skills-bench-") as scratch_name:
        scratch = Path(scratch_name)
        trees = {size: scratch / f"skills-{size}" for size in SIZES}
        for size, tree in trees.items():
            make_tree(tree, size)
        project = scratch / "project"
        (project / ".git").mkdir(parents=True)
        measure_import(results, python)
        measure_discovery(results, python, trees, missing)
        measure_handoff(results, python, trees)
        measure_agent(results, python, trees, project)
        series = scratch / "series.json"
        series.write_text(json.dumps(chart_series(results)), encoding="utf-8")
        chart = [python, str(HERE / "bench_env" / "chart.py"), str(series), str(CHART)]
        subprocess.run(chart, check=True)
    results.machine["load average (1, 5, 15 min) at the end"] = load_average()
    DOC.write_text(render(results) + kept_sections(), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)} and {CHART.relative_to(ROOT)}", file=sys.stderr)
    return 0


# Sections other scripts measure (extras this environment does not install, a store of 10,000
# sessions, two checkouts side by side): a rewrite keeps them as they are, after the ones
# written here.
KEPT_HEADINGS = (
    "## Skills from an MCP server",
    "## A forwarded MCP server's first catalog",
    "## Listing sessions",
    "## The command line on a large tree",
    "## Reading the trust file",
)


def kept_sections() -> str:
    """The sections of the current docs/benchmarks.md named in `KEPT_HEADINGS`, verbatim."""
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    kept = []
    for heading in KEPT_HEADINGS:
        start = text.find("\n" + heading + "\n")
        if start < 0:
            continue
        end = text.find("\n## ", start + 1)
        kept.append(text[start : end if end >= 0 else len(text)].rstrip("\n") + "\n")
    return "".join(kept)


if __name__ == "__main__":
    sys.exit(main())
