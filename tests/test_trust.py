"""The trust store and project identity (contract §13): real files, a real git worktree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from acp_skills import SkillCandidate
from acp_skills.trust import (
    Decision,
    Pair,
    ProjectSource,
    ServerSource,
    StoredTrust,
    TrustFileError,
    TrustMode,
    TrustSource,
    TrustStore,
    default_trust_file,
    project_of,
    shown_items,
    trust_mode,
    trust_states,
)


def _git(*args: str, cwd: Path) -> None:
    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_a_path_inside_a_repository_or_a_link_to_it_means_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    (tmp_path / "link").symlink_to(repo)
    assert project_of(repo / "src" / "deep") == ProjectSource(str(repo.resolve()))
    assert project_of(tmp_path / "link" / "src") == ProjectSource(str(repo.resolve()))
    assert project_of(repo).label == "repo"


def test_a_directory_outside_any_repository_is_its_own_project(tmp_path: Path) -> None:
    assert project_of(tmp_path).key == str(tmp_path.resolve())


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_worktrees_of_one_repository_share_one_decision(tmp_path: Path) -> None:
    repo = tmp_path / "main"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "README").write_text("x\n")
    _git("add", "README", cwd=repo)
    _git("commit", "-q", "-m", "first", cwd=repo)
    _git("worktree", "add", "-q", str(tmp_path / "feature"), cwd=repo)
    assert (tmp_path / "feature" / ".git").is_file()
    store = TrustStore(tmp_path / "config" / "trust.json")
    store.decide(project_of(tmp_path / "feature"), "trusted")
    assert store.decision(project_of(repo)) == "trusted"
    assert project_of(tmp_path / "feature") == project_of(repo)


def test_decisions_are_stored_atomically_outside_the_project(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "config" / "acp-skills" / "trust.json")
    project = ProjectSource(str(tmp_path / "p"))
    store.decide(project, "refused")
    data = json.loads(Path(store.path).read_text())
    assert data == {"projects": [{"path": project.key, "decision": "refused"}]}
    store.decide(project, None)
    assert store.decisions() == {}
    # Nothing left behind by the atomic write.
    # No temporary file is left behind (the lock file beside it stays, empty).
    assert sorted(os.listdir(os.path.dirname(store.path))) == ["trust.json", "trust.json.lock"]


def test_a_broken_trust_file_is_an_error_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    path.write_text("{not json")
    with pytest.raises(TrustFileError, match="cannot read"):
        TrustStore(path).decide(ProjectSource("/x"), "trusted")
    assert path.read_text() == "{not json"


def test_the_trust_file_follows_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACP_SKILLS_TRUST_FILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/cfg")
    assert default_trust_file() == "/cfg/acp-skills/trust.json"
    monkeypatch.setenv("ACP_SKILLS_TRUST_FILE", "/elsewhere/t.json")
    assert default_trust_file() == "/elsewhere/t.json"


def test_modes() -> None:
    assert trust_mode(None) == "ask"
    assert trust_mode(" ALL ") == "all"
    assert trust_mode("none") == "none"
    with pytest.raises(ValueError, match="unknown mode"):
        trust_mode("yes")


def _skill(name: str, source: str) -> SkillCandidate:
    return SkillCandidate(name=name, description="d", source=source, rank=0)


def _states(
    skills: list[SkillCandidate],
    sources: dict[str, TrustSource],
    decisions: dict[str, Decision],
    mode: TrustMode,
    grants: dict[str, frozenset[Pair]] | None = None,
    served: dict[str, frozenset[Pair]] | None = None,
) -> list[str]:
    stored = StoredTrust(decisions, served or {})
    states = trust_states(skills, lambda skill: sources.get(skill.source), stored, mode, grants)
    return [states[skill] for skill in skills]


def test_trust_states_per_mode_decision_and_session_grant() -> None:
    own, mine = _skill("a", "user-agents"), _skill("b", "project-agents")
    project = ProjectSource("/p")
    source_of: dict[str, TrustSource] = {"project-agents": project}
    assert _states([own, mine], source_of, {}, "ask") == ["trusted", "pending"]
    assert _states([mine], source_of, {}, "all") == ["trusted"]
    assert _states([own, mine], source_of, {}, "none") == ["trusted", "refused"]
    assert _states([mine], source_of, {"/p": "refused"}, "ask") == ["refused"]
    assert _states([mine], source_of, {"/p": "trusted"}, "ask") == ["trusted"]
    once = {"/p": shown_items(mine, project)}
    assert _states([mine], source_of, {}, "ask", once) == ["session"]
    # A once-answer admits what its question showed: another skill of the project waits.
    assert _states([_skill("c", "project-agents")], source_of, {}, "ask", once) == ["pending"]


_SKILL_MD = ("skill://a/SKILL.md", "sha256:1")


def test_a_trusted_server_covers_only_the_pairs_it_was_trusted_with() -> None:
    server = ServerSource("docs", "docs=https://mcp.example/x", frozenset({_SKILL_MD}))
    skill = _skill("a", "mcp:docs")
    sources: dict[str, TrustSource] = {"mcp:docs": server}
    trusted: dict[str, Decision] = {server.key: "trusted"}
    assert _states([skill], sources, trusted, "ask", served={server.key: server.items}) == [
        "trusted"
    ]
    # Trusted with nothing of this skill (a new skill, or a decision without pairs): pending.
    assert _states([skill], sources, trusted, "ask") == ["pending"]
    changed = ServerSource("docs", server.endpoint, frozenset({("skill://a/SKILL.md", "sha256:2")}))
    served = {server.key: server.items}
    states = trust_states([skill], lambda _: changed, StoredTrust(trusted, served), "ask")
    assert (states[skill], states.change(skill)) == ("pending", "changed")
    other = ServerSource("docs", server.endpoint, frozenset({("skill://b/SKILL.md", "sha256:3")}))
    states = trust_states([skill], lambda _: other, StoredTrust(trusted, served), "ask")
    assert (states[skill], states.change(skill)) == ("pending", "new")
    # A refusal holds for the server whatever it serves; a once-grant admits the pairs shown.
    assert _states([skill], sources, {server.key: "refused"}, "ask") == ["refused"]
    assert _states([skill], sources, trusted, "ask", {server.key: server.items}) == ["session"]
    assert _states([skill], sources, trusted, "ask", {server.key: changed.items}) == ["pending"]


def test_trusting_a_server_stores_its_pairs_and_replaces_those_of_the_same_uris(
    tmp_path: Path,
) -> None:
    store = TrustStore(tmp_path / "trust.json")
    endpoint = "team=uvx team-skills"
    first = frozenset({_SKILL_MD, ("skill://b/SKILL.md", "sha256:b")})
    store.decide(ServerSource("team", endpoint, first), "trusted")
    store.decide(
        ServerSource("team", endpoint, frozenset({("skill://a/SKILL.md", "sha256:9")})), "trusted"
    )
    stored = store.read()
    key = ServerSource("team", endpoint).key
    assert stored.decisions == {key: "trusted"}
    assert stored.served[key] == {
        ("skill://a/SKILL.md", "sha256:9"),
        ("skill://b/SKILL.md", "sha256:b"),
    }
    data = json.loads(Path(store.path).read_text())
    assert data["projects"] == []
    assert data["servers"] == [
        {
            "server": endpoint,
            "decision": "trusted",
            "resources": [
                {"uri": "skill://a/SKILL.md", "digest": "sha256:9"},
                {"uri": "skill://b/SKILL.md", "digest": "sha256:b"},
            ],
        }
    ]
    store.decide(ServerSource("team", endpoint), "refused")
    assert store.read().served == {}
    assert json.loads(Path(store.path).read_text())["servers"] == [
        {"server": endpoint, "decision": "refused"}
    ]
    store.decide(ServerSource("team", endpoint), None)
    assert store.read() == StoredTrust()


def test_decisions_made_at_once_are_all_kept(tmp_path: Path) -> None:
    """Sessions answering together (threads here, agents and the command line as well) each
    read, merge and write under the lock: no decision overwrites another."""
    path = tmp_path / "trust.json"
    sources = [ProjectSource(str(tmp_path / f"p{index}")) for index in range(24)]
    stores = [TrustStore(path), TrustStore(path)]  # two stores: the file lock, not the thread one
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: stores[i % 2].decide(sources[i], "trusted"), range(24)))
    assert TrustStore(path).decisions() == {source.key: "trusted" for source in sources}


def test_a_server_decision_stored_under_the_earlier_key_still_holds(tmp_path: Path) -> None:
    """Server decisions were once kept among the projects as ``mcp:LABEL:IDENTITY``: a refusal
    stored then still refuses, and the next write moves it to the servers."""
    path = tmp_path / "trust.json"
    old = {"path": "mcp:team:team=uvx team-skills", "decision": "refused"}
    path.write_text(json.dumps({"projects": [old]}))
    store = TrustStore(path)
    server = ServerSource("team", "team=uvx team-skills")
    assert store.decision(server) == "refused"
    store.decide(ProjectSource(str(tmp_path / "p")), "trusted")
    data = json.loads(path.read_text())
    assert data["servers"] == [{"server": "team=uvx team-skills", "decision": "refused"}]


def test_forgetting_what_was_never_stored_says_so(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json")
    assert store.decide(ServerSource("x", "x=nothing"), None) is False
    assert store.decide(ServerSource("x", "x=nothing"), "refused") is True
    assert store.decide(ServerSource("x", "x=nothing"), "refused") is False
