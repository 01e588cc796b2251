"""Live reload (docs/reload.md): a local provider's skill roots, each directory watched alone
with ``watchfiles.watch`` in one thread a `RootWatch` owns."""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

from watchfiles import Change, watch

from .model import SKILL_FILE_NAME
from .provider import ProviderHandle
from .quiet_log import get_logger
from .sweep import SWEEP_SECONDS, SafetySweep, root_entries

_log = get_logger(__name__)

WATCHER_THREAD_NAME: Final = "acp-skills watcher"
# A batch ends after STEP_MS without a new change (DEBOUNCE_MS at the latest); the thread also
# looks for new projects that often. Invalidations are at least DEBOUNCE_MS apart.
STEP_MS: Final = 30
DEBOUNCE_MS: Final = 150
POLL_DELAY_MS: Final = 300
MAX_WATCHED_PROJECTS: Final = 32
_REMEMBERED_CWDS: Final = 1024  # for `vouches_for`, and the projects to watch after a change
_RETRY_SECONDS: Final = (0.5, 10.0)  # a failed watch is retried after this, doubling up to that
_MAX_REPLANS: Final = 5  # directories kept appearing while a watch was being opened

Mode = Literal["off", "starting", "native", "polling", "failed"]
_HEALTHY: Final = ("native", "polling")
_Project = tuple[str, ...]
_Batch = set[tuple[Change, str]]


def is_relevant_change(
    change: Change, relative: Sequence[str], *, is_dir: bool, skips_system: bool
) -> bool:
    """Whether a change at ``relative`` (below a skills root) can change what is listed."""
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
    # What a watched directory's entries mean: it is ``below`` a root (``()``: the root, holding
    # ``bundles``; ``(bundle,)``), or only its entry ``only`` matters (a step towards a root).
    below: tuple[str, ...] = ()
    skips_system: bool = False
    bundles: frozenset[str] = frozenset()
    only: str | None = None


WatchPlan = dict[str, frozenset[_Role]]


def plan_watches(roots: Iterable[WatchedRoot]) -> WatchPlan:
    """The directories to watch, non-recursively, for ``roots`` as they are now."""
    plan: dict[str, set[_Role]] = {}

    def add(path: str, role: _Role) -> None:
        plan.setdefault(path, set()).add(role)

    def add_entry(path: str, *, target: bool = False) -> None:
        path = os.path.realpath(path) if target else path
        if not target or _is_watchable(os.path.dirname(path)):
            parent, name = os.path.split(path)
            add(os.path.realpath(parent), _Role(only=name))

    for root in roots:
        if not os.path.isdir(root.path):
            missing = root.path
            while not os.path.isdir(os.path.dirname(missing)) and missing != "/":
                missing = os.path.dirname(missing)
            add_entry(missing)
            continue
        if os.path.islink(root.path):
            add_entry(root.path)  # re-pointed
        if not _is_watchable(resolved := os.path.realpath(root.path)):
            continue  # the provider cannot list it either
        bundles: list[str] = []
        try:
            entries = root_entries(resolved, skips_system=root.skips_system)
        except OSError:
            entries = []
        for entry, is_dir in entries:
            if is_dir:
                bundles.append(entry.name)
                bundle = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                # A directory, as scandir just said: only whether it can be watched is left.
                if os.access(bundle, os.R_OK | os.X_OK):
                    add(bundle, _Role((entry.name,), root.skips_system))
                    if os.path.islink(skill_file := os.path.join(bundle, SKILL_FILE_NAME)):
                        add_entry(skill_file, target=True)
            elif entry.is_symlink():
                add_entry(entry.path, target=True)
        add(resolved, _Role((), root.skips_system, frozenset(bundles)))
    return {directory: frozenset(roles) for directory, roles in plan.items()}


def _is_watchable(directory: str) -> bool:
    return os.path.isdir(directory) and os.access(directory, os.R_OK | os.X_OK)


def _judge(plan: WatchPlan, change: Change, path: str) -> tuple[bool, bool]:
    # Whether one change matters, and whether it may change what must be watched.
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


@dataclass(eq=False)
class _State:
    # Shared by the thread and the provider's side, under ``lock``: the project roots (a project)
    # of each cwd looked up (least recent first), the projects to watch and those the live watch
    # covers, and whether a lookup was answered before a watch covering it was live.
    fixed_roots: tuple[WatchedRoot, ...]
    sweep_seconds: float  # the safety sweep's shortest interval
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    cwd_projects: OrderedDict[Hashable, _Project] = field(default_factory=OrderedDict)
    wanted: set[_Project] = field(default_factory=set)
    active: frozenset[_Project] = frozenset()
    mode: Mode = "off"
    unseen: bool = False
    thread: threading.Thread | None = None


