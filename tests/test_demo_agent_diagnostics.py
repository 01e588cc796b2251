"""Diagnostics reach the person in the editor: the real demo agent, in this process
(`tests.acp_peer.demo_peer`).

``/skills`` is answered without the model, its problems errors and warnings alike (what the
library's commands say, and ``_skills/list``'s problems: tests/test_commands.py); a
``--skills-dir`` that does not exist is a warning at start-up; and ``acp-skills show`` prints
exactly the skill text this agent gives its model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp_peer import DemoPeer, demo_peer
from tests.cli_runner import run
from tests.demo_in_process import agent_environment
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

BROKEN = "---\nname: broken\ndescription: [never closed\n---\nbody\n"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    sandbox = Sandbox.create(tmp_path)
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.")
    sandbox.write_skill("model-helper", "Conventions for the model.", **{"user-invocable": False})
    broken = sandbox.skills_dir / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_text(BROKEN, encoding="utf-8")
    renamed = sandbox.skills_dir / "old-name" / "SKILL.md"
    renamed.parent.mkdir()
    renamed.write_text("---\nname: new-name\ndescription: Renamed.\n---\nx\n", encoding="utf-8")
    return sandbox


async def no_model_request_made(agent: DemoPeer, session_id: str) -> bool:
    """Every model request records a header first: no header, no request."""
    prefix = await agent.ext("skills/prefix", {"sessionId": session_id})
    return prefix["header"] is None and not prefix["composed"]


async def test_skills_command_answers_with_skills_and_problems_without_the_model(
    sandbox: Sandbox,
) -> None:
    """``/skills`` is advertised, answered by the library, and nothing reaches the model."""
    async with demo_peer(sandbox) as agent:
        client = agent.client
        sid = await agent.open_session()
        await client.wait_until(lambda: "available_commands_update" in client.kinds(sid))
        [announced] = client.session_updates(sid)
        assert [c.name for c in announced.available_commands] == [
            "alpha-notes",
            "new-name",
            "skills",
        ]
        assert await agent.ask(sid, "/skills") == "end_turn"
        answer = client.agent_text(sid)
        assert await no_model_request_made(agent, sid)
        assert client.tool_updates(sid) == []
        # The catalog is still composed by the first turn that asks the model.
        assert await agent.ask(sid, "please use alpha-notes") == "end_turn"
        assert not await no_model_request_made(agent, sid)
    broken = sandbox.skills_dir / "broken" / "SKILL.md"
    assert answer.startswith(f"**Skills for `{sandbox.project}`** (3)\n")
    assert "- `/alpha-notes` — Summarise meeting notes into action items. (custom)" in answer
    assert "- `model-helper` — Conventions for the model. (custom, model only)" in answer
    assert "**Problems** (1 error, 1 warning)" in answer
    assert f"- `{broken}:4`: error `yaml-invalid`: invalid YAML: " in answer
    assert ": warning `name-mismatch`: " in answer


async def test_a_missing_skills_dir_is_a_warning_at_start_up(tmp_path: Path) -> None:
    """The agent says so as it starts, before any session exists."""
    sandbox = Sandbox.create(tmp_path)
    typo = tmp_path / "skils"
    async with demo_peer(sandbox, "--skills-dir", str(typo)) as agent:
        [line] = [line for line in agent.log.splitlines() if "skill_root_missing" in line]
    assert "warning" in line
    assert f"path={typo}" in line
    assert "code=root-missing" in line


async def test_an_existing_skills_dir_starts_quietly(tmp_path: Path) -> None:
    """No warning at all when every --skills-dir is there."""
    async with demo_peer(Sandbox.create(tmp_path)) as agent:
        pass
    assert "skill_root_missing" not in agent.log


async def test_show_prints_exactly_the_skill_text_the_agent_gives_its_model(
    sandbox: Sandbox,
) -> None:
    """`acp-skills show NAME`, looking from the agent's project with its skills, prints the
    agent's ``skill`` tool result (the catalog: tests/test_cli_agent_parity.py)."""
    async with demo_peer(sandbox) as agent:
        sid = await agent.open_session()
        assert await agent.ask(sid, "please use alpha-notes on today's notes") == "end_turn"
        [(status, result)] = agent.client.tool_results(sid)
    assert status == "completed"
    where = ["--cwd", str(sandbox.project), "--skills-dir", str(sandbox.skills_dir)]
    homes = [
        "--dsh-home",
        str(sandbox.home / ".dsh"),
        "--agents-home",
        str(sandbox.home / ".agents"),
    ]
    shown = run("show", "alpha-notes", *where, *homes, env=agent_environment({}))
    assert shown.returncode == 0
    assert "Traceback" not in shown.stderr
    assert shown.stdout == result + "\n"
