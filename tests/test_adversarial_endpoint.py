"""Named hostile inputs, each met once through the real agent or the real console script, so
that a later change cannot quietly bring one of them back.

The model endpoint is a real HTTP server on 127.0.0.1 (`tests.fake_openai`), the agent a real
subprocess over stdio (`tests.agent_client`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.agent_client import Agent, Sandbox, text_prompt
from tests.fake_openai import (
    FakeOpenAI,
    Raw,
    Reply,
    Stream,
    chunk,
    openai_agent_args,
    text_reply,
    tool_call_reply,
)

pytestmark = pytest.mark.anyio

TEST_SECONDS = 60
NOTES_BODY = "# Meeting notes\n\n1. Read the notes.\n"
UNREADABLE = "The model endpoint sent a reply the agent could not read"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox.create(tmp_path)


def sse(*events: Any) -> bytes:
    """Server-sent events: each event a JSON value, or raw text sent as it is."""
    lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in [*lines, "[DONE]"])


def call_piece(**piece: Any) -> dict[str, Any]:
    return chunk({"tool_calls": [piece]})


async def ask(agent: Agent, session_id: str, text: str) -> str:
    response = await agent.conn.prompt(session_id=session_id, prompt=text_prompt(text))
    return response.stop_reason


# -- the model endpoint -------------------------------------------------------------------------

MALFORMED_REPLIES: list[tuple[str, Reply, str]] = [
    ("bad SSE JSON", Raw(sse("{not json")), UNREADABLE),
    (
        "arguments sent as an object",
        Raw(sse(call_piece(index=0, id="c1", function={"name": "skill", "arguments": {}}))),
        "tool-call arguments is a dict",
    ),
    (
        "a chunk without index",
        Raw(sse(call_piece(id="c1", function={"name": "skill", "arguments": "{}"}))),
        "a tool-call piece has no index",
    ),
    ("non-string content", Raw(sse(chunk({"content": {"text": "hi"}}))), "content is a dict"),
    (
        "a non-streamed JSON body",
        Raw(
            json.dumps(
                {"object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}
            ).encode(),
            content_type="application/json",
        ),
        "sent no streamed reply",
    ),
    (
        "a streamed reply past the size cap",
        Raw(sse(*(chunk({"content": "x" * 100_000}) for _ in range(21)))),
        "passed 2,000,000 characters",
    ),
]


async def test_malformed_endpoint_output_is_a_model_error_with_end_turn(
    sandbox: Sandbox,
) -> None:
    """Each malformed reply is shown as a model error and ends the turn; the agent lives on."""
    script: list[Reply] = []
    for _, reply, _ in MALFORMED_REPLIES:
        script += [reply, text_reply("Still here.")]
    with FakeOpenAI(script) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with sandbox.spawn(
                *openai_agent_args(server.base_url), env={"TEST_KEY": "k"}
            ) as agent:
                client = agent.client
                sid = (
                    await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
                ).session_id
                for name, _, expected in MALFORMED_REPLIES:
                    mark = len(client.updates)
                    assert await ask(agent, sid, name) == "end_turn", name
                    assert expected in client.agent_text(sid, since=mark), name
                    mark = len(client.updates)
                    assert await ask(agent, sid, "again") == "end_turn", name
                    assert client.agent_text(sid, since=mark) == "Still here.", name
                assert agent.proc.returncode is None
    assert len(server.requests) == 2 * len(MALFORMED_REPLIES)


async def test_a_one_byte_drip_is_stopped_by_the_overall_timeout(sandbox: Sandbox) -> None:
    """An endpoint sending a byte every 0.2 s never trips a per-read timeout: --timeout holds."""
    drip = Raw(sse(chunk({"content": "Partial"}))[: -len(b"data: [DONE]\n\n")], drip=0.2)
    with FakeOpenAI([drip]) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with sandbox.spawn(
                *openai_agent_args(server.base_url, "--timeout", "1"), env={"TEST_KEY": "k"}
            ) as agent:
                sid = (
                    await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
                ).session_id
                assert await ask(agent, sid, "hello") == "end_turn"
                text = agent.client.agent_text(sid)
            assert await anyio.to_thread.run_sync(server.client_closed.wait, 10.0)
    assert text == "Partial\n\nThe model endpoint did not answer within 1 s. Try again later."


def _call_without_id(name: str, arguments: str) -> Stream:
    piece = {"index": 0, "type": "function", "function": {"name": name, "arguments": arguments}}
    return Stream([call_piece(**piece), chunk({}, "tool_calls")])


async def test_tool_call_ids_are_unique_in_a_session_when_repeated_or_missing(
    sandbox: Sandbox,
) -> None:
    """An endpoint numbering calls per response (call_0 twice) or omitting ids still gets
    every result paired with its own call."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes.", NOTES_BODY)
    arguments = '{"name": "alpha-notes"}'
    script: list[Reply] = [
        tool_call_reply("call_0", "skill", [arguments]),
        tool_call_reply("call_0", "skill", [arguments]),
        _call_without_id("skill", arguments),
        _call_without_id("skill", arguments),
        text_reply("Done."),
    ]
    with FakeOpenAI(script) as server:
        with anyio.fail_after(TEST_SECONDS):
            async with sandbox.spawn(
                *openai_agent_args(server.base_url), env={"TEST_KEY": "k"}
            ) as agent:
                sid = (
                    await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
                ).session_id
                assert await ask(agent, sid, "use the notes skill") == "end_turn"
    messages = server.requests[-1].messages
    call_ids = [
        call["id"] for m in messages if m["role"] == "assistant" for call in m.get("tool_calls", [])
    ]
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(call_ids) == 4
    assert len(set(call_ids)) == 4
    assert all(call_ids)
    assert result_ids == call_ids
