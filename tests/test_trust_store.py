"""The trust file (`acp_skills.trust`, contract §13 and §13a): decisions stored atomically
outside any project, bounded reads, a link kept, concurrent writers."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from acp_skills.trust import (
    Decision,
    ProjectSource,
    ServerSource,
    StoredTrust,
    TrustFileError,
    TrustSource,
    TrustStore,
    default_trust_file,
)
from tests.git_repos import needs_posix

_SKILL_MD = ("skill://a/SKILL.md", "sha256:1")


def test_decisions_are_stored_atomically_outside_the_project(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "config" / "acp-skills" / "trust.json")
    project = ProjectSource(str(tmp_path / "p"))
    store.decide(project, "refused")
    data = json.loads(Path(store.path).read_text())
    assert data == {"projects": [{"path": project.key, "decision": "refused"}]}
    store.decide(project, None)
    assert store.read().decisions == {}
    # Nothing left behind by the atomic write.
    # No temporary file is left behind (the lock file beside it stays, empty).
    assert sorted(os.listdir(os.path.dirname(store.path))) == ["trust.json", "trust.json.lock"]


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        # JSON, but not of decisions: a hand edit the next decision must not overwrite.
        '{"projects": {"/home/me/src/repo": "trusted"}}',
        '{"projects": "/home/me/src/repo"}',
        '{"projects": [], "servers": {"mcp:team=serve": "refused"}}',
    ],
    ids=["not-json", "projects-an-object", "projects-a-string", "servers-an-object"],
)
def test_a_broken_trust_file_is_an_error_and_is_left_untouched(tmp_path: Path, text: str) -> None:
    path = tmp_path / "trust.json"
    path.write_text(text)
    with pytest.raises(TrustFileError, match="cannot read"):
        TrustStore(path).decide(ProjectSource("/x"), "trusted")
    assert path.read_text() == text


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
    assert store.read().decisions == {"/p": "trusted", "/q": "refused"}
    assert sorted(os.listdir(target.parent)) == ["trust.json"]  # nothing left beside it


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


@pytest.mark.parametrize("seed", range(3))
def test_reading_a_file_of_many_entries_is_folding_decided_entry_by_entry(
    tmp_path: Path, seed: int
) -> None:
    """The file read (in time linear in its entries) is what `StoredTrust.decided` makes of its
    entries one by one, in the file's order: projects and servers decided again and again,
    refused, trusted with pairs that replace those of the same uris, and entries that are no
    decision (skipped)."""
    rng = random.Random(seed)
    projects: list[object] = []
    servers: list[object] = []
    steps: dict[str, list[tuple[TrustSource, Decision]]] = {"projects": [], "servers": []}
    for _ in range(2000):
        decision: Decision = rng.choice(("trusted", "trusted", "refused"))
        if rng.random() < 0.05:  # no decision: skipped
            projects.append(rng.choice([[], "x", {"path": "/p", "decision": "maybe"}]))
        elif rng.random() < 0.4:
            project = f"/home/me/project-{rng.randrange(40)}"
            projects.append({"path": project, "decision": decision})
            steps["projects"].append((ProjectSource(project), decision))
        else:
            endpoint = f"s{rng.randrange(12)}=uvx server"
            pairs = {
                (f"skill://k{rng.randrange(30)}/SKILL.md", f"sha256:{rng.randrange(3)}")
                for _ in range(rng.randrange(6))
            }
            resources = [{"uri": uri, "digest": digest} for uri, digest in sorted(pairs)]
            servers.append({"server": endpoint, "decision": decision, "resources": resources})
            steps["servers"].append((ServerSource("", endpoint, frozenset(pairs)), decision))
    path = tmp_path / "trust.json"
    path.write_text(json.dumps({"projects": projects, "servers": servers}))
    expected = StoredTrust()
    for source, decision in [*steps["projects"], *steps["servers"]]:  # the file's order
        expected = expected.decided(source, decision)
    assert TrustStore(path).read() == expected
    assert expected.served
    assert "refused" in expected.decisions.values()


def test_decisions_made_at_once_are_all_kept(tmp_path: Path) -> None:
    """Sessions answering together (threads here, agents and the command line as well) each
    read, merge and write under the lock: no decision overwrites another."""
    path = tmp_path / "trust.json"
    sources = [ProjectSource(str(tmp_path / f"p{index}")) for index in range(24)]
    stores = [TrustStore(path), TrustStore(path)]  # two stores: the file lock, not the thread one
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: stores[i % 2].decide(sources[i], "trusted"), range(24)))
    assert TrustStore(path).read().decisions == {source.key: "trusted" for source in sources}


def test_forgetting_what_was_never_stored_says_so(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json")
    assert store.decide(ServerSource("x", "x=nothing"), None) is False
    assert store.decide(ServerSource("x", "x=nothing"), "refused") is True
    assert store.decide(ServerSource("x", "x=nothing"), "refused") is False
