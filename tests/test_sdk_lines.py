"""What the project sends is the same on every supported line of the ACP SDK (0.12.x and 1.x;
``python3 dev.py check`` runs this file on both, docs/testing.md).

The 1.x line removed ``acp.helpers`` (and its builders re-exported from ``acp``) and gave the
discriminators of ``acp.schema`` models defaults. Nothing of the project imports those helpers,
and the library builds every update from ``acp.schema`` models with its discriminator passed
explicitly, so no line's defaults decide what goes out.

The frames are pinned byte for byte. One session goes through what the library puts on the
wire: the initialize response with the capability entry, the commands update, the trust
question (its card, the permission request and the card's end), a ``/name`` invocation, the
model's text and tool calls (the ``skill`` tool and a tool the agent does not have), and the
replay of ``session/load``; the demo agent's own initialize response is pinned too. What differs
between runs (the temporary directory, random ids, the package version) is replaced by a
placeholder; nothing else is touched. To accept a deliberate change: ``UPDATE_GOLDEN=1`` with
this file, then review the diff.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from acp_skills.trust import TrustStore
from demo_agent import __version__
from tests.acp_peer import (
    ScriptedModelAgent,
    connected,
    demo_peer,
    fixture_registry,
    skill_call,
    write_fixture_skills,
    write_skill,
)
from tests.providers import assert_matches_golden
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

_RANDOM_ID = re.compile(rb"[0-9a-f]{32}")
ROOT = Path(__file__).resolve().parents[1]
# `acp.helpers.__all__` of 0.12.1: gone in 1.x, with their re-exports from `acp`.
_REMOVED_HELPERS = frozenset(
    {
        "audio_block", "embedded_blob_resource", "embedded_text_resource", "image_block",
        "plan_entry", "resource_block", "resource_link_block", "session_notification",
        "start_edit_tool_call", "start_read_tool_call", "start_tool_call", "text_block",
        "tool_content", "tool_diff_content", "tool_terminal_ref", "update_agent_message",
        "update_agent_message_text", "update_agent_thought", "update_agent_thought_text",
        "update_available_commands", "update_current_mode", "update_plan", "update_tool_call",
        "update_user_message", "update_user_message_text",
    }
)  # fmt: skip


def removed_helper_imports(path: Path) -> list[str]:
    """Each import in ``path`` of what the SDK's 1.x line no longer has, as ``file:line``."""
    text = path.read_text(encoding="utf-8")
    if "acp.helpers" not in text and "from acp import" not in text:
        return []  # most files: no parse needed
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            hit = any(name == "acp.helpers" or name.startswith("acp.helpers.") for name in names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            hit = module == "acp.helpers" or (
                module == "acp"
                and any(a.name in _REMOVED_HELPERS | {"helpers"} for a in node.names)
            )
        else:
            continue
        if hit:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_nothing_imports_the_sdk_helpers_the_1x_line_removed() -> None:
    """No module of the library, the demo agent, the benchmarks or the tests imports
    ``acp.helpers`` or a builder the SDK used to re-export from ``acp``."""
    files = [ROOT / "dev.py"]
    for directory in ("acp_skills", "demo_agent", "bench", "tests"):
        files += sorted((ROOT / directory).rglob("*.py"))
    assert [hit for path in files for hit in removed_helper_imports(path)] == []


def normalized(lines: list[bytes], *places: Path) -> str:
    """The agent's lines, one per line, with ``places``, random ids and the version replaced."""
    text = b"\n".join(lines) + b"\n"
    for place in places:
        for spelling in {str(place), os.path.realpath(place)}:
            text = text.replace(spelling.encode(), b"<tmp>")
    text = _RANDOM_ID.sub(b"<id>", text)
    text = text.replace(f'"version":"{__version__}"'.encode(), b'"version":"<version>"')
    return text.decode("utf-8")


async def test_a_session_s_frames_are_pinned_byte_for_byte(tmp_path: Path) -> None:
    """Initialize, the commands, the trust question, ``/name``, the model's tool calls and the
    replay of ``session/load`` go out exactly as the golden file has them."""
    skills = write_fixture_skills(tmp_path)
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    write_skill(
        project / ".agents" / "skills",
        "review",
        "Review the change — against the checklist.",
        body="1. Read the diff.",
    )
    registry = fixture_registry(tmp_path, skills)
    store = TrustStore(tmp_path / "trust.json")
    async with connected(
        registry, agent_type=ScriptedModelAgent, trust="ask", trust_store=store, answer="allow_once"
    ) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        review = skill_call("call-review", "review")
        review["content"] = "Loading the review steps."
        review["tool_calls"].append(
            {
                "id": "call-lint",
                "type": "function",
                "function": {"name": "lint", "arguments": '{"fix": true}'},
            }
        )
        agent.replies = [review, {"content": "Reviewed: nothing to change."}]
        session_id = await peer.new_session(project)
        assert await peer.ask(session_id, "/deploy prod, then review it") == "end_turn"
        await peer.load_session(session_id, project)
    assert_matches_golden("frames_session.jsonl", normalized(peer.wire.written, tmp_path))


async def test_the_demo_agent_s_initialize_response_is_pinned_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The demo agent's capabilities, its identity and the capability entry go out exactly as
    the golden file has them."""
    async with demo_peer(Sandbox.create(tmp_path)) as agent:
        initialized = agent.wire.written[:1]
    assert_matches_golden("frames_demo_initialize.jsonl", normalized(initialized, tmp_path))