class _Loop:
    # The watcher thread's body: one watch of the fixed roots and the watched projects'.
    def __init__(self, state: _State, on_change: weakref.WeakMethod[Callable[[], None]]) -> None:
        self._state, self._stop, self._on_change = state, state.stop, on_change
        self._sweep = SafetySweep(state.sweep_seconds)  # for changes a native watch never reports
        self._changes: Generator[_Batch, None, None] | None = None
        self._plan: WatchPlan = {}
        self._covered: frozenset[_Project] | None = None  # the projects the watch covers
        self._mode: Mode = "native"
        self._replan_at, self._last_told = math.inf, -math.inf
        self._told_polling = self._pending = False

    def run(self) -> None:
        state, delay = self._state, _RETRY_SECONDS[0]
        try:
            while not self._stop.is_set():
                try:
                    self._step()
                    delay = _RETRY_SECONDS[0]
                except Exception as error:
                    self._close()
                    with state.lock:
                        previous, state.mode = state.mode, "failed"
                    reason = f"{type(error).__name__}: {error}"
                    if previous == "failed":
                        _log.debug("skill_watch_failed", reason=reason)
                    else:
                        consequence = "skill catalogs are not cached until watching recovers"
                        _log.warning("skill_watch_failed", reason=reason, consequence=consequence)
                        self._tell(now=True)  # what was cached can no longer be vouched for
                    self._stop.wait(delay)
                    delay = min(delay * 2, _RETRY_SECONDS[1])
                self._tell()
        finally:
            self._close()
            with state.lock:
                if state.thread in (None, threading.current_thread()):  # not replaced
                    state.mode, state.active = "off", frozenset()
            _log.debug("skill_watch_stopped")

    def _step(self) -> None:
        state, batch, now = self._state, None, time.monotonic()
        with state.lock:
            covered = frozenset(state.wanted)
        if covered != self._covered or now >= self._replan_at:
            batch = self._reopen(covered)
            self._covered, self._replan_at = covered, math.inf
            mode: Mode = self._mode if self._changes is not None else "native"
            with state.lock:  # catch up on lookups answered before this watch was live
                previous, state.mode, state.active = state.mode, mode, covered
                if state.unseen and frozenset(state.wanted) == covered:
                    state.unseen, self._pending = False, True
            directories = len(self._plan)
            self._told_polling = self._told_polling and mode == "polling"
            if previous == "failed":
                self._pending = True  # every session catches up
                _log.info("skill_watch_recovered", mode=mode, directories=directories)
            elif previous == "polling" and mode == "native":
                _log.info("skill_watch_native", directories=directories)
            elif previous != mode:
                _log.debug("skill_watch_started", mode=mode, directories=directories)
        if self._changes is None:
            self._stop.wait(STEP_MS / 1000)
            return
        batch = next(self._changes, set()) if batch is None else batch
        judged = [_judge(self._plan, change, path) for change, path in batch]
        if relevant := any(r for r, _ in judged):
            self._changed(now, structural=any(structural for _, structural in judged))
        if batch:
            paths = sorted(path for _, path in batch)[:20]
            _log.debug("skill_watch_changes", relevant=relevant, changes=len(batch), paths=paths)
        # Never skipped because events came: an overflow drops the tail of a burst, not its head.
        if self._sweep.due():
            roots, structural = self._sweep.sweep()
            if roots:
                _log.debug("skill_watch_sweep_found_changes", roots=roots)
                # A bundle whose add was lost needs watching too: only then a replan.
                self._changed(now, structural=structural)

    def _changed(self, now: float, *, structural: bool) -> None:
        state, self._pending = self._state, True
        with state.lock:  # a change clears every cache: watch the projects listed last
            recent = dict.fromkeys(p for p in reversed(state.cwd_projects.values()) if p)
            state.wanted = set(list(recent)[:MAX_WATCHED_PROJECTS])
        if structural:
            # A little later, so the lookups this change causes do not compete with reopening.
            self._replan_at = min(self._replan_at, now + DEBOUNCE_MS / 1000)

    def _reopen(self, projects: frozenset[_Project]) -> _Batch | None:
        roots = [*self._state.fixed_roots, *(WatchedRoot(p) for ps in projects for p in ps)]
        first = None
        for _ in range(_MAX_REPLANS):
            if (plan := plan_watches(roots)) == self._plan:
                if self._changes is not None and self._mode == "native":
                    self._sweep.cover(roots)  # polling sees everything anyway
                else:
                    self._sweep.stop()
                return first
            try:
                changes, first = self._open(plan) if plan else (None, None)
            except FileNotFoundError:
                continue  # a directory went away since it was planned
            if self._changes is not None:
                self._changes.close()  # the new watch is live: what the old one missed counts
                self._pending = True
            self._changes, self._plan = changes, plan
        raise RuntimeError("the directories to watch kept changing")

    def _open(self, plan: WatchPlan) -> tuple[Generator[_Batch, None, None], _Batch]:
        # watchfiles' own switch, read here too so that `mode` can say "polling".
        switch = os.environ.get("WATCHFILES_FORCE_POLLING", "").lower()
        polling = switch not in ("", "false", "disable", "disabled")
        while True:
            changes = watch(
                *sorted(plan),
                # Only a change that matters ends a batch: the rest (the agent's own log file
                # in a directory watched for a missing root to appear) wakes nothing, logs
                # nothing, and cannot feed itself through a debug line about it.
                watch_filter=lambda change, path: _judge(plan, change, path)[0],
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                stop_event=self._stop,
                rust_timeout=STEP_MS,  # back every step when quiet, to look for new projects
                yield_on_timeout=True,
                debug=False,  # stdout may be the protocol
                force_polling=True if polling else None,
                poll_delay_ms=POLL_DELAY_MS,
                recursive=False,
            )
            try:
                first = next(changes, set())  # opens the watch: live once this returns
                self._mode = "polling" if polling else "native"
                return changes, first
            except (OSError, RuntimeError) as error:
                if polling or isinstance(error, FileNotFoundError):
                    raise
                # The inotify watch or instance limit, or no inotify at all: told once.
                log = _log.debug if self._told_polling else _log.warning
                self._told_polling = polling = True
                reason = f"native file watching is unavailable ({error})"
                log("skill_watch_polling", reason=reason, poll_delay_ms=POLL_DELAY_MS)

    def _close(self) -> None:
        self._sweep.stop()
        if self._changes is not None:
            self._changes.close()
        self._changes, self._plan, self._covered = None, {}, None

    def _tell(self, *, now: bool = False) -> None:
        # Invalidate ``now``, or for pending changes at most once per DEBOUNCE_MS.
        moment = time.monotonic()
        if now or (self._pending and moment - self._last_told >= DEBOUNCE_MS / 1000):
            self._pending, self._last_told = now and self._pending, moment
            try:
                if (invalidate := self._on_change()) is not None:
                    invalidate()
            except Exception as error:
                _log.warning("skill_watch_invalidate_failed", error=repr(error))


