"""The library's own commands: ``/skills``, and the note for a ``/word`` that is no command.

Through `AcpSkills.turn` over a real in-memory ACP connection (`tests/test_acp.py`'s
`connected`), with an agent that drives its model loop with `PromptTurn.requests`, as the demo
agent does; the pure builders are checked as tables.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_skills import SkillDefinition, SkillRegistry
from acp_skills.acp.commands import (
    SKILLS_COMMAND_DESCRIPTION,
    builtin_commands,
    leading_slash_word,
)
from tests.providers import candidate
from tests.test_acp import Peer, connected, fixture_registry, write_fixture_skills
from tests.test_turn import ScriptedModelAgent

pytestmark = pytest.mark.anyio


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    """deploy, compare, internal (model-only), secret (person-only), and one broken file."""
    root = write_fixture_skills(tmp_path)
    broken = root / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_text("---\nname: broken\ndescription: [\n---\n", encoding="utf-8")
    return root


@pytest.fixture
def registry(tmp_path: Path, skills_dir: Path) -> SkillRegistry:
    return fixture_registry(tmp_path, skills_dir)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def shown(peer: Peer, session_id: str) -> str:
    return "".join(
        u["content"]["text"] for u in peer.wire.updates(session_id, "agent_message_chunk")
    )


async def test_skills_is_answered_without_the_model_and_not_recorded(
    registry: SkillRegistry, project: Path, skills_dir: Path
) -> None:
    """``/skills``: the skills and problems are shown; no model request; nothing recorded."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        response = await peer.prompt(session_id, "/skills")
        session = await peer.skills.session(session_id)
        answer = shown(peer, session_id)
        assert (response.stop_reason, agent.requests, session.history) == ("end_turn", [], ())
        # The catalog is composed by the first turn that asks the model, not by this one.
        assert not session.composed
        [turn] = agent.turns
        assert turn.finished
        assert peer.wire.updates(session_id, "tool_call") == []

        await peer.prompt(session_id, "hello")
        assert len(agent.requests) == 1
        assert session.composed
    assert answer.startswith(f"**Skills for `{project}`** (4)\n")
    assert "- `/deploy` — Deploy the app to production. (custom)" in answer
    assert "- `internal` — Model-only helper. (custom, model only)" in answer
    assert "- `/secret` — Only a person may run this. (custom, hidden from the model)" in answer
    assert "**Problems** (1 error)" in answer
    assert (
        f"- error `yaml-invalid` `{skills_dir / 'broken' / 'SKILL.md'}:4`: invalid YAML" in answer
    )
    assert f"Run `acp-skills doctor --cwd {project}` in a terminal for details." in answer


async def test_skills_without_problems_says_so(tmp_path: Path, project: Path) -> None:
    """Clean skills: the list, then "No problems found."."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "  /skills please")
        answer = shown(peer, session_id)
    assert answer.endswith("No problems found.")
    assert "**Problems**" not in answer


@pytest.mark.parametrize(
    ("prompt", "note"),
    [
        ("/nope", "`/nope` is not a command here."),
        ("/deplo now", "`/deplo` is not a command here. Did you mean `/deploy`?"),
        ("/Deploy staging", "`/Deploy` is not a command here. Did you mean `/deploy`?"),
        (
            "/internal",
            "`/internal` is not a command: the skill `internal` is for the model only "
            "(its `user-invocable` is false).",
        ),
    ],
    ids=["unknown", "typo", "capitalised", "model-only"],
)
async def test_a_slash_word_that_is_no_command_gets_a_note_instead_of_the_model(
    registry: SkillRegistry, project: Path, prompt: str, note: str
) -> None:
    """The note names the commands that exist; the model is not asked; nothing is recorded."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        response = await peer.prompt(session_id, prompt)
        history = (await peer.skills.session(session_id)).history
        answer = shown(peer, session_id)
    assert (response.stop_reason, agent.requests, history) == ("end_turn", [], ())
    assert answer == (
        f"{note}\n\nCommands: `/compare`, `/deploy`, `/secret`, `/skills`.\n\n"
        "Nothing was sent to the model."
    )


@pytest.mark.parametrize(
    "prompt",
    [
        "please /nope",
        "/deploy now",
        "5/8 of the tests fail",
        "/usr/bin/env is missing",
        pytest.param(
            "/tmp is full",
            marks=pytest.mark.skipif(sys.platform == "win32", reason="needs /tmp"),
        ),
    ],
    ids=["not-first", "a-skill", "fraction", "a-path", "an-existing-directory"],
)
async def test_other_prompts_still_reach_the_model(
    registry: SkillRegistry, project: Path, prompt: str
) -> None:
    """Only a leading slash word that is no command is intercepted; ``/tmp`` is a path."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, prompt)
    assert len(agent.requests) == 1


async def test_a_skill_named_skills_wins_over_the_built_in(
    registry: SkillRegistry, project: Path
) -> None:
    """A person's own ``skills`` skill is invoked by ``/skills`` and advertised once."""
    registry.register(
        SkillDefinition(name="skills", description="My own skills helper.", content="Mine.")
    )
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        [commands] = peer.wire.commands(session_id)
        await peer.prompt(session_id, "/skills")
    assert [c["description"] for c in commands if c["name"] == "skills"] == [
        "My own skills helper."
    ]
    assert [turn.invoked[0].name for turn in agent.turns] == ["skills"]
    assert len(agent.requests) == 1


async def test_skills_list_carries_the_problems(registry: SkillRegistry, project: Path) -> None:
    """``_skills/list`` has ``problems``: the same records, in their JSON shape."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        listed = await peer.ext("skills/list", {"sessionId": session_id})
    [problem] = listed["problems"]
    assert list(problem) == ["code", "severity", "path", "line", "message"]
    assert (problem["code"], problem["severity"], problem["line"]) == ("yaml-invalid", "error", 4)
    assert problem["path"].endswith("broken/SKILL.md")


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("/skills", "skills"),
        ("  /skills now", "skills"),
        ("\n/Deploy\tx", "Deploy"),
        ("/run_tests", "run_tests"),
        ("/a/b", None),
        ("/deploy.", None),
        ("please /skills", None),
        ("/", None),
        ("/-x", None),
        ("", None),
    ],
)
def test_leading_slash_word(text: str, word: str | None) -> None:
    """A word only when the prompt opens with it, followed by whitespace or the end."""
    assert leading_slash_word(text) == word


def test_the_built_in_is_advertised_unless_a_skill_takes_its_name() -> None:
    """``/skills`` is offered, except when a user-invocable skill is itself called ``skills``."""
    [offered] = builtin_commands([candidate("deploy", provider="p")])
    assert (offered.name, offered.description) == ("skills", SKILLS_COMMAND_DESCRIPTION)
    assert builtin_commands([candidate("skills", provider="p")]) == []
    hidden = candidate("skills", provider="p", user_invocable=False)
    assert [c.name for c in builtin_commands([hidden])] == ["skills"]


async def test_skills_reports_what_the_catalog_budget_did(tmp_path: Path, project: Path) -> None:
    """With a catalog budget, ``/skills`` says what it did to the session's catalog."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    async with connected(registry, agent_type=ScriptedModelAgent, catalog_budget=700) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "/skills")
        answer = shown(peer, session_id)
        fit = await peer.skills.catalog_fit(session_id)
    assert fit is None  # nothing was frozen: /skills asks no model
    assert "Catalog: " in answer
    assert " of 700 characters; 3 skills listed" in answer
