"""docs/integration.md: its "whole integration" snippet runs, as written, over a real connection
(a skill loaded, a slash command, a turn cancelled); so does the block that lends the agent's own
MCP sessions to the skills, against a FastMCP server in this process."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import PROTOCOL_VERSION
from acp.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    McpServerStdio,
    TextContentBlock,
)
from mcp import ClientSession

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry, render_skill_content
from acp_skills.acp import AcpSkills
from acp_skills.mcp import McpServer
from tests.doc_snippets import (
    first_prompt,
    integration_snippet,
    library_lines,
    load_snippet,
    marked_lines,
    serve,
    wait_for_update,
)
from tests.events import WAIT_SECONDS
from tests.mcp_http import SERVER, write_served_skill
from tests.mcp_memory import fastmcp_streams

pytestmark = pytest.mark.sdk


def snippet_agent(registry: SkillRegistry) -> Any:
    """The snippet's agent, with the test's registry instead of the home directory's skills."""
    agent = load_snippet().SkilledAgent()
    agent.skills = AcpSkills(registry)
    return agent


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SkillRegistry]:
    skill = tmp_path / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy the app.\n---\nRun the deploy script.\n",
        encoding="utf-8",
    )
    registry = SkillRegistry()
    handle = registry.register_provider(
        LocalSkillProvider(
            custom_skill_dirs=[str(tmp_path / "skills")],
            dsh_home=str(tmp_path / "dsh"),
            agents_home=str(tmp_path / "agents"),
        )
    )
    yield registry
    handle.dispose()  # stops watching the skills directory


def test_the_snippet_is_one_self_contained_agent_class() -> None:
    """The block imports what it uses and defines `SkilledAgent` with its six handlers."""
    module = load_snippet()
    handlers = ("initialize", "new_session", "load_session", "prompt", "cancel", "ext_method")
    assert all(callable(getattr(module.SkilledAgent, name, None)) for name in handlers)


def test_the_snippet_touches_the_library_in_thirteen_lines() -> None:
    """Every line that uses `acp_skills` is marked ``# skills``, and there are 13 (twelve, plus
    the import of the on-disk store that makes `loadSession` honest), as the doc says."""
    block = integration_snippet()
    assert library_lines(block) == marked_lines(block)
    assert len(marked_lines(block)) == 13


@pytest.mark.anyio
async def test_the_snippet_agent_loads_a_skill_over_acp(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """initialize, session/new, a prompt naming a skill: tool call updates, then _skills/list."""
    agent = snippet_agent(registry)
    async with serve(agent) as (conn, wire):
        with anyio.fail_after(10):
            initialized = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=False)
                ),
                client_info=Implementation(name="doc-test-client", version="0"),
            )
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await wait_for_update(wire, session.session_id, "available_commands_update")
            response = await conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="please use the deploy skill")],
            )
            listed = await conn.ext_method("skills/list", {"sessionId": session.session_id})
            prefix = await conn.ext_method("skills/prefix", {"sessionId": session.session_id})
    definition = await registry.get("deploy", SkillLookupOptions(cwd=str(tmp_path)))
    assert definition is not None
    capabilities = initialized.agent_capabilities
    assert capabilities is not None
    assert capabilities.field_meta == AcpSkills.capability_meta()
    assert response.stop_reason == "end_turn"
    [start] = wire.updates(session.session_id, "tool_call")
    [end] = wire.updates(session.session_id, "tool_call_update")
    assert (start["title"], start["kind"], start["status"], start["rawInput"]) == (
        "Load skill deploy",
        "read",
        "in_progress",
        {"name": "deploy"},
    )
    assert (end["toolCallId"], end["status"]) == (start["toolCallId"], "completed")
    assert end["content"][0]["content"]["text"] == render_skill_content(definition)
    chunks = wire.updates(session.session_id, "agent_message_chunk")
    assert [chunk["content"]["text"] for chunk in chunks] == ["Done."]
    assert [skill["name"] for skill in listed["skills"]] == ["deploy"]
    assert prefix["composed"] is True
    assert prefix["header"]["reason"] == "initial"
    assert "`deploy`" in prefix["messages"][0]["text"]


@pytest.mark.anyio
async def test_the_snippet_agent_expands_a_slash_command(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """``/deploy`` puts the skill into the turn's user message, reported as a tool call."""
    agent = snippet_agent(registry)
    async with serve(agent) as (conn, wire):
        with anyio.fail_after(10):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="/deploy now")],
            )
    definition = await registry.get("deploy", SkillLookupOptions(cwd=str(tmp_path)))
    assert definition is not None
    [start] = wire.updates(session.session_id, "tool_call")
    assert start["title"] == "Load skill deploy"
    history = (await agent.skills.session(session.session_id)).history
    assert (history[0]["role"], history[0]["content"]) == (
        "user",
        f"/deploy now\n\n{render_skill_content(definition)}",
    )


