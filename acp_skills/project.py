"""Which project a directory belongs to (contract §13a), for discovery and trust alike. Git is
never run; reads are bounded but block briefly: async code calls `find_project` in a thread."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from .fs import OPEN_FLAGS, read_path

# Git's pointer files are one line ("gitdir: PATH", a path, "../.."), a few KiB at most.
MAX_POINTER_BYTES: Final = 4096
_POINTER_FLAGS: Final = OPEN_FLAGS | os.O_NOFOLLOW  # a link is no pointer: it is not followed
# The local provider's sources found in a project, and the directory of each (contract §5).
PROJECT_SKILL_DIRS: Final = {
    "project-dsh": ".dsh",
    "project-agents": ".agents",
    "project-claude": ".claude",
}


@dataclass(frozen=True, slots=True)
class Project:
    """A directory's project, by real paths: ``root`` holds its skill roots, ``key`` is where
    its trust decision is stored (``root``, or a linked worktree's main work tree)."""

    root: str
    key: str

    def skill_root(self, source: str) -> str:
        """The root of ``source`` (a key of `PROJECT_SKILL_DIRS`) in this project."""
        return os.path.join(self.root, PROJECT_SKILL_DIRS[source], "skills")


def find_project(path: str | os.PathLike[str]) -> Project:
    """The project of ``path``'s real path (docs/trust.md, "Which project"); never raises."""
    if "\0" in (given := os.fspath(path)):  # no directory has such a name: its own project
        return Project(os.path.abspath(given), os.path.abspath(given))
    start = os.path.realpath(given)
    if os.path.exists(start) and not os.path.isdir(start):
        start = os.path.dirname(start)
    directory, parent = start, ""
    while parent != directory:
        # Links followed, as git follows them (a `.git` file is read without: `_pointer`).
        if os.path.isdir(marker := os.path.join(directory, ".git")):
            return Project(directory, directory)
        if os.path.isfile(marker):
            return Project(directory, _main_work_tree(directory) or directory)
        directory, parent = os.path.dirname(directory), directory
    return Project(start, start)


def _main_work_tree(directory: str) -> str | None:
    """Where a worktree git counts as one keeps its decision (docs/trust.md, "Which project")."""
    dot_git = os.path.join(directory, ".git")
    if not (pointer := _pointer(directory, ".git") or "").startswith("gitdir:"):
        return None
    admin = os.path.realpath(os.path.join(directory, pointer.removeprefix("gitdir:").strip()))
    # Git writes the `.git` path into `<admin>/gitdir`, absolute or relative to `<admin>`.
    back, common = _pointer(admin, "gitdir"), _pointer(admin, "commondir")
    if not (back and common) or os.path.realpath(os.path.join(admin, back)) != dot_git:
        return None
    common = os.path.realpath(os.path.join(admin, common))
    if os.path.dirname(admin) != os.path.join(common, "worktrees"):
        return None  # git keeps the worktrees it lists there: one elsewhere is not the repository's
    if os.path.basename(common) == ".git":
        return os.path.dirname(common)
    # A bare repository (or a --separate-git-dir): its own decision, unless it is a work tree.
    return None if os.path.lexists(os.path.join(common, ".git")) else common


def _pointer(directory: str, name: str) -> str | None:
    # A regular file, not a link, of one UTF-8 line within `MAX_POINTER_BYTES`; else `None`.
    try:
        read = read_path(os.path.join(directory, name), MAX_POINTER_BYTES, _POINTER_FLAGS)
        text = read.decode("utf-8").strip() if isinstance(read, bytes) else "\n"
    except (OSError, ValueError):  # a `UnicodeDecodeError` is a `ValueError`
        return None
    return None if "\n" in text or "\0" in text else text
