"""Diagnostics reach the person in the editor: the real demo agent over stdio.

``/skills`` and a ``/word`` that is no command are answered without the model; ``_skills/list``
carries the problems; a ``--skills-dir`` that does not exist is a warning at start-up; and the
``acp-skills`` command line shows exactly the catalog and the skill text this agent uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.agent_client import Agent, Sandbox, text_prompt

pytestmark = pytest.mark.anyio

TEST_SECONDS = 30

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


async def open_session(agent: Agent, sandbox: Sandbox) -> str:
    return (await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])).session_id


async def ask(agent: Agent, session_id: str, text: str) -> str:
    response = await agent.conn.prompt(session_id=session_id, prompt=text_prompt(text))
    return response.stop_reason


async def no_model_request_made(agent: Agent, session_id: str) -> bool:
    """Every model request records a header first: no header, no request."""
    prefix = await agent.conn.ext_method("skills/prefix", {"sessionId": session_id})
    return prefix["header"] is None and not prefix["composed"]


async def test_skills_command_answers_with_skills_and_problems_without_the_model(
    sandbox: Sandbox,
) -> None:
    """``/skills`` is advertised, answered by the library, and nothing reaches the model."""
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            client = agent.client
            sid = await open_session(agent, sandbox)
            await client.wait_until(lambda: "available_commands_update" in client.kinds(sid))
            [announced] = client.session_updates(sid)
            assert [c.name for c in announced.available_commands] == [
                "alpha-notes",
                "new-name",
                "skills",
            ]
            assert await ask(agent, sid, "/skills") == "end_turn"
            answer = client.agent_text(sid)
            assert await no_model_request_made(agent, sid)
            assert client.tool_updates(sid) == []
            # The catalog is still composed by the first turn that asks the model.
            assert await ask(agent, sid, "please use alpha-notes") == "end_turn"
            assert not await no_model_request_made(agent, sid)
    broken = sandbox.skills_dir / "broken" / "SKILL.md"
    assert answer.startswith(f"**Skills for `{sandbox.project}`** (3)\n")
    assert "- `/alpha-notes` — Summarise meeting notes into action items. (custom)" in answer
    assert "- `model-helper` — Conventions for the model. (custom, model only)" in answer
    assert "**Problems** (1 error, 1 warning)" in answer
    assert f"- error `yaml-invalid` `{broken}:4`: invalid YAML: " in answer
    assert "- warning `name-mismatch` " in answer


async def test_an_unknown_command_gets_a_note_listing_the_commands(sandbox: Sandbox) -> None:
    """``/alpha-note`` (a typo) is not sent to the model as text: a note answers it."""
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            sid = await open_session(agent, sandbox)
            assert await ask(agent, sid, "/alpha-note for today") == "end_turn"
            answer = agent.client.agent_text(sid)
            assert await no_model_request_made(agent, sid)
    assert answer == (
        "`/alpha-note` is not a command here. Did you mean `/alpha-notes`?\n\n"
        "Commands: `/alpha-notes`, `/new-name`, `/skills`.\n\nNothing was sent to the model."
    )


async def test_skills_list_carries_the_problems_over_the_wire(sandbox: Sandbox) -> None:
    """``_skills/list`` answers ``problems`` beside ``skills``: one record per problem."""
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            sid = await open_session(agent, sandbox)
            listed = await agent.conn.ext_method("skills/list", {"sessionId": sid})
    assert [s["name"] for s in listed["skills"]] == ["alpha-notes", "model-helper", "new-name"]
    assert [(p["code"], p["severity"], p["line"]) for p in listed["problems"]] == [
        ("yaml-invalid", "error", 4),
        ("name-mismatch", "warning", None),
    ]
    assert listed["problems"][0]["path"] == str(sandbox.skills_dir / "broken" / "SKILL.md")


def test_a_missing_skills_dir_is_a_warning_at_start_up(tmp_path: Path) -> None:
    """The agent says so on stderr as it starts, before any session exists."""
    typo = tmp_path / "skils"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo_agent",
            "--skills-dir",
            str(typo),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        env={
            **os.environ,
            "HOME": str(tmp_path),
            "DSH_HOME": str(tmp_path / "d"),
            "DSH_AGENTS_HOME": str(tmp_path / "a"),
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout == ""
    [line] = [line for line in result.stderr.splitlines() if "skill_root_missing" in line]
    assert "warning" in line
    assert f"path={typo}" in line
    assert "code=root-missing" in line


def test_an_existing_skills_dir_starts_quietly(tmp_path: Path) -> None:
    """No warning at all when every --skills-dir is there."""
    (tmp_path / "skills").mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo_agent",
            "--skills-dir",
            str(tmp_path / "skills"),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        env={**os.environ, "HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")
    assert "skill_root_missing" not in result.stderr


def cli(sandbox: Sandbox, *args: str) -> str:
    """Run ``acp-skills`` looking from the sandbox's project, as the agent does."""
    env = {key: value for key, value in os.environ.items() if key != "ACP_SKILLS_DIRS"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "acp_skills",
            *args,
            "--cwd",
            str(sandbox.project),
            "--dsh-home",
            str(sandbox.home / ".dsh"),
            "--agents-home",
            str(sandbox.home / ".agents"),
            "--skills-dir",
            str(sandbox.skills_dir),
        ],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert "Traceback" not in result.stderr
    return result.stdout


async def test_the_command_line_shows_exactly_the_agent_s_catalog_and_skill_text(
    sandbox: Sandbox,
) -> None:
    """`acp-skills catalog` is the agent's catalog message; `show` its skill tool result."""
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            client = agent.client
            sid = await open_session(agent, sandbox)
            assert await ask(agent, sid, "please use alpha-notes on today's notes") == "end_turn"
            prefix = await agent.conn.ext_method("skills/prefix", {"sessionId": sid})
            _, end = client.tool_updates(sid)
    [catalog] = prefix["messages"]
    assert cli(sandbox, "catalog") == catalog["text"] + "\n"
    assert cli(sandbox, "show", "alpha-notes") == end.content[0].content.text + "\n"