@pytest.mark.anyio
async def test_the_snippet_agent_ends_a_cancelled_turn_with_cancelled(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """`session/cancel` while the snippet's model call is awaited: the prompt's answer is
    ``cancelled``, the model's reply never reaches the editor, and the session takes the next
    turn."""
    module = load_snippet()
    asked = anyio.Event()
    answered_model = vars(module)["model"]

    async def unanswered_model(system: str, tools: list[Any], messages: list[Any]) -> Any:
        # The model's call outlives the cancel: nothing sets this event.
        asked.set()
        await anyio.Event().wait()

    vars(module)["model"] = unanswered_model  # the doc's stand-in for an LLM call, not ours
    agent = module.SkilledAgent()
    agent.skills = AcpSkills(registry)
    responses: list[Any] = []
    async with serve(agent) as (conn, wire):
        with anyio.fail_after(10):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])

            async def prompt(text: str) -> None:
                block = TextContentBlock(type="text", text=text)
                responses.append(await conn.prompt(session_id=session.session_id, prompt=[block]))

            async with anyio.create_task_group() as group:
                group.start_soon(prompt, "please use the deploy skill")
                await asked.wait()
                await conn.cancel(session_id=session.session_id)
            vars(module)["model"] = answered_model
            await prompt("hello")
    assert [response.stop_reason for response in responses] == ["cancelled", "end_turn"]
    chunks = wire.updates(session.session_id, "agent_message_chunk")
    assert [chunk["content"]["text"] for chunk in chunks] == ["Done."]


RUNNER = "## What each call does"  # its first block: the `run_tool` example


@pytest.mark.anyio
async def test_the_doc_s_run_tool_reads_a_file_for_the_model_as_written(
    registry: SkillRegistry, tmp_path: Path
) -> None:
    """The `run_tool` block, as written, passed to `skills.turn` with a `read_file` tool: the
    editor is shown the read as the block builds it, and the model is given the file's text."""
    module = load_snippet(RUNNER)
    notes = tmp_path / "notes.txt"
    notes.write_text("the notes\n", encoding="utf-8")
    function = {"name": "read_file", "arguments": json.dumps({"path": str(notes)})}
    asked = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": function}],
    }
    requests: list[list[dict[str, Any]]] = []

    snippet_agent_class: Any = module.SkilledAgent

    class ToolAgent(snippet_agent_class):  # type: ignore[misc]
        async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
            async with self.skills.turn(
                session_id, prompt, tools=[READ_FILE], run_tool=module.run_tool
            ) as turn:
                async for messages in turn.requests():
                    requests.append(messages)
                    await turn.add_reply(asked if len(requests) == 1 else {"content": "Read."})
            return turn.response

    agent = ToolAgent()
    agent.skills = AcpSkills(registry)
    response, wire, session_id = await first_prompt(agent, tmp_path, "read my notes")
    assert response.stop_reason == "end_turn"
    [end] = wire.updates(session_id, "tool_call_update")
    assert (end["toolCallId"], end["status"]) == ("c1", "completed"), end["content"]
    assert (end["kind"], end["title"]) == ("read", f"Read {notes}")
    assert end["locations"] == [{"path": str(notes)}]
    assert requests[-1][-1] == {"role": "tool", "tool_call_id": "c1", "content": "the notes\n"}


READ_FILE = {"type": "function", "function": {"name": "read_file", "parameters": {}}}

SHARING = "## One connection per MCP server"


@pytest.mark.anyio
async def test_the_sharing_agent_lends_its_own_mcp_session_to_the_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sharing block, as written, over a session the agent opened: its tool call and the
    skills' listing go over that session, the server sees one handshake, and the session is
    still open once the skills have let go of the server and closed."""
    for variable in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(variable, str(tmp_path / "home"))
    monkeypatch.delenv("ACP_SKILLS_TRUST_FILE", raising=False)
    root, record = tmp_path / "served", tmp_path / "methods.txt"
    write_served_skill(root, "served-skill", "A skill from the server.", "Do the thing.")
    arguments = [str(root), "--tool", "--record", str(record)]
    entry = McpServerStdio(name="team", command=sys.executable, args=[SERVER, *arguments], env=[])
    lent: list[McpServer] = []
    with anyio.fail_after(WAIT_SECONDS):
        async with (
            fastmcp_streams(arguments) as (read, write),
            ClientSession(read, write) as own,
        ):
            await own.discover()

            class Agent(load_snippet(SHARING).ToolfulAgent):  # type: ignore[misc]
                async def connect_mcp(self, server: McpServer) -> ClientSession:
                    lent.append(server)
                    return own

            agent = Agent()
            created = await agent.new_session(str(tmp_path), mcp_servers=[entry])
            listed = await agent.skills.ext_method("skills/list", {"sessionId": created.session_id})
            tool = await agent.mcp_sessions[McpServer.from_acp(entry)].call_tool("ping")
            await agent.skills.close_session(created.session_id)  # no session names it now
            await agent.mcp.aclose()
            agent.local.close()
            after = await own.call_tool("ping")
    assert lent == [McpServer.from_acp(entry)]
    assert [(skill["name"], skill["source"]) for skill in listed["skills"]] == [
        ("served-skill", "mcp:team")
    ]
    assert [block.text for block in (*tool.content, *after.content)] == ["pong", "pong"]
    methods = record.read_text(encoding="utf-8").split()
    assert (methods.count("server/discover"), methods.count("initialize")) == (1, 0)
    assert {"skills/list", "tools/call"} <= set(methods)
