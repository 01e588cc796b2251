"""``acp-skills new``: a skill to start from, where a project keeps its skills, never over one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_skills.cli.main import main
from tests.git_repos import repository, worktree


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository, with the current directory below its top."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    monkeypatch.chdir(tmp_path / "repo" / "src")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "repo"


@pytest.mark.parametrize(
    ("flags", "written"),
    [([], "release-notes/SKILL.md"), (["--flat"], "release-notes.md")],
    ids=["bundle", "flat"],
)
def test_new_writes_a_skill_that_passes_strict_validation(
    project: Path, capsys: pytest.CaptureFixture[str], flags: list[str], written: str
) -> None:
    """Written in the project's .agents/skills, found by discovery, and clean under --strict."""
    assert main(["new", "release-notes", *flags, "--json"]) == 0
    path = project / ".agents" / "skills" / written
    assert json.loads(capsys.readouterr().out) == {"path": str(path)}
    assert main(["validate", "--strict", "--json", str(path)]) == 0
    records = json.loads(capsys.readouterr().out)["diagnostics"]
    assert all(record["severity"] == "info" for record in records)
    assert main(["list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert "release-notes" in json.dumps(listed)


def test_new_never_overwrites_a_skill(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An existing SKILL.md is left as it was, and the command says so with status 1."""
    skill = project / ".agents" / "skills" / "mine" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("my own words\n")
    assert main(["new", "mine"]) == 1
    assert "exists already; nothing was written" in capsys.readouterr().out
    assert skill.read_text() == "my own words\n"


def test_new_takes_a_directory_and_refuses_a_bad_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dir chooses the skills directory; a name the runtime would skip is a usage error."""
    assert main(["new", "tidy", "--dir", str(tmp_path / "skills")]) == 0
    assert (tmp_path / "skills" / "tidy" / "SKILL.md").is_file()
    capsys.readouterr()
    assert main(["new", "Deploy App", "--dir", str(tmp_path / "skills")]) == 2
    assert "not a skill name: 'Deploy App'" in capsys.readouterr().out
    assert main(["new", "a" * 65, "--dir", str(tmp_path / "skills")]) == 2


def test_new_in_a_linked_worktree_writes_in_that_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worktree shares its repository's trust decision, not its files: the skill lands in
    the worktree the person works in."""
    main_tree = repository(tmp_path / "repo")
    linked = worktree(main_tree, tmp_path / "linked")
    monkeypatch.chdir(linked)
    assert main(["new", "tidy"]) == 0
    assert (linked / ".agents" / "skills" / "tidy" / "SKILL.md").is_file()
    assert not (main_tree / ".agents").exists()
