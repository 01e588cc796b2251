"""Live reload: a local provider's skill roots, watched with ``watchfiles.watch``.

A `RootWatch` belongs to one `LocalSkillProvider`. Nothing starts when it is made: the provider's
first lookup while registered starts one thread (``acp-skills watcher``), and disposing of the
last registration or closing the provider ends it. The thread follows two watches, one of the
fixed roots and one of the project roots (so starting to watch a project never reopens the watch
of a thousand bundles), and between them watches, each non-recursively:

* every root that exists, at its resolved path (a root that is a symbolic link is watched at its
  target, and the directory holding the link is watched too, so re-pointing the link is seen);
* every bundle directory in those roots (where its ``SKILL.md`` lives);
* for a root that does not exist yet, its nearest existing ancestor, until the next component
  of the path appears: ``~/.agents/skills`` appearing is noticed without watching the home
  directory's tree;
* the directory holding the target of a symbolically linked flat skill or ``SKILL.md``.

A batch of changes that `is_relevant_change` accepts invalidates the provider's registrations (at
most once per `DEBOUNCE_MS`). A batch that changes what must be watched (a new bundle) has the
watch planned again and reopened, and the registrations invalidated once more when the new watch
is live: that covers whatever changed while it was being opened.

Setting up a watch never holds up a lookup: the lookup scans while the thread opens the watch,
and its answer may be cached, since the registrations are invalidated once as soon as the watch
covering that lookup is live. Whatever changed meanwhile is seen by the discovery that follows.

A thread rather than an anyio task: the provider has no event loop of its own (it is registered
synchronously and its registry may serve more than one loop), and the registry's
``invalidate()`` may be called from any thread. The thread holds no reference to the provider,
so a provider nobody closed still stops its thread when it is collected; it is a daemon thread,
so a program that forgets to close the provider still exits.

At most `MAX_WATCHED_PROJECTS` projects are watched; a project beyond the bound is served
uncached until a relevant change (which clears every cache anyway) lets the most recently listed
projects win. When native watching is unavailable (the inotify limits) the watch polls instead,
logged once. When even that fails, or the watch fails later, that is logged once, answers stop
being cacheable, and the watch is retried with a growing delay; recovering invalidates once.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import structlog
from watchfiles import Change, watch

from .model import SKILL_FILE_NAME
from .provider import ProviderHandle

__all__ = [
    "DEBOUNCE_MS",
    "MAX_WATCHED_PROJECTS",
    "POLL_DELAY_MS",
    "STEP_MS",
    "WATCHER_THREAD_NAME",
    "RootWatch",
    "WatchedRoot",
    "is_relevant_change",
    "plan_watches",
]

_log = structlog.get_logger(__name__)

WATCHER_THREAD_NAME: Final = "acp-skills watcher"
# A batch ends after STEP_MS without a new change (DEBOUNCE_MS at the latest), so one change is
# passed on 1-2 steps after it happens; invalidations are at least DEBOUNCE_MS apart.
STEP_MS: Final = 30
DEBOUNCE_MS: Final = 150
POLL_DELAY_MS: Final = 300  # how often a polling watch scans its directories
MAX_WATCHED_PROJECTS: Final = 32
_REMEMBERED_PROJECTS: Final = 4 * MAX_WATCHED_PROJECTS
_REMEMBERED_CWDS: Final = 1024
_RETRY_FIRST_SECONDS: Final = 0.5
_RETRY_MAX_SECONDS: Final = 10.0
_MAX_REPLANS: Final = 5
_LOGGED_PATHS: Final = 20
_FLAT_SUFFIX: Final = ".md"
_SYSTEM_DIR: Final = ".system"

Mode = Literal["off", "starting", "native", "polling", "failed"]
_HEALTHY: Final = ("native", "polling")
_Batch = set[tuple[Change, str]]
_Project = tuple[str, ...]


def is_relevant_change(
    change: Change, relative: Sequence[str], *, is_dir: bool, skips_system: bool
) -> bool:
    """Whether a change below a skills root can change what the provider lists.

    Relevant: the root itself appearing or going away; a ``*.md`` file directly in the root
    changing in any way; a directory directly in the root (a bundle) added, removed or renamed;
    ``X/SKILL.md`` changing in any way. Not relevant: anything deeper in a bundle, other files
    in the root or a bundle, a directory merely modified, and everything under ``.system`` in
    the user dsh root (``skips_system``). ``relative`` is the path's components below the root.
    """
    depth = len(relative)
    if depth == 0:
        return change is not Change.modified
    if skips_system and relative[0] == _SYSTEM_DIR:
        return False
    if depth == 1:
        return change is not Change.modified if is_dir else relative[0].endswith(_FLAT_SUFFIX)
    return depth == 2 and relative[1] == SKILL_FILE_NAME


@dataclass(frozen=True, slots=True)
class WatchedRoot:
    """A skills root to watch: its absolute path as scanned, and whether it skips ``.system``."""

    path: str
    skips_system: bool = False


@dataclass(frozen=True, slots=True)
class _RootRole:
    """The watched directory is a root holding these bundles."""

    skips_system: bool
    bundles: frozenset[str]


@dataclass(frozen=True, slots=True)
class _BundleRole:
    """The watched directory is the bundle ``bundle`` of a root."""

    bundle: str
    skips_system: bool


@dataclass(frozen=True, slots=True)
class _EntryRole:
    """Only the entry ``name`` matters: the next step towards a missing root, a root that is a
    link, or the target of a linked skill file."""

    name: str


_Role = _RootRole | _BundleRole | _EntryRole
WatchPlan = dict[str, frozenset[_Role]]
"""Resolved directory -> what its entries mean. Equal plans need no reopening."""


def plan_watches(roots: Iterable[WatchedRoot]) -> WatchPlan:
    """Decide which directories to watch for ``roots`` as they are on disk now."""
    plan: dict[str, set[_Role]] = {}

    def add(directory: str, role: _Role) -> None:
        plan.setdefault(directory, set()).add(role)

    def add_link_target(link: str) -> None:
        target = os.path.realpath(link)
        if _is_watchable(os.path.dirname(target)):
            add(os.path.dirname(target), _EntryRole(os.path.basename(target)))

    for root in roots:
        if not os.path.isdir(root.path):
            ancestor, next_name = _nearest_directory(root.path)
            add(os.path.realpath(ancestor), _EntryRole(next_name))
            continue
        resolved = os.path.realpath(root.path)
        if os.path.islink(root.path):
            parent, name = os.path.split(root.path)
            add(os.path.realpath(parent), _EntryRole(name))
        if not _is_watchable(resolved):
            continue  # the provider cannot list it either
        bundles: list[str] = []
        for entry in _entries(resolved):
            if root.skips_system and entry.name == _SYSTEM_DIR:
                continue
            if _entry_is_dir(entry):
                bundles.append(entry.name)
                directory = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                if os.access(directory, os.R_OK | os.X_OK):
                    add(directory, _BundleRole(entry.name, root.skips_system))
                    if os.path.islink(skill_file := os.path.join(directory, SKILL_FILE_NAME)):
                        add_link_target(skill_file)
            elif entry.name.endswith(_FLAT_SUFFIX) and entry.is_symlink():
                add_link_target(entry.path)
        add(resolved, _RootRole(root.skips_system, frozenset(bundles)))
    return {directory: frozenset(roles) for directory, roles in plan.items()}


def _nearest_directory(path: str) -> tuple[str, str]:
    """The nearest existing ancestor directory of ``path`` and the name of its next component."""
    child, parent = path, os.path.dirname(path)
    while parent != child and not os.path.isdir(parent):
        child, parent = parent, os.path.dirname(parent)
    return parent, os.path.basename(child)


def _is_watchable(directory: str) -> bool:
    return os.path.isdir(directory) and os.access(directory, os.R_OK | os.X_OK)


def _entries(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _judge(plan: WatchPlan, change: Change, path: str) -> tuple[bool, bool]:
    """Whether one change matters, and whether it may change what must be watched."""
    if path in plan and change is not Change.modified:
        return True, True  # a watched directory itself came or went
    parent, name = os.path.split(path)
    for role in plan.get(parent, ()):
        if isinstance(role, _EntryRole):
            if name == role.name:
                return True, True
        elif isinstance(role, _RootRole):
            is_dir = name in role.bundles or os.path.isdir(path)
            if is_relevant_change(change, (name,), is_dir=is_dir, skips_system=role.skips_system):
                return True, is_dir or os.path.islink(path)
        elif is_relevant_change(
            change, (role.bundle, name), is_dir=False, skips_system=role.skips_system
        ):
            return True, os.path.islink(path)
    return False, False


def _polling_forced() -> bool:
    # watchfiles' own switch, read here too so that `mode` can say "polling".
    value = os.environ.get("WATCHFILES_FORCE_POLLING", "")
    return bool(value) and value.lower() not in ("false", "disable", "disabled")


class _Watch:
    """One open `watchfiles.watch` of a plan's directories, live once constructed."""

    def __init__(
        self, plan: WatchPlan, stop: threading.Event, *, timeout_ms: int, polling: bool
    ) -> None:
        self.plan = plan
        self.mode: Mode = "polling" if polling else "native"
        self._changes: Generator[_Batch, None, None] = watch(
            *sorted(plan),
            watch_filter=None,  # every change is judged against the plan
            debounce=DEBOUNCE_MS,
            step=min(STEP_MS, timeout_ms),
            stop_event=stop,
            rust_timeout=timeout_ms,
            yield_on_timeout=True,
            debug=False,  # stdout may be the protocol
            raise_interrupt=False,
            force_polling=True if polling else None,
            poll_delay_ms=POLL_DELAY_MS,
            recursive=False,
            ignore_permission_denied=False,
        )
        # The generator opens the watch in its first step, so this returns once it is live.
        self._first = next(self._changes, None)

    def next(self) -> _Batch | None:
        """The next batch of changes (empty after a quiet step), or None once stopped."""
        if self._first is not None:
            batch, self._first = self._first, None
            return batch
        return next(self._changes, None)

    def close(self) -> None:
        self._changes.close()


