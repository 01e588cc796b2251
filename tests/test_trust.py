"""Trust sources and the view a session has of a snapshot (`acp_skills.trust`, contract §13):
which project a skill needs trust from (real files, a real git worktree), each skill's state, and
what a session offers and withholds. The trust file: tests/test_trust_store.py."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from acp_skills import SkillCandidate, SkillSnapshot
from acp_skills.model import ShadowedSkill
from acp_skills.project import find_project
from acp_skills.trust import (
    Decision,
    ProjectSource,
    ServerSource,
    ShownItem,
    StoredTrust,
    TrustMode,
    TrustSource,
    TrustStore,
    shown_items,
    trust_mode,
    view,
)
from tests.git_repos import needs_git, repository, worktree


def project_of(path: Path) -> ProjectSource:
    return ProjectSource(find_project(path).key)


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
    assert store.read().decisions.get(project_of(repo).key) == "trusted"
    assert project_of(tmp_path / "feature") == project_of(repo)


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
    grants: dict[str, frozenset[ShownItem]] | None = None,
    served: dict[str, frozenset[ShownItem]] | None = None,
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


def test_a_view_offers_the_own_skill_a_withheld_one_shadowed() -> None:
    """A withheld project skill takes no part in resolution: the person's own skill of that
    name is offered in its place, and the withheld one says why. With nothing withheld the
    view offers the snapshot itself."""
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
    trusted = view(found, source_of, StoredTrust({"/p": "trusted"}), "ask")
    assert trusted.offered is found
    assert trusted.withheld == {}


def test_a_skill_that_loses_to_the_one_standing_in_for_a_withheld_winner_names_it() -> None:
    """Two own skills of the withheld project skill's name: the first stands in, and the other
    is shadowed by it in what the session offers, not by the withheld one."""
    theirs, custom, mine = (_skill("a", s) for s in ("project-agents", "custom", "user-agents"))
    lost = (ShadowedSkill(skill=custom, winner=theirs), ShadowedSkill(skill=mine, winner=theirs))
    found = SkillSnapshot(skills=(theirs,), complete=True, shadowed=lost)

    def source_of(skill: SkillCandidate) -> TrustSource | None:
        return ProjectSource("/p") if skill.source == "project-agents" else None

    seen = view(found, source_of, StoredTrust(), "ask")
    assert seen.offered.skills == (custom,)
    assert seen.offered.shadowed == (ShadowedSkill(skill=mine, winner=custom),)
