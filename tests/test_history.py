"""The history a turn yields, sent in the Anthropic Messages shape (contract §16, last point):
`acp_skills.history.anthropic_request` makes every history a Messages endpoint takes, where
the same conversation carried over role by role is refused; and a real turn (a skill call, a
tool that fails, a tool cancelled with its turn) goes to the endpoint through it, request by
request, as does docs/history.md's own example agent. The endpoint is `tests/fake_anthropic.py`,
which refuses what the real one refuses."""

from __future__ import annotations

import json
import re
import sys
import types
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_skills.acp import AcpSkills, ToolCall
from acp_skills.history import anthropic_request
from tests.acp_peer import SkillsAgent, connected, fixture_registry, write_fixture_skills
from tests.doc_snippets import first_prompt, integration_snippet, load_snippet
from tests.fake_anthropic import anthropic_endpoint, problem_of, text, tool_use

pytestmark = pytest.mark.anyio

PREFIX = {"role": "user", "content": "<system-reminder>The skills: deploy.</system-reminder>"}
PROMPT = {"role": "user", "content": "Deploy the app."}


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asks(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """An assistant message of the history, with its tool calls."""
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def result(call_id: str, words: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": words}


def posted(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as an agent completes it before posting it."""
    return {"model": "claude-test", "max_tokens": 1024, **body}


def role_by_role(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The conversation carried over message by message, as a first attempt would: the shape of
    each message changed, its place in the sequence kept."""
    converted = []
    for message in messages:
        if message["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            converted.append({"role": "user", "content": [block | {"content": message["content"]}]})
            continue
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message["content"] or ""}]
        for each in message.get("tool_calls") or []:
            function = each["function"]
            arguments = json.loads(function["arguments"])
            blocks.append(tool_use(each["id"], function["name"], arguments))
        converted.append({"role": message["role"], "content": blocks})
    return {"messages": converted}


# Each history: as a Chat Completions endpoint takes it (or as a record left it), and the
# Messages endpoint's own words for the sequence carried over role by role.
HISTORIES = {
    "prefix-then-prompt": (
        [PREFIX, PROMPT],
        'messages: roles must alternate between "user" and "assistant", but found multiple '
        '"user" roles in a row',
    ),
    "assistant-first": (
        [{"role": "assistant", "content": "Hello again."}, PROMPT],
        'messages: first message must use the "user" role',
    ),
    "empty-reply": (
        [PROMPT, {"role": "assistant", "content": ""}, {"role": "user", "content": "Well?"}],
        "messages: text content blocks must contain non-whitespace text",
    ),
    "result-without-its-call": (
        [PROMPT, {"role": "assistant", "content": "Done."}, result("gone", "Error: cancelled")],
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: gone. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message.",
    ),
    "call-without-its-result": (
        [PROMPT, asks(call("c1", "skill", '{"name": "deploy"}'), content="Loading."), PROMPT],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "c1. Each `tool_use` block must have a corresponding `tool_result` block in the next "
        "message.",
    ),
    "results-then-the-next-prompt": (
        [
            PROMPT,
            asks(call("c1", "skill", '{"name": "deploy"}'), call("c2", "run"), content="On it."),
            result("c1", "The deploy skill."),
            result("c2", "Error: the turn was cancelled before this tool call finished"),
            {"role": "user", "content": "Try again."},
        ],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "c2. Each `tool_use` block must have a corresponding `tool_result` block in the next "
        "message.",
    ),
}


@pytest.mark.parametrize(("history", "refusal"), HISTORIES.values(), ids=HISTORIES.keys())
def test_a_history_carried_over_role_by_role_is_refused_and_converted_is_taken(
    history: list[dict[str, Any]], refusal: str
) -> None:
    """What the endpoint refuses (two user turns in a row, an assistant turn first, empty
    content, a result without its call, a call without its result) it takes once converted."""
    with anthropic_endpoint() as endpoint:
        assert _post(endpoint.url, posted(role_by_role(history))) == (400, refusal)
        assert _post(endpoint.url, posted(anthropic_request(history)))[0] == 200
    assert endpoint.refused == [(0, refusal)]


def test_the_prefix_and_the_prompt_become_one_message_after_the_system_prompt() -> None:
    """The system prompt goes to `system`, the frozen prefix and the prompt to one user message,
    and the tools become Messages tools."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    function = {"name": "skill", "description": "Load a skill.", "parameters": schema}
    tool = {"type": "function", "function": function}
    body = anthropic_request([PREFIX, PROMPT], system="You are an agent.", tools=[tool])
    assert body == {
        "system": "You are an agent.",
        "messages": [
            {"role": "user", "content": [text(PREFIX["content"]), text(PROMPT["content"])]},
        ],
        "tools": [
            {
                "name": "skill",
                "description": "Load a skill.",
                "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
        ],
    }
    assert problem_of(posted(body)) is None


def test_results_come_first_in_the_message_that_follows_their_calls() -> None:
    """A cancelled turn's results and the next prompt share one user message, results first;
    arguments that are no JSON object are carried as their text."""
    history = [
        PROMPT,
        asks(call("c1", "skill", '{"name": "deploy"}'), call("c2", "run", "not json")),
        result("c1", "The deploy skill."),
        result("c2", "Error: the turn was cancelled before this tool call finished"),
        {"role": "user", "content": "Try again."},
    ]
    body = anthropic_request(history)
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                tool_use("c1", "skill", {"name": "deploy"}),
                tool_use("c2", "run", {"arguments": "not json"}),
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "The deploy skill."},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "Error: the turn was cancelled before this tool call finished",
                },
                text("Try again."),
            ],
        },
    ]
    assert problem_of(posted(body)) is None


@pytest.mark.parametrize(
    "history",
    [
        [{"role": "user", "content": ""}, {"role": "assistant", "content": "hi"}, PROMPT],
        [
            {"role": "user", "content": ""},
            asks(call("c1", "skill", "{}")),
            result("c1", "The deploy skill."),
            {"role": "assistant", "content": "hi"},
            PROMPT,
        ],
    ],
    ids=["empty-prompt-then-reply", "empty-prompt-then-a-call-and-its-result"],
)
def test_a_request_starts_with_the_person_even_after_an_empty_first_message(
    history: list[dict[str, Any]],
) -> None:
    """An empty first message is left out before the assistant's leading ones, so the
    request still starts with a message of the person's."""
    body = anthropic_request(history)
    assert body["messages"] == [{"role": "user", "content": [text(PROMPT["content"])]}]
    assert problem_of(posted(body)) is None


def test_call_ids_the_endpoint_would_refuse_or_that_repeat_are_replaced_in_pairs() -> None:
    """An id with other characters, or one an earlier call already had, gets an id of its
    own, and its result follows it."""
    history = [
        PROMPT,
        asks(call("call:1", "run")),
        result("call:1", "first"),
        asks(call("call:1", "run")),
        result("call:1", "second"),
    ]
    body = anthropic_request(history)
    assert problem_of(posted(body)) is None
    first, second = (body["messages"][index]["content"][0]["id"] for index in (1, 3))
    assert first != second
    assert [m["content"][0]["tool_use_id"] for m in body["messages"][2::2]] == [first, second]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"role": "function", "content": "x"}, "message 0 has the role 'function'"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            "message 0 has a content part of type 'image_url', not text",
        ),
    ],
    ids=["unknown-role", "not-text"],
)
def test_a_message_of_another_shape_is_a_value_error_naming_it(
    message: dict[str, Any], error: str
) -> None:
    """Bad input is refused with the message's place and what is wrong with it."""
    with pytest.raises(ValueError, match="^" + re.escape(error)):
        anthropic_request([message])


