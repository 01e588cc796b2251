"""Live reload (docs/reload.md): a local provider's skill roots, their directories watched
non-recursively with ``watchfiles.watch`` in one thread a `RootWatch` owns."""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

from watchfiles import Change, watch

from .diagnostics import Diagnostic
from .model import SKILL_FILE_NAME
from .quiet_log import get_logger

if TYPE_CHECKING:  # a type only: the registry is the layer above
    from .registry import ProviderHandle

_log = get_logger(__name__)

WATCHER_THREAD_NAME: Final = "acp-skills watcher"
# A batch ends after STEP_MS without a new change, DEBOUNCE_MS at the latest; the thread also
# looks for new projects that often.
STEP_MS: Final = 30
DEBOUNCE_MS: Final = 150
POLL_DELAY_MS: Final = 300
MAX_WATCHED_PROJECTS: Final = 32
_REMEMBERED_LOOKUPS: Final = 1024  # for `vouches_for`, and the projects to watch after a change
_RETRY_SECONDS: Final = 1.0  # a failed watch is tried again after this

Mode = Literal["off", "starting", "native", "polling", "failed"]
_Project = tuple[str, ...]  # a project's skill roots
_Batch = set[tuple[Change, str]]


class WatchPlan(NamedTuple):
    """What one watch covers. ``anchors``: each root with its parent resolved."""

    directories: frozenset[str]
    roots: frozenset[str]
    anchors: frozenset[str]
    bundles: frozenset[str]
    targets: frozenset[str]


def plan_watches(roots: Iterable[str]) -> WatchPlan:
    """What to watch for the skill ``roots`` (absolute paths) as they are now."""
    directories, existing, anchors, bundles, targets = (set[str]() for _ in WatchPlan._fields)

    def watch_target(link: str) -> None:
        targets.add(target := os.path.realpath(link))
        if _is_watchable(os.path.dirname(target)):
            directories.add(os.path.dirname(target))

    for root in roots:
        anchor = os.path.join(os.path.realpath(os.path.dirname(root)), os.path.basename(root))
        anchors.add(anchor)
        if not os.path.isdir(root):
            nearest = os.path.dirname(anchor)  # a missing root: its nearest existing ancestor
            while not os.path.isdir(nearest) and nearest != os.path.dirname(nearest):
                nearest = os.path.dirname(nearest)
            directories.add(nearest)
            continue
        if os.path.islink(root):
            directories.add(os.path.dirname(anchor))  # the link may be re-pointed
        if not _is_watchable(resolved := os.path.realpath(root)):
            continue  # the provider cannot list it either
        existing.add(resolved)
        directories.add(resolved)
        try:
            with os.scandir(resolved) as listing:
                entries = list(listing)
        except OSError:
            entries = []
        for entry in entries:
            if entry.is_dir():  # following a link, from the listing itself otherwise
                bundle = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                if _is_watchable(bundle):
                    directories.add(bundle)
                    bundles.add(bundle)
                    if os.path.islink(skill := os.path.join(bundle, SKILL_FILE_NAME)):
                        watch_target(skill)
            elif entry.name.endswith(".md") and entry.is_symlink():
                watch_target(entry.path)
    return WatchPlan(*map(frozenset, (directories, existing, anchors, bundles, targets)))


def _is_watchable(directory: str) -> bool:
    return os.path.isdir(directory) and os.access(directory, os.R_OK | os.X_OK)


def matters(plan: WatchPlan, change: Change, path: str) -> bool:
    """Whether a change the watch of ``plan`` reports can change what is listed."""
    parent, name = os.path.split(path)
    if path in plan.targets or (name == SKILL_FILE_NAME and parent in plan.bundles):
        return True
    if change is not Change.modified:
        if path in plan.directories:
            return True  # a watched directory went away
        if any(anchor == path or anchor.startswith(path + os.sep) for anchor in plan.anchors):
            return True  # a root, or a directory on the way to one, came, went or was re-pointed
    if parent not in plan.roots:
        return False
    if change is Change.deleted:
        return True  # it may have been a bundle: nothing can tell any more
    return change is Change.added if os.path.isdir(path) else name.endswith(".md")


def _relevant(plan: WatchPlan, batch: _Batch) -> _Batch:
    """The changes of ``batch`` that matter to ``plan``, logged when there are any."""
    if relevant := {(change, path) for change, path in batch if matters(plan, change, path)}:
        paths = sorted(path for _, path in relevant)[:20]
        _log.debug("skill_watch_changes", changes=len(relevant), paths=paths)
    return relevant


