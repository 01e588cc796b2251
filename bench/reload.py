"""Benchmark: live reload in the running demo agent, and the watcher at rest.

    python bench/reload.py [--changes 50] [--skills 1000] [--idle-seconds 60] [--rounds 20]

1. Change on disk -> visible in ``_skills/list``: for each kind of change (a bundle added,
   edited, moved into the root, removed; a flat skill added, edited, removed), ``--changes``
   changes one after another (0.3 s apart), each timed from the moment the change on disk is
   complete until a ``_skills/list`` request (asked again every 2 ms) shows it; p50 and p95 per
   kind, with ``--skills`` bundles installed besides. Target: p95 <= 300 ms with the default
   debounce.
2. The watcher at rest with ``--skills`` bundles: CPU time of the whole agent process over
   ``--idle-seconds`` after its first lookup, as a share of one core, with watching on
   (native), forced to poll (``WATCHFILES_FORCE_POLLING=1``) and off (``--no-watch``); and the
   agent's resident memory and inotify watches after that lookup. Target: under 1% of a core.
3. What watching adds to start-up, in-process: a fresh registered `LocalSkillProvider` over the
   same bundles, its first ``list()`` (with a project cwd) timed with watching on and off,
   ``--rounds`` times each, alternating; and, with watching on, how long after that lookup began
   the watch was live and had invalidated once (it is set up right after the first scan).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from acp.schema import ClientCapabilities
from acp.stdio import spawn_agent_process

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
POLL_SECONDS = 0.002
# Between two changes, so that each is a batch of its own and the last one has been handled
# completely (a bundle added or removed reopens the watch a debounce window after it).
SETTLE_SECONDS = 0.3
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")

Catalog = dict[str, str]


class QuietClient:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def read_text_file(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def write_text_file(self, **kwargs: Any) -> Any:
        raise NotImplementedError


def skill_text(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n" + "Follow the steps.\n" * 200


def write_bundle(directory: Path, name: str, description: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "SKILL.md").write_text(skill_text(name, description))


def make_skills(root: Path, count: int) -> None:
    for index in range(count):
        name = f"skill-{index:04d}"
        write_bundle(root / name, name, f"Skill number {index} of the benchmark.")


class Scenario:
    """One kind of change: ``change(i)`` makes the i-th change on disk and returns a test the
    listed catalog passes once the change is visible; ``prepare(i)`` runs untimed before it."""

    def __init__(self, skills: Path, outside: Path) -> None:
        self.skills = skills
        self.outside = outside

    def kinds(
        self,
    ) -> list[tuple[str, Callable[[int], None], Callable[[int], Callable[[Catalog], bool]]]]:
        return [
            ("bundle added", _nothing, self.add_bundle),
            ("bundle edited", _nothing, self.edit_bundle),
            ("bundle moved in", self.prepare_move, self.move_bundle_in),
            ("bundle removed", _nothing, self.remove_bundle),
            ("flat skill added", _nothing, self.add_flat),
            ("flat skill edited", _nothing, self.edit_flat),
            ("flat skill removed", _nothing, self.remove_flat),
        ]

    def add_bundle(self, index: int) -> Callable[[Catalog], bool]:
        name = f"added-{index:03d}"
        write_bundle(self.skills / name, name, "A bundle added while the agent runs.")
        return lambda catalog: name in catalog

    def edit_bundle(self, index: int) -> Callable[[Catalog], bool]:
        description = f"Edited for the {index}th time."
        write_bundle(self.skills / "skill-0000", "skill-0000", description)
        return lambda catalog: catalog.get("skill-0000") == description

    def prepare_move(self, index: int) -> None:
        name = f"moved-{index:03d}"
        write_bundle(self.outside / name, name, "A bundle moved into the root.")

    def move_bundle_in(self, index: int) -> Callable[[Catalog], bool]:
        name = f"moved-{index:03d}"
        os.rename(self.outside / name, self.skills / name)
        return lambda catalog: name in catalog

    def remove_bundle(self, index: int) -> Callable[[Catalog], bool]:
        name = f"added-{index:03d}"
        shutil.rmtree(self.skills / name)
        return lambda catalog: name not in catalog

    def add_flat(self, index: int) -> Callable[[Catalog], bool]:
        name = f"flat-{index:03d}"
        (self.skills / f"{name}.md").write_text(skill_text(name, "A flat skill."))
        return lambda catalog: name in catalog

    def edit_flat(self, index: int) -> Callable[[Catalog], bool]:
        description = f"Flat, edited for the {index}th time."
        (self.skills / "flat-000.md").write_text(skill_text("flat-000", description))
        return lambda catalog: catalog.get("flat-000") == description

    def remove_flat(self, index: int) -> Callable[[Catalog], bool]:
        name = f"flat-{index:03d}"
        (self.skills / f"{name}.md").unlink()
        return lambda catalog: name not in catalog


def _nothing(index: int) -> None:
    return None


async def listed(conn: Any, cwd: str) -> Catalog:
    answer = await conn.ext_method("skills/list", {"cwd": cwd})
    return {skill["name"]: skill["description"] for skill in answer["skills"]}


async def time_until_visible(conn: Any, cwd: str, shows: Callable[[Catalog], bool]) -> float:
    started = time.perf_counter()
    while True:
        if shows(await listed(conn, cwd)):
            return time.perf_counter() - started
        await asyncio.sleep(POLL_SECONDS)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def agent_argv(scratch: Path, skills: Path, *extra: str) -> list[str]:
    return [
        "-m",
        "demo_agent",
        "--state-dir",
        str(scratch / "state"),
        "--skills-dir",
        str(skills),
        *extra,
    ]


def agent_env(scratch: Path, **extra: str) -> dict[str, str]:
    return {
        "HOME": str(scratch / "home"),
        "DSH_HOME": str(scratch / "home" / ".dsh"),
        "DSH_AGENTS_HOME": str(scratch / "home" / ".agents"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
        **extra,
    }


async def measure_latency(scratch: Path, skills: Path, project: Path, changes: int) -> None:
    outside = scratch / "outside"
    scenario = Scenario(skills, outside)
    async with spawn_agent_process(
        cast(Any, QuietClient()),
        sys.executable,
        *agent_argv(scratch, skills),
        env=agent_env(scratch),
        transport_kwargs={"stderr": None},
    ) as (conn, _process):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        cwd = str(project)
        await listed(conn, cwd)
        # The edits need something to edit.
        (skills / "flat-000.md").write_text(skill_text("flat-000", "A flat skill."))
        await time_until_visible(conn, cwd, lambda catalog: "flat-000" in catalog)
        print(f"change on disk -> visible in _skills/list, {changes} changes of each kind:")
        everything: list[float] = []
        for label, prepare, change in scenario.kinds():
            times = []
            for index in range(1, changes + 1):
                prepare(index)
                await asyncio.sleep(SETTLE_SECONDS)
                shows = change(index)
                times.append(await time_until_visible(conn, cwd, shows))
            everything.extend(times)
            print(
                f"  {label:<20} p50 {statistics.median(times) * 1000:6.1f} ms"
                f"   p95 {percentile(times, 0.95) * 1000:6.1f} ms"
                f"   max {max(times) * 1000:6.1f} ms"
            )
        print(
            f"  {'all kinds':<20} p50 {statistics.median(everything) * 1000:6.1f} ms"
            f"   p95 {percentile(everything, 0.95) * 1000:6.1f} ms   (target: p95 <= 300 ms)"
        )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def inotify_watches(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if "inotify" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                count += text.count("inotify wd:")
        except OSError:
            continue
    return count


async def measure_idle(
    scratch: Path, skills: Path, project: Path, seconds: float, label: str, *extra: str, **env: str
) -> None:
    async with spawn_agent_process(
        cast(Any, QuietClient()),
        sys.executable,
        *agent_argv(scratch, skills, *extra),
        env=agent_env(scratch, **env),
        transport_kwargs={"stderr": None},
    ) as (conn, process):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        await listed(conn, str(project))
        await asyncio.sleep(2)  # let start-up work finish
        memory, watches = resident_mib(process.pid), inotify_watches(process.pid)
        before = cpu_seconds(process.pid)
        await asyncio.sleep(seconds)
        used = cpu_seconds(process.pid) - before
        print(
            f"  {label:<22} CPU {used / seconds * 100:5.2f}% of a core   "
            f"RSS {memory:6.1f} MiB   inotify watches {watches}"
        )


async def measure_first_discovery(scratch: Path, skills: Path, project: Path, rounds: int) -> None:
    import structlog

    from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry

    # This process is the benchmark, not an agent: its debug lines would only be noise.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    options = SkillLookupOptions(cwd=str(project))
    first: dict[bool, list[float]] = {True: [], False: []}
    live: list[float] = []
    for _ in range(rounds):
        for watching in (False, True):
            registry = SkillRegistry()
            provider = LocalSkillProvider(
                dsh_home=scratch / "home" / ".dsh",
                agents_home=scratch / "home" / ".agents",
                custom_skill_dirs=[skills],
                watch=watching,
            )
            handle = registry.register_provider(provider)
            caught_up = asyncio.Event()
            loop = asyncio.get_running_loop()

            def tell(
                loop: asyncio.AbstractEventLoop = loop, event: asyncio.Event = caught_up
            ) -> None:
                loop.call_soon_threadsafe(event.set)

            registry.on_change(tell)
            started = time.perf_counter()
            await registry.list(options)
            first[watching].append(time.perf_counter() - started)
            if watching:
                # The invalidation that follows the watch going live.
                await asyncio.wait_for(caught_up.wait(), 30)
                live.append(time.perf_counter() - started)
            handle.dispose()
    print(f"first discovery of a fresh provider, {rounds} rounds:")
    for watching, label in ((False, "watching off"), (True, "watching on")):
        times = first[watching]
        print(
            f"  {label:<22} p50 {statistics.median(times) * 1000:6.1f} ms"
            f"   p95 {percentile(times, 0.95) * 1000:6.1f} ms"
        )
    print(
        f"  {'watch live, caught up':<22} p50 {statistics.median(live) * 1000:6.1f} ms"
        f"   p95 {percentile(live, 0.95) * 1000:6.1f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        (scratch / "home").mkdir()
        skills = scratch / "skills"
        make_skills(skills, args.skills)
        project = scratch / "project"
        (project / ".git").mkdir(parents=True)
        print(f"{args.skills} bundles installed")
        await measure_first_discovery(scratch, skills, project, args.rounds)
        await measure_latency(scratch, skills, project, args.changes)

        print(f"at rest for {args.idle_seconds:.0f} s after the first lookup:")
        await measure_idle(scratch, skills, project, args.idle_seconds, "watching (native)")
        await measure_idle(
            scratch,
            skills,
            project,
            args.idle_seconds,
            "watching (polling)",
            WATCHFILES_FORCE_POLLING="1",
        )
        await measure_idle(
            scratch, skills, project, args.idle_seconds, "not watching", "--no-watch"
        )


if __name__ == "__main__":
    asyncio.run(main())
