"""The demo agent with skills from MCP servers named in ``session/new`` / ``session/load``
(contract §14): a real ``python -m demo_agent`` over stdio, real FastMCP 4.2.3 skills servers
(tests/mcp_skills_server.py) over stdio and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import EnvVariable, McpServerStdio

from tests.agent_client import Agent, Sandbox

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("mcp_skills_server.py"))
# Generous: a FastMCP server takes a second or two to start on a loaded machine.
TEST_SECONDS = 90


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox.create(tmp_path)


def serve_skill(root: Path, name: str, body: str = "Do the thing.") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Skill {name} from the server.\n---\n{body}\n",
        encoding="utf-8",
    )
    (folder / "notes.md").write_text(f"notes of {name}\n", encoding="utf-8")
    return folder


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
