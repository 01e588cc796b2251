"""Which project a session is in, whose decision applies, and trust reads that cannot stall
anything (contract §13a), through the agent (the in-process rig) and the command line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_skills import LocalSkillProvider, SkillRegistry
from acp_skills.cli.main import main as cli
from acp_skills.trust import ProjectSource, TrustStore
from demo_agent.__main__ import parse_args as agent_args
from tests.acp_peer import connected, write_skill
from tests.git_repos import (
    FORGERIES,
    needs_git,
    needs_posix,
    points_at_a_forged_admin_dir,
    repository,
    worktree,
)

CliRun = Callable[..., tuple[int, str, str]]


@dataclass
class World:
    """A trusted repository (one skill, ``notes``), a home, and a trust file trusting it."""

    root: Path
    trusted: Path
    home: Path
    store: TrustStore

    def registry(self, agents_home: Path | None = None) -> SkillRegistry:
        registry = SkillRegistry()
        provider = LocalSkillProvider(
            dsh_home=str(self.home / ".dsh"),
            agents_home=str(agents_home or self.home / ".agents"),
            watch=False,
        )
        registry.register_provider(provider)
        return registry

    async def listed(
        self, cwd: Path | str, registry: SkillRegistry | None = None
    ) -> dict[str, str]:
        """Each skill a session at ``cwd`` lists (``_skills/list``), by name: its trust."""
        registry = registry or self.registry()
        async with connected(registry, trust="ask", trust_store=self.store) as peer:
            session_id = await peer.new_session(Path(cwd))
            listed = await peer.ext("skills/list", {"sessionId": session_id})
        return {entry["name"]: entry["trust"] for entry in listed["skills"]}


def skills_of(directory: Path) -> Path:
    return directory / ".agents" / "skills"


@pytest.fixture
def world(tmp_path: Path) -> World:
    trusted = repository(tmp_path / "trusted")
    write_skill(skills_of(trusted), "notes", "The trusted repository's notes.", body="Notes.")
    store = TrustStore(tmp_path / "config" / "trust.json")
    store.decide(ProjectSource(str(trusted.resolve())), "trusted")
    return World(tmp_path, trusted, tmp_path / "home", store)


def sneaky_skill(directory: Path) -> None:
    write_skill(skills_of(directory), "sneaky", "Not from the trusted repository.", body="x")


# -- which project, and whose decision --------------------------------------------------------


@pytest.mark.sdk
@needs_git
@FORGERIES
@pytest.mark.anyio
async def test_a_forged_git_file_never_inherits_a_trusted_repositorys_decision(
    world: World, forge: Callable[[Path], Path]
) -> None:
    """The directory is a project of its own: its skills wait for trust."""
    evil = forge(world.trusted)
    sneaky_skill(evil)
    assert (await world.listed(evil))["sneaky"] == "pending"


@needs_git
def test_forgetting_in_a_forged_directory_leaves_the_trusted_repository_alone(
    world: World, cli_run: CliRun
) -> None:
    evil = points_at_a_forged_admin_dir(world.trusted)
    status, out, _ = cli_run("trust", "--forget", str(evil))
    assert (status, out) == (0, f"no decision was stored for: {evil.resolve()}\n")
    assert world.store.read().decisions == {str(world.trusted.resolve()): "trusted"}


@pytest.mark.sdk
@needs_git
@pytest.mark.anyio
async def test_a_real_worktree_offers_its_own_skills_under_the_repositorys_decision(
    world: World,
) -> None:
    tree = worktree(world.trusted, world.root / "feature")
    write_skill(skills_of(tree), "feature-notes", "The worktree's own notes.", body="x")
    assert await world.listed(tree) == {"feature-notes": "trusted"}


@pytest.mark.sdk
@needs_git
@pytest.mark.anyio
@needs_posix
async def test_a_fifo_as_a_worktrees_commondir_never_stalls_the_agent(world: World) -> None:
    """The worktree is then a project of its own; the agent answers at once, and again."""
    tree = worktree(world.trusted, world.root / "feature")
    write_skill(skills_of(tree), "feature-notes", "The worktree's own notes.", body="x")
    commondir = world.trusted / ".git" / "worktrees" / "feature" / "commondir"
    commondir.unlink()
    os.mkfifo(commondir)
    assert await world.listed(tree) == {"feature-notes": "pending"}
    assert await world.listed(world.trusted) == {"notes": "trusted"}


@pytest.mark.sdk
@pytest.mark.anyio
@needs_posix
async def test_a_nested_directory_whose_git_is_a_fifo_is_not_a_project(world: World) -> None:
    """Neither scanned nor judged as its own: the session is in the trusted repository."""
    nested = world.trusted / "nested"
    sneaky_skill(nested)
    os.mkfifo(nested / ".git")
    assert await world.listed(nested) == {"notes": "trusted"}


@pytest.mark.sdk
@pytest.mark.anyio
async def test_skills_listed_before_their_project_changed_never_take_the_new_projects_decision(
    world: World,
) -> None:
    """A nested repository's listing, cached, outlives its ``.git``: its skills still wait."""
    nested = world.trusted / "vendor" / "nested"
    (nested / ".git").mkdir(parents=True)
    sneaky_skill(nested)
    registry = world.registry()  # not watched: its listing stays cached until a reload
    assert await world.listed(nested, registry) == {"sneaky": "pending"}
    await anyio.Path(nested / ".git").rmdir()
    assert await world.listed(nested, registry) == {"sneaky": "pending"}


