"""Live reload: a local provider's skill roots, watched with ``watchfiles.watch``.

A `RootWatch` starts nothing when made: its provider's first lookup while registered starts one
thread (``acp-skills watcher``; the provider has no event loop of its own), which ends when the
last registration is disposed or the provider is closed or collected. Changes that
`is_relevant_change` accepts in what `plan_watches` chose invalidate the registrations. Opening
a watch never holds up a lookup: one invalidation as soon as a watch covering the lookup is live
drops its answer, so nothing that changed meanwhile is missed.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Final, Literal, NamedTuple

import structlog
from watchfiles import Change, watch

from .model import SKILL_FILE_NAME
from .provider import ProviderHandle

__all__ = ["MAX_WATCHED_PROJECTS", "WATCHER_THREAD_NAME", "RootWatch", "WatchedRoot"]
__all__ += ["is_relevant_change", "plan_watches"]

_log = structlog.get_logger(__name__)

WATCHER_THREAD_NAME: Final = "acp-skills watcher"
# A batch ends after STEP_MS without a new change (DEBOUNCE_MS at the latest), so one change is
# passed on 1-2 steps after it happens; the thread also looks for new projects that often.
STEP_MS: Final = 30
DEBOUNCE_MS: Final = 150
POLL_DELAY_MS: Final = 300  # how often a polling watch scans its directories
MAX_WATCHED_PROJECTS: Final = 32
_REMEMBERED_PROJECTS: Final = 4 * MAX_WATCHED_PROJECTS  # for re-planning after a change
_REMEMBERED_CWDS: Final = 1024  # for `cacheable`
_RETRY_SECONDS: Final = (0.5, 10.0)  # a failed watch is retried after this, doubling up to that
_MAX_REPLANS: Final = 5  # directories kept appearing while a watch was being opened

Mode = Literal["off", "starting", "native", "polling", "failed"]
_HEALTHY: Final = ("native", "polling")
_Batch = set[tuple[Change, str]]
_Project = tuple[str, ...]


def is_relevant_change(
    change: Change, relative: Sequence[str], *, is_dir: bool, skips_system: bool
) -> bool:
    """Whether a change at ``relative`` (its components below a skills root) can change what
    the provider lists: the root coming or going, a flat ``*.md`` in the root changing, a
    directory in the root (a bundle) added, removed or renamed, or ``X/SKILL.md`` changing.
    Nothing deeper in a bundle, no other file, no directory merely modified, and nothing under
    ``.system`` when ``skips_system`` (the user dsh root)."""
    if not relative:
        return change is not Change.modified
    if skips_system and relative[0] == ".system":
        return False
    if len(relative) == 1:
        return change is not Change.modified if is_dir else relative[0].endswith(".md")
    return len(relative) == 2 and relative[1] == SKILL_FILE_NAME


class WatchedRoot(NamedTuple):
    """A skills root to watch: its absolute path as scanned, and whether it skips ``.system``."""

    path: str
    skips_system: bool = False


class _Role(NamedTuple):
    """What a watched directory's entries mean: it is ``below`` a root (``()``: the root, with
    ``bundles``; ``(bundle,)``), or only its entry ``only`` matters (a step towards a root)."""

    below: tuple[str, ...] = ()
    skips_system: bool = False
    bundles: frozenset[str] = frozenset()
    only: str | None = None


WatchPlan = dict[str, frozenset[_Role]]


def plan_watches(roots: Iterable[WatchedRoot]) -> WatchPlan:
    """Decide which directories to watch, non-recursively, for ``roots`` as they are now: every
    existing root at its resolved path (and the directory holding it, when it is a link), every
    bundle directory in it, the nearest existing ancestor of a missing root, and the directory
    holding the target of a linked flat skill or ``SKILL.md``."""
    plan: dict[str, set[_Role]] = {}

    def add(path: str, role: _Role) -> None:
        plan.setdefault(path, set()).add(role)

    def add_entry(path: str) -> None:
        parent, name = os.path.split(path)
        add(os.path.realpath(parent), _Role(only=name))

    def add_target(link: str) -> None:
        target = os.path.realpath(link)
        if _is_watchable(os.path.dirname(target)):
            add_entry(target)

    for root in roots:
        if not os.path.isdir(root.path):
            missing = root.path
            while not os.path.isdir(os.path.dirname(missing)) and missing != "/":
                missing = os.path.dirname(missing)
            add_entry(missing)
            continue
        if os.path.islink(root.path):
            add_entry(root.path)  # re-pointed
        resolved = os.path.realpath(root.path)
        if not _is_watchable(resolved):
            continue  # the provider cannot list it either
        bundles: list[str] = []
        try:
            with os.scandir(resolved) as scanned:
                entries = list(scanned)
        except OSError:
            entries = []
        for entry in entries:
            if root.skips_system and entry.name == ".system":
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                bundles.append(entry.name)
                bundle = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                # A directory, as scandir just said: only whether it can be watched is left.
                if os.access(bundle, os.R_OK | os.X_OK):
                    add(bundle, _Role((entry.name,), root.skips_system))
                    if os.path.islink(skill_file := os.path.join(bundle, SKILL_FILE_NAME)):
                        add_target(skill_file)
            elif entry.name.endswith(".md") and entry.is_symlink():
                add_target(entry.path)
        add(resolved, _Role((), root.skips_system, frozenset(bundles)))
    return {directory: frozenset(roles) for directory, roles in plan.items()}


def _is_watchable(directory: str) -> bool:
    return os.path.isdir(directory) and os.access(directory, os.R_OK | os.X_OK)


def _judge(plan: WatchPlan, change: Change, path: str) -> tuple[bool, bool]:
    """Whether one change matters, and whether it may change what must be watched."""
    if path in plan and change is not Change.modified:
        return True, True  # a watched directory itself came or went
    parent, name = os.path.split(path)
    for role in plan.get(parent, ()):
        if role.only is not None:
            if name == role.only:
                return True, True
            continue
        is_dir = not role.below and (name in role.bundles or os.path.isdir(path))
        relative = (*role.below, name)
        if is_relevant_change(change, relative, is_dir=is_dir, skips_system=role.skips_system):
            return True, is_dir or os.path.islink(path)
    return False, False


class _Watch:
    """One `watchfiles.watch` of a plan's directories, live once constructed."""

    def __init__(self, plan: WatchPlan, stop: threading.Event, *, polling: bool):
        self.plan: WatchPlan = plan
        self.mode: Mode = "polling" if polling else "native"
        self._changes: Generator[_Batch, None, None] = watch(
            *sorted(plan),
            watch_filter=None,  # every change is judged against the plan
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=STEP_MS,  # back every step when quiet, to look for new projects
            yield_on_timeout=True,
            debug=False,  # stdout may be the protocol
            force_polling=True if polling else None,
            poll_delay_ms=POLL_DELAY_MS,
            recursive=False,
        )
        self.close = self._changes.close
        # The generator opens the watch in its first step, so this returns once it is live.
        self._first = next(self._changes, None)

    def next(self) -> _Batch:
        """The next batch of changes, empty after a quiet step or once stopped."""
        batch, self._first = self._first, None
        return batch if batch is not None else next(self._changes, set())