class _Watcher:
    # The thread's side (one at a time), shared with `RootWatch` under ``lock``; not `RootWatch`,
    # whose handles the thread must not keep alive. Every watch that goes live invalidates once.
    def __init__(
        self, fixed_roots: Sequence[str], on_change: weakref.WeakMethod[Callable[[], None]]
    ) -> None:
        self.fixed_roots, self.on_change = tuple(fixed_roots), on_change
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.lookup_projects: OrderedDict[Hashable, _Project] = OrderedDict()
        self.wanted: set[_Project] = set()
        self.mode: Mode = "off"
        self.thread: threading.Thread | None = None
        self._changes: Generator[_Batch, None, None] | None = None
        self._plan: WatchPlan | None = None
        self._projects: frozenset[_Project] | None = None  # those the watch covers
        self._replan = False
        # watchfiles' own switch, read here too so that `mode` can say "polling".
        switch = os.environ.get("WATCHFILES_FORCE_POLLING", "").lower()
        self._polling = switch not in ("", "false", "disable", "disabled")

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    self._step()
                except Exception as error:
                    self._close()
                    with self.lock:
                        previous, self.mode = self.mode, "failed"
                    reason = f"{type(error).__name__}: {error}"
                    if previous == "failed":
                        _log.debug("skill_watch_failed", reason=reason)
                    else:
                        consequence = "skill catalogs are not cached until watching recovers"
                        _log.warning("skill_watch_failed", reason=reason, consequence=consequence)
                        self._invalidate()  # what was cached can no longer be vouched for
                    self.stop.wait(_RETRY_SECONDS)
        finally:
            self._close()
            with self.lock:
                self.mode = "off"
            _log.debug("skill_watch_stopped")

    def _step(self) -> None:
        with self.lock:
            projects = frozenset(self.wanted)
        changed = False
        if projects != self._projects or self._replan:
            changed = self._reopen(projects)
        if self._changes is None or (plan := self._plan) is None:  # planned at the next step
            return
        if _relevant(plan, next(self._changes, set())):  # every change: only those that matter
            self._replan = changed = True
            with self.lock:  # a change clears every cache: watch the projects listed last
                recent = dict.fromkeys(p for p in reversed(self.lookup_projects.values()) if p)
                self.wanted = set(list(recent)[:MAX_WATCHED_PROJECTS])
        if changed:
            self._invalidate()

    def _reopen(self, projects: frozenset[_Project]) -> bool:
        # Whether a new watch went live.
        self._projects, self._replan = projects, False
        roots = [*self.fixed_roots, *(p for ps in projects for p in ps)]
        plan = plan_watches(roots)
        if plan == self._plan and self._changes is not None:
            return False
        try:
            changes, first = self._open(plan)  # never empty: the user roots are always there
        except FileNotFoundError:
            self._replan = True  # a directory went away since it was planned: plan again
            self.stop.wait(STEP_MS / 1000)
            return False
        if self._changes is not None:
            self._changes.close()  # the new watch is live first: nothing falls in between
        self._changes, self._plan = changes, plan
        # Planned again after a change that matters, or a bundle made after planning but before
        # the watch was live (its creation unseen, so it is not watched yet).
        self._replan = bool(_relevant(plan, first)) or plan_watches(roots) != plan
        mode: Mode = "polling" if self._polling else "native"
        with self.lock:
            previous, self.mode = self.mode, mode
        if previous == "failed":
            _log.info("skill_watch_recovered", mode=mode, directories=len(plan.directories))
        elif previous != mode:
            _log.debug("skill_watch_started", mode=mode, directories=len(plan.directories))
        return True

    def _open(self, plan: WatchPlan) -> tuple[Generator[_Batch, None, None], _Batch]:
        while True:
            changes = watch(
                *sorted(plan.directories),
                # Every change comes back, filtered by `_step`: with a filter here, a log written
                # without pause beside a missing root would keep the thread in this generator.
                watch_filter=None,
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                stop_event=self.stop,
                rust_timeout=STEP_MS,  # back every step when quiet, to look for new projects
                yield_on_timeout=True,
                debug=False,  # stdout may be the protocol
                force_polling=True if self._polling else None,
                poll_delay_ms=POLL_DELAY_MS,
                recursive=False,
            )
            try:
                return changes, next(changes, set())  # opens the watch: live once this returns
            except (OSError, RuntimeError) as error:
                if self._polling or isinstance(error, FileNotFoundError):
                    raise
                # The inotify watch or instance limit, or no inotify at all: polling from now on.
                self._polling = True
                reason = f"native file watching is unavailable ({error})"
                _log.warning("skill_watch_polling", reason=reason, poll_delay_ms=POLL_DELAY_MS)

    def _close(self) -> None:
        if self._changes is not None:
            self._changes.close()
        self._changes, self._plan, self._projects = None, None, None

    def _invalidate(self) -> None:
        if (invalidate := self.on_change()) is not None:  # the provider is still there
            invalidate()


