"""What an MCP server gets wrong is a problem a person sees, never a broken session (contract
§14a): a bad listed skill is left out with `mcp-skill-invalid`, a skipped server is
`mcp-server-unavailable` in doctor (exit 1), `/skills` and `_skills/list`, and `--mcp-server`
without the `mcp` extra is refused up front. Through the agent (in process) and the CLI."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from acp_skills import LocalSkillProvider, SkillRegistry
from acp_skills.mcp import McpServer, McpSkillProvider
from demo_agent.__main__ import parse_args
from tests.acp_peer import Peer, ScriptedModelAgent, connected, write_skill
from tests.cli_runner import install_hint
from tests.mcp_memory import InProcess
from tests.mcp_scripted import scripted_server, served, skill_text, write_script

DEAD = McpServer(label="dead", command=sys.executable, args=("-c", "import sys; sys.exit(3)"))
Cli = Callable[..., tuple[int, str, str]]
DEAD_OPTION = f"dead={sys.executable} -c 'import sys; sys.exit(3)'"


def bad_and_good_entries() -> list[tuple[dict[str, Any], dict[str, str]]]:
    """A listing with one good skill and two that a local file would be skipped for."""
    entries = []
    for folder, fields in (
        ("deploy-app", {"name": "Deploy App", "description": "Not a skill name."}),
        ("empty", {"name": "empty", "description": ""}),
        ("served", {"name": "served", "description": "A good one."}),
    ):
        yaml = "\n".join(f"{key}: {json.dumps(value)}" for key, value in fields.items())
        entries.append(served(folder, skill_text(yaml), fields))
    return entries


@contextlib.asynccontextmanager
async def agent_with(tmp_path: Path, *servers: McpServer) -> AsyncIterator[Peer]:
    """The agent (in process) with the person's own skill and ``servers`` for every session:
    the scripted server in this process too, a dead one as the real process it is."""
    own = tmp_path / "own"
    write_skill(own, "mine", "My own skill.", body="Mine.")
    mcp = McpSkillProvider(servers=servers, timeout=30, transport=InProcess())
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(tmp_path / "h1", tmp_path / "h2", custom_skill_dirs=[str(own)])
    )
    registry.register_provider(mcp)
    try:
        async with connected(registry, agent_type=ScriptedModelAgent, mcp=mcp) as peer:
            yield peer
    finally:
        await mcp.aclose()


@pytest.mark.sdk
@pytest.mark.anyio
async def test_a_bad_listed_skill_is_skipped_and_every_other_skill_stays(tmp_path: Path) -> None:
    """A listed `Deploy App` or an empty description no longer fails `_skills/list` (-32603):
    the person's own skills and the server's good one stay, each bad one is a problem."""
    script = write_script(tmp_path / "s.json", bad_and_good_entries())
    async with agent_with(tmp_path, scripted_server(script)) as peer:
        listing = await peer.ext("skills/list", {"cwd": str(tmp_path)})
        session_id = await peer.new_session(tmp_path)
        await peer.prompt(session_id, "/skills")
        answer = shown(peer, session_id)
    assert [(s["name"], s["source"]) for s in listing["skills"]] == [
        ("mine", "custom"),
        ("served", "mcp:team"),
    ]
    invalid = [p for p in listing["problems"] if p["code"] == "mcp-skill-invalid"]
    assert invalid == [
        {
            "code": "mcp-skill-invalid",
            "severity": "error",
            "path": "skill://deploy-app/SKILL.md",
            "line": None,
            "message": "MCP server 'team' lists skill 'skill://deploy-app/SKILL.md' that is "
            "skipped: field 'name' is not a valid skill name: 'Deploy App' (use lowercase "
            "letters, digits and single hyphens, e.g. 'pdf-tools')",
        },
        {
            "code": "mcp-skill-invalid",
            "severity": "error",
            "path": "skill://empty/SKILL.md",
            "line": None,
            "message": "MCP server 'team' lists skill 'skill://empty/SKILL.md' that is "
            "skipped: field 'description' is empty",
        },
    ]
    assert "`skill://empty/SKILL.md`: error `mcp-skill-invalid`:" in answer


def shown(peer: Peer, session_id: str) -> str:
    """What the agent answered in the session, joined."""
    return "".join(
        u["content"]["text"] for u in peer.wire.updates(session_id, "agent_message_chunk")
    )


@pytest.mark.sdk
@pytest.mark.anyio
async def test_a_skipped_server_is_a_problem_in_skills_list_and_the_skills_command(
    tmp_path: Path,
) -> None:
    """A server that exits is not "No problems found": `mcp-server-unavailable`, a warning
    with its exit status, in `_skills/list` problems and in `/skills`."""
    async with agent_with(tmp_path, DEAD) as peer:
        listing = await peer.ext("skills/list", {"cwd": str(tmp_path)})
        session_id = await peer.new_session(tmp_path)
        await peer.prompt(session_id, "/skills")
        answer = shown(peer, session_id)
    (unavailable,) = [p for p in listing["problems"] if p["code"] == "mcp-server-unavailable"]
    assert unavailable == {
        "code": "mcp-server-unavailable",
        "severity": "warning",
        "path": None,
        "line": None,
        "message": "MCP server 'dead' skipped: the server exited with status 3",
    }
    assert "No problems found." not in answer
    assert (
        "- warning `mcp-server-unavailable`: MCP server 'dead' skipped: the server exited "
        "with status 3"
    ) in answer


def test_doctor_counts_a_dead_server_as_a_problem(cli: Cli, tmp_path: Path) -> None:
    """`doctor --mcp-server dead=...` is no longer `Result: no problems`, exit 0."""
    status, out, _ = cli("doctor", "--cwd", str(tmp_path), "--mcp-server", DEAD_OPTION)
    assert status == 1
    assert "mcp-server-unavailable" in out
    assert "MCP server 'dead' skipped: the server exited with status 3" in out
    assert "Result: no problems" not in out
    status, out, _ = cli("doctor", "--json", "--cwd", str(tmp_path), "--mcp-server", DEAD_OPTION)
    assert status == 1
    assert [p["code"] for p in json.loads(out)["problems"]] == ["mcp-server-unavailable"]


def test_list_warns_of_a_dead_server(cli: Cli, tmp_path: Path) -> None:
    """`list` says why the server's skills are missing."""
    status, _, err = cli("list", "--cwd", str(tmp_path), "--mcp-server", DEAD_OPTION)
    assert status == 0
    assert "warning: MCP server 'dead' skipped: the server exited with status 3" in err


