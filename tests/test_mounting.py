"""Mounting `AcpSkills` on a connection the agent builds itself: the doc's `run_agent` block
runs as written, and a turn on an `AcpSkills` never attached fails loudly, naming the call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest
from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.schema import TextContentBlock

from acp_skills import LocalSkillProvider, SkillRegistry
from acp_skills.acp import AcpSkills
from tests.acp_peer import RecordingClient
from tests.doc_snippets import (
    integration_snippet,
    library_lines,
    linked,
    load_snippet,
    marked_lines,
    wait_for_update,
)

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

RUN_AGENT = "## An agent that already calls `run_agent`"
NOT_ATTACHED = (
    "AcpSkills is not attached to a connection, so nothing a turn sends would reach the editor: "
    "call skills.attach(conn) with the SDK's AgentSideConnection (from your agent's "
    "on_connect(conn)), or serve the agent with skills.serve(agent)"
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory with one skill, ``deploy``, where the doc's agent looks by default."""
    home = tmp_path / "home"
    skill = home / ".agents" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy the app.\n---\nRun the deploy script.\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("HOME", str(home))
    for variable in ("DSH_HOME", "DSH_AGENTS_HOME", "ACP_SKILLS_TRUST_FILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


def test_the_run_agent_variant_touches_the_library_in_fifteen_lines() -> None:
    """The whole integration without its `serve` line, plus the `run_agent` block: every line
    that uses `acp_skills` is marked ``# skills``, and there are fifteen, as the doc says."""
    main = [line for line in marked_lines(integration_snippet()) if "serve(" not in line]
    variant = integration_snippet(RUN_AGENT)
    assert library_lines(variant) == marked_lines(variant)
    assert len(main) + len(marked_lines(variant)) == 15


async def test_the_doc_s_run_agent_block_serves_skills_as_written(
    home: Path, tmp_path: Path
) -> None:
    """``main(writer, reader)`` of the doc: commands follow `session/new`, a skill loads."""
    module = load_snippet(RUN_AGENT)
    async with linked(lambda reader, writer: module.main(writer, reader)) as (conn, wire):
        with anyio.fail_after(10):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await wait_for_update(wire, session.session_id, "available_commands_update")
            response = await conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="please use the deploy skill")],
            )
    assert response.stop_reason == "end_turn"
    # Before the prompt (the observer), and once more as the first turn begins.
    for commands in wire.updates(session.session_id, "available_commands_update"):
        assert [command["name"] for command in commands["availableCommands"]] == [
            "deploy",
            "skills",
        ]
    [start] = wire.updates(session.session_id, "tool_call")
    [end] = wire.updates(session.session_id, "tool_call_update")
    assert (start["title"], end["status"]) == ("Load skill deploy", "completed")
    assert "Run the deploy script." in end["content"][0]["content"]["text"]


async def test_forgetting_attach_answers_the_prompt_with_an_error_naming_it(
    home: Path, tmp_path: Path
) -> None:
    """The doc's agent under `run_agent` without `on_connect`: its prompt is an error that
    names ``skills.attach(conn)``, and no reply reaches the editor."""
    module = load_snippet()

    async def main(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        agent = module.SkilledAgent()  # no on_connect: never attached
        async with agent.skills:
            await run_agent(agent, writer, reader)

    async with linked(main) as (conn, wire):
        with anyio.fail_after(10):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with pytest.raises(RequestError) as raised:
                await conn.prompt(
                    session_id=session.session_id,
                    prompt=[TextContentBlock(type="text", text="please use the deploy skill")],
                )
    assert raised.value.data == {"details": NOT_ATTACHED}
    assert wire.updates(session.session_id, "agent_message_chunk") == []
    assert wire.updates(session.session_id, "tool_call") == []


async def test_a_turn_on_an_unattached_acp_skills_raises_before_the_model_is_called(
    tmp_path: Path,
) -> None:
    """`AcpSkills.turn` without `attach` or `serve`: `RuntimeError` naming both, the block
    never runs, and the session takes another turn once attached."""
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(dsh_home=str(tmp_path / "dsh"), agents_home=str(tmp_path / "agents"))
    )
    skills = AcpSkills(registry, trust="all")
    await skills.open_session("s1", str(tmp_path))
    prompt = [TextContentBlock(type="text", text="hello")]
    ran = False
    with pytest.raises(RuntimeError) as raised:
        async with skills.turn("s1", prompt):
            ran = True
    assert str(raised.value) == NOT_ATTACHED
    assert not ran
    assert (await skills.session("s1")).history == ()
    skills.attach(RecordingClient())
    async with skills.turn("s1", prompt) as turn:
        async for _messages in turn.requests():
            await turn.add_reply({"content": "hi"})
    assert turn.response.stop_reason == "end_turn"
    await skills.aclose()