class RootWatch:
    """Watches a local provider's roots and invalidates its registrations on relevant changes."""

    def __init__(self, fixed_roots: Sequence[str], *, enabled: bool) -> None:
        self._watcher = watcher = _Watcher(fixed_roots, weakref.WeakMethod(self._invalidate))
        self._handles: list[ProviderHandle] = []
        self._enabled, self._closed = enabled, not enabled  # disabled: never started, vouches
        weakref.finalize(self, lambda: watcher.stop.set())  # the running thread's stop event

    @property
    def mode(self) -> Mode:
        """``off``, ``starting``, ``native``, ``polling`` or ``failed``."""
        return self._watcher.mode

    def attach(self, handle: ProviderHandle) -> None:
        """Invalidate ``handle`` on relevant changes once watching; starts nothing."""
        if not self._closed:
            self._handles.append(handle)

    def detach(self, handle: ProviderHandle) -> None:
        """Stop invalidating ``handle``; the last one detached stops the thread."""
        self._handles = [kept for kept in self._handles if kept is not handle]
        if not self._handles:
            with self._watcher.lock:
                thread = self._watcher.thread
                self._watcher.stop.set()
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def close(self) -> None:
        """Stop watching for good and invalidate once more (nothing is vouched for)."""
        handles, self._closed = self._handles, True
        for handle in handles:
            self.detach(handle)  # the last one stops the thread
        for handle in handles:
            handle.invalidate()

    def start(self, lookup: Hashable, project_roots: Sequence[str]) -> None:
        """After a scan, never beside it: watch ``lookup``'s project too (docs/reload.md)."""
        if not self._handles:  # none once closed
            return
        watcher, project = self._watcher, tuple(project_roots)
        with watcher.lock:
            watcher.lookup_projects[lookup] = project
            watcher.lookup_projects.move_to_end(lookup)
            if len(watcher.lookup_projects) > _REMEMBERED_LOOKUPS:
                watcher.lookup_projects.popitem(last=False)
            if project and len(watcher.wanted) < MAX_WATCHED_PROJECTS:
                watcher.wanted.add(project)
            if watcher.thread is None or not watcher.thread.is_alive():
                watcher.stop, watcher.mode = threading.Event(), "starting"
                watcher.thread = threading.Thread(
                    target=watcher.run, name=WATCHER_THREAD_NAME, daemon=True
                )
                watcher.thread.start()

    def vouches_for(self, lookup: Hashable) -> bool:
        """Whether ``lookup``'s catalogs may be cached (an invalidation follows if stale)."""
        if not self._enabled:
            return True
        watcher = self._watcher
        with watcher.lock:
            project = watcher.lookup_projects.get(lookup)
            healthy = watcher.mode in ("starting", "native", "polling") and project is not None
            return healthy and (not project or project in watcher.wanted)

    def _invalidate(self) -> None:
        for handle in tuple(self._handles):
            handle.invalidate()


MAX_REMEMBERED_PROBLEMS: Final = 4096  # the oldest forgotten first: memory stays bounded


def fresh_problems(
    logged: dict[Diagnostic, None], records: Iterable[Diagnostic], roots: Sequence[str]
) -> list[Diagnostic]:
    """The records of one discovery of ``roots`` not in ``logged`` (added to it): live reload
    discovers at every edit, and a problem is logged once, again only once gone and come back."""
    current = dict.fromkeys(records)
    inside = tuple(os.path.join(root, "") for root in roots)
    # Forgotten when this discovery no longer meets it: logged again if it comes back.
    for record in [record for record in logged if record not in current]:
        if (path := record.path) is not None and (path in roots or path.startswith(inside)):
            del logged[record]
    fresh = [record for record in current if record not in logged]
    logged.update(current)
    while len(logged) > MAX_REMEMBERED_PROBLEMS:
        del logged[next(iter(logged))]
    return fresh
