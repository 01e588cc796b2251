"""The trust question's frames (`tool_call`, `session/request_permission`, the answer) against
the official ACP v1 schema, for each answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_client import Sandbox, text_prompt, write_skill
from tests.test_demo_agent_trust import AnsweringClient

from .wire import AGENT, CLIENT, FrameLog, Schema

pytestmark = [pytest.mark.anyio, pytest.mark.demo_agent]


@pytest.mark.parametrize(
    "answer", ["allow_once", "allow_always", "reject_once", "reject_always", "cancelled", "error"]
)
async def test_the_trust_question_validates_against_the_schema(
    schema: Schema, tmp_path: Path, answer: str
) -> None:
    """Every frame of a first turn that asks is valid ACP v1, whatever the answer."""
    sandbox = Sandbox.create(tmp_path / "world")
    (sandbox.project / ".git").mkdir()
    write_skill(sandbox.project / ".agents" / "skills", "review", "Review the change.")
    env = {"ACP_SKILLS_TRUST": "ask", "ACP_SKILLS_TRUST_FILE": str(tmp_path / "trust.json")}
    client = AnsweringClient(answer)
    async with sandbox.spawn(env=env, client=client) as agent:
        session = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
        await agent.conn.prompt(session_id=session.session_id, prompt=text_prompt("hello"))
    log = FrameLog(schema)
    for frame in client.frames:
        log.add(AGENT if frame.direction == "incoming" else CLIENT, frame.message)
    asked = [m for m in log.sent_by(AGENT) if m.get("method") == "session/request_permission"]
    assert len(asked) == 1
    # On the wire the question follows its tool_call, so the card has a call to show (how a
    # client dispatches the two is its own affair: the TypeScript SDK may run them out of order).
    sent = log.sent_by(AGENT)
    call_id = asked[0]["params"]["toolCall"]["toolCallId"]
    announced = [
        index
        for index, message in enumerate(sent)
        if message.get("method") == "session/update"
        and message["params"]["update"].get("toolCallId") == call_id
        and message["params"]["update"].get("sessionUpdate") == "tool_call"
    ]
    assert announced
    assert announced[0] < sent.index(asked[0])
    assert [o["kind"] for o in asked[0]["params"]["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    log.assert_valid()