# -- a real turn, through the converter ---------------------------------------------------------

SYSTEM = "You are a test agent. Load a skill before acting on it."
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("fail", "wait")
]


class AnthropicAgent(SkillsAgent):
    """An agent whose model is a Messages endpoint: each request converted, posted, and its
    answer turned back into the assistant message the turn takes."""

    url = ""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.waiting = anyio.Event()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        async with self.skills.turn(
            session_id, prompt, system=SYSTEM, tools=TOOLS, run_tool=self.run_tool
        ) as turn:
            async for messages in turn.requests():
                body = anthropic_request(messages, system=SYSTEM, tools=turn.tools)
                status, answer = await anyio.to_thread.run_sync(_post_json, self.url, posted(body))
                assert status == 200, answer
                await turn.add_reply(_assistant_message(answer["content"]))
        return turn.response

    async def run_tool(self, call: ToolCall) -> str:
        if call.name == "fail":
            raise OSError("the disk is full")
        self.waiting.set()  # "wait": runs until its turn is cancelled
        await anyio.sleep_forever()
        return "never"


def _assistant_message(content: list[dict[str, Any]]) -> dict[str, Any]:
    # The answer's blocks as the Chat Completions assistant message `add_reply` takes.
    words = "".join(block["text"] for block in content if block["type"] == "text")
    calls = [
        call(block["id"], block["name"], json.dumps(block["input"]))
        for block in content
        if block["type"] == "tool_use"
    ]
    return {"content": words, **({"tool_calls": calls} if calls else {})}


