"""The live-reload safety sweep (docs/reload.md): a cheap fingerprint of what discovery would
see in the watched roots, compared now and then, for changes the watch never reported (events
the kernel dropped on a queue overflow, an edit through a hard link outside the roots)."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from typing import Final

from .model import SKILL_FILE_NAME

SWEEP_SECONDS: Final = 5.0
# A sweep may take at most this share of the watcher thread's time: the next one waits at least
# this many times as long as the last one took.
SWEEP_COST_FACTOR: Final = 100

# One stat of a skill file: which file (a replaced file is a new inode), its size and mtime
# (written in place), its ctime (its mode or owner changed, so it may no longer be readable).
FileStamp = tuple[int, int, int, int] | None  # None: missing or unreadable
# A root's entries that discovery reads: name -> (is a bundle, the stamp of its skill file).
RootFingerprint = dict[str, tuple[bool, FileStamp]] | None  # None: the root cannot be listed
# A root as `acp_skills.watch.WatchedRoot` has it: its path, and whether it skips ``.system``.
Root = tuple[str, bool]


def root_entries(path: str, *, skips_system: bool = False) -> list[tuple[os.DirEntry[str], bool]]:
    """The entries of a skills root that discovery reads, each with whether it is a bundle
    directory (links followed): every directory and ``*.md`` file, but ``.system`` where the
    root skips it; ``OSError`` if the root cannot be listed. Nothing else can change what is
    listed (`acp_skills.watch.is_relevant_change`)."""
    with os.scandir(path) as listing:
        entries = list(listing)
    found = []
    for entry in entries:
        if skips_system and entry.name == ".system":
            continue
        try:
            is_dir = entry.is_dir()  # follows a link, as discovery does
        except OSError:
            is_dir = False
        if is_dir or entry.name.endswith(".md"):
            found.append((entry, is_dir))
    return found


def _stamp(path: str) -> FileStamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def fingerprint_root(path: str, *, skips_system: bool = False) -> RootFingerprint:
    """What a rescan of the root at ``path`` depends on: one ``scandir``, a ``stat`` per skill."""
    try:
        entries = root_entries(path, skips_system=skips_system)
    except OSError:
        return None
    found: dict[str, tuple[bool, FileStamp]] = {}
    for entry, bundle in entries:
        skill_file = os.path.join(entry.path, SKILL_FILE_NAME) if bundle else entry.path
        found[entry.name] = (bundle, _stamp(skill_file))
    return found


def fingerprint(roots: Iterable[Root]) -> dict[str, RootFingerprint]:
    """`fingerprint_root` of every root, by path."""
    return {path: fingerprint_root(path, skips_system=skips) for path, skips in roots}


class SafetySweep:
    """The watcher thread's sweep: a baseline taken when a watch goes live, compared at most
    every ``interval`` seconds (less often when a sweep is slow, see `SWEEP_COST_FACTOR`)."""

    def __init__(self, interval: float = SWEEP_SECONDS) -> None:
        self._interval = interval
        self._roots: tuple[Root, ...] = ()
        self._baseline: dict[str, RootFingerprint] = {}
        self._next_at: float | None = None  # None: nothing to sweep

    def cover(self, roots: Iterable[Root]) -> None:
        """Sweep ``roots`` from now on (a watch covering them is live): the baseline of a root
        not swept before is taken now; the others keep theirs, so that nothing that changed
        unreported while the watch was reopened is forgotten."""
        self._roots = tuple(dict.fromkeys(roots))
        kept = {path: self._baseline[path] for path, _ in self._roots if path in self._baseline}
        started = time.monotonic()
        self._baseline = kept | fingerprint(r for r in self._roots if r[0] not in kept)
        if self._next_at is None:
            self._next_at = self._after(started)

    def stop(self) -> None:
        """Sweep nothing until the next `cover` (no watch, or one that polls anyway)."""
        self._roots, self._baseline, self._next_at = (), {}, None

    def due(self) -> bool:
        """Whether a sweep is due now."""
        return self._next_at is not None and time.monotonic() >= self._next_at

    def sweep(self) -> tuple[list[str], bool]:
        """Fingerprint the roots again: the roots whose fingerprint changed since the last one,
        and whether any root's entries came, went or changed kind (not only a file's stamp)."""
        started = time.monotonic()
        current = fingerprint(self._roots)
        self._next_at = self._after(started)
        changed = [path for path, found in current.items() if self._baseline.get(path) != found]
        structural = any(
            _kinds(self._baseline.get(path)) != _kinds(current[path]) for path in changed
        )
        self._baseline = current
        return changed, structural

    def _after(self, started: float) -> float:
        ended = time.monotonic()
        return ended + max(self._interval, SWEEP_COST_FACTOR * (ended - started))


def _kinds(found: RootFingerprint) -> dict[str, bool] | None:
    return None if found is None else {name: bundle for name, (bundle, _) in found.items()}
