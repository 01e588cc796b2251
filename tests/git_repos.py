"""Real git repositories and worktrees for the tests of projects and trust (git is run here,
never by the library), and forged `.git` files that claim a trusted repository's decision."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
needs_posix = pytest.mark.skipif(
    sys.platform == "win32", reason="needs POSIX FIFOs, sockets and symbolic links"
)


def git(*args: str, cwd: Path) -> None:
    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def repository(path: Path) -> Path:
    """A git repository at ``path`` with one commit (so worktrees can be added)."""
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=path)
    (path / "README").write_text("x\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "first", cwd=path)
    return path


def worktree(repo: Path, path: Path) -> Path:
    """``git worktree add`` of ``repo`` at ``path``."""
    git("worktree", "add", "-q", str(path), cwd=repo)
    return path


# Ways a directory's `.git` file may claim a trusted repository's decision: each makes the
# claiming directory next to (or inside) ``trusted`` and returns it.


def _sibling(trusted: Path) -> Path:
    evil = trusted.parent / "evil"
    evil.mkdir()
    return evil


def points_at_the_trusted_git(trusted: Path) -> Path:
    evil = _sibling(trusted)
    (evil / ".git").write_text(f"gitdir: {trusted / '.git'}\n")
    return evil


def points_at_a_real_worktrees_admin_dir(trusted: Path) -> Path:
    # The back link names the real worktree's `.git`, not this one.
    worktree(trusted, trusted.parent / "real-worktree")
    evil = _sibling(trusted)
    (evil / ".git").write_text(f"gitdir: {trusted / '.git' / 'worktrees' / 'real-worktree'}\n")
    return evil


def points_at_a_forged_admin_dir(trusted: Path) -> Path:
    # Back link and commondir as git writes them, but the directory is not the repository's.
    evil = _sibling(trusted)
    forged = evil / "forged"
    forged.mkdir()
    (forged / "gitdir").write_text(f"{evil / '.git'}\n")
    (forged / "commondir").write_text(f"{trusted / '.git'}\n")
    (evil / ".git").write_text("gitdir: forged\n")
    return evil


def points_at_a_forged_worktrees_dir(trusted: Path) -> Path:
    evil = _sibling(trusted)
    forged = evil / "x" / "worktrees" / "w"
    forged.mkdir(parents=True)
    (forged / "gitdir").write_text(f"{evil / '.git'}\n")
    (forged / "commondir").write_text(f"{trusted / '.git'}\n")
    (evil / ".git").write_text(f"gitdir: {forged}\n")
    return evil


def poses_as_a_worktree_of_a_bare_repository(trusted: Path) -> Path:
    # Files inside the trusted work tree, laid out as a bare repository's worktree entry.
    evil = _sibling(trusted)
    admin = trusted / "worktrees" / "w"
    admin.mkdir(parents=True)
    (admin / "gitdir").write_text(f"{evil / '.git'}\n")
    (admin / "commondir").write_text("../..\n")
    (evil / ".git").write_text(f"gitdir: {admin}\n")
    return evil


def points_up_from_inside(trusted: Path) -> Path:
    package = trusted / "vendor" / "pkg"
    package.mkdir(parents=True)
    (package / ".git").write_text("gitdir: ../..\n")
    return package


FORGERIES = pytest.mark.parametrize(
    "forge",
    [
        points_at_the_trusted_git,
        points_at_a_real_worktrees_admin_dir,
        points_at_a_forged_admin_dir,
        points_at_a_forged_worktrees_dir,
        poses_as_a_worktree_of_a_bare_repository,
        points_up_from_inside,
    ],
    ids=[
        "trusted-git",
        "real-worktree-admin-dir",
        "forged-admin-dir",
        "forged-worktrees-dir",
        "work-tree-as-bare",
        "gitdir-dot-dot",
    ],
)