@pytest.mark.sdk
async def test_a_turn_with_a_skill_a_failing_tool_and_a_cancelled_one_is_taken_request_by_request(
    tmp_path: Path,
) -> None:
    """Every request of two turns (a skill loaded, a tool that raised, one cancelled with its
    turn, then the next prompt) is accepted, and the last one carries each call with its
    result."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    replies = [
        [tool_use("toolu_1", "skill", {"name": "deploy"}), tool_use("toolu_2", "fail", {})],
        [text("One more step."), tool_use("toolu_3", "wait", {})],
        [text("Deployed.")],
    ]
    with anthropic_endpoint(replies) as endpoint:
        async with connected(registry, agent_type=AnthropicAgent, trust="all") as peer:
            agent: Any = peer.agent
            agent.url = endpoint.url
            session_id = await peer.new_session(tmp_path)
            stops: list[str] = []

            async def first_turn() -> None:
                stops.append((await peer.prompt(session_id, "Deploy the app.")).stop_reason)

            async with anyio.create_task_group() as group:
                group.start_soon(first_turn)
                with anyio.fail_after(30):
                    await agent.waiting.wait()
                await peer.conn.cancel(session_id=session_id)
            stops.append((await peer.prompt(session_id, "Is it done?")).stop_reason)
    assert stops == ["cancelled", "end_turn"]
    assert endpoint.refused == []
    assert len(endpoint.received) == 3
    last = endpoint.received[-1]
    assert last["system"] == SYSTEM
    assert [tool["name"] for tool in last["tools"]] == ["skill", "fail", "wait"]
    roles = [(m["role"], [b["type"] for b in m["content"]]) for m in last["messages"]]
    assert roles == [
        ("user", ["text", "text"]),  # the catalog, then the prompt
        ("assistant", ["tool_use", "tool_use"]),
        ("user", ["tool_result", "tool_result"]),
        ("assistant", ["text", "tool_use"]),
        ("user", ["tool_result", "text"]),  # the cancelled call's result, then the next prompt
    ]
    results = [b for m in last["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert 'skill_content name="deploy"' in results[0]["content"]
    assert results[1]["content"] == 'Error: the tool "fail" failed: the disk is full'
    assert results[2]["content"] == "Error: the turn was cancelled before this tool call finished"


# -- docs/history.md's block, as written --------------------------------------------------------

HISTORY_DOC = Path(__file__).resolve().parent.parent / "docs" / "history.md"


def anthropic_package(url: str) -> types.ModuleType:
    """An `anthropic` module whose `AsyncAnthropic().messages.create(**body)` posts ``body`` to
    the endpoint at ``url`` and answers with the reply's blocks as attributes, as the package
    does (the library does not depend on the package)."""

    async def create(**body: Any) -> Any:
        status, answer = await anyio.to_thread.run_sync(_post_json, url, body)
        assert status == 200, answer
        blocks = [types.SimpleNamespace(**block) for block in answer["content"]]
        return types.SimpleNamespace(content=blocks, stop_reason=answer["stop_reason"])

    def client() -> Any:
        return types.SimpleNamespace(messages=types.SimpleNamespace(create=create))

    package = types.ModuleType("anthropic")
    package.AsyncAnthropic = client  # type: ignore[attr-defined]
    return package


@pytest.mark.sdk
async def test_the_doc_s_claude_agent_runs_as_written_after_the_integration_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/history.md's block, after docs/integration.md's agent: the model's tool call loads
    the skill, and every request is one the Messages endpoint takes."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    replies = [[tool_use("toolu_1", "skill", {"name": "deploy"})], [text("Deployed.")]]
    with anthropic_endpoint(replies) as endpoint:
        monkeypatch.setitem(sys.modules, "anthropic", anthropic_package(endpoint.url))
        module = load_snippet()
        block = integration_snippet("## The Anthropic Messages shape", HISTORY_DOC)
        exec(compile(block, str(HISTORY_DOC), "exec"), module.__dict__)
        agent = module.ClaudeAgent()
        agent.skills = AcpSkills(registry)
        response, wire, session_id = await first_prompt(agent, tmp_path, "Deploy the app.")
    assert response.stop_reason == "end_turn"
    assert (endpoint.refused, len(endpoint.received)) == ([], 2)
    [loaded] = wire.updates(session_id, "tool_call_update")
    assert loaded["status"] == "completed"
    assert 'skill_content name="deploy"' in loaded["content"][0]["content"]["text"]
    chunks = wire.updates(session_id, "agent_message_chunk")
    assert [chunk["content"]["text"] for chunk in chunks] == ["Deployed."]


def _post_json(url: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "anthropic-version": "2023-06-01"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _post(url: str, body: Mapping[str, Any]) -> tuple[int, str]:
    """The status, and the refusal's message (empty when taken)."""
    status, answer = _post_json(url, body)
    return status, answer.get("error", {}).get("message", "") if status != 200 else ""
