"""The trust store and project identity (contract §13): real files, a real git worktree."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from acp_skills import SkillCandidate, SkillSnapshot
from acp_skills.model import ShadowedSkill
from acp_skills.trust import (
    ProjectSource,
    ServerSource,
    TrustMode,
    TrustSource,
    TrustStore,
    project_of,
    shown_items,
    trust_mode,
    view,
)
from acp_skills.trust_store import Decision, Pair, StoredTrust, TrustFileError, default_trust_file
from tests.git_repos import needs_git, needs_posix, repository, worktree


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


@needs_git
def test_git_worktrees_of_one_repository_share_one_decision(tmp_path: Path) -> None:
    repo = repository(tmp_path / "main")
    worktree(repo, tmp_path / "feature")
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


def test_a_relative_xdg_config_home_is_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As the XDG specification says: a relative one would name a project's own directory."""
    monkeypatch.delenv("ACP_SKILLS_TRUST_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", ".config")
    assert default_trust_file() == str(tmp_path / ".config" / "acp-skills" / "trust.json")


def test_a_relative_trust_file_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_SKILLS_TRUST_FILE", "trust.json")
    with pytest.raises(ValueError, match="ACP_SKILLS_TRUST_FILE must be an absolute path"):
        default_trust_file()
    with pytest.raises(ValueError, match="ACP_SKILLS_TRUST_FILE"):
        TrustStore()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _over_the_size_cap(path: Path) -> None:
    with path.open("wb") as file:  # sparse: no disk space taken
        file.truncate(16 * 1024 * 1024 + 1)


def _deeply_nested(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _nested_past_the_depth_cap(path: Path) -> None:
    path.write_text('{"projects": ' + "[" * 70 + "]" * 70 + "}")  # the decoder parses it


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(_fifo, "not a regular file", marks=needs_posix),
        (_over_the_size_cap, "over the 16777216-byte limit"),
        (_deeply_nested, "nested more than 64 levels deep"),
        (_nested_past_the_depth_cap, "nested more than 64 levels deep"),
    ],
    ids=["fifo", "over-16-MiB", "100000-brackets", "past-64-levels"],
)
def test_a_trust_file_that_cannot_be_read_within_bounds_is_an_error_at_once(
    tmp_path: Path, make: Callable[[Path], None], reason: str
) -> None:
    """Never a hang, a RecursionError or the whole file in memory: a `TrustFileError`."""
    path = tmp_path / "trust.json"
    make(path)
    with pytest.raises(TrustFileError, match=reason):
        TrustStore(path).read()


@needs_posix
def test_a_link_at_the_trust_files_path_is_kept_and_its_target_rewritten(tmp_path: Path) -> None:
    """A dotfiles repository's link stays a link; a link to a file not made yet reads empty."""
    target = tmp_path / "dotfiles" / "trust.json"
    link = tmp_path / "config" / "trust.json"
    link.parent.mkdir()
    link.symlink_to(target)
    store = TrustStore(link)
    assert store.read() == StoredTrust()
    store.decide(ProjectSource("/p"), "trusted")
    assert link.is_symlink()
    assert json.loads(target.read_text())["projects"] == [{"path": "/p", "decision": "trusted"}]
    store.decide(ProjectSource("/q"), "refused")
    assert link.is_symlink()
    assert store.decisions() == {"/p": "trusted", "/q": "refused"}
    assert sorted(os.listdir(target.parent)) == ["trust.json"]  # nothing left beside it


def test_a_huge_git_file_is_never_read_whole(tmp_path: Path) -> None:
    """A 64 MiB sparse ``.git`` file is not a pointer: read no further than its first 4 KiB."""
    repo = tmp_path / "repo"
    repo.mkdir()
    with (repo / ".git").open("wb") as file:
        file.truncate(64 * 1024 * 1024)
    tracemalloc.start()
    try:
        assert project_of(repo) == ProjectSource(str(repo.resolve()))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


def test_trust_imports_and_decides_without_fcntl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where there is no ``fcntl`` (Windows), the module still imports and stores decisions."""
    monkeypatch.setitem(sys.modules, "fcntl", None)  # `import fcntl` raises ImportError
    spec = importlib.util.find_spec("acp_skills.trust")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a copy: the imported module stays as it is
    store = module.TrustStore(tmp_path / "trust.json")
    assert store.decide(module.ProjectSource("/p"), "trusted") is True
    assert store.decisions() == {"/p": "trusted"}


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
    found = SkillSnapshot(skills=tuple(skills), complete=True)
    seen = view(found, lambda skill: sources.get(skill.source), stored, mode, grants)
    return [seen.state(skill) for skill in skills]


def test_each_skills_state_per_mode_decision_and_session_grant() -> None:
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
    found = SkillSnapshot(skills=(skill,), complete=True)
    seen = view(found, lambda _: changed, StoredTrust(trusted, served), "ask")
    assert (seen.state(skill), seen.withheld["a"].change) == ("pending", "changed")
    other = ServerSource("docs", server.endpoint, frozenset({("skill://b/SKILL.md", "sha256:3")}))
    seen = view(found, lambda _: other, StoredTrust(trusted, served), "ask")
    assert (seen.state(skill), seen.withheld["a"].change) == ("pending", "new")
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


def test_a_view_offers_the_own_skill_a_withheld_one_shadowed() -> None:
    """A withheld project skill takes no part in resolution: the person's own skill of that
    name is offered in its place, and the withheld one says why. With nothing withheld the
    view offers the snapshot itself, and a view that would not differ is the previous one."""
    theirs, mine, other = _skill("a", "project-agents"), _skill("a", "user-agents"), _skill("b", "")
    lost = ShadowedSkill(skill=mine, winner=theirs)
    found = SkillSnapshot(skills=(theirs, other), complete=True, shadowed=(lost,))
    project = ProjectSource("/p")

    def source_of(skill: SkillCandidate) -> TrustSource | None:
        return project if skill.source == "project-agents" else None

    seen = view(found, source_of, StoredTrust(), "ask")
    assert seen.offered.skills == (mine, other)
    assert seen.offered.shadowed == ()
    assert (seen.state(theirs), seen.state(mine)) == ("pending", "trusted")
    assert [(w.skill, w.state, w.source) for w in seen.pending] == [(theirs, "pending", project)]
    assert view(found, source_of, StoredTrust(), "ask", previous=seen) is seen
    trusted = view(found, source_of, StoredTrust({"/p": "trusted"}), "ask", previous=seen)
    assert trusted.offered is found
    assert trusted.withheld == {}
