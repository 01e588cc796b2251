"""Skills written for Claude Code: ``.claude/skills`` roots and ``$ARGUMENTS``, opt-in.

The library option (``LocalSkillProvider(compat=("claude",))``) on real directories, then the
demo agent's ``--compat claude`` end to end: the agent as its entry point builds it from its
arguments (in this process, `tests/demo_in_process.py`), the official SDK client over a
socketpair, and a project laid out the way Claude Code expects.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry
from tests.acp_peer import DemoPeer, demo_peer
from tests.agent_client import Sandbox, text_prompt
from tests.demo_in_process import run_agent

pytestmark = pytest.mark.anyio

TEST_SECONDS = 30

# A skill as Claude Code's documentation writes them: kebab-case flags, its own keys
# (`allowed-tools`) and argument placeholders in the body.
CLAUDE_SKILL = """\
---
name: fix-issue
description: Fix a GitHub issue following the team's standards.
disable-model-invocation: true
argument-hint: "[issue] [priority]"
allowed-tools: Read, Grep
---
Fix issue $0 (priority $1) in this repository.

Everything the person typed: $ARGUMENTS
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def plain_skill(name: str, body: str = "") -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n---\n{body or name}\n"


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    return {
        "project": project,
        "dsh_home": tmp_path / "home" / ".dsh",
        "agents_home": tmp_path / "home" / ".agents",
        "claude_home": tmp_path / "home" / ".claude",
    }


def provider(homes: dict[str, Path], **options: Any) -> LocalSkillProvider:
    return LocalSkillProvider(
        dsh_home=homes["dsh_home"], agents_home=homes["agents_home"], **options
    )


# -- the library option --------------------------------------------------------------------------


async def test_claude_roots_come_after_ours_only_when_asked(homes: dict[str, Path]) -> None:
    """compat=("claude",) adds project-claude (600) and user-claude (700) after our five roots."""
    options = SkillLookupOptions(cwd=str(homes["project"] / "src"))
    plain = await provider(homes).roots(options)
    assert [root.source for root in plain] == [
        "project-dsh",
        "project-agents",
        "user-dsh",
        "user-agents",
    ]
    claude = provider(homes, compat=("claude",), claude_home=homes["claude_home"])
    roots = await claude.roots(options)
    assert [(root.source, root.rank) for root in roots] == [
        ("project-dsh", 100),
        ("project-agents", 200),
        ("user-dsh", 400),
        ("user-agents", 500),
        ("project-claude", 600),
        ("user-claude", 700),
    ]
    assert roots[4].path == str(homes["project"] / ".claude" / "skills")
    assert roots[5].path == str(homes["claude_home"] / "skills")
    assert claude.compat == ("claude",)


async def test_claude_home_defaults_to_claude_config_dir(
    homes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without claude_home, $CLAUDE_CONFIG_DIR names Claude Code's home (else ~/.claude)."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(homes["claude_home"]))
    roots = await provider(homes, compat=("claude",)).roots(SkillLookupOptions())
    assert roots[-1].path == str(homes["claude_home"] / "skills")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(homes["project"].parent / "elsewhere"))
    roots = await provider(homes, compat=("claude",)).roots(SkillLookupOptions())
    assert roots[-1].path == str(homes["project"].parent / "elsewhere" / ".claude" / "skills")


async def test_a_skill_of_ours_wins_a_clash_with_a_claude_skill(homes: dict[str, Path]) -> None:
    """Same name in ~/.agents/skills and <project>/.claude/skills: ours wins, by rank."""
    write(homes["agents_home"] / "skills" / "deploy" / "SKILL.md", plain_skill("deploy", "ours"))
    write(homes["project"] / ".claude" / "skills" / "deploy" / "SKILL.md", plain_skill("deploy"))
    write(homes["claude_home"] / "skills" / "notes.md", plain_skill("notes"))
    registry = SkillRegistry()
    registry.register_provider(
        provider(homes, compat=("claude",), claude_home=homes["claude_home"])
    )
    options = SkillLookupOptions(cwd=str(homes["project"]))
    snapshot = await registry.snapshot(options)
    assert [(skill.name, skill.source) for skill in snapshot.skills] == [
        ("deploy", "user-agents"),
        ("notes", "user-claude"),
    ]
    deploy = await registry.get("deploy", options)
    assert deploy is not None
    assert deploy.content == "ours"