class _State:
    """What the thread shares with the provider's side, under ``lock`` (never the provider)."""

    def __init__(self, fixed_roots: Sequence[WatchedRoot], max_projects: int) -> None:
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.fixed_roots, self.max_projects = tuple(fixed_roots), max_projects
        # Projects seen (least recently listed first), those watched, a count of changes to
        # those, and those the live watch covers.
        self.recent: OrderedDict[_Project, tuple[WatchedRoot, ...]] = OrderedDict()
        self.wanted: dict[_Project, tuple[WatchedRoot, ...]] = {}
        self.version = 0
        self.active: frozenset[_Project] = frozenset()
        self.cwd_projects: OrderedDict[str | None, _Project] = OrderedDict()
        self.mode: Mode = "off"
        # A lookup was answered before a watch covering it was live: invalidate once one is.
        self.unseen = False
        self.thread: threading.Thread | None = None

    def shut_down(self) -> None:
        self.stop.set()


class _Loop:
    """The body of the watcher thread: one watch of the fixed roots and the watched projects'."""

    def __init__(self, state: _State, on_change: weakref.WeakMethod[Callable[[], None]]):
        self._state, self._stop, self._on_change = state, state.stop, on_change
        self._watch: _Watch | None = None
        self._version = -1  # the `_State.version` the watch covers
        self._replan_at = math.inf
        self._told_polling = self._pending = False
        self._last_told = -math.inf

    def run(self) -> None:
        delay = _RETRY_SECONDS[0]
        try:
            while not self._stop.is_set():
                try:
                    self._step()
                    delay = _RETRY_SECONDS[0]
                except Exception as error:
                    self._close()
                    self._failed(error)
                    self._stop.wait(delay)
                    delay = min(delay * 2, _RETRY_SECONDS[1])
                self._tell()
        finally:
            self._close()
            with self._state.lock:
                if self._state.thread in (None, threading.current_thread()):  # not replaced
                    self._state.mode, self._state.active = "off", frozenset()
            _log.debug("skill_watch_stopped")

    def _step(self) -> None:
        """Reopen the watch if it must cover something new, then judge its next batch."""
        state = self._state
        with state.lock:
            version, wanted = state.version, dict(state.wanted)
        now = time.monotonic()
        if self._version != version or now >= self._replan_at:
            self._reopen([*state.fixed_roots, *(r for roots in wanted.values() for r in roots)])
            self._version, self._replan_at = version, math.inf
            self._publish(frozenset(wanted))
        if self._watch is None:
            self._stop.wait(STEP_MS / 1000)
            return
        batch = self._watch.next()
        judged = [_judge(self._watch.plan, change, path) for change, path in batch]
        relevant, structural = any(r for r, _ in judged), any(s for _, s in judged)
        if batch:
            paths = sorted(path for _, path in batch)[:20]
            _log.debug("skill_watch_changes", relevant=relevant, changes=len(batch), paths=paths)
        if relevant:
            self._pending = True
            with state.lock:  # a change clears every cache: watch the projects listed last
                recent = list(state.recent)[-state.max_projects :]
                if set(recent) != set(state.wanted):
                    state.wanted = {key: state.recent[key] for key in recent}
                    state.version += 1
        if structural:
            # A little later, so the lookups this change causes do not compete with reopening.
            self._replan_at = min(self._replan_at, now + DEBOUNCE_MS / 1000)

    def _reopen(self, roots: Sequence[WatchedRoot]) -> None:
        """Watch ``roots`` as they are now; a replaced watch's unreported changes count."""
        for _ in range(_MAX_REPLANS):
            plan, old = plan_watches(roots), self._watch
            if plan == (old.plan if old is not None else {}):
                return
            try:
                self._watch = self._open(plan) if plan else None
            except FileNotFoundError:
                continue  # a directory went away since it was planned
            if old is not None:
                old.close()
                self._pending = True
        raise RuntimeError("the directories to watch kept changing")

    def _open(self, plan: WatchPlan) -> _Watch:
        # watchfiles' own switch, read here too so that `mode` can say "polling".
        switch = os.environ.get("WATCHFILES_FORCE_POLLING", "").lower()
        forced = switch not in ("", "false", "disable", "disabled")
        try:
            return _Watch(plan, self._stop, polling=forced)
        except FileNotFoundError:
            raise
        except (OSError, RuntimeError) as error:
            if forced:
                raise
            # The inotify watch or instance limit, or no inotify at all: told once.
            log = _log.debug if self._told_polling else _log.warning
            self._told_polling = True
            reason = f"native file watching is unavailable ({error})"
            log("skill_watch_polling", reason=reason, poll_delay_ms=POLL_DELAY_MS)
        return _Watch(plan, self._stop, polling=True)

    def _close(self) -> None:
        if self._watch is not None:
            self._watch.close()
        self._watch, self._version = None, -1

    def _publish(self, projects: frozenset[_Project]) -> None:
        """Tell the provider's side what is watched; catch up on lookups answered before."""
        mode: Mode = self._watch.mode if self._watch is not None else "native"
        state = self._state
        with state.lock:
            previous, state.mode, state.active = state.mode, mode, projects
            if state.unseen and self._version == state.version:
                state.unseen, self._pending = False, True
        directories = len(self._watch.plan) if self._watch is not None else 0
        self._told_polling = self._told_polling and mode == "polling"
        if previous == "failed":
            self._pending = True  # every session catches up
            _log.info("skill_watch_recovered", mode=mode, directories=directories)
        elif previous == "polling" and mode == "native":
            _log.info("skill_watch_native", directories=directories)
        elif previous != mode:
            _log.debug("skill_watch_started", mode=mode, directories=directories)

    def _failed(self, error: Exception) -> None:
        with self._state.lock:
            previous, self._state.mode = self._state.mode, "failed"
        reason = f"{type(error).__name__}: {error}"
        if previous == "failed":
            _log.debug("skill_watch_failed", reason=reason)
        else:
            consequence = "skill catalogs are not cached until watching recovers"
            _log.warning("skill_watch_failed", reason=reason, consequence=consequence)
            self._tell(now=True)  # what was cached can no longer be vouched for

    def _tell(self, *, now: bool = False) -> None:
        """Invalidate ``now``, or for pending changes at most once per `DEBOUNCE_MS`."""
        moment = time.monotonic()
        if now or (self._pending and moment - self._last_told >= DEBOUNCE_MS / 1000):
            self._pending, self._last_told = now and self._pending, moment
            try:
                if (invalidate := self._on_change()) is not None:
                    invalidate()
            except Exception as error:
                _log.warning("skill_watch_invalidate_failed", error=repr(error))


