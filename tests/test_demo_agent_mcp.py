"""The demo agent with skills from MCP servers named in ``session/new`` / ``session/load``
(contract §14): a real ``python -m demo_agent`` over stdio, real FastMCP 4.2.3 skills servers
(tests/mcp_skills_server.py) over stdio and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio

from tests.agent_client import Agent, Sandbox, text_prompt
from tests.fake_openai import FakeOpenAI, openai_agent_args, text_reply, tool_call_reply
from tests.mcp_http import SERVER, http_skills_server, write_served_skill
from tests.test_demo_agent_trust import AnsweringClient, trust_calls, trust_env

pytestmark = pytest.mark.anyio

# Generous: a FastMCP server takes a second or two to start on a loaded machine.
TEST_SECONDS = 90


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox.create(tmp_path)


def serve_skill(root: Path, name: str, body: str = "Do the thing.") -> Path:
    return write_served_skill(root, name, f"Skill {name} from the server.", body)


def stdio_entry(root: Path, *extra: str, label: str = "team") -> McpServerStdio:
    # The server's own marker variable: env entries reach the process.
    env = [EnvVariable(name="SKILLS_SERVER_LABEL", value=label)]
    args = [SERVER, str(root), *extra]
    return McpServerStdio(name=label, command=sys.executable, args=args, env=env)


async def listed(agent: Agent, session_id: str) -> dict[str, Any]:
    return await agent.conn.ext_method("skills/list", {"sessionId": session_id})


def names(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return [(skill["name"], skill["source"]) for skill in listing["skills"]]


async def test_the_agent_advertises_http_mcp_servers(sandbox: Sandbox) -> None:
    """initialize answers agentCapabilities.mcpCapabilities.http: true."""
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn(initialize=False) as agent:
            answer = await agent.conn.initialize(protocol_version=1)
    capabilities = answer.agent_capabilities
    assert capabilities is not None
    assert capabilities.mcp_capabilities is not None
    assert capabilities.mcp_capabilities.http is True


async def test_session_servers_bring_their_skills_and_sessions_do_not_share_catalogs(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Each session sees the skills of the servers it named, and no other session's."""
    serve_skill(tmp_path / "a", "alpha-skill")
    serve_skill(tmp_path / "b", "beta-skill")
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            first = await agent.conn.new_session(
                cwd=str(sandbox.project), mcp_servers=[stdio_entry(tmp_path / "a", label="a")]
            )
            second = await agent.conn.new_session(
                cwd=str(sandbox.project), mcp_servers=[stdio_entry(tmp_path / "b", label="b")]
            )
            plain = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
            one = await listed(agent, first.session_id)
            two = await listed(agent, second.session_id)
            none = await listed(agent, plain.session_id)
    assert names(one) == [("alpha-skill", "mcp:a")]
    assert names(two) == [("beta-skill", "mcp:b")]
    assert names(none) == []
    assert one["mcpServers"] == [
        {"label": "a", "connected": True, "skillsExtension": True, "skills": 1, "failure": None}
    ]
    assert none["mcpServers"] == []


async def file_appears(path: Path) -> None:
    """Return once ``path`` exists (the test's deadline bounds the wait)."""
    while True:  # the caller's fail_after ends a hang
        if await anyio.Path(path).exists():
            return
        await anyio.sleep(0.05)


def process_gone(pid: int) -> bool:
    """No such process, or only its zombie (an exited child the test runner has not reaped)."""
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


def skill_call(call_id: str, arguments: dict[str, str]) -> Any:
    return tool_call_reply(call_id, "skill", [json.dumps(arguments)])


