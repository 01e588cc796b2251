"""Which project a directory belongs to (contract §13a), for discovery and trust alike.

`find_project` is the one answer: the local provider scans the skill roots of its ``root``, and
trust looks up the decision stored under its ``key``. Both come from one call, so the provider
never scans a directory whose decision is looked up elsewhere.

Git is never run. A linked worktree shares its repository's decision only when git itself
counts it as one of the repository's worktrees: its ``.git`` file names an administrative
directory ``<common>/worktrees/<id>`` whose ``gitdir`` file points back at that very ``.git``
file and whose ``commondir`` names ``<common>``. Any other pointer (at a trusted repository's
``.git``, at a directory the pointing repository made up, ``gitdir: ../..``) leaves the
directory a project of its own.

Every read here is bounded: pointer files are opened without blocking and without following a
final symbolic link, must be regular files, and are read up to 4 KiB; anything else counts as
unreadable, which leaves the directory a project of its own. The reads block (briefly): async
code calls `find_project` in a worker thread.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Final

from .confined import OPEN_FLAGS, read_descriptor

# Git's own pointer files are one line ("gitdir: PATH", a path, "../.."); a path is at most a
# few KiB on any platform. Anything longer is not one of them, and is never read whole.
MAX_POINTER_BYTES: Final = 4096
_POINTER_FLAGS: Final = OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0)
_GITDIR_PREFIX: Final = "gitdir:"


# The local provider's sources found in a project, and the directory of each (contract §5).
PROJECT_SKILL_DIRS: Final = {
    "project-dsh": ".dsh",
    "project-agents": ".agents",
    "project-claude": ".claude",
}


@dataclass(frozen=True, slots=True)
class Project:
    """The project of a directory: ``root`` is where its skill roots are (the nearest directory
    holding a ``.git`` marker, else the directory itself), ``key`` the directory whose trust
    decision applies (``root`` itself, or a linked worktree's main work tree). Real paths."""

    root: str
    key: str

    def skill_root(self, source: str) -> str:
        """The root of ``source`` (a key of `PROJECT_SKILL_DIRS`) in this project."""
        return os.path.join(self.root, PROJECT_SKILL_DIRS[source], "skills")


def find_project(path: str | os.PathLike[str]) -> Project:
    """The project ``path`` belongs to, on the local disk, by real path.

    The real path comes first (symbolic links resolved, then ``..``), so a link into another
    repository, or ``link/..``, means where it leads. The nearest directory at or above it that
    holds a ``.git`` directory or regular file is the project; a ``.git`` of another type (a
    FIFO, a socket, a device) is no marker. A path to a file means the directory holding it.
    Never raises: what cannot be read is not a marker, or not a shared worktree.
    """
    try:
        start = os.path.realpath(os.fspath(path))
        if os.path.exists(start) and not os.path.isdir(start):
            start = os.path.dirname(start)
    except (OSError, ValueError):  # a NUL in the path, a path over the platform's limit
        start = os.path.abspath(os.fspath(path))
        return Project(start, start)
    directory, parent = start, ""
    while parent != directory:
        kind = _marker_kind(os.path.join(directory, ".git"))
        if kind == "dir":
            return Project(directory, directory)
        if kind == "file":
            return Project(directory, _shared_worktree_key(directory) or directory)
        directory, parent = os.path.dirname(directory), directory
    return Project(start, start)


def _marker_kind(dot_git: str) -> str | None:
    # Links are followed, as git follows them: a `.git` link to a directory is a repository
    # (keyed by the directory holding the link); a link to a file is read without following
    # it below, so it never joins another repository's decision.
    try:
        mode = os.stat(dot_git).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else None


def _shared_worktree_key(directory: str) -> str | None:
    """The main work tree (or the common git directory, for a bare repository) whose decision
    the linked worktree at ``directory`` shares, or ``None`` when git would not count it as one
    of that repository's worktrees."""
    dot_git = os.path.join(directory, ".git")
    if (pointer := read_pointer(dot_git)) is None or not pointer.startswith(_GITDIR_PREFIX):
        return None
    if not (target := pointer.removeprefix(_GITDIR_PREFIX).strip()):
        return None
    admin = os.path.realpath(os.path.join(directory, target))
    # The back link: git writes the worktree's `.git` path into `<admin>/gitdir` (absolute, or
    # relative to the admin directory with `worktree.useRelativePaths`).
    back = read_pointer(os.path.join(admin, "gitdir"))
    if back is None or os.path.realpath(os.path.join(admin, back)) != dot_git:
        return None
    if not (common_text := read_pointer(os.path.join(admin, "commondir"))):
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
        fd = os.open(path, _POINTER_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        read = read_descriptor(fd, MAX_POINTER_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not isinstance(read, tuple):
        return None
    try:
        text = read[1].decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    return None if "\n" in text or "\0" in text else text