@pytest.mark.parametrize(
    ("compat", "error", "message"),
    [
        ("claude", TypeError, "compat must be a sequence of names"),
        (("cursor",), ValueError, "compat: unknown tool 'cursor' \\(known: claude\\)"),
    ],
    ids=["lone-string", "unknown-tool"],
)
def test_compat_is_checked_at_construction(
    compat: Any, error: type[Exception], message: str
) -> None:
    """A lone string or an unknown tool is refused when the provider is made."""
    with pytest.raises(error, match=message):
        LocalSkillProvider(compat=compat)


# -- the demo agent ------------------------------------------------------------------------------


def claude_project(sandbox: Sandbox) -> None:
    """A git project with a Claude Code skill, and a personal one in the sandbox's ~/.claude."""
    (sandbox.project / ".git").mkdir(exist_ok=True)
    write(sandbox.project / ".claude" / "skills" / "fix-issue" / "SKILL.md", CLAUDE_SKILL)
    write(sandbox.home / ".claude" / "skills" / "standup" / "SKILL.md", plain_skill("standup"))


async def listed(agent: DemoPeer, sandbox: Sandbox) -> dict[str, str]:
    answer = await agent.conn.ext_method("skills/list", {"cwd": str(sandbox.project)})
    return {skill["name"]: skill["source"] for skill in answer["skills"]}


@pytest.mark.sdk
async def test_claude_project_is_discovered_with_compat_claude_only(tmp_path: Path) -> None:
    """Without --compat the .claude skills are invisible; with it, both are found."""
    sandbox = Sandbox.create(tmp_path)
    claude_project(sandbox)
    sandbox.write_skill("house-rules", "Our own conventions.")
    with anyio.fail_after(TEST_SECONDS):
        async with demo_peer(sandbox) as agent:
            assert await listed(agent, sandbox) == {"house-rules": "custom"}
        async with demo_peer(sandbox, "--compat", "claude") as agent:
            assert await listed(agent, sandbox) == {
                "fix-issue": "project-claude",
                "house-rules": "custom",
                "standup": "user-claude",
            }


@pytest.mark.sdk
async def test_compat_claude_fills_arguments_of_a_slash_invocation(tmp_path: Path) -> None:
    """/fix-issue 42 "very high" fills $0, $1 and $ARGUMENTS in the body the turn carries."""
    sandbox = Sandbox.create(tmp_path)
    claude_project(sandbox)
    with anyio.fail_after(TEST_SECONDS):
        async with demo_peer(sandbox, "--compat", "claude") as agent:
            session = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
            sid = session.session_id
            response = await agent.conn.prompt(
                session_id=sid, prompt=text_prompt('/fix-issue 42 "very high"\nthanks')
            )
            assert response.stop_reason == "end_turn"
            result = agent.client.tool_updates(sid)[-1]
            assert result.status == "completed"
            text = result.content[0].content.text
            assert "Fix issue 42 (priority very high) in this repository." in text
            assert 'Everything the person typed: 42 "very high"' in text
            assert "$ARGUMENTS" not in text


@pytest.mark.sdk
async def test_without_compat_a_body_reaches_the_model_verbatim(tmp_path: Path) -> None:
    """Placeholders stay as written unless --compat claude asks for Claude Code's behaviour."""
    sandbox = Sandbox.create(tmp_path)
    sandbox.write_skill("tally", "Count things.", "Count $0 with awk '{print $1}': $ARGUMENTS")
    with anyio.fail_after(TEST_SECONDS):
        async with demo_peer(sandbox) as agent:
            session = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
            sid = session.session_id
            await agent.conn.prompt(session_id=sid, prompt=text_prompt("/tally apples"))
            text = agent.client.tool_updates(sid)[-1].content[0].content.text
            assert "Count $0 with awk '{print $1}': $ARGUMENTS" in text


def test_unknown_tool_in_acp_skills_compat_is_a_usage_error(tmp_path: Path) -> None:
    """ACP_SKILLS_COMPAT is checked like the flag: status 2, one line naming the value."""
    env = {**os.environ, "ACP_SKILLS_COMPAT": "claude, cursor"}
    result = run_agent("--state-dir", str(tmp_path), env=env)
    assert result.returncode == 2
    assert "ACP_SKILLS_COMPAT: must be one of claude, not 'cursor'" in result.stderr
    assert "Traceback" not in result.stderr