@pytest.fixture
def without_the_mcp_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the `mcp` extra were not installed: importing the SDK fails."""
    monkeypatch.setitem(sys.modules, "mcp", None)
    ours = [name for name in sys.modules if name.partition(".")[0] == "acp_skills"]
    for module in [name for name in ours if name.split(".")[1:2] == ["mcp"]]:
        monkeypatch.delitem(sys.modules, module)


@pytest.mark.usefixtures("without_the_mcp_extra")
def test_the_cli_refuses_mcp_server_without_the_extra(cli: Cli, tmp_path: Path) -> None:
    """A usage error before anything runs, with the command that installs the extra."""
    status, out, err = cli("list", "--cwd", str(tmp_path), "--mcp-server", "team=serve")
    assert status == 2
    assert out == ""
    said = (
        "acp-skills: --mcp-server needs the mcp extra, which is not installed (no module 'mcp'): "
    )
    assert re.fullmatch(re.escape(said) + install_hint("mcp") + "\n", err)


@pytest.mark.usefixtures("without_the_mcp_extra")
def test_the_agent_refuses_mcp_server_without_the_extra(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused at start-up (status 2, one line), not reported later as a skipped server."""
    with pytest.raises(SystemExit) as exited:
        parse_args(["--mcp-server", "team=serve"])
    assert exited.value.code == 2
    said = (
        "acp-skills-demo: --mcp-server needs the mcp extra, which is not installed (no module "
        "'mcp'): "
    )
    assert re.fullmatch(re.escape(said) + install_hint("mcp") + "\n", capsys.readouterr().err)
