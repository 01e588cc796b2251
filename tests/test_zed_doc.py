"""docs/zed.md: its settings snippets are Zed custom agents whose command lines really work.

Each ``json`` block of the page is parsed as Zed would read it (``agent_servers`` entries with
``type``, ``command``, ``args``, ``env``), and the command lines are run with the official SDK
client: the main one from a fresh install (the command found on the PATH of that venv, a
process), the DeepSeek ones against a local OpenAI-compatible server with the key where the
page says to keep it. A key kept in a file is read by the agent's start-up only, so that one
runs as Zed runs it, a process started from the command on PATH; a key in the inherited
environment reaches the agent its entry point builds from the snippet's arguments and
environment, in this process (`tests.acp_peer.demo_agent_peer`). The start-up refusals run through
the entry point's `main(argv)` in this process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from acp.schema import McpServerStdio
from acp.stdio import spawn_agent_process

from demo_agent.__main__ import build_parser
from tests.acp_peer import demo_agent_peer
from tests.agent_client import RecordingClient, initialize_agent, text_prompt, write_skill
from tests.demo_in_process import run_agent
from tests.fake_openai import FakeOpenAI, text_reply
from tests.installed import ROOT, Installation, isolated_env
from tests.mcp_scripted import SCRIPTED_SERVER, served, skill_text, write_script

DOC = ROOT / "docs" / "zed.md"
TEST_SECONDS = 60
KEY = "sk-test-0123456789abcdef"
DEV_BIN = Path(sys.executable).parent


def snippets(page: Path = DOC) -> list[tuple[str, dict[str, Any]]]:
    """Every ``agent_servers`` entry of the page's ``json`` blocks, in order, by name."""
    blocks = re.findall(r"```json\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert blocks, f"{page.name} has no json blocks"
    entries = []
    for block in blocks:
        settings = json.loads(block)
        assert list(settings) == ["agent_servers"]
        entries.extend(settings["agent_servers"].items())
    return entries


def snippet(name: str, *, env_names: set[str]) -> dict[str, Any]:
    """The entry called ``name`` whose ``env`` sets exactly ``env_names``."""
    (entry,) = [e for n, e in snippets() if n == name and set(e["env"]) == env_names]
    return entry


def test_every_snippet_is_a_custom_agent_with_no_key_in_it() -> None:
    """Each entry is a custom agent with flags the agent accepts and no literal key in env."""
    entries = snippets()
    assert len(entries) == 5
    for name, entry in entries:
        assert set(entry) == {"type", "command", "args", "env"}, name
        assert entry["type"] == "custom"
        assert entry["command"] == "acp-skills-demo"
        assert all(isinstance(arg, str) for arg in entry["args"])
        build_parser().parse_args(entry["args"])  # exits (fails the test) on an unknown flag
        # Every snippet works as pasted, in any project: the bundled examples are offered.
        assert "--examples" in entry["args"], name
        for variable, value in entry["env"].items():
            assert isinstance(value, str)
            assert not value.startswith("sk-"), f"{name}: a key in the settings"
            assert not variable.endswith("_KEY"), f"{name}: {variable} holds a key"


def test_readme_shows_the_main_snippet() -> None:
    """The README's Zed snippet is the one this page documents (and the tests start)."""
    assert snippets(ROOT / "README.md") == [
        ("acp-skills demo", snippet("acp-skills demo", env_names=set()))
    ]


@pytest.mark.wheel
@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_main_snippet_serves_a_session_from_a_fresh_install(
    installed: Installation, tmp_path: Path
) -> None:
    """The snippet's command, found on the fresh venv's PATH, serves a session with the
    bundled examples and the project's own skills."""
    entry = snippet("acp-skills demo", env_names=set())
    command = shutil.which(entry["command"], path=str(installed.bin))
    assert command is not None
    assert Path(command).parent == installed.bin
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    write_skill(project / ".agents" / "skills", "deploy", "Deploy the service to staging.")
    env = {**isolated_env(home, path=str(installed.bin)), **entry["env"]}
    # Not a test of trust: the suite's mode (tests/conftest.py) admits the project's skill.
    env["ACP_SKILLS_TRUST"] = os.environ["ACP_SKILLS_TRUST"]
    client = RecordingClient()
    with (tmp_path / "stderr.log").open("w") as stderr, anyio.fail_after(TEST_SECONDS):
        async with spawn_agent_process(
            cast(Any, client),
            command,
            *entry["args"],
            env=env,
            cwd=project,
            transport_kwargs={"stderr": stderr},
            observers=[client.observe],
        ) as (conn, _process):
            init = await initialize_agent(conn)
            assert init.agent_info is not None
            assert init.agent_info.name == "acp-skills-demo"
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            listed = await conn.ext_method("skills/list", {"sessionId": session.session_id})
            sources = {skill["name"]: skill["source"] for skill in listed["skills"]}
            assert sources["deploy"] == "project-agents"
            assert sources["code-review"] == "examples"
            response = await conn.prompt(
                session_id=session.session_id, prompt=text_prompt("please use deploy")
            )
            assert response.stop_reason == "end_turn"
            done = client.tool_updates(session.session_id)[-1]
            assert done.status == "completed"
            assert "Do the deploy thing." in done.content[0].content.text


def deepseek_env(entry: dict[str, Any], home: Path, server: FakeOpenAI) -> dict[str, str]:
    """The entry's env over what Zed would pass on, with the endpoint pointed at ``server``.

    Only the base URL changes, through its environment variable, so the snippet's ``args``
    stay exactly as written.
    """
    return {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "ACP_SKILLS_BASE_URL": server.base_url,
        **entry["env"],
    }


def keep_the_key(where: str, home: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Keep the key where the doc says, in ``home``; return the snippet and what Zed passes on.

    ``file``: the key goes in the file the snippet's ``env`` names (its ``~`` is ``home``).
    ``environment``: the key is a variable of the environment Zed inherited.
    """
    home.mkdir()
    if where == "environment":
        return snippet("acp-skills demo (DeepSeek)", env_names=set()), {"DEEPSEEK_API_KEY": KEY}
    entry = snippet("acp-skills demo (DeepSeek)", env_names={"ACP_SKILLS_API_KEY_FILE"})
    key_file = Path(entry["env"]["ACP_SKILLS_API_KEY_FILE"].replace("~", str(home), 1))
    key_file.parent.mkdir(parents=True)
    key_file.write_text(f"  {KEY}\n", encoding="utf-8")
    return entry, {}


@pytest.mark.anyio
async def test_the_deepseek_snippet_sends_the_key_from_the_file_it_names(tmp_path: Path) -> None:
    """The command on PATH, started with the snippet's arguments and environment, reads the key
    from the file its ``env`` names (``~`` is the home) and sends it to the endpoint."""
    home = tmp_path / "home"
    entry, inherited = keep_the_key("file", home)
    command = shutil.which(entry["command"], path=str(DEV_BIN))
    assert command is not None
    client = RecordingClient()
    with FakeOpenAI([text_reply("Hello from the endpoint.")]) as server:
        env = {**inherited, **deepseek_env(entry, home, server)}
        with anyio.fail_after(TEST_SECONDS):
            async with spawn_agent_process(
                cast(Any, client),
                command,
                *entry["args"],
                env=env,
                cwd=tmp_path,
                observers=[client.observe],
            ) as (conn, _process):
                await initialize_agent(conn)
                session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                response = await conn.prompt(
                    session_id=session.session_id, prompt=text_prompt("hello")
                )
                assert response.stop_reason == "end_turn"
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "deepseek-chat"
    assert client.agent_text(session.session_id) == "Hello from the endpoint."


@pytest.mark.sdk
@pytest.mark.anyio
async def test_the_deepseek_snippet_sends_the_key_from_the_inherited_environment(
    tmp_path: Path,
) -> None:
    """With no key file in the snippet, the key Zed's environment holds reaches the endpoint."""
    home = tmp_path / "home"
    entry, inherited = keep_the_key("environment", home)
    with FakeOpenAI([text_reply("Hello from the endpoint.")]) as server:
        env = {**inherited, **deepseek_env(entry, home, server)}
        with anyio.fail_after(TEST_SECONDS):
            async with demo_agent_peer(*entry["args"], env=env, cwd=tmp_path) as agent:
                session = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                response = await agent.conn.prompt(
                    session_id=session.session_id, prompt=text_prompt("hello")
                )
                assert response.stop_reason == "end_turn"
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "deepseek-chat"
    assert agent.client.agent_text(session.session_id) == "Hello from the endpoint."


@pytest.mark.sdk
@pytest.mark.anyio
async def test_the_snippet_that_leaves_context_servers_alone_never_starts_them(
    tmp_path: Path,
) -> None:
    """The ``--mcp-session-servers off`` snippet serves a turn, and the context server Zed
    forwards with ``session/new`` is never started (it would record its first request)."""
    (entry,) = [e for n, e in snippets() if "--mcp-session-servers" in e["args"]]
    record = tmp_path / "methods.txt"
    text = skill_text("name: team-skill\ndescription: A team skill.")
    fields = {"name": "team-skill", "description": "A team skill."}
    script = write_script(
        tmp_path / "team.json", [served("team-skill", text, fields)], record=str(record)
    )
    forwarded = McpServerStdio(
        name="team", command=sys.executable, args=[SCRIPTED_SERVER, str(script)], env=[]
    )
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / "state"), **entry["env"]}
    with anyio.fail_after(TEST_SECONDS):
        async with demo_agent_peer(*entry["args"], env=env, cwd=tmp_path) as agent:
            session = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[forwarded])
            response = await agent.conn.prompt(
                session_id=session.session_id, prompt=text_prompt("hello")
            )
    assert response.stop_reason == "end_turn"
    assert not record.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read the API key file"), ("  \n", "is empty")],
    ids=["missing", "empty"],
)
def test_an_unusable_key_file_stops_the_agent_with_one_line(
    content: str | None, message: str, tmp_path: Path
) -> None:
    """A key file that is missing or empty is told on stderr, status 2, before serving."""
    key_file = tmp_path / "key"
    if content is not None:
        key_file.write_text(content, encoding="utf-8")
    result = run_agent(
        "--model",
        "openai",
        "--state-dir",
        str(tmp_path),
        env={**os.environ, "ACP_SKILLS_API_KEY_FILE": str(key_file)},
    )
    assert result.returncode == 2
    assert result.stderr.startswith("acp-skills-demo: ")
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1