class _State:
    """What the watcher thread shares with the provider's side, all under ``lock``. It holds no
    reference to the provider, so a provider nobody closed can still be collected."""

    def __init__(self, fixed_roots: Sequence[WatchedRoot], max_projects: int) -> None:
        self.lock = threading.Lock()
        self.fixed_roots = tuple(fixed_roots)
        self.max_projects = max_projects
        # Every project seen, least recently listed first, and the ones to watch; `version`
        # counts changes to `wanted`, `active_projects` is what the live watch covers.
        self.recent: OrderedDict[_Project, tuple[WatchedRoot, ...]] = OrderedDict()
        self.wanted: dict[_Project, tuple[WatchedRoot, ...]] = {}
        self.version = 0
        self.cwd_projects: OrderedDict[str | None, _Project] = OrderedDict()
        self.mode: Mode = "off"
        self.active_projects: frozenset[_Project] = frozenset()
        # A lookup was answered before a watch covering it was live: once one is, invalidate.
        self.unseen = False
        self.stop: threading.Event | None = None
        self.thread: threading.Thread | None = None

    def shut_down(self) -> None:
        if self.stop is not None:
            self.stop.set()


@dataclass(slots=True)
class _Group:
    """The roots one watch covers: the fixed roots, or those of the watched projects."""

    for_projects: bool
    # How long the thread waits on this watch each round: the fixed roots' watch sets the pace.
    timeout_ms: int
    watch: _Watch | None = None
    version: int = -1  # the `_State.version` its watch covers; -1 before the first
    projects: frozenset[_Project] = frozenset()
    replan_at: float | None = None