@pytest.mark.sdk
@pytest.mark.parametrize("into", ["link", "link/.."], ids=["link", "link-dot-dot"])
@pytest.mark.anyio
@needs_posix
async def test_a_cwd_linked_from_an_untrusted_repository_is_scanned_and_judged_where_it_leads(
    world: World, into: str
) -> None:
    untrusted = world.root / "untrusted"
    (untrusted / ".git").mkdir(parents=True)
    sneaky_skill(untrusted)
    (world.trusted / "sub").mkdir()
    (untrusted / "link").symlink_to(world.trusted / "sub")
    assert await world.listed(f"{untrusted}/{into}") == {"notes": "trusted"}


@pytest.mark.sdk
@pytest.mark.parametrize("cwd", [".", "src/tool"], ids=["home", "below-home"])
@pytest.mark.anyio
async def test_home_as_a_project_keeps_the_persons_own_skills_ungated(
    world: World, cwd: str
) -> None:
    """A dotfiles repository at ``~``: ``~/.agents/skills`` stays the person's own root."""
    (world.home / ".git").mkdir(parents=True)
    write_skill(skills_of(world.home), "mine", "My own routine.", body="x")
    (world.home / cwd).mkdir(parents=True, exist_ok=True)
    listed = await world.listed(world.home / cwd, world.registry(world.home / ".agents"))
    assert listed == {"mine": "trusted"}


# -- bounded reads ------------------------------------------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _deeply_nested(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


@pytest.fixture(
    params=[pytest.param(_fifo, marks=needs_posix), _deeply_nested], ids=["fifo", "100000-brackets"]
)
def unreadable_trust_file(world: World, request: pytest.FixtureRequest) -> Path:
    """The world's trust file replaced by one no bounded read accepts."""
    path = Path(world.store.path)
    path.unlink()
    request.param(path)
    return path


@pytest.mark.sdk
@pytest.mark.anyio
async def test_an_unreadable_trust_file_grants_nothing_and_the_agent_keeps_serving(
    world: World, unreadable_trust_file: Path
) -> None:
    assert await world.listed(world.trusted) == {"notes": "pending"}
    assert await world.listed(world.trusted) == {"notes": "pending"}


def test_an_unreadable_trust_file_is_a_clean_error_on_the_command_line(
    unreadable_trust_file: Path, world: World, cli_run: CliRun
) -> None:
    status, out, err = cli_run("trust", "--list")
    assert status == 1
    assert out.startswith(f"{unreadable_trust_file}: cannot read trust decisions: ")
    assert out.count("\n") == 1
    assert "Traceback" not in err
    status, out, err = cli_run("list", "--cwd", str(world.trusted), "--trust", "ask", "--json")
    assert status == 0
    assert [skill["trust"] for skill in json.loads(out)["skills"]] == ["pending"]
    # Why the skill waits for trust, where the person looks: not the command it suggests.
    assert f"warning: {unreadable_trust_file}: cannot read trust decisions: " in err
    status, out, _ = cli_run("doctor", "--cwd", str(world.trusted), "--trust", "ask", "--json")
    assert status == 1
    (problem,) = [p for p in json.loads(out)["problems"] if p["code"] == "trust-file-unreadable"]
    assert problem["message"].startswith(f"{unreadable_trust_file}: cannot read trust decisions")


_opened_on_the_loop: list[str] | None = None


