"""Real git repositories and worktrees for the tests of projects and trust (git is run here,
never by the library)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


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
