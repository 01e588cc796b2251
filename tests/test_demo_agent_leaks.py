"""No side route lets the model read a skill it may not load (contract §7), end to end: the real
demo agent in this process (`tests.acp_peer.demo_peer`), a real OpenAI-compatible server on
127.0.0.1 scripting the model's tool calls, and real skill files in temporary directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acp_peer import demo_peer
from tests.fake_openai import (
    FakeOpenAI,
    ReceivedRequest,
    Reply,
    Responder,
    openai_agent_args,
    text_reply,
)
from tests.fake_openai import tool_call_reply as tool_call
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

SECRET = "SECRET-STEPS-ONLY-A-PERSON-MAY-SEE"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    return Sandbox.create(tmp_path)


def write_file_skill(path: Path, name: str, body: str, *, hidden: bool = False) -> None:
    flag = "disableModelInvocation: true\n" if hidden else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: The {name} skill.\n{flag}---\n{body}\n")


def calling(*arguments: dict[str, str]) -> Responder:
    """A model that makes one ``skill`` call per request with each of ``arguments``, then ends."""

    def respond(request: ReceivedRequest, index: int) -> Reply:
        if index < len(arguments):
            return tool_call(f"call-{index}", "skill", [json.dumps(arguments[index])])
        return text_reply("Done.")

    return respond


async def run_turn(
    sandbox: Sandbox, server: FakeOpenAI, cwd: Path
) -> tuple[list[str], list[str], list[str]]:
    """One prompt turn; returns the tool results' statuses and texts and the client's reads."""
    args = openai_agent_args(server.base_url)
    async with demo_peer(sandbox, *args, env={"TEST_KEY": "secret"}) as agent:
        session_id = await agent.open_session(cwd)
        assert await agent.ask(session_id, "use the skills") == "end_turn"
        results = agent.client.tool_results(session_id)
        return (
            [status for status, _ in results],
            [text for _, text in results],
            list(agent.client.reads),
        )


def sent_to_model(server: FakeOpenAI) -> str:
    return json.dumps([request.body for request in server.requests], ensure_ascii=False)


async def test_the_model_cannot_read_files_through_a_flat_skill(sandbox: Sandbox) -> None:
    """``path`` with a flat skill is refused, so the hidden skills beside it stay unread."""
    root = sandbox.skills_dir
    write_file_skill(root / "notes.md", "notes", "Take notes.")
    write_file_skill(root / "quiet.md", "quiet", SECRET, hidden=True)
    write_file_skill(root / "vault" / "SKILL.md", "vault", SECRET, hidden=True)
    paths = ["vault/SKILL.md", "quiet.md", "notes.md"]
    with FakeOpenAI(calling(*({"name": "notes", "path": p} for p in paths))) as server:
        statuses, texts, reads = await run_turn(sandbox, server, sandbox.project)
    reason = (
        "it is a single-file skill, so it has no resource files of its own; its directory "
        "holds other skills"
    )
    assert statuses == ["failed"] * 3
    assert texts == [f'Error: cannot read "{p}" from skill "notes": {reason}' for p in paths]
    assert reads == []
    assert SECRET not in sent_to_model(server)


async def test_a_session_inside_a_bundle_cannot_read_its_hidden_project_skills(
    sandbox: Sandbox,
) -> None:
    """Working inside a skill's own directory makes its project skills lie inside the bundle:
    the hidden ones are refused, other files are read through the client as usual."""
    bundle = sandbox.skills_dir / "pub"
    write_file_skill(bundle / "SKILL.md", "pub", "Publish.")
    (bundle / "checklist.md").write_text("1. Tag the release.\n")
    write_file_skill(
        bundle / ".agents" / "skills" / "vault" / "SKILL.md", "vault", SECRET, hidden=True
    )
    calls = [
        {"name": "pub", "path": ".agents/skills/vault/SKILL.md"},
        {"name": "pub", "path": "checklist.md"},
    ]
    with FakeOpenAI(calling(*calls)) as server:
        statuses, texts, reads = await run_turn(sandbox, server, bundle)
    assert statuses == ["failed", "completed"]
    assert texts == [
        'Error: cannot read ".agents/skills/vault/SKILL.md" from skill "pub": it belongs to a '
        "skill that is not available for model invocation",
        "1. Tag the release.\n",
    ]
    assert reads == [str((bundle / "checklist.md").resolve())]
    assert SECRET not in sent_to_model(server)