def _note_opens_on_the_event_loop(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or _opened_on_the_loop is None or not isinstance(args[0], str):
        return
    if os.path.basename(args[0]) not in (".git", "gitdir", "commondir", "trust.json"):
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread
    _opened_on_the_loop.append(args[0])


sys.addaudithook(_note_opens_on_the_event_loop)  # hooks stay for good: it records only below


@pytest.mark.sdk
@needs_git
@pytest.mark.anyio
async def test_reads_for_trust_never_run_on_the_event_loop(world: World) -> None:
    """A worktree's pointers and the trust file are read in worker threads."""
    global _opened_on_the_loop
    tree = worktree(world.trusted, world.root / "feature")
    write_skill(skills_of(tree), "feature-notes", "The worktree's own notes.", body="x")
    _opened_on_the_loop = []
    try:
        assert await world.listed(tree) == {"feature-notes": "trusted"}
        assert _opened_on_the_loop == []
    finally:
        _opened_on_the_loop = None


# -- the trust file and directories are the person's ------------------------------------------


@needs_posix
def test_a_linked_trust_file_stays_a_link_when_the_command_line_decides(
    world: World, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = world.root / "dotfiles" / "trust.json"
    target.parent.mkdir()
    os.replace(world.store.path, target)
    link = world.root / "linked" / "trust.json"
    link.parent.mkdir()
    link.symlink_to(target)
    monkeypatch.setenv("ACP_SKILLS_TRUST_FILE", str(link))
    assert cli_run("trust", "--refuse", str(world.trusted))[0] == 0
    assert link.is_symlink()
    assert TrustStore(target).read().decisions == {str(world.trusted.resolve()): "refused"}


def test_a_relative_xdg_config_home_never_reads_the_projects_own_trust_file(
    world: World, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started in a project, ``XDG_CONFIG_HOME=.config`` would name the project's directory."""
    evil = world.root / "evil"
    (evil / ".git").mkdir(parents=True)
    sneaky_skill(evil)
    TrustStore(evil / ".config" / "acp-skills" / "trust.json").decide(
        ProjectSource(str(evil.resolve())), "trusted"
    )
    monkeypatch.delenv("ACP_SKILLS_TRUST_FILE")
    monkeypatch.setenv("XDG_CONFIG_HOME", ".config")
    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.chdir(evil)
    status, out, _ = cli_run("list", "--trust", "ask", "--json")
    assert status == 0
    assert [skill["trust"] for skill in json.loads(out)["skills"]] == ["pending"]


@pytest.mark.parametrize("command", [["trust", "--list"], ["list"]], ids=["trust", "list"])
def test_the_command_line_refuses_a_relative_trust_file_variable(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("ACP_SKILLS_TRUST_FILE", "trust.json")
    status, out, err = cli_run(*command)
    assert (status, out) == (2, "")
    assert err.startswith("acp-skills: ACP_SKILLS_TRUST_FILE must be an absolute path")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "variables", "named"),
    [
        ([], {"ACP_SKILLS_TRUST_FILE": "trust.json"}, "ACP_SKILLS_TRUST_FILE"),
        (["--skills-dir", "skills"], {}, "--skills-dir"),
        ([], {"ACP_SKILLS_DIRS": f"/abs{os.pathsep}skills"}, "ACP_SKILLS_DIRS"),
    ],
    ids=["trust-file", "skills-dir", "skills-dirs-variable"],
)
def test_the_agent_refuses_a_relative_path_at_start_up(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    variables: dict[str, str],
    named: str,
) -> None:
    """One line naming the setting, status 2: the agent never starts."""
    for name in ("ACP_SKILLS_DIRS", "ACP_SKILLS_TRUST_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit:
        agent_args(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"acp-skills-demo: {named} must be an absolute path")
    assert err.count("\n") == 1


def test_the_command_line_resolves_a_relative_skills_dir_against_its_own_directory(
    world: World, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(world.root / "mine", "own", "My own skill.", body="x")
    world.home.mkdir()
    monkeypatch.chdir(world.root)
    status, out, _ = cli_run("list", "--skills-dir", "mine", "--cwd", str(world.home), "--json")
    assert status == 0
    assert [(s["name"], s["source"]) for s in json.loads(out)["skills"]] == [("own", "custom")]


# -- the command line, in process --------------------------------------------------------------


@pytest.fixture
def cli_run(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> CliRun:
    """``acp-skills ARGS`` in this process: (status, stdout, stderr), with the world's trust
    file and homes."""
    monkeypatch.setenv("ACP_SKILLS_TRUST_FILE", world.store.path)
    monkeypatch.setenv("DSH_HOME", str(world.home / ".dsh"))
    monkeypatch.setenv("DSH_AGENTS_HOME", str(world.home / ".agents"))
    monkeypatch.delenv("ACP_SKILLS_DIRS", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = cli(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run
