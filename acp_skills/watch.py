"""Live reload: the local provider's skill roots, watched with ``watchfiles``.

A `RootWatch` belongs to one `LocalSkillProvider`. While the provider has a live registration,
one thread (named ``acp-skills watcher``) follows two watches, one of the fixed roots and one of
the project roots (so starting to watch a project never reopens the watch of a thousand
bundles), and between them watches, each non-recursively:

* every root that exists, at its resolved path (a root that is a symbolic link is watched at its
  target, and the directory holding the link is watched too, so re-pointing the link is seen);
* every bundle directory in those roots (where its ``SKILL.md`` lives);
* for a root that does not exist yet, its nearest existing ancestor, until the next component
  of the path appears: ``~/.agents/skills`` appearing is noticed without watching the home
  directory's tree;
* the directory holding the target of a symbolically linked flat skill or ``SKILL.md``.

A batch of changes that `is_relevant_change` accepts calls ``invalidate()`` on the provider's
registration handles (at most once per `DEBOUNCE_MS`). When the batch also changes what must be
watched (a new bundle needs a watch of its own), the watch is planned again and reopened, and
the handles are invalidated once more: whatever happened before the new watch was active is
covered by that second invalidation, whatever happens after it is seen by the new watch.

Why a thread rather than an anyio task: the provider has no event loop or task group of its own
(it is registered synchronously and its registry may serve more than one loop), the registry's
``invalidate()`` may be called from any thread, and `AcpSkills` hands registry changes to its own
loop. The thread is owned by the provider's registrations: it ends when the last handle is
disposed, when the provider is closed, or when the provider is garbage, and closing the watch
releases its inotify descriptor. It is a daemon thread, so a program that forgets to close the
provider still exits.

Project roots are learned from ``list(options)`` calls. At most `MAX_WATCHED_PROJECTS` projects
are watched; a project beyond the bound is served uncached (its ``cacheable`` answer is no)
until a relevant change re-plans the watch, when the most recently listed projects win. Evicting
only then means an evicted project never leaves a cached catalog behind, since that change
clears the cache anyway, and never causes an invalidation of its own.

When native watching is unavailable (the inotify watch or instance limit is reached) the watch
falls back to polling, logged once. When even that fails, or the watch fails later, the failure
is logged once, the provider's answers stop being cacheable, and the watch is retried with a
growing delay; recovering invalidates once, so every session's commands catch up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import structlog
from watchfiles import Change

# The Rust backend under `watchfiles.watch` (documented as its low-level API): opening a watch
# with it costs no waiting step, and a watch can stay open while the thread does other work.
from watchfiles._rust_notify import RustNotify

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

# A batch of changes ends after STEP_MS without a new one (after DEBOUNCE_MS at the latest while
# changes keep coming), so a single change is passed on 1-2 steps after it happens. Invalidations
# are at least DEBOUNCE_MS apart: the first change after a quiet spell is passed on at once, a
# burst of 100 writes costs a handful. The thread wakes every step (watchfiles checks its stop
# event that often anyway) and looks at both of its watches: about 0.5% of a core at 30 ms,
# against a target of 1%. See docs/reload.md for the numbers against the 300 ms target.
STEP_MS: Final = 30
DEBOUNCE_MS: Final = 150
# Only used when native watching is unavailable: how often the watched directories are scanned.
POLL_DELAY_MS: Final = 300
# Projects whose roots are watched at once (the fixed roots are always watched).
MAX_WATCHED_PROJECTS: Final = 32
# Projects remembered for re-planning, and working directories remembered for `cacheable`.
_REMEMBERED_PROJECTS: Final = 4 * MAX_WATCHED_PROJECTS
_REMEMBERED_CWDS: Final = 1024
# A failed watch is retried after this many seconds, doubling up to the maximum.
_RETRY_FIRST_SECONDS: Final = 0.5
_RETRY_MAX_SECONDS: Final = 10.0
# Planning and opening again when directories keep appearing while a watch is opened.
_MAX_REPLANS: Final = 5
# How many changed paths a debug log line shows.
_LOGGED_PATHS: Final = 20

_FLAT_SUFFIX: Final = ".md"
_SYSTEM_DIR: Final = ".system"

Mode = Literal["off", "starting", "native", "polling", "failed"]
_HEALTHY: Final = ("native", "polling")


# -- what counts ------------------------------------------------------------------------------


def is_relevant_change(
    change: Change, relative: Sequence[str], *, is_dir: bool, skips_system: bool
) -> bool:
    """Whether a change below a skills root can change what the provider lists.

    Relevant: the root itself appearing or going away; a ``*.md`` file directly in the root
    (a flat skill) changing in any way; a directory directly in the root (a bundle) added,
    removed or renamed (a rename is a removal and an addition); ``X/SKILL.md`` changing in any
    way. Not relevant: anything deeper in a bundle (``references/``, ``scripts/``, ``assets/``:
    a body and its resources are read afresh on every load), other files in the root or a
    bundle, a directory merely modified (its permissions, or its link count when a
    subdirectory is made in it), and everything under ``.system`` in the user dsh root.

    Args:
        change: What happened, as ``watchfiles`` reports it.
        relative: The changed path's components below the root (empty for the root itself).
        is_dir: Whether the path is a directory (or was one, for a removal).
        skips_system: Whether this root skips its ``.system`` child (the user dsh root).
    """
    depth = len(relative)
    if depth == 0:
        return change is not Change.modified
    if skips_system and relative[0] == _SYSTEM_DIR:
        return False
    if depth == 1:
        if is_dir:
            return change is not Change.modified
        return relative[0].endswith(_FLAT_SUFFIX)
    if depth == 2:
        return relative[1] == SKILL_FILE_NAME
    return False


# -- what is watched --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WatchedRoot:
    """A skills root to watch.

    Attributes:
        path: The root's absolute path, as the provider scans it (links not resolved).
        skips_system: Whether its ``.system`` child is skipped (the user dsh root).
    """

    path: str
    skips_system: bool = False


@dataclass(frozen=True, slots=True)
class _RootRole:
    """The watched directory is a root: its entries are flat skills and bundles."""

    skips_system: bool
    bundles: frozenset[str]


@dataclass(frozen=True, slots=True)
class _BundleRole:
    """The watched directory is the bundle ``bundle`` of a root."""

    bundle: str
    skips_system: bool


@dataclass(frozen=True, slots=True)
class _EntryRole:
    """Only the entry ``name`` of the watched directory matters: the next step towards a root
    that does not exist yet, a root that is a link, or the target of a linked skill file."""

    name: str


_Role = _RootRole | _BundleRole | _EntryRole
WatchPlan = dict[str, frozenset[_Role]]
"""Resolved directory -> what its entries mean. Two plans are equal when nothing needs reopening."""


def plan_watches(roots: Iterable[WatchedRoot]) -> WatchPlan:
    """Decide which directories to watch for ``roots``, as they are on disk now.

    Every directory in the plan existed (and was readable) when it was planned.
    """
    plan: dict[str, set[_Role]] = {}

    def add(directory: str, role: _Role) -> None:
        plan.setdefault(directory, set()).add(role)

    def add_link_target(link: str) -> None:
        target = os.path.realpath(link)
        directory = os.path.dirname(target)
        if _is_watchable(directory):
            add(directory, _EntryRole(os.path.basename(target)))

    for root in roots:
        if not os.path.isdir(root.path):
            ancestor, next_name = _nearest_directory(root.path)
            add(os.path.realpath(ancestor), _EntryRole(next_name))
            continue
        resolved = os.path.realpath(root.path)
        if os.path.islink(root.path):
            add(
                os.path.realpath(os.path.dirname(root.path)),
                _EntryRole(os.path.basename(root.path)),
            )
        if not _is_watchable(resolved):
            # Unreadable: the provider cannot list it either. Watching its parent would at
            # least see it replaced, but permissions changing in place are not seen.
            continue
        bundles: list[str] = []
        for entry in _entries(resolved):
            if root.skips_system and entry.name == _SYSTEM_DIR:
                continue
            if _entry_is_dir(entry):
                bundles.append(entry.name)
                directory = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                # A directory, as scandir just said: only whether it can be watched is left.
                if os.access(directory, os.R_OK | os.X_OK):
                    add(directory, _BundleRole(entry.name, root.skips_system))
                    skill_file = os.path.join(directory, SKILL_FILE_NAME)
                    if os.path.islink(skill_file):
                        add_link_target(skill_file)
            elif entry.name.endswith(_FLAT_SUFFIX) and entry.is_symlink():
                add_link_target(entry.path)
        add(resolved, _RootRole(root.skips_system, frozenset(bundles)))
    return {directory: frozenset(roles) for directory, roles in plan.items()}


def _nearest_directory(path: str) -> tuple[str, str]:
    """The nearest existing ancestor directory of ``path`` and the name of its next component."""
    child = path
    parent = os.path.dirname(child)
    while parent != child:
        if os.path.isdir(parent):
            return parent, os.path.basename(child)
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
    """Whether one reported change matters, given what each watched directory is for, and
    whether it may also change what must be watched (a directory or a link came or went)."""
    if path in plan and change is not Change.modified:
        # A watched directory itself appeared or went away (a root, a bundle, an ancestor).
        return True, True
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


# -- one open watch ---------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _OpenWatch:
    """A ``watchfiles`` watch of one plan."""

    notify: RustNotify
    plan: WatchPlan
    mode: Mode

    def next_batch(self, stop: threading.Event, step_ms: int) -> set[tuple[Change, str]] | None:
        """The next batch of changes, empty after a quiet step; ``None`` once ``stop`` is set.

        Raises:
            RuntimeError: The underlying watcher failed.
        """
        # Returning after every quiet step lets the thread take new roots without closing a
        # watch that may hold changes it has not reported yet.
        result = self.notify.watch(DEBOUNCE_MS, step_ms, step_ms, stop)
        if result == "stop":
            return None
        if isinstance(result, str):  # "timeout" ("signal" only happens on the main thread)
            return set()
        return {(Change(change), path) for change, path in result}

    def judge(self, batch: Iterable[tuple[Change, str]]) -> tuple[bool, bool]:
        """Whether the batch is relevant, and whether it may change what must be watched."""
        relevant = structural = False
        for change, path in batch:
            one_relevant, one_structural = _judge(self.plan, change, path)
            relevant = relevant or one_relevant
            structural = structural or one_structural
        return relevant, structural

    def drain(self, step_ms: int) -> bool:
        """Take what the watch saw but has not reported yet; whether any of it was relevant."""
        try:
            return self.judge(self.next_batch(threading.Event(), step_ms) or ())[0]
        except Exception:
            # Closing anyway; whatever it held counts as a change.
            return True

    def close(self) -> None:
        self.notify.close()


def _open_watch(plan: WatchPlan, *, polling: bool) -> _OpenWatch:
    """Start watching every directory of ``plan`` (non-recursively).

    Raises:
        FileNotFoundError: A directory went away since it was planned.
        OSError: Native watching is unavailable (the inotify watch limit, say).
        RuntimeError: The watcher could not be created (the inotify instance limit, say).
    """
    notify = RustNotify(
        sorted(plan),
        False,  # debug output: never (stdout may be a protocol)
        polling,
        POLL_DELAY_MS,
        False,  # recursive: no, every directory that matters is in the plan
        False,  # ignore permission errors: no, a directory we cannot watch is an error
    )
    return _OpenWatch(notify=notify, plan=plan, mode="polling" if polling else "native")


def _polling_forced() -> bool:
    # The switch `watchfiles.watch` honours, for filesystems whose changes inotify cannot see
    # (network mounts): any value but false/disable/disabled forces polling.
    value = os.environ.get("WATCHFILES_FORCE_POLLING", "")
    return bool(value) and value.lower() not in ("false", "disable", "disabled")


# -- the watching thread and what it shares ---------------------------------------------------


class _WatchState:
    """What the watcher thread shares with the provider's side (all under ``lock``).

    It holds no reference to the provider or its handles, so a provider nobody closed can still
    be garbage collected, which stops the thread.
    """

    def __init__(self, fixed_roots: Sequence[WatchedRoot], max_projects: int) -> None:
        self.lock = threading.Lock()
        self.fixed_roots = tuple(fixed_roots)
        self.max_projects = max_projects
        # Every project seen, least recently listed first: project key -> its roots.
        self.recent: OrderedDict[tuple[str, ...], tuple[WatchedRoot, ...]] = OrderedDict()
        # The projects to watch, and a version bumped whenever that set changes; the thread
        # publishes the version its watch of project roots covers as `active_version`, which
        # is what a lookup waiting for its project waits for.
        self.wanted: dict[tuple[str, ...], tuple[WatchedRoot, ...]] = {}
        self.version = 1
        self.cwd_projects: OrderedDict[str | None, tuple[str, ...]] = OrderedDict()
        self.mode: Mode = "off"
        self.active_version = 0
        self.active_projects: frozenset[tuple[str, ...]] = frozenset()
        self.waiters: list[tuple[int, Callable[[], None]]] = []
        self.stop: threading.Event | None = None
        self.thread: threading.Thread | None = None

    # Called with the lock held.

    def wanted_projects(
        self,
    ) -> tuple[int, tuple[WatchedRoot, ...], frozenset[tuple[str, ...]]]:
        roots = [root for project_roots in self.wanted.values() for root in project_roots]
        return self.version, tuple(roots), frozenset(self.wanted)

    def release_waiters(self, everyone: bool) -> None:
        kept: list[tuple[int, Callable[[], None]]] = []
        for needed, wake in self.waiters:
            if everyone or needed <= self.active_version:
                wake()
            else:
                kept.append((needed, wake))
        self.waiters = kept

    def shut_down(self) -> None:
        if self.stop is not None:
            self.stop.set()


@dataclass(slots=True)
class _Group:
    """The roots one watch covers: the fixed roots, or those of the watched projects.

    Two watches rather than one: starting to watch a project reopens only the small watch of
    project roots, never the one holding a thousand bundle directories.
    """

    for_projects: bool
    # The fixed roots' watch sets the pace of the thread; the projects' is only looked at.
    step_ms: int
    watch: _OpenWatch | None = None
    # The projects' version and keys its watch covers (see `_WatchState.wanted`).
    version: int = 0
    projects: frozenset[tuple[str, ...]] = frozenset()
    # When to plan the watch again after a change to what it must watch (see `_follow`).
    replan_at: float | None = None


class _WatchLoop:
    """The body of the watcher thread."""

    def __init__(
        self, state: _WatchState, stop: threading.Event, on_change: Callable[[], None]
    ) -> None:
        self._state = state
        self._stop = stop
        self._on_change = on_change
        self._groups = (
            _Group(for_projects=False, step_ms=STEP_MS),
            _Group(for_projects=True, step_ms=1),
        )
        # Whether the fall-back to polling has been told (once, until native watching works).
        self._told_polling = False
        # A relevant change not passed on yet, and when the last one was (see `_tell`).
        self._pending = False
        self._last_told = -math.inf

    def run(self) -> None:
        delay = _RETRY_FIRST_SECONDS
        watching = False
        try:
            while not self._stop.is_set():
                try:
                    if watching:
                        if not all(self._follow(group) for group in self._groups):
                            return  # stopped
                    else:
                        changed = False
                        for group in self._groups:
                            changed = self._reopen(group, drain=False) or changed
                        watching = True
                        if self._active() or changed:
                            self._pending = True
                except Exception as error:
                    watching = False
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
                    self._state.release_waiters(everyone=True)
            _log.debug("skill_watch_stopped")

    def _follow(self, group: _Group) -> bool:
        """Take the group's next batch of changes; reopen its watch if it must cover
        something new. Returns False once stopped."""
        watch = group.watch
        now = time.monotonic()
        if watch is not None:
            batch = watch.next_batch(self._stop, group.step_ms)
            if batch is None:
                return False
            relevant, structural = watch.judge(batch)
            if batch:
                _log.debug(
                    "skill_watch_changes",
                    relevant=relevant,
                    changes=len(batch),
                    paths=sorted(path for _, path in batch)[:_LOGGED_PATHS],
                )
            now = time.monotonic()
            if relevant:
                self._pending = True
                self._rebalance()
                # Told at once: by the time a change is reported it is almost always complete
                # (a new bundle's SKILL.md written with its directory).
                self._tell()
            if structural and group.replan_at is None:
                # Reopened a little later rather than now, so the lookups this change causes
                # do not compete with reopening a watch of a thousand directories. Not
                # postponed further by later changes: a new bundle must not stay unwatched.
                group.replan_at = now + DEBOUNCE_MS / 1000
        with self._state.lock:
            moved = group.for_projects and self._state.version != group.version
        replan_at = group.replan_at
        if not (moved or (replan_at is not None and now >= replan_at)):
            return True
        group.replan_at = None
        if self._reopen(group, drain=True) or (replan_at is not None and group.watch is not watch):
            # Told again now that the new watch is active: a new directory may have been
            # written to before it was watched.
            self._pending = True
        self._active()
        return True

    def _wanted(self, group: _Group) -> tuple[int, tuple[WatchedRoot, ...], frozenset[Any]]:
        with self._state.lock:
            if not group.for_projects:
                return 0, self._state.fixed_roots, frozenset()
            version, roots, projects = self._state.wanted_projects()
        return version, roots, projects

    def _reopen(self, group: _Group, *, drain: bool) -> bool:
        """Watch the group's roots as they are now. Returns whether something may have changed
        unseen meanwhile (so the caller invalidates). The old watch is closed when replaced,
        after taking what it saw meanwhile when ``drain``.

        Raises:
            Exception: Watching failed; the group's watch is closed.
        """
        changed = False
        opened_here = False
        opened: _OpenWatch | None = None
        plan: WatchPlan = {}
        try:
            for _ in range(_MAX_REPLANS):
                version, roots, projects = self._wanted(group)
                plan = plan_watches(roots)
                current = group.watch
                if (current is None and not plan) or (current is not None and current.plan == plan):
                    group.version, group.projects = version, projects
                    return changed
                if opened_here:
                    # Directories came or went while the last watch was being opened.
                    changed = True
                try:
                    opened = self._open(plan) if plan else None
                except FileNotFoundError:
                    # A directory went away between planning and watching: plan again.
                    changed = True
                    continue
                opened_here = True
                if current is not None:
                    if drain:
                        # What the old watch saw before the new one was active.
                        changed = current.drain(group.step_ms) or changed
                    current.close()
                group.watch, group.version, group.projects = opened, version, projects
                opened = None
            if plan and group.watch is None:
                raise RuntimeError("the directories to watch kept disappearing")
            return True
        except BaseException:
            for watch in (opened, group.watch):
                if watch is not None:
                    watch.close()
            group.watch = None
            raise

    def _open(self, plan: WatchPlan) -> _OpenWatch:
        if _polling_forced():
            return _open_watch(plan, polling=True)
        try:
            return _open_watch(plan, polling=False)
        except FileNotFoundError:
            raise
        except (OSError, RuntimeError) as error:
            # The inotify watch limit (OSError) or instance limit (RuntimeError), or no inotify.
            reason = f"native file watching is unavailable ({error})"
            if self._told_polling:
                _log.debug("skill_watch_polling", reason=reason)
            else:
                self._told_polling = True
                _log.warning("skill_watch_polling", reason=reason, poll_delay_ms=POLL_DELAY_MS)
        return _open_watch(plan, polling=True)

    def _close_all(self) -> None:
        for group in self._groups:
            if group.watch is not None:
                group.watch.close()
                group.watch = None

    def _active(self) -> bool:
        """Publish what is watched; whether that ends a failure (then everyone must catch up)."""
        watches = [group.watch for group in self._groups if group.watch is not None]
        mode: Mode = "polling" if any(w.mode == "polling" for w in watches) else "native"
        projects = self._groups[1]
        with self._state.lock:
            previous = self._state.mode
            self._state.mode = mode
            self._state.active_version = projects.version
            self._state.active_projects = projects.projects
            self._state.release_waiters(everyone=False)
        directories = sum(len(w.plan) for w in watches)
        if mode == "native":
            self._told_polling = False
        if previous == "failed":
            _log.info("skill_watch_recovered", mode=mode, directories=directories)
            return True
        if previous == "polling" and mode == "native":
            _log.info("skill_watch_native", directories=directories)
        elif previous != mode:
            _log.debug("skill_watch_started", mode=mode, directories=directories)
        return False

    def _failed(self, error: BaseException) -> None:
        with self._state.lock:
            previous = self._state.mode
            self._state.mode = "failed"
            self._state.release_waiters(everyone=True)
        reason = f"{type(error).__name__}: {error}"
        if previous == "failed":
            # Told once per failure: retries that fail again are only debug noise.
            _log.debug("skill_watch_failed", reason=reason)
            return
        _log.warning(
            "skill_watch_failed",
            reason=reason,
            consequence="skill catalogs are not cached until watching recovers",
        )
        if previous in _HEALTHY:
            # Cached catalogs can no longer be vouched for.
            self._changed()

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
        """Invalidate if a change is pending, at most once per `DEBOUNCE_MS`.

        The first change after a quiet spell is passed on at once; a burst costs one
        invalidation per `DEBOUNCE_MS` at most, the last one after the burst has ended.
        """
        if not self._pending:
            return
        now = time.monotonic()
        if now - self._last_told < DEBOUNCE_MS / 1000:
            return
        self._pending = False
        self._last_told = now
        self._changed()

    def _changed(self) -> None:
        try:
            self._on_change()
        except Exception as error:
            _log.warning("skill_watch_invalidate_failed", error=repr(error))


# -- the provider's side ----------------------------------------------------------------------


class RootWatch:
    """Watches a local provider's roots and invalidates its registrations on relevant changes.

    The provider calls `attach` / `detach` from its ``on_register`` / ``on_dispose`` hooks,
    `cover` at the start of every ``list``, `vouches_for` from its ``cacheable`` hook, and
    `close` when it is closed. The thread starts with the first handle attached, so the fixed
    roots (1,001 directories with 1,000 bundles) are being watched by the time the first lookup
    comes, rather than that lookup waiting for it.

    Args:
        fixed_roots: The roots that do not depend on a project (custom and user roots).
        max_projects: How many projects' roots are watched at once.

    Raises:
        ValueError: ``max_projects`` is less than 1.
    """

    def __init__(
        self, fixed_roots: Sequence[WatchedRoot], *, max_projects: int = MAX_WATCHED_PROJECTS
    ) -> None:
        if max_projects < 1:
            raise ValueError(f"max_projects must be at least 1, got {max_projects!r}")
        self._state = _WatchState(fixed_roots, max_projects)
        self._handles: list[ProviderHandle] = []
        self._closed = False
        # A provider nobody closed stops its thread when it is collected.
        weakref.finalize(self, self._state.shut_down)

    @property
    def mode(self) -> Mode:
        """``off``, ``starting``, ``native``, ``polling`` or ``failed``."""
        return self._state.mode

    def attach(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` on relevant changes from now on; start watching if needed."""
        if self._closed:
            return
        self._handles.append(handle)
        with self._state.lock:
            self._start_thread()

    def detach(self, handle: ProviderHandle) -> None:
        """Stop invalidating ``handle``; the last one detached stops the watching thread."""
        self._handles = [kept for kept in self._handles if kept is not handle]
        if not self._handles:
            self._stop_thread()

    def close(self) -> None:
        """Stop watching for good; wait for the thread to end. Idempotent.

        The registrations are invalidated once more: what they cached was vouched for by the
        watch, and nothing is cached from now on.
        """
        if self._closed:
            return
        self._closed = True
        self._stop_thread()
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.invalidate()

    async def cover(self, cwd: str | None, project_roots: Sequence[WatchedRoot]) -> None:
        """Make sure the fixed roots and these project roots are watched before a scan.

        Starts the watching thread if needed and waits until its watch covers the roots (a
        project beyond the bound is not waited for: it is served uncached). Returns at once when
        nothing is registered, when watching failed (answers are then uncached) or was closed.
        """
        needed = self._want(cwd or None, tuple(project_roots))
        if needed is None:
            return
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            # Runs on the watcher thread (or here, when stopping); the loop may be gone.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, ready)

        state = self._state
        with state.lock:
            if state.mode in ("failed", "off") or state.active_version >= needed:
                return
            state.waiters.append((needed, wake))
        try:
            await ready
        finally:
            with state.lock:
                state.waiters = [entry for entry in state.waiters if entry[1] is not wake]

    def vouches_for(self, cwd: str | None) -> bool:
        """Whether catalogs for ``cwd`` may be cached: its roots are being watched right now."""
        state = self._state
        with state.lock:
            if state.mode not in _HEALTHY:
                return False
            project = state.cwd_projects.get(cwd or None)
            return project is not None and (not project or project in state.active_projects)

    def _want(self, cwd: str | None, project_roots: tuple[WatchedRoot, ...]) -> int | None:
        """Record what ``cwd`` needs watched; the watch version to wait for, or None."""
        if self._closed or not self._handles:
            return None
        state = self._state
        project = tuple(root.path for root in project_roots)
        with state.lock:
            state.cwd_projects[cwd] = project
            state.cwd_projects.move_to_end(cwd)
            while len(state.cwd_projects) > _REMEMBERED_CWDS:
                state.cwd_projects.popitem(last=False)
            if project:
                state.recent[project] = project_roots
                state.recent.move_to_end(project)
                self._forget_old_projects()
                if project not in state.wanted and len(state.wanted) < state.max_projects:
                    state.wanted[project] = project_roots
                    state.version += 1
            self._start_thread()
            if not project or project in state.wanted:
                return state.version
            # Beyond the bound: only the fixed roots are waited for (the first watch).
            return max(state.active_version, 1)

    def _forget_old_projects(self) -> None:
        state = self._state
        excess = len(state.recent) - _REMEMBERED_PROJECTS
        for key in list(state.recent):
            if excess <= 0:
                break
            if key not in state.wanted:
                del state.recent[key]
                excess -= 1

    def _start_thread(self) -> None:
        # With the lock held.
        state = self._state
        if state.thread is not None and state.thread.is_alive():
            return
        stop = threading.Event()
        notify = weakref.WeakMethod(self._invalidate)

        def on_change() -> None:
            invalidate = notify()
            if invalidate is not None:
                invalidate()

        loop = _WatchLoop(state, stop, on_change)
        state.stop = stop
        state.mode = "starting"
        state.active_version = 0
        state.active_projects = frozenset()
        state.thread = threading.Thread(target=loop.run, name=WATCHER_THREAD_NAME, daemon=True)
        state.thread.start()

    def _stop_thread(self) -> None:
        state = self._state
        with state.lock:
            thread, stop = state.thread, state.stop
            state.thread = None
        if stop is not None:
            stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _invalidate(self) -> None:
        for handle in tuple(self._handles):
            handle.invalidate()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