class RootWatch:
    """Watches a local provider's roots and invalidates its registrations on relevant changes."""

    def __init__(
        self, fixed_roots: Sequence[WatchedRoot], *, sweep_seconds: float = SWEEP_SECONDS
    ) -> None:
        self._state = state = _State(tuple(fixed_roots), sweep_seconds)
        self._handles: list[ProviderHandle] = []
        self._closed = False
        weakref.finalize(self, lambda: state.stop.set())  # the running thread's stop event

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
        if not self._handles:
            with self._state.lock:
                thread, self._state.thread = self._state.thread, None
                self._state.stop.set()
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def close(self) -> None:
        """Stop watching for good and invalidate once more (nothing is vouched for). Idempotent."""
        handles, self._closed = self._handles, True
        for handle in handles:
            self.detach(handle)  # the last one stops the thread
        for handle in handles:
            handle.invalidate()

    def cover(self, cwd: Hashable, project_roots: Sequence[WatchedRoot]) -> None:
        """Before a scan: unless its roots are watched, one invalidation follows once they are."""
        state, project = self._state, tuple(root.path for root in project_roots)
        with state.lock:
            beyond = project not in state.wanted and len(state.wanted) >= MAX_WATCHED_PROJECTS
            covered = state.mode in _HEALTHY and (project in state.active or beyond)
            state.unseen = state.unseen or not covered

    def start(self, cwd: Hashable, project_roots: Sequence[WatchedRoot]) -> None:
        """After a scan (not beside it, which it would slow down): watch ``cwd``'s project too
        (``cwd``: a lookup's working directory, with its additional directories if any)."""
        if not self._handles:  # none once closed
            return
        state, project, cwd = self._state, tuple(root.path for root in project_roots), cwd or None
        with state.lock:
            state.cwd_projects[cwd] = project
            state.cwd_projects.move_to_end(cwd)
            if len(state.cwd_projects) > _REMEMBERED_CWDS:
                state.cwd_projects.popitem(last=False)
            if project and len(state.wanted) < MAX_WATCHED_PROJECTS:
                state.wanted.add(project)
            if state.thread is None or not state.thread.is_alive():
                state.stop, state.mode, state.active = threading.Event(), "starting", frozenset()
                invalidate = weakref.WeakMethod(self._invalidate)
                run = _Loop(state, invalidate).run
                state.thread = threading.Thread(target=run, name=WATCHER_THREAD_NAME, daemon=True)
                state.thread.start()

    def vouches_for(self, cwd: Hashable) -> bool:
        """Whether catalogs for ``cwd`` may be cached (an invalidation follows if they go stale)."""
        with self._state.lock:
            project = self._state.cwd_projects.get(cwd or None)
            healthy = self._state.mode in ("starting", *_HEALTHY) and project is not None
            return healthy and (not project or project in self._state.wanted)

    def _invalidate(self) -> None:
        for handle in tuple(self._handles):
            handle.invalidate()
