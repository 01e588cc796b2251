"""Live reload in-process: a real `LocalSkillProvider` in a real `SkillRegistry`, real files in
temporary directories and the real watcher thread. Every wait ends on the registry's own change
notice (`tests.events.registry_changes`), except where only the operating system can end it (the
file watcher's own thread and descriptors going away), and no assertion depends on timing."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs
from watchfiles import Change
from watchfiles import watch as real_watch

from acp_skills import AcpSkills, LocalSkillProvider, SkillLookupOptions, SkillRegistry
from acp_skills import watch as watch_module
from acp_skills.registry import ProviderHandle
from acp_skills.watch import (
    MAX_WATCHED_PROJECTS,
    WATCHER_THREAD_NAME,
    matters,
    plan_watches,
)
from tests.events import WAIT_SECONDS, Changes, registry_changes

pytestmark = pytest.mark.anyio

# How often to look again at what only the operating system changes (`settles`).
OS_POLL_SECONDS = 0.02


def write_skill(path: Path, name: str, description: str, body: str = "Do it.") -> Path:
    """Write a skill file (``X/SKILL.md`` or a flat ``X.md``) with its frontmatter."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    return path


async def settles(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds, for what only the operating system changes: the
    file watcher's own thread and descriptor end just after it is closed, and nothing tells.
    Looked at again every few milliseconds; the bound ends a wait that never would."""
    with anyio.fail_after(WAIT_SECONDS):
        while not condition():  # noqa: ASYNC110 (no event tells a descriptor was closed)
            await anyio.sleep(OS_POLL_SECONDS)


@dataclass
class Watched:
    """A registry with one watched local provider over ``skills`` (its homes are empty)."""

    tmp: Path
    registry: SkillRegistry
    provider: LocalSkillProvider
    handle: ProviderHandle
    skills: Path
    changes: Changes
    invalidations: list[str] = field(default_factory=list)

    async def catalog(self, cwd: str | None = None) -> dict[str, tuple[str, str | None]]:
        """Every resolved skill: name -> (description, path)."""
        snapshot = await self.registry.snapshot(SkillLookupOptions(cwd=cwd))
        return {skill.name: (skill.description, skill.path) for skill in snapshot.skills}

    async def descriptions(self, cwd: str | None = None) -> dict[str, str]:
        return {name: value[0] for name, value in (await self.catalog(cwd)).items()}

    async def when(self, condition: Callable[[], Awaitable[bool] | bool]) -> None:
        """Wait until ``condition()`` holds, looking again at each change of the registry."""
        await self.changes.until(condition)

    async def until(self, expected: dict[str, str], cwd: str | None = None) -> None:
        """Wait until the registry lists exactly ``expected`` (name -> description)."""

        async def shows() -> bool:
            return await self.descriptions(cwd) == expected

        await self.when(shows)

    async def live(self) -> None:
        """Wait until the watch is live and has caught up (one invalidation) on the lookups
        answered while it was being set up."""

        def caught_up() -> bool:
            healthy = self.provider.watch_mode in ("native", "polling")
            return healthy and len(self.invalidations) > 0

        await self.when(caught_up)


def watched_registry(tmp: Path, *custom: Path, **options: Any) -> Watched:
    registry = SkillRegistry()
    provider = LocalSkillProvider(
        dsh_home=tmp / "home" / ".dsh",
        agents_home=tmp / "home" / ".agents",
        custom_skill_dirs=custom,
        **options,
    )
    handle = registry.register_provider(provider)
    invalidations: list[str] = []
    registry.on_change(lambda: invalidations.append(threading.current_thread().name))
    # Subscribed after the line above: a wait woken by a change sees it counted.
    changes = registry_changes(registry)
    skills = custom[0] if custom else tmp
    return Watched(tmp, registry, provider, handle, skills, changes, invalidations)


@pytest.fixture(autouse=True)
def no_watcher_left_behind() -> Iterator[None]:
    """Every test here ends its watchers: none may be running before or after it."""
    assert watcher_threads() == []
    yield
    assert watcher_threads() == []


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[Watched]:
    """A watched provider over ``tmp_path/skills`` (created empty); disposed after the test."""
    skills = tmp_path / "skills"
    skills.mkdir()
    (tmp_path / "home").mkdir()
    setup = watched_registry(tmp_path, skills)
    yield setup
    setup.handle.dispose()


def watcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WATCHER_THREAD_NAME and t.is_alive()]


def inotify_watch_count() -> int:
    """How many inotify watches this process holds (from /proc/self/fdinfo)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "inotify" not in os.readlink(f"/proc/self/fd/{fd}"):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                count += sum(1 for line in info if line.startswith("inotify wd:"))
        except OSError:
            continue  # closed meanwhile
    return count


# -- which changes count (a pure table) --------------------------------------------------------

A, M, D = Change.added, Change.modified, Change.deleted

RELEVANCE = [
    # (change, path below the root, is a directory, relevant)
    (A, "", True, True),
    (D, "", True, True),
    (M, "", True, False),
    (A, "deploy.md", False, True),
    (M, "deploy.md", False, True),
    (D, "deploy.md", False, True),
    (M, "notes.txt", False, False),
    (A, ".deploy.md.swp", False, False),
    (A, "deploy.md~", False, False),
    (A, "DEPLOY.MD", False, False),
    (A, "deploy", True, True),
    (D, "deploy", True, True),
    (M, "deploy", True, False),
    (A, "deploy/SKILL.md", False, True),
    (M, "deploy/SKILL.md", False, True),
    (D, "deploy/SKILL.md", False, True),
    (M, "deploy/skill.md", False, False),
    (M, "deploy/notes.md", False, False),
    (A, "deploy/references", True, False),
    (M, "deploy/references/guide.md", False, False),
    (A, "deploy/scripts/run.sh", False, False),
    (D, "deploy/assets/logo.png", False, False),
    (M, "deploy/references/deep/SKILL.md", False, False),
    (A, ".system", True, True),
    (M, ".system/SKILL.md", False, True),
    (M, ".system/tool/SKILL.md", False, False),
]


@pytest.mark.parametrize(
    ("change", "relative", "is_dir", "relevant"),
    RELEVANCE,
    ids=[f"{change.name}-{relative or 'root'}" for change, relative, _, _ in RELEVANCE],
)
def test_only_changes_to_the_listing_are_relevant(
    tmp_path: Path, change: Change, relative: str, is_dir: bool, relevant: bool
) -> None:
    """Flat ``*.md`` files, bundle directories and ``X/SKILL.md`` count; resources do not."""
    root = os.path.realpath(tmp_path)
    path = os.path.join(root, *relative.split("/")) if relative else root
    os.makedirs(path if is_dir else os.path.dirname(path), exist_ok=True)
    plan = plan_watches([root])
    assert matters(plan, change, path) is relevant


def test_a_missing_root_is_watched_at_its_nearest_existing_directory(tmp_path: Path) -> None:
    """Only the nearest existing ancestor of a root that does not exist is watched, not the
    tree above or below it."""
    (tmp_path / "home" / "projects").mkdir(parents=True)
    plan = plan_watches([str(tmp_path / "home" / ".agents" / "skills")])
    assert list(plan.directories) == [str((tmp_path / "home").resolve())]


def test_a_root_is_watched_with_each_bundle_but_not_their_resources(tmp_path: Path) -> None:
    """A root and each of its bundle directories are watched; resource directories are not."""
    root = tmp_path / "skills"
    write_skill(root / "deploy" / "SKILL.md", "deploy", "Deploy.")
    (root / "deploy" / "references").mkdir()
    write_skill(root / "notes.md", "notes", "Notes.")
    plan = plan_watches([str(root)])
    assert sorted(plan.directories) == [str(root.resolve()), str((root / "deploy").resolve())]


# -- when watching starts ---------------------------------------------------------------------


async def test_constructors_start_nothing_and_the_first_lookup_starts_watching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AcpSkills()`` and ``LocalSkillProvider()`` start no thread and open no watch; the
    provider's first lookup while registered starts its watcher."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    monkeypatch.setenv("DSH_AGENTS_HOME", str(tmp_path / "agents"))
    before = set(threading.enumerate())
    AcpSkills()
    setup = watched_registry(tmp_path, tmp_path / "skills")
    try:
        assert set(threading.enumerate()) == before
        assert inotify_watch_count() == 0
        assert setup.provider.watch_mode == "off"
        await setup.until({})
        assert len(watcher_threads()) == 1
        await setup.live()
    finally:
        setup.handle.dispose()


async def test_the_first_lookup_does_not_wait_for_the_watch_and_nothing_is_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lookup is answered while the watch is still being set up, and a skill changed
    during the set-up (before the watch could see it) is listed once the watch is live, through
    exactly one invalidation."""
    skills = tmp_path / "skills"
    write_skill(skills / "deploy" / "SKILL.md", "deploy", "Deploy.")
    (tmp_path / "home").mkdir()
    answered = threading.Event()
    changed = threading.Event()
    plan_watches = watch_module.plan_watches

    def plan_then_change(roots: Any) -> Any:
        plan = plan_watches(roots)
        if not changed.is_set() and str(skills) in roots:
            # Hold the set-up until the first lookup has been answered (which it could not be
            # if that lookup waited for the watch), then change the skill before it is watched.
            answered.wait(WAIT_SECONDS * 2)
            write_skill(skills / "deploy" / "SKILL.md", "deploy", "Changed during set-up.")
            changed.set()
        return plan

    monkeypatch.setattr(watch_module, "plan_watches", plan_then_change)
    setup = watched_registry(tmp_path, skills)
    try:
        with anyio.fail_after(WAIT_SECONDS):
            assert await setup.descriptions() == {"deploy": "Deploy."}
        assert setup.provider.watch_mode == "starting"
        # Cached meanwhile: the invalidation once the watch is live drops it.
        assert setup.provider.cacheable(SkillLookupOptions()) is True
        answered.set()
        await setup.until({"deploy": "Changed during set-up."})
        await setup.live()
        assert setup.invalidations == [WATCHER_THREAD_NAME]
    finally:
        answered.set()
        setup.handle.dispose()


async def test_a_bundle_created_while_the_watch_opens_is_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle created after the roots were looked at but before the watch of them is live is
    listed once it is live, and its ``SKILL.md`` is watched from then on."""
    skills = tmp_path / "skills"
    skills.mkdir()
    (tmp_path / "home").mkdir()
    created = threading.Event()

    def create_then_watch(*args: Any, **kwargs: Any) -> Any:
        if not created.is_set():  # planned without it; it appears before the watch is live
            write_skill(skills / "deploy" / "SKILL.md", "deploy", "Deploy.")
            created.set()
        return real_watch(*args, **kwargs)

    monkeypatch.setattr(watch_module, "watch", create_then_watch)
    setup = watched_registry(tmp_path, skills)
    try:
        await setup.until({})
        await setup.until({"deploy": "Deploy."})
        write_skill(skills / "deploy" / "SKILL.md", "deploy", "Deploy twice.")
        await setup.until({"deploy": "Deploy twice."})
    finally:
        setup.handle.dispose()


async def test_a_change_in_the_first_batch_of_a_new_watch_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relevant change that arrives with a watch going live is logged like any other (the
    agent's debug log then says why a skill appeared)."""
    skills = tmp_path / "skills"
    (skills / "deploy").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    bundle = str(skills / "deploy")

    def first_batch_with_a_bundle(*args: Any, **kwargs: Any) -> Any:
        changes = real_watch(*args, **kwargs)

        def relay() -> Iterator[set[tuple[Change, str]]]:
            yield next(changes, set()) | {(Change.added, bundle)}
            yield from changes

        return relay()

    monkeypatch.setattr(watch_module, "watch", first_batch_with_a_bundle)
    with capture_logs() as logs:
        setup = watched_registry(tmp_path, skills)
        try:
            await setup.until({})
            await setup.when(lambda: any(bundle in entry.get("paths", ()) for entry in logs))
        finally:
            setup.handle.dispose()
    said = [entry for entry in logs if entry["event"] == "skill_watch_changes"]
    assert said
    assert said[0]["changes"] >= 1


# -- changes on disk reach the registry --------------------------------------------------------


async def test_a_bundle_created_changed_renamed_and_deleted_shows_up(watched: Watched) -> None:
    """Each step of a bundle's life is listed without any explicit reload."""
    await watched.until({})
    write_skill(watched.skills / "deploy" / "SKILL.md", "deploy", "Deploy the app.")
    await watched.until({"deploy": "Deploy the app."})
    write_skill(watched.skills / "deploy" / "SKILL.md", "deploy", "Deploy it twice.")
    await watched.until({"deploy": "Deploy it twice."})

    (watched.skills / "deploy").rename(watched.skills / "ship")
    moved = str(watched.skills / "ship" / "SKILL.md")

    async def renamed() -> bool:
        return await watched.catalog() == {"deploy": ("Deploy it twice.", moved)}

    await watched.when(renamed)
    shutil.rmtree(watched.skills / "ship")
    await watched.until({})


async def test_a_flat_skill_created_changed_renamed_and_deleted_shows_up(watched: Watched) -> None:
    """Each step of a flat skill's life is listed without any explicit reload."""
    await watched.until({})
    write_skill(watched.skills / "notes.md", "notes", "Take notes.")
    await watched.until({"notes": "Take notes."})
    write_skill(watched.skills / "notes.md", "notes", "Take better notes.")
    await watched.until({"notes": "Take better notes."})

    (watched.skills / "notes.md").rename(watched.skills / "memo.md")
    moved = str(watched.skills / "memo.md")

    async def renamed() -> bool:
        return await watched.catalog() == {"notes": ("Take better notes.", moved)}

    await watched.when(renamed)
    (watched.skills / "memo.md").unlink()
    await watched.until({})


async def test_a_skill_saved_through_a_temporary_file_shows_up(watched: Watched) -> None:
    """An editor that writes a temporary file and renames it over the skill is seen."""
    skill = write_skill(watched.skills / "deploy" / "SKILL.md", "deploy", "Deploy.")
    await watched.until({"deploy": "Deploy."})
    temporary = write_skill(skill.with_name(".SKILL.md.tmp"), "deploy", "Deploy safely.")
    os.replace(temporary, skill)
    await watched.until({"deploy": "Deploy safely."})


async def test_roots_created_after_start_are_noticed(tmp_path: Path) -> None:
    """A custom root and the user's agents root that did not exist are listed once they do."""
    later = tmp_path / "later" / "skills"
    (tmp_path / "home").mkdir()
    setup = watched_registry(tmp_path, later)
    try:
        await setup.until({})
        write_skill(later / "deploy" / "SKILL.md", "deploy", "Deploy.")
        await setup.until({"deploy": "Deploy."})
        write_skill(tmp_path / "home" / ".agents" / "skills" / "mine.md", "mine", "Mine.")
        await setup.until({"deploy": "Deploy.", "mine": "Mine."})
    finally:
        setup.handle.dispose()


async def test_a_root_that_is_a_symbolic_link_is_watched_at_its_target(tmp_path: Path) -> None:
    """Changes in the link's target are seen, and so is the link being pointed elsewhere."""
    real = tmp_path / "real"
    write_skill(real / "deploy" / "SKILL.md", "deploy", "Deploy.")
    other = tmp_path / "other"
    write_skill(other / "review.md", "review", "Review.")
    link = tmp_path / "linked"
    link.symlink_to(real, target_is_directory=True)
    (tmp_path / "home").mkdir()
    setup = watched_registry(tmp_path, link)
    try:
        await setup.until({"deploy": "Deploy."})
        write_skill(real / "deploy" / "SKILL.md", "deploy", "Deploy carefully.")
        await setup.until({"deploy": "Deploy carefully."})
        write_skill(real / "ship" / "SKILL.md", "ship", "Ship.")
        await setup.until({"deploy": "Deploy carefully.", "ship": "Ship."})

        replacement = tmp_path / "linked.new"
        replacement.symlink_to(other, target_is_directory=True)
        os.replace(replacement, link)
        await setup.until({"review": "Review."})
        write_skill(other / "review.md", "review", "Review twice.")
        await setup.until({"review": "Review twice."})
    finally:
        setup.handle.dispose()


@pytest.mark.parametrize(
    ("linked", "target"),
    [("notes.md", "elsewhere/notes.md"), ("notes", "checkout/notes/SKILL.md")],
    ids=["flat-skill", "bundle"],
)
async def test_a_linked_skill_is_watched_at_its_target(
    tmp_path: Path, linked: str, target: str
) -> None:
    """Editing the file a flat skill links to, or the ``SKILL.md`` of a bundle that is a link
    into the root, is seen."""
    written = write_skill(tmp_path / target, "notes", "Notes.")
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / linked).symlink_to(written if linked.endswith(".md") else written.parent)
    (tmp_path / "home").mkdir()
    setup = watched_registry(tmp_path, skills)
    try:
        await setup.until({"notes": "Notes."})
        await setup.live()
        # Cached again after the catch-up, so the edit below is only seen through the watch.
        assert await setup.descriptions() == {"notes": "Notes."}
        write_skill(written, "notes", "Better notes.")
        await setup.until({"notes": "Better notes."})
    finally:
        setup.handle.dispose()


async def test_a_burst_of_changes_costs_only_a_handful_of_invalidations(watched: Watched) -> None:
    """Writing 100 skills at once invalidates a few times, not 100 times."""
    await watched.until({})
    before = len(watched.invalidations)
    expected = {}
    for index in range(100):
        name = f"skill-{index:03d}"
        write_skill(watched.skills / f"{name}.md", name, f"Skill {index}.")
        expected[name] = f"Skill {index}."
    await watched.until(expected)
    # One more change, waited for, so every batch of the burst has been handled by now.
    write_skill(watched.skills / "skill-000.md", "skill-000", "The last change.")
    await watched.until({**expected, "skill-000": "The last change."})
    assert len(watched.invalidations) - before <= 6


async def test_resource_changes_cause_no_invalidation(tmp_path: Path) -> None:
    """Files deeper in a bundle, and other files beside SKILL.md, never invalidate."""
    skills = tmp_path / "skills"
    bundle = skills / "deploy"
    write_skill(bundle / "SKILL.md", "deploy", "Deploy.")
    (bundle / "references").mkdir()
    (bundle / "references" / "guide.md").write_text("# Guide\n")
    write_skill(skills / "notes.md", "notes", "Notes.")
    # Written before watching starts, so no change of the setup is still on its way.
    watched = watched_registry(tmp_path, skills)
    try:
        await watched.until({"deploy": "Deploy.", "notes": "Notes."})
        await watched.live()
        # Cached again after the catch-up, so the change below is only seen through the watch.
        assert await watched.descriptions() == {"deploy": "Deploy.", "notes": "Notes."}
        with capture_logs() as logs:
            (bundle / "references" / "guide.md").write_text("# Guide, edited\n")
            (bundle / "references" / "more.md").write_text("# More\n")
            (bundle / "scripts").mkdir()
            (bundle / "scripts" / "run.sh").write_text("echo run\n")
            (bundle / "checklist.txt").write_text("1. Check.\n")
            # Changes arrive in order: once this one is seen, the ones above were judged.
            write_skill(watched.skills / "notes.md", "notes", "More notes.")
            notes = str((watched.skills / "notes.md").resolve())
            # Logged before the invalidation that follows it.
            await watched.when(lambda: any(notes in entry.get("paths", ()) for entry in logs))
            await watched.until({"deploy": "Deploy.", "notes": "More notes."})
        # Only relevant changes end a batch and are logged: the notes file alone.
        judged = [entry for entry in logs if entry.get("event") == "skill_watch_changes"]
        assert {path for entry in judged for path in entry["paths"]} == {notes}
    finally:
        watched.handle.dispose()


async def test_changes_under_the_user_system_directory_cause_no_invalidation(
    tmp_path: Path,
) -> None:
    """Skills the tool installs under ``<dsh_home>/skills/.system`` are neither listed nor, one
    level down like any bundle's subdirectory, relevant to the watch."""
    user_root = tmp_path / "home" / ".dsh" / "skills"
    write_skill(user_root / "mine" / "SKILL.md", "mine", "Mine.")
    (user_root / ".system").mkdir()
    setup = watched_registry(tmp_path, tmp_path / "custom")
    try:
        await setup.until({"mine": "Mine."})
        await setup.live()
        with capture_logs() as logs:
            write_skill(user_root / ".system" / "tool" / "SKILL.md", "tool", "Tool.")
            # Changes arrive in order: once this one is seen, the one above was judged.
            write_skill(user_root / "later.md", "later", "Later.")
            later = str((user_root / "later.md").resolve())
            await setup.when(lambda: any(later in entry.get("paths", ()) for entry in logs))
            await setup.until({"mine": "Mine.", "later": "Later."})
        system = str((user_root / ".system").resolve())
        judged = [entry for entry in logs if entry.get("event") == "skill_watch_changes"]
        assert not [p for entry in judged for p in entry["paths"] if p.startswith(system)]
        assert "tool" not in await setup.descriptions()
    finally:
        setup.handle.dispose()


async def test_invalidations_come_from_the_watcher_thread(watched: Watched) -> None:
    """The registry is invalidated by the watcher's own thread (the registry is thread-safe)."""
    await watched.until({})
    write_skill(watched.skills / "notes.md", "notes", "Notes.")
    await watched.until({"notes": "Notes."})
    assert WATCHER_THREAD_NAME in watched.invalidations


# -- project roots -----------------------------------------------------------------------------


async def test_project_skills_of_a_listed_project_are_watched(watched: Watched) -> None:
    """A project learnt from a lookup's cwd has its skill roots watched from then on."""
    project = watched.tmp / "project"
    (project / ".git").mkdir(parents=True)
    cwd = str(project / "src")
    (project / "src").mkdir()
    await watched.until({}, cwd=cwd)
    write_skill(project / ".agents" / "skills" / "lint" / "SKILL.md", "lint", "Lint.")
    await watched.until({"lint": "Lint."}, cwd=cwd)
    write_skill(project / ".dsh" / "skills" / "lint.md", "lint", "Lint the project's way.")
    await watched.until({"lint": "Lint the project's way."}, cwd=cwd)


async def test_a_project_is_watched_while_a_watched_directory_is_written_without_pause(
    watched: Watched,
) -> None:
    """A log written every few milliseconds beside a missing root (its nearest ancestor is
    watched) matters to no catalog, yet must not keep a project looked up meanwhile from being
    watched: that project's lookup is cached, so an edit of its skills must show."""
    await watched.until({})
    await watched.live()
    project = watched.tmp / "project"
    (project / ".git").mkdir(parents=True)
    skill = write_skill(project / ".agents" / "skills" / "task.md", "task", "Task.")
    stop = threading.Event()

    def keep_logging() -> None:  # the home directory is watched: ~/.agents/skills is missing
        with open(watched.tmp / "home" / "agent.log", "a") as log:
            while not stop.wait(0.002):
                log.write("a line\n")
                log.flush()

    logger = threading.Thread(target=keep_logging)
    logger.start()
    try:
        told = len(watched.invalidations)
        await watched.until({"task": "Task."}, cwd=str(project))
        # The watch covering the project is live once its catch-up invalidation has come.
        await watched.when(lambda: len(watched.invalidations) > told)
        write_skill(skill, "task", "Task twice.")
        await watched.until({"task": "Task twice."}, cwd=str(project))
    finally:
        stop.set()
        logger.join()


async def test_projects_beyond_the_bound_are_served_fresh_but_not_watched(
    watched: Watched,
) -> None:
    """Only so many projects are watched; lookups for the others discover afresh every time,
    so they are never stale either."""
    projects = []
    for index in range(MAX_WATCHED_PROJECTS + 2):
        project = watched.tmp / "projects" / f"p{index}"
        (project / ".git").mkdir(parents=True)
        write_skill(project / ".agents" / "skills" / "task.md", "task", f"Task {index}.")
        projects.append(project)
    await watched.until({})
    await watched.live()
    fixed = inotify_watch_count()
    # What one project's roots need watched (each project here looks the same).
    per_project = len(
        plan_watches([str(projects[0] / d / "skills") for d in (".dsh", ".agents")]).directories
    )
    assert per_project > 0
    for index, project in enumerate(projects):
        told = len(watched.invalidations)
        await watched.until({"task": f"Task {index}."}, cwd=str(project))
        if index < MAX_WATCHED_PROJECTS:
            # Its watch is live once the invalidation catching up on that lookup has come.
            await watched.when(lambda: len(watched.invalidations) > told)  # noqa: B023
    # The fixed roots plus exactly MAX_WATCHED_PROJECTS projects (a replaced watch lets go of
    # its descriptor just after it is closed).
    expected = fixed + MAX_WATCHED_PROJECTS * per_project
    await settles(lambda: inotify_watch_count() == expected)

    beyond = projects[-1]
    options = SkillLookupOptions(cwd=str(beyond))
    assert watched.provider.cacheable(options) is False
    assert watched.provider.cacheable(SkillLookupOptions(cwd=str(projects[0]))) is True
    before = len(watched.invalidations)
    write_skill(beyond / ".agents" / "skills" / "task.md", "task", "Changed, unwatched.")
    # Seen without any invalidation: that project's catalogs are never cached.
    assert await watched.descriptions(str(beyond)) == {"task": "Changed, unwatched."}
    assert len(watched.invalidations) == before


# -- turning it off, failures, and the polling fallback --------------------------------------


async def test_watching_can_be_turned_off(tmp_path: Path) -> None:
    """With ``watch=False`` there is no watcher: catalogs stay cached until an invalidation."""
    skills = tmp_path / "skills"
    write_skill(skills / "notes.md", "notes", "Notes.")
    setup = watched_registry(tmp_path, skills, watch=False)
    try:
        assert await setup.descriptions() == {"notes": "Notes."}
        assert watcher_threads() == []
        assert setup.provider.watch_mode == "off"
        write_skill(skills / "notes.md", "notes", "Changed.")
        assert await setup.descriptions() == {"notes": "Notes."}
        setup.registry.invalidate()
        assert await setup.descriptions() == {"notes": "Changed."}
    finally:
        setup.handle.dispose()


async def test_a_watcher_failure_is_logged_once_and_lookups_stay_fresh(watched: Watched) -> None:
    """A bundle whose name the watcher cannot handle makes watching fail; that is logged once,
    lookups are served uncached meanwhile, and watching recovers once the name is gone."""
    write_skill(watched.skills / "notes.md", "notes", "Notes.")
    await watched.until({"notes": "Notes."})
    await watched.live()
    undecodable = os.path.join(os.fsencode(watched.skills), b"bad-\xff")
    with capture_logs() as logs:
        told = len(watched.invalidations)
        os.mkdir(undecodable)

        def failed() -> bool:
            # Failing invalidates once: cached catalogs can no longer be vouched for.
            return watched.provider.watch_mode == "failed" and len(watched.invalidations) > told

        await watched.when(failed)
        # Uncached while failed: an edit is listed with no invalidation at all.
        before = len(watched.invalidations)
        write_skill(watched.skills / "notes.md", "notes", "Edited while failing.")
        assert await watched.descriptions() == {"notes": "Edited while failing."}
        assert watched.provider.cacheable(SkillLookupOptions()) is False
        assert len(watched.invalidations) == before

        os.rmdir(undecodable)

        def recovered() -> bool:
            # Recovering invalidates once too, so sessions catch up on what they missed.
            healthy = watched.provider.watch_mode in ("native", "polling")
            return healthy and len(watched.invalidations) > before

        await watched.when(recovered)
        warnings = [entry for entry in logs if entry["log_level"] == "warning"]
        recoveries = [entry for entry in logs if entry["event"] == "skill_watch_recovered"]
    assert [entry["event"] for entry in warnings] == ["skill_watch_failed"]
    assert len(recoveries) == 1
    # Watching again, and caching: a change is seen through an invalidation.
    assert await watched.descriptions() == {"notes": "Edited while failing."}
    assert watched.provider.cacheable(SkillLookupOptions()) is True
    before = len(watched.invalidations)
    write_skill(watched.skills / "notes.md", "notes", "Watched again.")
    await watched.until({"notes": "Watched again."})
    assert len(watched.invalidations) > before


async def test_polling_can_be_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``WATCHFILES_FORCE_POLLING`` (watchfiles' own switch) makes the watcher poll."""
    monkeypatch.setenv("WATCHFILES_FORCE_POLLING", "1")
    skills = tmp_path / "skills"
    skills.mkdir()
    setup = watched_registry(tmp_path, skills)
    try:
        await setup.until({})
        await setup.live()
        assert setup.provider.watch_mode == "polling"
        write_skill(skills / "deploy" / "SKILL.md", "deploy", "Deploy.")
        await setup.until({"deploy": "Deploy."})
    finally:
        setup.handle.dispose()


FALLBACK_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, resource, sys
    from pathlib import Path

    import structlog

    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
    )
    from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry

    async def main() -> None:
        tmp = Path(sys.argv[1])
        registry = SkillRegistry()
        provider = LocalSkillProvider(
            dsh_home=tmp / "dsh", agents_home=tmp / "agents", custom_skill_dirs=[tmp / "skills"]
        )
        # Leave two free descriptors: a native watcher needs three (inotify, epoll, eventfd),
        # polling needs none of its own.
        highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 64, hard))
        held = []
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        for fd in held[-2:]:
            os.close(fd)
        # Each wait ends on the registry's change notice, from the watcher's thread.
        loop, changed = asyncio.get_running_loop(), asyncio.Event()
        registry.on_change(lambda: loop.call_soon_threadsafe(changed.set))

        async def listed_once(condition):
            while True:
                changed.clear()
                names = [s.name for s in await registry.list(SkillLookupOptions())]
                if condition(names):
                    return names
                await changed.wait()

        registry.register_provider(provider)
        names = [s.name for s in await registry.list(SkillLookupOptions())]
        # Live once the invalidation catching up on that first lookup has come.
        await listed_once(lambda _: provider.watch_mode != "starting")
        print(json.dumps({"event": "listed", "names": names, "mode": provider.watch_mode}))
        (tmp / "skills" / "later.md").write_text("---\\nname: later\\ndescription: L.\\n---\\n")
        names = await listed_once(lambda names: "later" in names)
        print(json.dumps({"event": "listed", "names": names, "mode": provider.watch_mode}))
        provider.close()

    asyncio.run(main())
    """
)


async def test_watching_falls_back_to_polling_when_native_watching_is_unavailable(
    tmp_path: Path,
) -> None:
    """Out of descriptors for an inotify watcher, the provider polls instead, says so once,
    and still notices changes."""
    write_skill(tmp_path / "skills" / "notes.md", "notes", "Notes.")
    script = tmp_path / "fallback.py"
    script.write_text(FALLBACK_SCRIPT)
    with anyio.fail_after(WAIT_SECONDS * 2):
        result = await anyio.run_process([sys.executable, str(script), str(tmp_path)], check=False)
    assert result.returncode == 0, result.stderr.decode()
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    listed = [event for event in events if event["event"] == "listed"]
    assert listed == [
        {"event": "listed", "names": ["notes"], "mode": "polling"},
        {"event": "listed", "names": ["later", "notes"], "mode": "polling"},
    ]
    fallbacks = [event for event in events if event["event"] == "skill_watch_polling"]
    assert len(fallbacks) == 1
    assert fallbacks[0]["level"] == "warning"
    assert "unavailable" in fallbacks[0]["reason"]


# -- ownership: everything started is released ------------------------------------------------


def os_threads() -> int:
    """The process's threads as the kernel counts them (the Rust side's included), except the
    worker threads anyio keeps for blocking file I/O, which it reuses and prunes at its pace."""
    workers = {t.native_id for t in threading.enumerate() if t.name == "AnyIO worker thread"}
    return len({int(tid) for tid in os.listdir("/proc/self/task")} - workers)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@asynccontextmanager
async def released_afterwards() -> AsyncIterator[None]:
    """Check that threads, tasks and descriptors return to what they were before the block."""
    tasks = len(asyncio.all_tasks())
    threads, fds = os_threads(), open_fds()
    yield
    assert watcher_threads() == []
    assert len(asyncio.all_tasks()) == tasks
    # The Rust side lets go of its own thread and inotify descriptor just after the close.
    await settles(lambda: os_threads() <= threads and open_fds() <= fds)


async def exercise(setup: Watched) -> None:
    """Start the watcher and see it work."""
    await setup.until({})
    await setup.live()
    assert len(watcher_threads()) == 1
    assert inotify_watch_count() > 0
    write_skill(setup.skills / "notes.md", "notes", "Notes.")
    await setup.until({"notes": "Notes."})


async def test_disposing_the_registration_releases_everything(tmp_path: Path) -> None:
    """After ``handle.dispose()`` no thread, task or descriptor of the watcher is left."""
    (tmp_path / "skills").mkdir()
    async with released_afterwards():
        setup = watched_registry(tmp_path, tmp_path / "skills")
        await exercise(setup)
        setup.handle.dispose()
        assert setup.provider.watch_mode == "off"


async def test_closing_the_provider_releases_everything(tmp_path: Path) -> None:
    """After ``provider.close()`` no thread, task or descriptor of the watcher is left, and the
    provider still lists skills (uncached)."""
    (tmp_path / "skills").mkdir()
    async with released_afterwards():
        setup = watched_registry(tmp_path, tmp_path / "skills")
        await exercise(setup)
        setup.provider.close()
        setup.provider.close()  # idempotent
        write_skill(setup.skills / "notes.md", "notes", "After closing.")
        assert await setup.descriptions() == {"notes": "After closing."}
        assert watcher_threads() == []
    setup.handle.dispose()


async def test_a_provider_nobody_closed_stops_watching_when_collected(tmp_path: Path) -> None:
    """Dropping the registry and provider without disposing still ends the watcher thread."""
    (tmp_path / "skills").mkdir()
    async with released_afterwards():
        setup = watched_registry(tmp_path, tmp_path / "skills")
        await exercise(setup)
        [thread] = watcher_threads()
        del setup

        def collected() -> bool:
            # Again until it ends: an invalidation under way on the watcher thread holds the
            # provider for that moment, and one collection may meet it.
            gc.collect()
            return not thread.is_alive()

        await settles(collected)


async def test_a_provider_registered_again_watches_again(tmp_path: Path) -> None:
    """Disposing stops the watcher; registering the same provider again starts a new one."""
    (tmp_path / "skills").mkdir()
    setup = watched_registry(tmp_path, tmp_path / "skills")
    await exercise(setup)
    setup.handle.dispose()
    assert watcher_threads() == []
    registry = SkillRegistry()
    changes = registry_changes(registry)
    handle = registry.register_provider(setup.provider)
    try:
        assert [s.name for s in await registry.list()] == ["notes"]
        assert len(watcher_threads()) == 1
        write_skill(setup.skills / "notes.md", "notes", "Again.")

        async def seen() -> bool:
            return [s.description for s in await registry.list()] == ["Again."]

        await changes.until(seen)
    finally:
        handle.dispose()


async def test_an_unregistered_provider_does_not_watch(tmp_path: Path) -> None:
    """Listing with a provider that is in no registry starts nothing: nobody could be told."""
    write_skill(tmp_path / "skills" / "notes.md", "notes", "Notes.")
    provider = LocalSkillProvider(
        dsh_home=tmp_path / "dsh", agents_home=tmp_path / "agents", custom_skill_dirs=[tmp_path]
    )
    await provider.list(SkillLookupOptions())
    assert watcher_threads() == []
    assert provider.watch_mode == "off"
