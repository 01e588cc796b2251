"""What the demo agent adds to skills from MCP servers (contract §14): it advertises HTTP
servers, passes each session's ``mcpServers`` (``session/new`` and ``session/load``) on, reports
every server, and its ``--mcp-server`` servers, and its sessions', end with it.

In process: the demo agent in the rig every demo agent test uses (`tests.acp_peer.demo_peer`),
its MCP servers in this process too (``mcp_transport``, tests/mcp_memory.py). The agent's exit
is tested with a real ``python -m demo_agent`` and real server processes. What the library does
with a server (listing, loading, trust, bounds, cancellation) is tested in tests/test_mcp*.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, TextContentBlock

from acp_skills.mcp import McpServer
from tests.acp_peer import DemoPeer, demo_peer, write_skill
from tests.events import process_gone
from tests.mcp_http import SERVER, write_served_skill
from tests.mcp_memory import InProcess
from tests.mcp_scripted import SCRIPTED_SERVER, served, skill_text, write_script
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


def serve_skill(root: Path, name: str, body: str = "Do the thing.") -> Path:
    return write_served_skill(root, name, f"Skill {name} from the server.", body)


def stdio_entry(root: Path, *extra: str, label: str = "team") -> McpServerStdio:
    # The server's own marker variable: env entries reach the server's configuration.
    env = [EnvVariable(name="SKILLS_SERVER_LABEL", value=label)]
    args = [SERVER, str(root), *extra]
    return McpServerStdio(name=label, command=sys.executable, args=args, env=env)


def configuration(root: Path, *, label: str = "team") -> McpServer:
    """What the agent makes of `stdio_entry` (the server the transport is asked for)."""
    return McpServer(
        label=label,
        command=sys.executable,
        args=(SERVER, str(root)),
        env=(("SKILLS_SERVER_LABEL", label),),
    )


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    return Sandbox.create(tmp_path)


def agent_with_servers(
    sandbox: Sandbox, servers: InProcess | None = None
) -> AbstractAsyncContextManager[DemoPeer]:
    """The demo agent in this process (offline model, not watching), reaching its MCP servers
    through ``servers`` (in this process too)."""
    return demo_peer(sandbox, "--no-watch", mcp_transport=servers or InProcess())


def names(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return [(skill["name"], skill["source"]) for skill in listing["skills"]]


def test_the_agent_answers_initialize_without_the_mcp_sdk_then_loads_it(sandbox: Sandbox) -> None:
    """Built as `python -m demo_agent` builds it, with a --mcp-server and the sessions' servers
    on, the agent answers `initialize` (MCP over HTTP advertised) without the MCP SDK or httpx,
    and, serving, loads them once it has answered (a fresh interpreter's ``sys.modules``):
    nothing is imported later, and no session's first server waits for the import."""
    probe = (
        "import asyncio, sys, anyio\n"
        "from demo_agent.__main__ import build_agent, build_provider, parse_args\n"
        "args = parse_args([*sys.argv[1:], '--no-watch', '--mcp-server', 'team=serve'])\n"
        "agent = build_agent(args, build_provider(args))\n"
        "def loaded(): return [m for m in ('mcp', 'httpx', 'httpx2') if m in sys.modules]\n"
        "answer = asyncio.run(agent.initialize(1))\n"
        "print(args.mcp is not None, answer.agent_capabilities.mcp_capabilities.http)\n"
        "print(loaded())\n"
        "async def served():\n"
        "    async with agent.skills:  # its end waits for the load it started\n"
        "        await agent.initialize(1)\n"
        "        await anyio.wait_all_tasks_blocked()  # the load it started is under way\n"
        "asyncio.run(served())\n"
        "print(loaded())"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *sandbox.args()],
        env={**os.environ, **sandbox.env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    printed = [line for line in result.stdout.splitlines() if "client_initialized" not in line]
    assert printed[-3:] == ["True True", "[]", "['mcp', 'httpx2']"]


def test_an_mcp_sdk_that_does_not_import_skips_the_servers_and_the_agent_serves_on(
    sandbox: Sandbox,
) -> None:
    """An `mcp` package that is found but does not import (another version's, say): the load
    started as `initialize` is answered fails quietly, and each server says why it is skipped."""
    probe = (
        "import asyncio, sys, anyio\n"
        "sys.modules['mcp.client.caching'] = None  # found, but it does not import whole\n"
        "from acp_skills import SkillLookupOptions\n"
        "from demo_agent.__main__ import build_agent, build_provider, parse_args\n"
        "args = parse_args([*sys.argv[1:-1], '--no-watch', '--mcp-server', 'team=serve'])\n"
        "agent = build_agent(args, build_provider(args))\n"
        "async def served():\n"
        "    async with agent.skills:\n"
        "        await agent.initialize(1)\n"
        "        await anyio.wait_all_tasks_blocked()  # the load it started has failed\n"
        "        options = SkillLookupOptions(cwd=sys.argv[-1])\n"
        "        await agent.skills.registry.list(options)\n"
        "        for problem in await agent.skills.registry.diagnose(options):\n"
        "            print('PROBLEM', problem.code, problem.message)\n"
        "    print('served to the end')\n"
        "asyncio.run(served())"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *sandbox.args(), str(sandbox.project)],
        env={**os.environ, **sandbox.env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    printed = result.stdout.splitlines()
    assert printed[-1] == "served to the end"
    [problem] = [line for line in printed if line.startswith("PROBLEM")]
    assert problem.startswith(
        "PROBLEM mcp-server-unavailable MCP server 'team' skipped: the MCP SDK cannot be loaded: "
        "ModuleNotFoundError"
    )


async def test_the_agent_advertises_http_mcp_servers(sandbox: Sandbox) -> None:
    """initialize answers agentCapabilities.mcpCapabilities.http: true."""
    async with agent_with_servers(sandbox) as agent:
        capabilities = agent.initialized.agent_capabilities
    assert capabilities is not None
    assert capabilities.mcp_capabilities is not None
    assert capabilities.mcp_capabilities.http is True


async def test_session_servers_bring_their_skills_and_sessions_do_not_share_catalogs(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Each session sees the skills of the servers it named (their env passed on), and no
    other session's; `_skills/list` reports each session's servers."""
    serve_skill(tmp_path / "a", "alpha-skill")
    serve_skill(tmp_path / "b", "beta-skill")
    servers = InProcess()
    async with agent_with_servers(sandbox, servers) as agent:
        first = await agent.open_session(tmp_path, [stdio_entry(tmp_path / "a", label="a")])
        second = await agent.open_session(tmp_path, [stdio_entry(tmp_path / "b", label="b")])
        plain = await agent.open_session(tmp_path)
        one, two, none = [await agent.listing(sid) for sid in (first, second, plain)]
        opened = list(servers.opened)
    assert names(one) == [("alpha-skill", "mcp:a")]
    assert names(two) == [("beta-skill", "mcp:b")]
    assert names(none) == []
    assert one["mcpServers"] == [
        {"label": "a", "identity": configuration(tmp_path / "a", label="a").identity}
        | {"connected": True, "skillsExtension": True, "skills": 1, "failure": None}
    ]
    assert none["mcpServers"] == []
    assert opened == [
        configuration(tmp_path / "a", label="a"),
        configuration(tmp_path / "b", label="b"),
    ]


async def test_skills_command_and_list_show_each_server_and_every_name_clash(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """/skills and _skills/list: each server's state (one that exits, as a real process), and
    a local skill hiding an MCP one."""
    write_skill(sandbox.skills_dir, "deploy-app", "Deploy the local way.", body="Local.")
    serve_skill(tmp_path / "root", "deploy-app")
    serve_skill(tmp_path / "root", "other-skill")
    gone = McpServerStdio(name="gone", command=sys.executable, args=["-c", "pass"], env=[])
    gone_identity = McpServer(label="gone", command=sys.executable, args=("-c", "pass")).identity
    async with agent_with_servers(sandbox) as agent:
        sid = await agent.open_session(tmp_path, [stdio_entry(tmp_path / "root"), gone])
        listing = await agent.listing(sid)
        await agent.conn.prompt(
            session_id=sid, prompt=[TextContentBlock(type="text", text="/skills")]
        )
        shown = agent.client.agent_text(sid)
    local = next(s for s in listing["skills"] if s["name"] == "deploy-app")
    assert local["source"] == "custom"
    assert ("other-skill", "mcp:team") in names(listing)
    assert listing["shadowed"] == [
        {
            "name": "deploy-app",
            "winner": {"source": "custom", "provider": local["provider"]},
            "loser": {"source": "mcp:team", "provider": "mcp"},
        }
    ]
    team, failed = listing["mcpServers"]
    assert team == {
        "label": "team",
        "identity": configuration(tmp_path / "root").identity,
        "connected": True,
        "skillsExtension": True,
        "skills": 2,
        "failure": None,
    }
    assert failed["label"] == "gone"
    assert failed["connected"] is False
    assert failed["failure"] == "the server exited with status 0"
    assert "**MCP servers** (2)" in shown
    assert "- `team`: connected, 2 skills" in shown
    assert f"- `gone`: skipped: {failed['failure']}" in shown
    # The clash is one of the problems (`skill-shadowed`), as in doctor, naming the server's
    # copy that lost (it has no path to show) and the local one that won.
    lost = "skill 'deploy-app' of the mcp provider (source \"mcp:team\") is shadowed by "
    assert f"- note `skill-shadowed`: {lost}" in shown
    # The doctor it points to is told the same servers: without them it would not see their
    # problems.
    team_option = f"--mcp-server {shlex.quote(configuration(tmp_path / 'root').identity)}"
    assert f"{team_option} --mcp-server {shlex.quote(gone_identity)}` in a terminal" in shown


async def test_an_http_server_from_session_new_brings_its_skills(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """An HTTP entry (url, headers) of session/new is a server of that url, with its headers."""
    serve_skill(tmp_path / "root", "served-skill")
    url = "https://skills.example/mcp"
    entry = HttpMcpServer(
        type="http", name="web", url=url, headers=[HttpHeader(name="X-Team", value="1")]
    )
    servers = InProcess(urls={url: configuration(tmp_path / "root")})
    async with agent_with_servers(sandbox, servers) as agent:
        listing = await agent.listing(await agent.open_session(tmp_path, [entry]))
        opened = list(servers.opened)
    assert names(listing) == [("served-skill", "mcp:web")]
    assert opened == [McpServer(label="web", url=url, headers=(("X-Team", "1"),))]


async def test_session_load_takes_its_own_servers_and_stops_the_one_it_dropped(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """session/load naming other servers changes the catalog; the dropped server's connection
    is the first to end (closed beside the answer, which does not wait for it)."""
    serve_skill(tmp_path / "a", "alpha-skill")
    serve_skill(tmp_path / "b", "beta-skill")
    servers = InProcess()
    async with agent_with_servers(sandbox, servers) as agent:
        sid = await agent.open_session(tmp_path, [stdio_entry(tmp_path / "a", label="a")])
        before = await agent.listing(sid)
        await agent.conn.load_session(
            cwd=str(tmp_path), session_id=sid, mcp_servers=[stdio_entry(tmp_path / "b", label="b")]
        )
        after = await agent.listing(sid)
    assert names(before) == [("alpha-skill", "mcp:a")]
    assert servers.closed[0] == configuration(tmp_path / "a", label="a")
    assert names(after) == [("beta-skill", "mcp:b")]


def stubborn_server(tmp_path: Path, name: str) -> tuple[list[str], Path]:
    """A scripted server serving skill ``name`` that ignores SIGTERM and the end of its input
    (only a kill stops it): its command line, and the file it writes its pid to."""
    fields = {"name": name, "description": f"Skill {name}."}
    text = skill_text(f"name: {name}\ndescription: Skill {name}.")
    pid = tmp_path / f"{name}.pid"
    script = write_script(
        tmp_path / f"{name}.json", [served(name, text, fields)], pid=str(pid), stubborn=True
    )
    return [sys.executable, SCRIPTED_SERVER, str(script)], pid


async def test_no_mcp_server_outlives_the_agent(tmp_path: Path) -> None:
    """A real agent with an `--mcp-server` server and a session's own server, both of which
    ignore SIGTERM and the end of their input: once the agent has exited, neither is left."""
    fixed, fixed_pid = stubborn_server(tmp_path, "fixed-skill")
    own, own_pid = stubborn_server(tmp_path, "own-skill")
    home = tmp_path / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "DSH_HOME": str(home / ".dsh"),
        "DSH_AGENTS_HOME": str(home / ".agents"),
    }
    command = [
        sys.executable,
        "-m",
        "demo_agent",
        "--state-dir",
        str(tmp_path / "state"),
        "--mcp-server",
        "team=" + " ".join(fixed),
    ]
    entry = {"name": "own", "command": own[0], "args": own[1:], "env": []}
    agent = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert agent.stdin is not None
    assert agent.stdout is not None
    stdin, stdout = agent.stdin, agent.stdout

    async def ask(request_id: int, method: str, params: dict[str, Any]) -> Any:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        stdin.write((json.dumps(frame) + "\n").encode())
        await stdin.drain()
        while True:  # notifications come before the answer
            message = json.loads(await stdout.readline())
            if message.get("id") == request_id and "method" not in message:
                return message["result"]

    try:
        with anyio.fail_after(90):
            await ask(1, "initialize", {"protocolVersion": 1})
            created = await ask(2, "session/new", {"cwd": str(tmp_path), "mcpServers": [entry]})
            agent_wide = await ask(3, "_skills/list", {"cwd": str(tmp_path)})
            session = await ask(4, "_skills/list", {"sessionId": created["sessionId"]})
            stdin.close()
            await agent.wait()
        left = [pid for pid in (fixed_pid, own_pid) if not process_gone(int(pid.read_text()))]
    finally:
        # Should the test fail, nothing it started is left running.
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
        for pid in (fixed_pid, own_pid):
            if pid.exists() and not process_gone(int(pid.read_text())):
                os.kill(int(pid.read_text()), signal.SIGKILL)
    assert [skill["source"] for skill in agent_wide["skills"]] == ["mcp:team"]
    assert names(session) == [("fixed-skill", "mcp:team"), ("own-skill", "mcp:own")]
    assert left == []
