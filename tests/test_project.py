"""Which project a directory belongs to (contract §13a): real files, real git worktrees."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from acp_skills.project import Project, find_project
from tests.git_repos import FORGERIES, git, needs_git, needs_posix, repository, worktree


def real(path: Path) -> str:
    return str(path.resolve())


def own(path: Path) -> Project:
    """``path`` as a project of its own (its skills scanned, its own decision)."""
    return Project(real(path), real(path))


@needs_git
def test_a_git_worktree_is_scanned_itself_and_shares_the_repositorys_decision(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path / "main")
    tree = worktree(repo, tmp_path / "feature")
    (tree / "src").mkdir()
    assert find_project(tree / "src") == Project(real(tree), real(repo))
    assert find_project(repo) == own(repo)


@needs_git
def test_a_worktree_written_with_relative_paths_shares_the_decision_too(tmp_path: Path) -> None:
    """Git 2.48's ``worktree.useRelativePaths``: both pointers relative to their own place."""
    repo = repository(tmp_path / "main")
    tree = worktree(repo, tmp_path / "feature")
    admin = repo / ".git" / "worktrees" / "feature"
    (tree / ".git").write_text("gitdir: ../main/.git/worktrees/feature\n")
    (admin / "gitdir").write_text("../../../../feature/.git\n")
    assert find_project(tree) == Project(real(tree), real(repo))


@needs_git
def test_worktrees_of_a_bare_repository_share_a_decision_kept_under_it(tmp_path: Path) -> None:
    source = repository(tmp_path / "source")
    bare = tmp_path / "repo.git"
    git("clone", "-q", "--bare", str(source), str(bare), cwd=tmp_path)
    one, two = worktree(bare, tmp_path / "one"), worktree(bare, tmp_path / "two")
    assert find_project(one) == Project(real(one), real(bare))
    assert find_project(two).key == find_project(one).key


@needs_git
@FORGERIES
def test_a_git_file_git_would_not_count_as_a_worktree_makes_a_project_of_its_own(
    tmp_path: Path, forge: Callable[[Path], Path]
) -> None:
    evil = forge(repository(tmp_path / "trusted"))
    assert find_project(evil) == own(evil)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))


@pytest.mark.parametrize("make", [_fifo, _socket], ids=["fifo", "socket"])
@needs_posix
def test_a_git_that_is_neither_directory_nor_regular_file_is_no_marker(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    nested = repo / "nested"
    nested.mkdir()
    make(nested / ".git")
    assert find_project(nested) == Project(real(repo), real(repo))


@needs_git
@needs_posix
def test_a_git_link_to_a_worktrees_git_file_is_a_project_of_its_own(tmp_path: Path) -> None:
    repo = repository(tmp_path / "main")
    tree = worktree(repo, tmp_path / "feature")
    other = tmp_path / "other"
    other.mkdir()
    (other / ".git").symlink_to(tree / ".git")
    assert find_project(other) == own(other)


@needs_git
@pytest.mark.parametrize("pointer", ["commondir", "gitdir"])
@needs_posix
def test_a_fifo_among_a_worktrees_pointers_makes_a_project_of_its_own(
    tmp_path: Path, pointer: str
) -> None:
    """Opened without blocking: a FIFO never hangs the lookup, and is unreadable."""
    repo = repository(tmp_path / "main")
    tree = worktree(repo, tmp_path / "feature")
    admin = repo / ".git" / "worktrees" / "feature"
    (admin / pointer).unlink()
    os.mkfifo(admin / pointer)
    assert find_project(tree) == own(tree)


@needs_posix
def test_the_real_path_comes_first_then_dot_dot(tmp_path: Path) -> None:
    """``link/..`` is the parent of where the link leads, not the link's own directory."""
    outer, target = tmp_path / "outer", tmp_path / "repo" / "sub"
    (outer / ".git").mkdir(parents=True)
    target.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (outer / "link").symlink_to(target)
    repo = own(tmp_path / "repo")
    assert find_project(outer / "link") == repo
    assert find_project(f"{outer}/link/..") == repo


def test_a_file_means_the_directory_holding_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert find_project(tmp_path / "notes.txt") == find_project(tmp_path)


def test_a_path_the_platform_cannot_look_up_is_a_project_of_its_own(tmp_path: Path) -> None:
    assert find_project(f"{tmp_path}/a\0b") == Project(f"{tmp_path}/a\0b", f"{tmp_path}/a\0b")