class RootWatch:
    """Watches a local provider's roots and invalidates its registrations on relevant changes.

    The provider calls `attach` / `detach` from its ``on_register`` / ``on_dispose`` hooks,
    `cover` before every scan and `start` after it, `vouches_for` from ``cacheable``, and
    `close`. At most `MAX_WATCHED_PROJECTS` projects are watched at once.
    """

    def __init__(self, fixed_roots: Sequence[WatchedRoot]) -> None:
        self._state = _State(fixed_roots, MAX_WATCHED_PROJECTS)
        self._handles: list[ProviderHandle] = []
        self._closed = False
        weakref.finalize(self, self._state.shut_down)

    @property
    def mode(self) -> Mode:
        """``off``, ``starting``, ``native``, ``polling`` or ``failed``."""
        return self._state.mode

    def attach(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` on relevant changes once watching; starts nothing."""
        if not self._closed:
            self._handles.append(handle)

    def detach(self, handle: ProviderHandle) -> None:
        """Stop invalidating ``handle``; the last one detached stops the thread."""
        self._handles = [kept for kept in self._handles if kept is not handle]
        if self._handles:
            return
        with self._state.lock:
            thread, self._state.thread = self._state.thread, None
            self._state.stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def close(self) -> None:
        """Stop watching for good and invalidate once more (nothing is vouched for). Idempotent."""
        if not self._closed:
            self._closed, handles = True, self._handles
            for handle in handles:
                self.detach(handle)  # the last one stops the thread
            for handle in handles:
                handle.invalidate()

    def cover(self, cwd: str | None, project_roots: Sequence[WatchedRoot]) -> None:
        """Before a scan: note whether the roots it needs are watched already (if not, one
        invalidation follows as soon as a watch covering them is live)."""
        state, project = self._state, tuple(root.path for root in project_roots)
        with state.lock:
            beyond = project not in state.wanted and len(state.wanted) >= state.max_projects
            covered = state.mode in _HEALTHY and (project in state.active or beyond)
            state.unseen = state.unseen or not covered

    def start(self, cwd: str | None, project_roots: Sequence[WatchedRoot]) -> None:
        """After a scan: have the fixed roots and ``cwd``'s project roots watched, starting the
        thread if need be. Not before or during the scan: setting up a watch beside a scan
        slows the scan down (both need the interpreter)."""
        if self._closed or not self._handles:
            return
        state, project, cwd = self._state, tuple(root.path for root in project_roots), cwd or None
        with state.lock:
            state.cwd_projects[cwd] = project
            state.cwd_projects.move_to_end(cwd)
            if len(state.cwd_projects) > _REMEMBERED_CWDS:
                state.cwd_projects.popitem(last=False)
            if project:
                state.recent[project] = tuple(project_roots)
                state.recent.move_to_end(project)
                old = [key for key in state.recent if key not in state.wanted]
                for key in old[: max(len(state.recent) - _REMEMBERED_PROJECTS, 0)]:
                    del state.recent[key]
                if project not in state.wanted and len(state.wanted) < state.max_projects:
                    state.wanted[project] = tuple(project_roots)
                    state.version += 1
            if state.thread is None or not state.thread.is_alive():
                state.stop, state.mode, state.active = threading.Event(), "starting", frozenset()
                run = _Loop(state, weakref.WeakMethod(self._invalidate)).run
                state.thread = threading.Thread(target=run, name=WATCHER_THREAD_NAME, daemon=True)
                state.thread.start()

    def vouches_for(self, cwd: str | None) -> bool:
        """Whether catalogs for ``cwd`` may be cached (an invalidation follows if they go stale)."""
        state = self._state
        with state.lock:
            project = state.cwd_projects.get(cwd or None)
            watching = state.mode in ("starting", *_HEALTHY) and project is not None
            return watching and (not project or project in state.wanted)

    def _invalidate(self) -> None:
        for handle in tuple(self._handles):
            handle.invalidate()
