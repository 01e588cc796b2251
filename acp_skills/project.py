"""Which project a directory belongs to (contract §13a), one answer for discovery (the skill
roots of ``root``) and trust (the decision stored under ``key``). Git is never run, and every
read is bounded; the reads block briefly, so async code calls `find_project` in a worker thread.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Final

from .confined import OPEN_FLAGS, read_path

# Git's pointer files are one line ("gitdir: PATH", a path, "../.."); a path is at most a few
# KiB on any platform. Anything longer is not one of them, and is never read whole.
MAX_POINTER_BYTES: Final = 4096
_POINTER_FLAGS: Final = OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0)
# The local provider's sources found in a project, and the directory of each (contract §5).
PROJECT_SKILL_DIRS: Final = {
    "project-dsh": ".dsh",
    "project-agents": ".agents",
    "project-claude": ".claude",
}


@dataclass(frozen=True, slots=True)
class Project:
    """The project of a directory: ``root`` holds its skill roots (the nearest directory with a
    ``.git`` marker, else the directory itself), ``key`` is where its trust decision is stored
    (``root``, or a linked worktree's main work tree). Real paths."""

    root: str
    key: str

    def skill_root(self, source: str) -> str:
        """The root of ``source`` (a key of `PROJECT_SKILL_DIRS`) in this project."""
        return os.path.join(self.root, PROJECT_SKILL_DIRS[source], "skills")


def find_project(path: str | os.PathLike[str]) -> Project:
    """The project of ``path``'s real path (links resolved before ``..``; a file means its
    directory): the nearest directory at or above it holding a ``.git`` directory or regular
    file (a FIFO, socket or device is no marker). Never raises: what cannot be read is no
    marker, or no shared worktree."""
    try:
        start = os.path.realpath(os.fspath(path))
        if os.path.exists(start) and not os.path.isdir(start):
            start = os.path.dirname(start)
    except (OSError, ValueError):  # a NUL in the path, a path over the platform's limit
        start = os.path.abspath(os.fspath(path))
        return Project(start, start)
    directory, parent = start, ""
    while parent != directory:
        # Links are followed, as git follows them; a `.git` file is read without following one
        # (`read_pointer`), so a link to a file never joins another repository's decision.
        try:
            mode = os.stat(os.path.join(directory, ".git")).st_mode
        except (OSError, ValueError):
            mode = 0
        if stat.S_ISDIR(mode):
            return Project(directory, directory)
        if stat.S_ISREG(mode):
            return Project(directory, _shared_worktree_key(directory) or directory)
        directory, parent = os.path.dirname(directory), directory
    return Project(start, start)


def _shared_worktree_key(directory: str) -> str | None:
    """The main work tree (or, for a bare repository, the common git directory) whose decision
    the linked worktree at ``directory`` shares, when git itself would count it as one: its
    ``.git`` names ``<common>/worktrees/<id>``, whose ``gitdir`` points back at that very
    ``.git`` and whose ``commondir`` names ``<common>``. Anything else: ``None``."""
    dot_git = os.path.join(directory, ".git")
    pointer = read_pointer(dot_git) or ""
    target = pointer.removeprefix("gitdir:").strip()
    if not pointer.startswith("gitdir:") or not target:
        return None
    admin = os.path.realpath(os.path.join(directory, target))
    # The back link: git writes the worktree's `.git` path into `<admin>/gitdir` (absolute, or
    # relative to the admin directory with `worktree.useRelativePaths`).
    back = read_pointer(os.path.join(admin, "gitdir"))
    common_text = read_pointer(os.path.join(admin, "commondir"))
    if back is None or not common_text or os.path.realpath(os.path.join(admin, back)) != dot_git:
        return None
    common = os.path.realpath(os.path.join(admin, common_text))
    # Git keeps a worktree's administrative directory in `<common>/worktrees/`, where the
    # repository lists it; one elsewhere was not made by the repository.
    if os.path.dirname(admin) != os.path.join(common, "worktrees"):
        return None
    if os.path.basename(common) == ".git":
        return os.path.dirname(common)
    # A bare repository (or one made with --separate-git-dir): its worktrees share a decision
    # kept under the git directory, unless that directory is a work tree itself.
    return None if os.path.lexists(os.path.join(common, ".git")) else common


def read_pointer(path: str) -> str | None:
    """One of git's pointer files, stripped; ``None`` when it is missing, a link, not a regular
    file, over `MAX_POINTER_BYTES`, not UTF-8 or more than one line."""
    try:
        read = read_path(path, MAX_POINTER_BYTES, _POINTER_FLAGS)
        text = read.decode("utf-8").strip() if isinstance(read, bytes) else "\n"
    except (OSError, ValueError):  # a `UnicodeDecodeError` is a `ValueError`
        return None
    return None if "\n" in text or "\0" in text else text