async def test_the_skill_tool_reads_a_file_of_an_mcp_skill(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``path`` of an MCP skill is read from its server, verified against the manifest."""
    serve_skill(tmp_path / "root", "deploy-app")
    call = {"name": "deploy-app", "path": "notes.md"}
    missing = {"name": "deploy-app", "path": "missing.md"}
    replies = [skill_call("c1", call), skill_call("c2", missing), text_reply("done")]
    with FakeOpenAI(replies) as model:
        with anyio.fail_after(TEST_SECONDS):
            args = openai_agent_args(model.base_url)
            async with sandbox.spawn(*args, env={"TEST_KEY": "secret"}) as agent:
                created = await agent.conn.new_session(
                    cwd=str(sandbox.project), mcp_servers=[stdio_entry(tmp_path / "root")]
                )
                sid = created.session_id
                answer = await agent.conn.prompt(session_id=sid, prompt=text_prompt("deploy"))
        tool_messages = [m for m in model.requests[-1].messages if m.get("role") == "tool"]
    assert answer.stop_reason == "end_turn"
    assert [m["content"] for m in tool_messages] == [
        "notes of deploy-app\n",
        'Error: cannot read "missing.md" from skill "deploy-app": no such file in the '
        "skill's manifest",
    ]


async def test_cancel_during_a_slow_read_ends_the_turn_and_the_agent_keeps_serving(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """session/cancel while the server holds a read: the turn ends cancelled, the next works."""
    serve_skill(tmp_path / "root", "deploy-app")
    marker = tmp_path / "reading"
    record = tmp_path / "methods"
    server = stdio_entry(tmp_path / "root", "--slow-reads", str(marker), "--record", str(record))
    replies = [skill_call("c1", {"name": "deploy-app", "path": "notes.md"}), text_reply("here")]
    with FakeOpenAI(replies) as model:
        with anyio.fail_after(TEST_SECONDS):
            args = openai_agent_args(model.base_url)
            async with sandbox.spawn(*args, env={"TEST_KEY": "secret"}) as agent:
                created = await agent.conn.new_session(
                    cwd=str(sandbox.project), mcp_servers=[server]
                )
                sid = created.session_id
                stops: list[str] = []

                async def run_prompt() -> None:
                    answer = await agent.conn.prompt(session_id=sid, prompt=text_prompt("go"))
                    stops.append(answer.stop_reason)

                async with anyio.create_task_group() as group:
                    group.start_soon(run_prompt)
                    await file_appears(marker)  # the read has reached the server
                    await agent.conn.cancel(session_id=sid)
                after = await agent.conn.prompt(session_id=sid, prompt=text_prompt("again"))
                listing = await listed(agent, sid)
    assert stops == ["cancelled"]
    assert after.stop_reason == "end_turn"
    assert names(listing) == [("deploy-app", "mcp:team")]
    assert marker.read_text() == "skill://deploy-app/notes.md"
    # The server was told (MCP's notifications/cancelled), ahead of the listing that followed.
    methods = record.read_text().splitlines()
    read = len(methods) - 1 - methods[::-1].index("resources/read")
    assert "notifications/cancelled" in methods[read:], methods


async def test_skills_command_and_list_show_each_server_and_every_name_clash(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """/skills and _skills/list: each server's state, and a local skill hiding an MCP one."""
    sandbox.write_skill("deploy-app", "Deploy the local way.")
    serve_skill(tmp_path / "root", "deploy-app")
    serve_skill(tmp_path / "root", "other-skill")
    gone = McpServerStdio(name="gone", command=sys.executable, args=["-c", "pass"], env=[])
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            created = await agent.conn.new_session(
                cwd=str(sandbox.project), mcp_servers=[stdio_entry(tmp_path / "root"), gone]
            )
            sid = created.session_id
            listing = await listed(agent, sid)
            await agent.conn.prompt(session_id=sid, prompt=text_prompt("/skills"))
            shown = agent.client.agent_text(sid)
    local = next(s for s in listing["skills"] if s["name"] == "deploy-app")
    assert local["source"] != "mcp:team"
    assert ("other-skill", "mcp:team") in names(listing)
    assert listing["shadowed"] == [
        {
            "name": "deploy-app",
            "winner": {"source": local["source"], "provider": local["provider"]},
            "loser": {"source": "mcp:team", "provider": "mcp"},
        }
    ]
    team, failed = listing["mcpServers"]
    assert team == {
        "label": "team",
        "connected": True,
        "skillsExtension": True,
        "skills": 2,
        "failure": None,
    }
    assert failed["label"] == "gone"
    assert failed["connected"] is False
    assert failed["failure"]
    assert "**MCP servers** (2)" in shown
    assert "- `team`: connected, 2 skills" in shown
    assert f"- `gone`: skipped: {failed['failure']}" in shown
    assert (
        "- `deploy-app` of MCP server `team` is hidden by the skill of the same name from "
        f"{local['source']}"
    ) in shown


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """A FastMCP skills server over streamable HTTP on 127.0.0.1 (a free port)."""
    serve_skill(tmp_path / "http-root", "served-skill")
    with http_skills_server(tmp_path / "http-root") as url:
        yield url


async def test_an_http_server_from_session_new_brings_its_skills(
    sandbox: Sandbox, http_server: str
) -> None:
    """An HTTP entry (url, headers) of session/new is listed over streamable HTTP."""
    entry = HttpMcpServer(
        type="http", name="web", url=http_server, headers=[HttpHeader(name="X-Team", value="1")]
    )
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[entry])
            listing = await listed(agent, created.session_id)
    assert names(listing) == [("served-skill", "mcp:web")]


