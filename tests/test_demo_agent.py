"""The demo agent end to end: the real agent, built from its command line and environment, in
this process over a real ACP connection (`tests.acp_peer.demo_peer`), with real SKILL.md files
and a real state directory per test; a restart is a new agent on the same state directory.

The offline model's own decisions: tests/test_offline_model.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    McpServerStdio,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from tests.acp_peer import DemoPeer, Frame, demo_peer
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

NOTES_BODY = """# Meeting notes

1. Read the notes the user points at.
2. List every action item with its owner.
3. Flag decisions that have no owner.
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    return Sandbox.create(tmp_path)


async def skills_prefix(agent: DemoPeer, session_id: str) -> dict[str, Any]:
    return await agent.ext("skills/prefix", {"sessionId": session_id})


def without_envelope(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A record line without its format fields: what ``_skills/prefix`` reports as header."""
    return {key: value for key, value in entry.items() if key not in ("v", "type")}


def is_commands_update(session_id: str) -> Any:
    def match(frame: Frame) -> bool:
        params = frame.message.get("params") or {}
        return (
            frame.direction == "incoming"
            and frame.message.get("method") == "session/update"
            and params.get("sessionId") == session_id
            and params.get("update", {}).get("sessionUpdate") == "available_commands_update"
        )

    return match


def is_session_update(session_id: str) -> Any:
    def match(frame: Frame) -> bool:
        return (
            frame.direction == "incoming"
            and frame.message.get("method") == "session/update"
            and (frame.message.get("params") or {}).get("sessionId") == session_id
        )

    return match


def without_commands(updates: Sequence[Any]) -> list[Any]:
    return [u for u in updates if u.session_update != "available_commands_update"]


async def load(agent: DemoPeer, sandbox: Sandbox, session_id: str) -> list[Any]:
    """``session/load`` of ``session_id``; the updates it replayed before its response."""
    with anyio.fail_after(30):
        await agent.conn.load_session(
            cwd=str(sandbox.project), session_id=session_id, mcp_servers=[]
        )
    response = agent.wire.response_index("session/load")
    count = len(
        [i for i in agent.wire.frame_indexes(is_session_update(session_id)) if i < response]
    )
    # The client handles each update as it arrives: wait until it has handled them all.
    await agent.client.wait_until(lambda: len(agent.client.session_updates(session_id)) >= count)
    return agent.client.session_updates(session_id)[:count]


# -- the catalog -------------------------------------------------------------------------------


async def test_catalog_is_frozen_per_session_instance(sandbox: Sandbox) -> None:
    """A session keeps its catalog after a reload; new and loaded sessions see the new skill."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox) as agent:
        client = agent.client
        a = await agent.open_session()
        assert (await skills_prefix(agent, a)) == {
            "composed": False,
            "messages": [],
            "header": None,
            "budget": None,
        }
        assert await agent.ask(a, "hello") == "end_turn"
        before = await skills_prefix(agent, a)
        assert before["composed"] is True
        [catalog] = before["messages"]
        assert catalog["role"] == "user"
        assert "- `alpha-notes`: Summarise meeting notes" in catalog["text"]
        assert "beta-release" not in catalog["text"]

        sandbox.write_skill("beta-release", "Publish a new release of the package.")
        reloaded = await agent.ext("skills/reload", {})
        assert isinstance(reloaded["revision"], int)
        listed = await agent.ext("skills/list", {"sessionId": a})
        assert [s["name"] for s in listed["skills"]] == ["alpha-notes", "beta-release"]

        # Session A keeps the catalog it composed, for this and every later request.
        assert (await skills_prefix(agent, a))["messages"] == before["messages"]
        mark = len(client.updates)
        assert await agent.ask(a, "please run beta-release now") == "end_turn"
        assert client.tool_updates(a, since=mark) == []
        reply = client.agent_text(a, since=mark)
        assert "`alpha-notes`" in reply
        assert "beta-release" not in reply
        headers = sandbox.headers(a)
        # Same config, system, tools and prefix on both requests: one header, never "change".
        assert [h["reason"] for h in headers] == ["initial"]
        assert headers[0]["messagePrefix"] == before["messages"]
        a_prefix = await skills_prefix(agent, a)
        assert a_prefix["messages"] == before["messages"]
        assert a_prefix["header"] == without_envelope(headers[-1])
        # The prefix is in the header only, never in the stored history.
        assert all("<available_skills>" not in json.dumps(m) for m in sandbox.history(a))

        # A new session composes from the new state.
        b = await agent.open_session()
        assert await agent.ask(b, "hello") == "end_turn"
        b_prefix = await skills_prefix(agent, b)
        [b_catalog] = b_prefix["messages"]
        assert "- `alpha-notes`:" in b_catalog["text"]
        assert "- `beta-release`: Publish a new release" in b_catalog["text"]
        [b_header] = sandbox.headers(b)
        assert b_header["reason"] == "initial"
        assert without_envelope(b_header) == b_prefix["header"]

        # session/load opens a new instance of A: uncomposed until its first prompt, which
        # composes afresh and records a "resume" header.
        await agent.conn.load_session(cwd=str(sandbox.project), session_id=a, mcp_servers=[])
        loaded = await skills_prefix(agent, a)
        assert loaded["composed"] is False
        assert loaded["messages"] == []
        assert loaded["header"] == without_envelope(headers[-1])
        assert await agent.ask(a, "hello again") == "end_turn"
        resumed = await skills_prefix(agent, a)
        assert resumed["composed"] is True
        assert resumed["messages"] == b_prefix["messages"]
        assert resumed["header"]["reason"] == "resume"
        assert resumed["header"]["messagePrefix"] == resumed["messages"]
        headers = sandbox.headers(a)
        assert [h["reason"] for h in headers] == ["initial", "resume"]
        assert without_envelope(headers[-1]) == resumed["header"]


# -- skill tool calls --------------------------------------------------------------------------


async def test_skill_tool_call_success_sequence(sandbox: Sandbox) -> None:
    """A skill the model loads by name is reported as tool_call in_progress, then completed."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox) as agent:
        client = agent.client
        sid = await agent.open_session()
        assert await agent.ask(sid, "please use alpha-notes on today's notes") == "end_turn"

        start, end = client.tool_updates(sid)
        assert start.session_update == "tool_call"
        assert start.status == "in_progress"
        assert start.kind == "read"
        assert start.title == "Load skill alpha-notes"
        assert start.raw_input == {"name": "alpha-notes"}
        assert end.session_update == "tool_call_update"
        assert end.tool_call_id == start.tool_call_id
        assert end.status == "completed"
        [content] = end.content
        result = content.content.text
        assert result.startswith('<skill_content name="alpha-notes">')
        assert "2. List every action item with its owner." in result

        kinds = without_commands(client.session_updates(sid))
        order = [u.session_update for u in kinds]
        assert order.index("tool_call") < order.index("tool_call_update")
        assert order.index("tool_call_update") < order.index("agent_message_chunk")
        reply = client.agent_text(sid)
        assert "I loaded the `alpha-notes` skill" in reply
        assert "2. List every action item with its owner." in reply

        roles = [m["role"] for m in sandbox.history(sid)]
        assert roles == ["user", "assistant", "tool", "assistant"]


async def test_skill_tool_call_failure_sequence(sandbox: Sandbox) -> None:
    """A catalog skill whose file is gone by load time is reported as a failed tool call."""
    path = sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.")
    async with demo_peer(sandbox) as agent:
        client = agent.client
        sid = await agent.open_session()
        assert await agent.ask(sid, "hello") == "end_turn"  # catalog composed with it
        path.unlink()
        path.parent.rmdir()

        mark = len(client.updates)
        assert await agent.ask(sid, "please use alpha-notes") == "end_turn"
        start, end = client.tool_updates(sid, since=mark)
        assert (start.session_update, start.status) == ("tool_call", "in_progress")
        assert start.title == "Load skill alpha-notes"
        assert (end.session_update, end.status) == ("tool_call_update", "failed")
        assert end.tool_call_id == start.tool_call_id
        error = end.content[0].content.text
        assert error == 'Error: skill "alpha-notes" is unknown or no longer available'
        reply = client.agent_text(sid, since=mark)
        assert "failed" in reply
        assert error in reply
        assert sandbox.history(sid)[-2] == {
            "role": "tool",
            "tool_call_id": start.tool_call_id,
            "content": error,
            "_is_error": True,
        }


# -- slash commands ----------------------------------------------------------------------------


async def test_available_commands_follow_the_new_session_response_and_the_first_turn(
    sandbox: Sandbox,
) -> None:
    """The agent as served sends available_commands_update after the session/new response,
    and again in the first turn only (what is advertised: tests/test_commands.py)."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox) as agent:
        wire = agent.wire
        sid = await agent.open_session()
        commands = is_commands_update(sid)
        await wire.wait_for(lambda: bool(wire.frame_indexes(commands)))
        new_response = wire.response_index("session/new")
        [first] = wire.frame_indexes(commands)
        assert first > new_response
        assert [c["name"] for c in wire.commands(sid)[0]] == ["alpha-notes", "skills"]

        assert await agent.ask(sid, "hello") == "end_turn"
        prompt_response = wire.response_index("session/prompt")
        again = wire.frame_indexes(commands)
        assert len(again) == 2
        assert new_response < again[1] < prompt_response

        # Only the first turn re-sends them (nothing changed).
        assert await agent.ask(sid, "hello again") == "end_turn"
        assert len(wire.frame_indexes(commands)) == 2


async def test_slash_command_puts_skill_in_the_turn(sandbox: Sandbox) -> None:
    """``/commit-message fix x`` loads the skill into the turn and the answer quotes its steps."""
    sandbox.write_skill(
        "commit-message",
        "Write a clear git commit message for staged changes.",
        "# Commit messages\n\n1. Look at what is staged.\n2. Write an imperative subject line.\n"
        "3. Explain why in the body.\n",
    )
    async with demo_peer(sandbox) as agent:
        client = agent.client
        sid = await agent.open_session()
        assert await agent.ask(sid, "/commit-message fix x") == "end_turn"

        start, end = client.tool_updates(sid)
        assert (start.session_update, start.status) == ("tool_call", "in_progress")
        assert start.title == "Load skill commit-message"
        assert (end.session_update, end.status) == ("tool_call_update", "completed")
        assert end.tool_call_id == start.tool_call_id
        assert end.content[0].content.text.startswith('<skill_content name="commit-message">')
        reply = client.agent_text(sid)
        assert "I loaded the `commit-message` skill" in reply
        assert "1. Look at what is staged." in reply
        assert "2. Write an imperative subject line." in reply
        assert "3. Explain why in the body." in reply

        # The skill rode in the user's message; the model answered without a tool call.
        history = sandbox.history(sid)
        assert [m["role"] for m in history] == ["user", "assistant"]
        assert history[0]["content"].startswith("/commit-message fix x")
        assert '<skill_content name="commit-message">' in history[0]["content"]


# -- session/load ------------------------------------------------------------------------------


async def test_load_replays_conversation_before_its_response(sandbox: Sandbox) -> None:
    """session/load in a restarted agent replays the stored turns before answering."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox) as agent:
        sid = await agent.open_session()
        assert await agent.ask(sid, "please use alpha-notes") == "end_turn"
        first_tools = agent.client.tool_updates(sid)
        first_reply = agent.client.agent_text(sid)
        mark = len(agent.client.updates)
        assert await agent.ask(sid, "thanks") == "end_turn"
        second_reply = agent.client.agent_text(sid, since=mark)

    async with demo_peer(sandbox) as agent:
        replayed = await load(agent, sandbox, sid)
        assert [u.session_update for u in replayed] == [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "user_message_chunk",
            "agent_message_chunk",
        ]
        assert replayed[0].content.text == "please use alpha-notes"
        assert replayed[4].content.text == "thanks"
        call, result = replayed[1], replayed[2]
        assert call.tool_call_id == first_tools[0].tool_call_id
        assert call.title == "Load skill alpha-notes"
        assert call.raw_input == {"name": "alpha-notes"}
        assert result.tool_call_id == call.tool_call_id
        assert result.status == "completed"
        assert result.content[0].content.text == first_tools[1].content[0].content.text
        assert replayed[3].content.text == first_reply
        assert replayed[5].content.text == second_reply

        # The commands follow the response, and the loaded session takes new turns.
        wire = agent.wire
        await wire.wait_for(lambda: bool(wire.frame_indexes(is_commands_update(sid))))
        assert wire.frame_indexes(is_commands_update(sid))[0] > wire.response_index("session/load")
        assert await agent.ask(sid, "hello") == "end_turn"


async def test_replay_shows_what_was_typed_and_every_skill_call(sandbox: Sandbox) -> None:
    """A replayed /name turn shows the typed text and the skill's tool call as it was seen
    live; a failed model call replays as failed."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    doomed = sandbox.write_skill("beta-gone", "Rotate the staging credentials.", "1. Rotate.")
    async with demo_peer(sandbox) as agent:
        sid = await agent.open_session()
        assert await agent.ask(sid, "/alpha-notes for today") == "end_turn"
        live = agent.client.tool_updates(sid)
        doomed.unlink()  # the catalog was frozen with it; loading it now fails
        assert await agent.ask(sid, "please use beta-gone") == "end_turn"
        assert agent.client.tool_updates(sid)[-1].status == "failed"

    async with demo_peer(sandbox) as agent:
        replayed = without_commands(await load(agent, sandbox, sid))
        typed = [u.content.text for u in replayed if u.session_update == "user_message_chunk"]
        assert typed == ["/alpha-notes for today", "please use beta-gone"]
        # The /name call follows the message that invoked it, with the same id and text.
        assert [u.session_update for u in replayed[:3]] == [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
        ]
        start, end = replayed[1], replayed[2]
        assert start.tool_call_id == live[0].tool_call_id == end.tool_call_id
        assert start.title == "Load skill alpha-notes"
        assert end.status == "completed"
        assert end.content[0].content.text == live[1].content[0].content.text
        ends = [u for u in replayed if u.session_update == "tool_call_update"]
        assert [u.status for u in ends] == ["completed", "failed"]
        assert ends[1].content[0].content.text == (
            'Error: skill "beta-gone" is unknown or no longer available'
        )


async def test_every_completed_turn_is_on_disk_while_the_agent_still_runs(
    sandbox: Sandbox,
) -> None:
    """A turn is saved when it completes, not when the agent stops: a second agent loads the
    session while the first still runs (as after a kill) and replays every turn."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox) as first:
        sid = await first.open_session()
        assert await first.ask(sid, "please use alpha-notes") == "end_turn"
        assert await first.ask(sid, "what else can you do?") == "end_turn"
        stored = sandbox.history(sid)

        async with demo_peer(sandbox) as agent:
            replayed = await load(agent, sandbox, sid)
            users = [u.content.text for u in replayed if u.session_update == "user_message_chunk"]
            assert users == ["please use alpha-notes", "what else can you do?"]
            assert [u.status for u in replayed if u.session_update == "tool_call_update"] == [
                "completed"
            ]
            answers = [u for u in replayed if u.session_update == "agent_message_chunk"]
            assert len(answers) == 2
            assert "I loaded the `alpha-notes` skill" in answers[0].content.text
            assert "- `alpha-notes`:" in answers[1].content.text
            assert await agent.ask(sid, "one more") == "end_turn"
            assert len(sandbox.history(sid)) == len(stored) + 2


# -- bad requests ------------------------------------------------------------------------------


async def test_bad_requests_get_invalid_params_and_agent_keeps_serving(sandbox: Sandbox) -> None:
    """Unknown sessions and relative cwds get -32602; the agent answers the next request."""
    async with demo_peer(sandbox) as agent:
        conn = agent.conn
        sid = await agent.open_session()
        missing = "0" * 32
        project = str(sandbox.project)
        attempts: list[tuple[str, Any]] = [
            (
                "prompt",
                lambda: conn.prompt(
                    session_id=missing, prompt=[TextContentBlock(type="text", text="hi")]
                ),
            ),
            (
                "load",
                lambda: conn.load_session(cwd=project, session_id=missing, mcp_servers=[]),
            ),
            ("new-relative", lambda: conn.new_session(cwd="project", mcp_servers=[])),
            (
                "load-relative",
                lambda: conn.load_session(cwd="project", session_id=sid, mcp_servers=[]),
            ),
        ]
        for label, attempt in attempts:
            with pytest.raises(RequestError) as caught:
                await attempt()
            assert caught.value.code == -32602, label
            assert agent.serving, label
            assert await agent.ask(sid, "hello") == "end_turn", label
        assert agent.serving


async def test_mcp_servers_are_accepted_and_attached_context_reaches_the_model(
    sandbox: Sandbox,
) -> None:
    """HTTP and stdio MCP entries are accepted (servers that are not there are skipped, told);
    embedded files and links in a prompt become part of the user's message."""
    servers: list[Any] = [
        HttpMcpServer(type="http", name="web", url="http://127.0.0.1:9/mcp", headers=[]),
        McpServerStdio(name="local", command="/bin/true", args=[], env=[]),
    ]
    prompt: list[Any] = [
        TextContentBlock(type="text", text="Summarise the attached notes."),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///notes.md", text="Ship on Friday."),
        ),
        ResourceContentBlock(type="resource_link", name="plan", uri="file:///plan.md"),
    ]
    async with demo_peer(sandbox) as agent:
        sid = await agent.open_session(mcp_servers=servers)
        with anyio.fail_after(30):
            response = await agent.conn.prompt(session_id=sid, prompt=prompt)
        assert response.stop_reason == "end_turn"
    skipped = [line for line in agent.log.splitlines() if "mcp_server_skipped" in line]
    assert any("server=web" in line for line in skipped), skipped
    assert any("server=local" in line for line in skipped), skipped
    (user,) = [m for m in sandbox.history(sid) if m["role"] == "user"]
    assert user["content"] == (
        "Summarise the attached notes.\n\n"
        '<context uri="file:///notes.md">\nShip on Friday.\n</context>\n\n'
        "(attached: file:///plan.md)"
    )
    assert user["_display"] == "Summarise the attached notes."


async def test_a_live_session_loads_before_its_first_prompt(sandbox: Sandbox) -> None:
    """session/load of a session that exists but has no record yet is a reload, not unknown."""
    async with demo_peer(sandbox) as agent:
        sid = await agent.open_session()
        await agent.conn.load_session(cwd=str(sandbox.project), session_id=sid, mcp_servers=[])
        assert await agent.ask(sid, "hello") == "end_turn"