class _Loop:
    """The body of the watcher thread."""

    def __init__(self, state: _State, stop: threading.Event, on_change: Callable[[], None]) -> None:
        self._state, self._stop, self._on_change = state, stop, on_change
        self._groups = (_Group(False, STEP_MS), _Group(True, 1))
        self._told_polling = False
        self._pending = False  # a relevant change not passed on yet
        self._last_told = -math.inf

    def run(self) -> None:
        delay = _RETRY_FIRST_SECONDS
        try:
            while not self._stop.is_set():
                try:
                    for group in self._groups:
                        self._step(group)
                    self._publish()
                except Exception as error:
                    self._close_all()
                    self._failed(error)
                    self._stop.wait(delay)
                    delay = min(delay * 2, _RETRY_MAX_SECONDS)
                    continue
                delay = _RETRY_FIRST_SECONDS
                self._tell()
        finally:
            self._close_all()
            with self._state.lock:
                # Unless a new thread has taken over already (stopped without being joined).
                if self._state.thread in (None, threading.current_thread()):
                    self._state.mode = "off"
                    self._state.active_projects = frozenset()
            _log.debug("skill_watch_stopped")

    def _step(self, group: _Group) -> None:
        """Reopen the group's watch if it must cover something new, then take its next batch."""
        with self._state.lock:
            if group.for_projects:
                version, wanted = self._state.version, dict(self._state.wanted)
                roots = tuple(root for roots in wanted.values() for root in roots)
            else:
                version, wanted, roots = 0, {}, self._state.fixed_roots
        now = time.monotonic()
        if group.version != version or (group.replan_at is not None and now >= group.replan_at):
            group.replan_at = None
            self._reopen(group, roots)
            group.version, group.projects = version, frozenset(wanted)
        if group.watch is None:
            self._stop.wait(group.timeout_ms / 1000)
            return
        batch = group.watch.next() or set()
        relevant = structural = False
        for change, path in batch:
            one_relevant, one_structural = _judge(group.watch.plan, change, path)
            relevant, structural = relevant or one_relevant, structural or one_structural
        if batch:
            _log.debug(
                "skill_watch_changes",
                relevant=relevant,
                changes=len(batch),
                paths=sorted(path for _, path in batch)[:_LOGGED_PATHS],
            )
        if relevant:
            self._pending = True
            self._rebalance()
        if structural and group.replan_at is None:
            # A little later, so the lookups this change causes do not compete with reopening.
            group.replan_at = now + DEBOUNCE_MS / 1000

    def _reopen(self, group: _Group, roots: tuple[WatchedRoot, ...]) -> None:
        """Watch the group's roots as they are now; a replaced watch is closed once the new one
        is live, and whatever the old one had not reported counts as a change."""
        for _ in range(_MAX_REPLANS):
            plan = plan_watches(roots)
            old = group.watch
            if (old.plan if old is not None else {}) == plan:
                return
            try:
                group.watch = self._open(plan, group.timeout_ms) if plan else None
            except FileNotFoundError:
                continue  # a directory went away since it was planned
            if old is not None:
                old.close()
                self._pending = True
        raise RuntimeError("the directories to watch kept changing")

    def _open(self, plan: WatchPlan, timeout_ms: int) -> _Watch:
        forced = _polling_forced()
        try:
            return _Watch(plan, self._stop, timeout_ms=timeout_ms, polling=forced)
        except FileNotFoundError:
            raise
        except (OSError, RuntimeError) as error:
            if forced:
                raise
            # The inotify watch or instance limit, or no inotify at all.
            reason = f"native file watching is unavailable ({error})"
            log = _log.debug if self._told_polling else _log.warning
            self._told_polling = True
            log("skill_watch_polling", reason=reason, poll_delay_ms=POLL_DELAY_MS)
        return _Watch(plan, self._stop, timeout_ms=timeout_ms, polling=True)

    def _close_all(self) -> None:
        for group in self._groups:
            if group.watch is not None:
                group.watch.close()
            group.watch, group.version, group.projects = None, -1, frozenset()

    def _publish(self) -> None:
        """Tell the provider's side what is watched; catch up on lookups answered before."""
        watches = [group.watch for group in self._groups if group.watch is not None]
        mode: Mode = "polling" if any(w.mode == "polling" for w in watches) else "native"
        projects = self._groups[1]
        state = self._state
        with state.lock:
            previous, state.mode = state.mode, mode
            state.active_projects = projects.projects
            if state.unseen and projects.version == state.version:
                state.unseen = False
                self._pending = True
        if previous == mode:
            return
        directories = sum(len(w.plan) for w in watches)
        if mode == "native":
            self._told_polling = False
        if previous == "failed":
            self._pending = True
            _log.info("skill_watch_recovered", mode=mode, directories=directories)
        elif previous == "polling":
            _log.info("skill_watch_native", directories=directories)
        else:
            _log.debug("skill_watch_started", mode=mode, directories=directories)

    def _failed(self, error: BaseException) -> None:
        with self._state.lock:
            previous, self._state.mode = self._state.mode, "failed"
        reason = f"{type(error).__name__}: {error}"
        if previous == "failed":
            _log.debug("skill_watch_failed", reason=reason)
            return
        _log.warning(
            "skill_watch_failed",
            reason=reason,
            consequence="skill catalogs are not cached until watching recovers",
        )
        self._changed()  # what was cached can no longer be vouched for

    def _rebalance(self) -> None:
        """After a relevant change (which clears every cache anyway), watch the projects listed
        most recently."""
        state = self._state
        with state.lock:
            recent = list(state.recent)[-state.max_projects :]
            if set(recent) != set(state.wanted):
                state.wanted = {key: state.recent[key] for key in recent}
                state.version += 1

    def _tell(self) -> None:
        """Invalidate if a change is pending, at most once per `DEBOUNCE_MS`: the first change
        after a quiet spell at once, a burst's last one after it ends."""
        now = time.monotonic()
        if self._pending and now - self._last_told >= DEBOUNCE_MS / 1000:
            self._pending, self._last_told = False, now
            self._changed()

    def _changed(self) -> None:
        try:
            self._on_change()
        except Exception as error:
            _log.warning("skill_watch_invalidate_failed", error=repr(error))


