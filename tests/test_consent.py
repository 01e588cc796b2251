"""The session layer's trust: the `skill` tool, `query` and the wording of withheld skills."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_skills import LocalSkillProvider, SkillRegistry
from acp_skills.acp.consent import (
    TrustView,
    Withheld,
    command_note,
    question_text,
    report_lines,
    trust_error,
)
from acp_skills.model import SkillCandidate, SkillSnapshot
from acp_skills.trust import ProjectSource, ServerSource, TrustStore
from tests.acp_peer import ScriptedModelAgent, connected, text_content, write_skill


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    skills = project / ".agents" / "skills"
    skills.mkdir(parents=True)
    write_skill(skills, "review", "Review the change against the checklist.", body="Review.")
    return project


@pytest.fixture
def registry(tmp_path: Path) -> SkillRegistry:
    registry = SkillRegistry()
    home, own = tmp_path / "home", tmp_path / "own"
    own.mkdir()
    for number in range(20):  # enough own skills that a small budget leaves some out
        write_skill(own, f"chore-{number}", f"Routine chore number {number} of the week.", body="x")
    provider = LocalSkillProvider(
        custom_skill_dirs=[str(own)],
        dsh_home=str(home / ".dsh"),
        agents_home=str(home / ".agents"),
        watch=False,
    )
    registry.register_provider(provider)
    return registry


def query_call(call_id: str, query: str) -> dict[str, Any]:
    arguments = f'{{"query": "{query}"}}'
    function = {"name": "skill", "arguments": arguments}
    return {
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def name_call(call_id: str, name: str) -> dict[str, Any]:
    function = {"name": "skill", "arguments": f'{{"name": "{name}"}}'}
    return {
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


async def tool_results(
    registry: SkillRegistry, project: Path, store: TrustStore, reply: dict[str, Any], **opts: Any
) -> list[str]:
    # The rig's client does not answer `session/request_permission`: an error answer, "not now".
    async with connected(
        registry, agent_type=ScriptedModelAgent, trust_store=store, **opts
    ) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        agent.replies = [reply, {"content": "done"}]
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "go")
        finished = peer.wire.updates(session_id, "tool_call_update")
        return [text_content(update) for update in finished if update.get("content")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "decision", "expected"),
    [
        ("ask", None, 'Error: skill "review" is waiting for trust in this project'),
        ("ask", "refused", 'Error: skill "review" is not trusted in this project'),
        ("none", None, 'Error: skill "review" is not trusted in this project'),
        ("all", None, "Review."),
    ],
    ids=["pending", "refused", "mode-none", "mode-all"],
)
async def test_the_skill_tool_names_why_a_project_skill_is_withheld(
    registry: SkillRegistry,
    project: Path,
    tmp_path: Path,
    mode: str,
    decision: str | None,
    expected: str,
) -> None:
    """A withheld skill has its own error by exact name, never "unknown"."""
    store = TrustStore(tmp_path / "trust.json")
    if decision == "refused":
        store.decide(ProjectSource(str(project)), "refused")
    results = await tool_results(registry, project, store, name_call("c1", "review"), trust=mode)
    assert len(results) == 1
    assert (results[0] == expected) if mode != "all" else (expected in results[0])


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "found"), [("ask", False), ("all", True)], ids=["ask", "all"])
async def test_a_query_never_finds_a_withheld_skill(
    registry: SkillRegistry, project: Path, tmp_path: Path, mode: str, found: bool
) -> None:
    """``query`` searches only what the session offers."""
    # A small budget: the catalog leaves skills out, so the tool takes `query`.
    store = TrustStore(tmp_path / "trust.json")
    reply = query_call("q1", "review checklist")
    results = await tool_results(registry, project, store, reply, trust=mode, catalog_budget=300)
    assert len(results) == 1
    assert not results[0].startswith("Error")
    assert ("`review`" in results[0] or "review:" in results[0]) is found


def candidate(name: str, source: str) -> SkillCandidate:
    return SkillCandidate(name=name, description="d", source=source, rank=600, provider="mcp")


@pytest.mark.parametrize(
    ("state", "text"),
    [
        ("pending", 'Error: skill "fmt" from MCP server "tools" is waiting for trust'),
        ("refused", 'Error: skill "fmt" from MCP server "tools" is not trusted'),
    ],
    ids=["pending", "refused"],
)
def test_an_mcp_skill_withheld_names_its_server(state: Any, text: str) -> None:
    """The tool's error for an MCP skill names the server's label."""
    source = ServerSource(label="tools", endpoint="tools=run-tools")
    assert trust_error("fmt", Withheld(candidate("fmt", "mcp:tools"), state, source)) == text


def test_what_a_person_reads_about_a_withheld_server_skill() -> None:
    """The question marks a changed skill; `/skills` and the `/NAME` note never send a person
    to trust a server from the command line, only to forget a refusal."""
    items = frozenset({("skill://fmt/SKILL.md", "sha256:2"), ("skill://fmt/notes.md", "sha256:3")})
    source = ServerSource(
        label="tools", endpoint="tools=run tools", items=items, uri="skill://fmt/SKILL.md"
    )
    skill = candidate("fmt", "mcp:tools")
    pending = Withheld(skill, "pending", source, "changed")
    assert question_text([pending]) == (
        "- fmt: d (MCP server tools, skill://fmt/SKILL.md)"
        " — changed on the server since you trusted it"
    )
    note = command_note("fmt", pending)
    assert "acp-skills trust" not in note
    assert note.endswith("Trust it when asked in a new session.")
    refused = Withheld(skill, "refused", source)
    assert "`acp-skills trust --forget 'mcp:tools=run tools'`" in command_note("fmt", refused)
    view = TrustView(
        snapshot=SkillSnapshot(skills=(), complete=True), states={}, withheld={"fmt": refused}
    )
    assert "To undo a refusal, run `acp-skills trust --forget 'mcp:tools=run tools'`." in (
        report_lines(view)
    )