async def test_no_session_server_outlives_the_agent(sandbox: Sandbox, tmp_path: Path) -> None:
    """A stdio server a session named, even one that ignores SIGTERM, ends with the agent."""
    serve_skill(tmp_path / "root", "deploy-app")
    pid_file = tmp_path / "server.pid"
    entry = stdio_entry(tmp_path / "root", "--pid-file", str(pid_file), "--ignore-eof")
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[entry])
            assert names(await listed(agent, created.session_id)) == [("deploy-app", "mcp:team")]
        await agent.proc.wait()
    assert process_gone(int(pid_file.read_text()))


async def test_session_load_takes_its_own_servers_and_stops_the_one_it_dropped(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """session/load naming other servers changes the catalog; the dropped server stops."""
    serve_skill(tmp_path / "a", "alpha-skill")
    serve_skill(tmp_path / "b", "beta-skill")
    pid_file = tmp_path / "a.pid"
    first = stdio_entry(tmp_path / "a", "--pid-file", str(pid_file), label="a")
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn() as agent:
            created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[first])
            sid = created.session_id
            before = await listed(agent, sid)
            await agent.conn.load_session(
                cwd=str(sandbox.project),
                session_id=sid,
                mcp_servers=[stdio_entry(tmp_path / "b", label="b")],
            )
            stopped = process_gone(int(pid_file.read_text()))
            after = await listed(agent, sid)
    assert names(before) == [("alpha-skill", "mcp:a")]
    assert stopped
    assert names(after) == [("beta-skill", "mcp:b")]


async def test_a_trusted_server_is_asked_again_for_just_the_skills_it_added_or_changed(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """allow_always stores the server with its {uri, digest} pairs; after the server changes
    one skill and adds another, only those two wait, and the question says what changed."""
    root = tmp_path / "served"
    for name in ("alpha-skill", "beta-skill"):
        serve_skill(root, name)
    env = trust_env(tmp_path)
    first = AnsweringClient("allow_always")
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn(env=env, client=first) as agent:
            sid = await mcp_session(agent, sandbox, stdio_entry(root))
            assert await trust_of(agent, sid) == {"alpha-skill": "pending", "beta-skill": "pending"}
            response = await agent.conn.prompt(session_id=sid, prompt=text_prompt("hi"))
            assert response.stop_reason == "end_turn"
            assert await trust_of(agent, sid) == {"alpha-skill": "trusted", "beta-skill": "trusted"}
    (start, _end) = trust_calls(first, sid)
    assert start.title == "Trust 2 skills from team?"
    (server,) = json.loads((tmp_path / "config" / "trust.json").read_text())["servers"]
    assert server["server"] == f"team={stdio_entry(root).command} {SERVER} {root}"
    assert server["decision"] == "trusted"
    uris = {entry["uri"] for entry in server["resources"]}
    assert {"skill://alpha-skill/SKILL.md", "skill://beta-skill/SKILL.md"} <= uris

    serve_skill(root, "beta-skill", body="Do another thing now.")
    serve_skill(root, "gamma-skill")
    second = AnsweringClient("reject_once")
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn(env=env, client=second) as agent:
            sid = await mcp_session(agent, sandbox, stdio_entry(root))
            assert await trust_of(agent, sid) == {
                "alpha-skill": "trusted",
                "beta-skill": "pending",
                "gamma-skill": "pending",
            }
            response = await agent.conn.prompt(session_id=sid, prompt=text_prompt("hi"))
            assert response.stop_reason == "end_turn"
    (start, end) = trust_calls(second, sid)
    assert start.title == "Trust 2 skills from team?"
    shown = start.content[0].content.text
    assert "alpha-skill" not in shown
    assert (
        "- beta-skill: Skill beta-skill from the server. (MCP server team, "
        "skill://beta-skill/SKILL.md) — changed on the server since you trusted it"
    ) in shown
    assert "gamma-skill" in shown
    assert "— new on the server since you trusted it" in shown
    assert end.status == "failed"


async def mcp_session(agent: Agent, sandbox: Sandbox, entry: McpServerStdio) -> str:
    created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[entry])
    return created.session_id


async def trust_of(agent: Agent, session_id: str) -> dict[str, str]:
    return {skill["name"]: skill["trust"] for skill in (await listed(agent, session_id))["skills"]}