class RootWatch:
    """Watches a local provider's roots and invalidates its registrations on relevant changes.

    The provider calls `attach` / `detach` from its ``on_register`` / ``on_dispose`` hooks,
    `cover` at the start of every lookup (the first one while attached starts the thread),
    `vouches_for` from its ``cacheable`` hook, and `close` when it is closed.

    Raises:
        ValueError: ``max_projects`` is less than 1.
    """

    def __init__(
        self, fixed_roots: Sequence[WatchedRoot], *, max_projects: int = MAX_WATCHED_PROJECTS
    ) -> None:
        if max_projects < 1:
            raise ValueError(f"max_projects must be at least 1, got {max_projects!r}")
        self._state = _State(fixed_roots, max_projects)
        self._handles: list[ProviderHandle] = []
        self._closed = False
        weakref.finalize(self, self._state.shut_down)

    @property
    def mode(self) -> Mode:
        """``off``, ``starting``, ``native``, ``polling`` or ``failed``."""
        return self._state.mode

    def attach(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` on relevant changes once watching (nothing starts here)."""
        if not self._closed:
            self._handles.append(handle)

    def detach(self, handle: ProviderHandle) -> None:
        """Stop invalidating ``handle``; the last one detached stops the watching thread."""
        self._handles = [kept for kept in self._handles if kept is not handle]
        if not self._handles:
            self._stop_thread()

    def close(self) -> None:
        """Stop watching for good and wait for the thread to end; the registrations are
        invalidated once more, since nothing is vouched for any longer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop_thread()
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.invalidate()

    def cover(self, cwd: str | None, project_roots: Sequence[WatchedRoot]) -> None:
        """Have the fixed roots and these project roots watched, starting the thread if needed;
        returns at once. A lookup not covered yet is caught up on once its watch is live."""
        if self._closed or not self._handles:
            return
        project = tuple(root.path for root in project_roots)
        state = self._state
        with state.lock:
            state.cwd_projects[cwd or None] = project
            state.cwd_projects.move_to_end(cwd or None)
            while len(state.cwd_projects) > _REMEMBERED_CWDS:
                state.cwd_projects.popitem(last=False)
            if project:
                state.recent[project] = tuple(project_roots)
                state.recent.move_to_end(project)
                self._forget_old_projects()
                if project not in state.wanted and len(state.wanted) < state.max_projects:
                    state.wanted[project] = tuple(project_roots)
                    state.version += 1
            self._start_thread()
            covered = state.mode in _HEALTHY and (
                not project or project not in state.wanted or project in state.active_projects
            )
            state.unseen = state.unseen or not covered

    def vouches_for(self, cwd: str | None) -> bool:
        """Whether catalogs for ``cwd`` may be cached: its roots are watched, or will be with an
        invalidation as soon as they are."""
        state = self._state
        with state.lock:
            if state.mode not in ("starting", *_HEALTHY):
                return False
            project = state.cwd_projects.get(cwd or None)
            return project is not None and (not project or project in state.wanted)

    def _forget_old_projects(self) -> None:
        state = self._state
        excess = len(state.recent) - _REMEMBERED_PROJECTS
        for key in [key for key in state.recent if key not in state.wanted][: max(excess, 0)]:
            del state.recent[key]

    def _start_thread(self) -> None:
        # With the lock held.
        state = self._state
        if state.thread is not None and state.thread.is_alive():
            return
        stop = threading.Event()
        invalidate = weakref.WeakMethod(self._invalidate)

        def on_change() -> None:
            if (method := invalidate()) is not None:
                method()

        state.stop, state.mode, state.active_projects, state.unseen = (
            stop,
            "starting",
            frozenset(),
            False,
        )
        loop = _Loop(state, stop, on_change)
        state.thread = threading.Thread(target=loop.run, name=WATCHER_THREAD_NAME, daemon=True)
        state.thread.start()

    def _stop_thread(self) -> None:
        with self._state.lock:
            thread, stop = self._state.thread, self._state.stop
            self._state.thread = None
        if stop is not None:
            stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _invalidate(self) -> None:
        for handle in tuple(self._handles):
            handle.invalidate()
