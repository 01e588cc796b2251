"""`AcpSkills.turn` and the session lifecycle it owns: cancellation, reopened sessions, owners.

The agent and the client talk over a real in-memory ACP connection (`tests/acp_peer.py`'s
`connected` pair); the agent here drives its turns through `PromptTurn`, as an agent author's
code does.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import TextContentBlock
from anyio.abc import TaskGroup

from acp_skills import (
    PrefixMessage,
    SkillDefinition,
    SkillLookupOptions,
    SkillRegistry,
    ToolResult,
    render_catalog,
)
from acp_skills.acp import AcpSkills, ToolCall
from acp_skills.acp.turn import PromptTurn
from acp_skills.record import HistoryEntry, InMemorySessionStore, RecordEntry
from tests.acp_peer import (
    CLIENT_MARKER,
    GUIDE_ON_DISK,
    Peer,
    RecordingClient,
    ScriptedModelAgent,
    connected,
    fixture_registry,
    rendered,
    skill_call,
    text_content,
    write_fixture_skills,
)
from tests.fake_openai import Fail, FakeOpenAI, ReceivedRequest, Reply, text_reply, tool_call_reply
from tests.providers import ListProvider, candidate

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


@pytest.fixture
def registry(tmp_path: Path) -> SkillRegistry:
    """deploy, compare, internal (model-only) and secret (person-only), on disk."""
    return fixture_registry(tmp_path, write_fixture_skills(tmp_path))


@pytest.fixture
def guide(tmp_path: Path) -> str:
    """The deploy skill's guide, as the absolute real path the client is asked to read."""
    return os.path.realpath(tmp_path / "skills" / "deploy" / "references" / "guide.md")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


async def test_a_turn_runs_skill_calls_and_records_the_conversation(
    registry: SkillRegistry, project: Path
) -> None:
    """A reply with a ``skill`` call is reported, answered and recorded; the next reply ends."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        agent.replies = [skill_call("c1", "deploy"), {"content": "Deployed."}]
        session_id = await peer.new_session(project)
        response = await peer.prompt(session_id, "ship it")
        history = (await peer.skills.session(session_id)).history
    assert response.stop_reason == "end_turn"
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2]["tool_call_id"] == "c1"
    assert str(history[2]["content"]).startswith('<skill_content name="deploy">')
    # The second request carries the tool result, without the record's bookkeeping keys.
    assert agent.requests[1][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": history[2]["content"],
    }
    [start] = peer.wire.updates(session_id, "tool_call")
    assert start["toolCallId"] == "c1"
    chunks = [u["content"]["text"] for u in peer.wire.updates(session_id, "agent_message_chunk")]
    assert chunks == ["Deployed."]


async def test_the_agent_s_own_tools_go_to_its_runner_and_unknown_tools_get_an_error(
    registry: SkillRegistry, project: Path
) -> None:
    """``run_tool`` answers the agent's tools; without one, a call is an ``Error:`` result."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        ran: list[tuple[str, object]] = []

        async def run_tool(call: ToolCall) -> str:
            ran.append((call.name, call.arguments))
            return "42"

        async with peer.skills.turn(
            session_id, [TextContentBlock(type="text", text="x")], run_tool=run_tool
        ) as turn:
            answer = await turn.call_tool("t1", "calc", '{"expr": "6*7"}')
        async with peer.skills.turn(session_id, [TextContentBlock(type="text", text="y")]) as turn:
            refused = await turn.call_tool("t2", "calc", "{}")
    assert ran == [("calc", {"expr": "6*7"})]
    assert (answer.text, answer.is_error) == ("42", False)
    assert refused.is_error
    assert refused.text == 'Error: there is no tool called "calc"'


async def test_cancel_ends_the_turn_with_cancelled_and_keeps_what_completed(
    registry: SkillRegistry, project: Path
) -> None:
    """``session/cancel`` mid-turn: stop reason cancelled, history kept, next turn works."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        agent.gate = anyio.Event()
        async with anyio.create_task_group() as group:
            results: list[str] = []

            async def run() -> None:
                results.append((await peer.prompt(session_id, "slow one")).stop_reason)

            group.start_soon(run)
            with anyio.fail_after(5):
                await agent.waiting.wait()
            await peer.conn.cancel(session_id=session_id)
        agent.gate = None
        assert results == ["cancelled"]
        assert (await peer.prompt(session_id, "again")).stop_reason == "end_turn"
        history = (await peer.skills.session(session_id)).history
    assert [(m["role"], m.get("content")) for m in history] == [
        ("user", "slow one"),
        ("user", "again"),
        ("assistant", "ok"),
    ]


async def hold_a_turn_in_a_tool(peer: Peer, session_id: str, group: TaskGroup) -> list[str]:
    """Start a turn in ``group`` whose model calls the agent's tool ``wait`` (call ``t1``),
    which runs until cancelled; return once it runs, with the list its stop reason goes to."""
    started, stops = anyio.Event(), list[str]()

    async def run_tool(call: ToolCall) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    call = {
        "content": "",
        "tool_calls": [{"id": "t1", "function": {"name": "wait", "arguments": "{}"}}],
    }

    async def run() -> None:
        prompt = [TextContentBlock(type="text", text="wait")]
        async with peer.skills.turn(session_id, prompt, run_tool=run_tool) as turn:
            await turn.request_messages()
            await turn.add_reply(call)
        stops.append(turn.response.stop_reason)

    group.start_soon(run)
    with anyio.fail_after(5):
        await started.wait()
    return stops


def assert_ends_with_the_cancelled_result(history: Sequence[Mapping[str, object]]) -> None:
    assert history[-1]["role"] == "tool"
    assert history[-1]["tool_call_id"] == "t1"
    assert str(history[-1]["content"]).startswith("Error: the turn was cancelled")


async def test_a_cancelled_tool_call_still_gets_a_result_in_the_record(
    registry: SkillRegistry, project: Path
) -> None:
    """Cancelled while the agent's own tool runs: the call is answered with an error."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        async with anyio.create_task_group() as group:
            stops = await hold_a_turn_in_a_tool(peer, session_id, group)
            peer.skills.cancel(session_id)
        history = (await peer.skills.session(session_id)).history
        await peer.ext("skills/list", {"sessionId": session_id})
    assert stops == ["cancelled"]
    assert_ends_with_the_cancelled_result(history)
    [end] = [u for u in peer.wire.updates(session_id, "tool_call_update")]
    assert end["status"] == "failed"


@pytest.mark.parametrize("opening", ["resume", "load"])
async def test_a_session_reopened_while_a_tool_runs_answers_the_call_in_its_new_instance(
    registry: SkillRegistry, project: Path, opening: str
) -> None:
    """Resumed or loaded while the agent's own tool runs: the new instance's history has
    the cancelled call's result, so its next request to the model is well formed."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        async with anyio.create_task_group() as group:
            await hold_a_turn_in_a_tool(peer, session_id, group)
            reopen = getattr(peer.skills, f"{opening}_session")
            reopened = await reopen(session_id, str(project))
    assert_ends_with_the_cancelled_result(reopened.history)


async def test_a_turn_cancelled_while_composing_discards_its_prefix(
    tmp_path: Path, project: Path
) -> None:
    """A cancel while the catalog is still being discovered leaves the session uncomposed."""
    release = anyio.Event()
    listing = anyio.Event()

    async def hold() -> None:
        listing.set()
        await release.wait()

    provider = ListProvider("slow", [candidate("alpha", provider="slow")], before_list=hold)
    registry = SkillRegistry()
    registry.register_provider(provider)
    skills = AcpSkills(registry)
    skills.attach(RecordingClient())  # the editor a turn reports to
    session_id = "s1"
    await skills.open_session(session_id, str(project))
    async with anyio.create_task_group() as group:

        async def run() -> None:
            async with skills.turn(session_id, [TextContentBlock(type="text", text="hi")]) as turn:
                assert turn.finished
                assert [m async for m in turn.requests()] == []
            assert turn.response.stop_reason == "cancelled"

        group.start_soon(run)
        with anyio.fail_after(5):
            await listing.wait()
        skills.cancel(session_id)
    session = await skills.session(session_id)
    assert not session.composed
    release.set()
    async with skills.turn(session_id, [TextContentBlock(type="text", text="again")]) as turn:
        await turn.request_messages()
    assert session.composed


async def test_a_second_turn_while_one_runs_is_an_invalid_request(
    registry: SkillRegistry, project: Path
) -> None:
    """Two turns of one session at once: the second is refused with -32600."""
    skills = AcpSkills(registry)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await skills.open_session("s1", str(project))
    async with skills.turn("s1", [TextContentBlock(type="text", text="one")]):
        with pytest.raises(RequestError) as caught:
            async with skills.turn("s1", [TextContentBlock(type="text", text="two")]):
                pass
    assert caught.value.code == -32600


async def test_requests_stop_at_the_turn_limit(registry: SkillRegistry, project: Path) -> None:
    """A model that calls tools forever is stopped with ``max_turn_requests``."""
    skills = AcpSkills(registry, max_requests_per_turn=3)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await skills.open_session("s1", str(project))
    async with skills.turn("s1", [TextContentBlock(type="text", text="loop")]) as turn:
        count = 0
        async for _messages in turn.requests():
            count += 1
            await turn.add_reply(skill_call(f"c{count}", "deploy"))
    assert (count, turn.response.stop_reason) == (3, "max_turn_requests")


async def test_a_request_left_unanswered_is_a_clear_error(
    registry: SkillRegistry, project: Path
) -> None:
    """Iterating `requests` without `add_reply` raises instead of looping on the same request."""
    skills = AcpSkills(registry)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await skills.open_session("s1", str(project))

    async def loop_without_replies() -> None:
        async with skills.turn("s1", [TextContentBlock(type="text", text="x")]) as turn:
            async for _messages in turn.requests():
                pass

    with pytest.raises(RuntimeError, match="add_reply"):
        await loop_without_replies()


# -- the skill tool as ACP tool calls --------------------------------------------------------


async def test_skill_call_is_reported_as_tool_call_then_completed_update(
    registry: SkillRegistry, project: Path
) -> None:
    """A ``skill`` call: tool_call (read, in progress), then tool_call_update completed."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [{"name": "deploy"}]
        await peer.prompt(session_id, "ship it")
        [start] = peer.wire.updates(session_id, "tool_call")
        [end] = peer.wire.updates(session_id, "tool_call_update")
    expected_text = await rendered(registry, "deploy", project)
    assert start == {
        "sessionUpdate": "tool_call",
        "toolCallId": start["toolCallId"],
        "title": "Load skill deploy",
        "kind": "read",
        "status": "in_progress",
        "rawInput": {"name": "deploy"},
    }
    assert end == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": start["toolCallId"],
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": expected_text}}],
    }
    assert peer.agent.results == [ToolResult(text=expected_text, is_error=False)]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"name": "nope"}, 'Error: skill "nope" is unknown or no longer available'),
        ({"name": "secret"}, 'Error: skill "secret" is not available for model invocation'),
        (
            {"name": "deploy", "force": True},
            'Error: unexpected argument "force"; the skill tool accepts only "name" and "path"',
        ),
    ],
    ids=["unknown", "model-invocation-disabled", "extra-argument"],
)
async def test_failed_skill_call_reports_failed_with_the_error_text(
    registry: SkillRegistry, project: Path, arguments: dict[str, Any], error: str
) -> None:
    """A refused call still opens with tool_call, then closes failed with the error text."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [arguments]
        await peer.prompt(session_id, "go")
        [start] = peer.wire.updates(session_id, "tool_call")
        [end] = peer.wire.updates(session_id, "tool_call_update")
    assert (start["status"], start["rawInput"]) == ("in_progress", arguments)
    assert end["toolCallId"] == start["toolCallId"]
    assert end["status"] == "failed"
    assert text_content(end) == error


async def test_resource_is_read_through_the_client_when_it_advertised_read_text_file(
    registry: SkillRegistry, guide: str, project: Path
) -> None:
    """With ``fs.readTextFile``, a ``path`` read goes through ``fs/read_text_file``."""
    async with connected(registry, reads_files=True) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [{"name": "deploy", "path": "references/guide.md"}]
        await peer.prompt(session_id, "read the guide")
        [end] = peer.wire.updates(session_id, "tool_call_update")
        requests = [m for m in peer.wire.incoming() if m.get("method") == "fs/read_text_file"]
    assert peer.client.reads == [guide]
    assert [request["params"] for request in requests] == [{"sessionId": session_id, "path": guide}]
    assert (end["status"], text_content(end)) == ("completed", f"{CLIENT_MARKER} {guide}")


async def test_resource_is_read_from_disk_when_the_client_cannot_read_files(
    registry: SkillRegistry, project: Path
) -> None:
    """Without ``fs.readTextFile``, the file's text comes from the local disk."""
    async with connected(registry, reads_files=False) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [{"name": "deploy", "path": "references/guide.md"}]
        await peer.prompt(session_id, "read the guide")
        [end] = peer.wire.updates(session_id, "tool_call_update")
        requests = [m for m in peer.wire.incoming() if m.get("method") == "fs/read_text_file"]
    assert (peer.client.reads, requests) == ([], [])
    assert (end["status"], text_content(end)) == ("completed", GUIDE_ON_DISK)


# -- /name invocations and the turn ----------------------------------------------------------


async def test_slash_invocation_puts_the_rendered_skill_into_the_turn(
    registry: SkillRegistry, project: Path
) -> None:
    """``/deploy`` and ``/secret`` in a prompt load those skills before the model runs."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "please /deploy staging, then /secret and /deploy")
        starts = peer.wire.updates(session_id, "tool_call")
        ends = peer.wire.updates(session_id, "tool_call_update")
    # A person may invoke a skill the model may not load (`secret`).
    assert [e["content"][0]["content"]["text"] for e in ends] == [
        await rendered(registry, "deploy", project),
        await rendered(registry, "secret", project),
    ]
    assert [(s["title"], s["rawInput"]) for s in starts] == [
        ("Load skill deploy", {"name": "deploy"}),
        ("Load skill secret", {"name": "secret"}),
    ]
    assert [e["toolCallId"] for e in ends] == [s["toolCallId"] for s in starts]
    assert [e["status"] for e in ends] == ["completed", "completed"]


async def test_unknown_and_non_invocable_slash_names_stay_text(
    registry: SkillRegistry, project: Path
) -> None:
    """Inside a prompt, ``/nope``, ``/internal`` (user-invocable: false), ``a/deploy`` load
    nothing (a prompt that opens with one is answered by a note: test_builtin_commands.py)."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "see /nope /internal a/deploy /deploy/x 5/8")
        starts = peer.wire.updates(session_id, "tool_call")
    assert starts == []


async def test_slash_tool_call_ids_are_unique_within_the_session(
    registry: SkillRegistry, project: Path
) -> None:
    """Invoking the same skill in two turns reports two distinct tool calls."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "/deploy")
        await peer.prompt(session_id, "/deploy")
        starts = peer.wire.updates(session_id, "tool_call")
    ids = [start["toolCallId"] for start in starts]
    assert len(ids) == 2
    assert len(set(ids)) == 2


async def test_prefix_is_composed_once_per_session(registry: SkillRegistry, project: Path) -> None:
    """Every turn gets the very same frozen prefix tuple: the catalog as one user message."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "one")
        first = (await peer.skills.session(session_id)).messages
        catalog = render_catalog(await registry.list(SkillLookupOptions(cwd=str(project))))
        registry.register(SkillDefinition(name="late", description="Too late.", content="x"))
        await peer.prompt(session_id, "two")
        second = (await peer.skills.session(session_id)).messages
    assert catalog is not None
    assert first == (PrefixMessage(role="user", text=catalog),)
    # The skill registered after the first turn does not reach the running session.
    assert second is first


async def test_prompt_for_an_unknown_session_is_invalid_params(registry: SkillRegistry) -> None:
    """A turn for a session never opened is refused with -32602."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.prompt("no-such-session", "hi")
    assert caught.value.code == -32602
    assert caught.value.data == {"sessionId": "no-such-session", "reason": "unknown session"}


def _well_formed(messages: list[dict[str, Any]]) -> bool:
    """What real Chat Completions endpoints insist on: every tool call answered by its result."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    calls = [c.get("id") for m in messages for c in m.get("tool_calls") or ()]
    return all(call in answered for call in calls)


def _post_chat(base_url: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One streamed Chat Completions request over real HTTP; the reply as an assistant message."""
    body = json.dumps({"model": "m", "messages": messages, "stream": True}).encode()
    request = urllib.request.Request(
        base_url + "/chat/completions", body, {"Content-Type": "application/json"}
    )
    content, calls = "", []
    with urllib.request.urlopen(request, timeout=60) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0]["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                if call.get("id"):
                    calls.append(
                        {
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"].get("name", ""), "arguments": ""},
                        }
                    )
                calls[-1]["function"]["arguments"] += call["function"].get("arguments") or ""
    return {"content": content, **({"tool_calls": calls} if calls else {})}


async def test_a_tool_that_raises_fails_its_call_and_the_conversation_goes_on(
    registry: SkillRegistry, project: Path
) -> None:
    """``run_tool`` raising: the call ends ``failed`` with the error text, its result is
    recorded, the turn ends ``end_turn``, and the next prompt's request is well formed."""

    def respond(request: ReceivedRequest, index: int) -> Reply:
        if not _well_formed(request.messages):
            return Fail(400, {"error": {"message": "tool call without its result"}})
        if index == 0:
            return tool_call_reply("t1", "calc", ['{"expr": ', '"1/0"}'])
        return text_reply(f"answer {index}")

    async def run_tool(call: ToolCall) -> str:
        raise ZeroDivisionError("division by zero")

    with FakeOpenAI(respond) as fake:
        async with connected(registry) as peer:
            session_id = await peer.new_session(project)
            for typed in ("compute 1/0", "and now?"):
                prompt = [TextContentBlock(type="text", text=typed)]
                async with peer.skills.turn(session_id, prompt, run_tool=run_tool) as turn:
                    async for messages in turn.requests():
                        reply = await anyio.to_thread.run_sync(_post_chat, fake.base_url, messages)
                        await turn.add_reply(reply)
                assert turn.response.stop_reason == "end_turn"
            history = (await peer.skills.session(session_id)).history
    assert [r.messages[-1]["role"] for r in fake.requests] == ["user", "tool", "user"]
    assert all(_well_formed(r.messages) for r in fake.requests)
    [finished] = [
        u for u in peer.wire.updates(session_id, "tool_call_update") if u["toolCallId"] == "t1"
    ]
    assert finished["status"] == "failed"
    assert "division by zero" in json.dumps(finished["content"])
    tool = next(m for m in history if m["role"] == "tool")
    assert tool["content"] == 'Error: the tool "calc" failed: division by zero'
    assert [m["content"] for m in history if m["role"] == "assistant"][-1] == "answer 2"


class FaultyStore(InMemorySessionStore):
    """A store that can hold an agent's tool result until the turn is cancelled, or fail."""

    def __init__(self) -> None:
        super().__init__()
        self.hold_results = False
        self.held = anyio.Event()  # set once a tool result is being held
        self.failure: Exception | None = None  # raised by every append while set

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        if self.failure is not None:
            raise self.failure
        is_result = isinstance(entry, HistoryEntry) and entry.message["role"] == "tool"
        if self.hold_results and is_result:
            self.hold_results = False
            self.held.set()
            await anyio.Event().wait()  # until cancelled
        await super().append(session_id, entry)


def agent_tool_reply(call_id: str) -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": "t", "arguments": "{}"}}
    return {"content": "", "tool_calls": [call]}


async def answer_with_a_tool_call(turn: PromptTurn) -> None:
    """The turn's first request, answered with a call of the agent's own tool ``t``."""
    await turn.request_messages()
    await turn.add_reply(agent_tool_reply("c1"))


async def own_tool(call: object) -> str:
    return "tool output"


async def faulty_session(registry: SkillRegistry, project: Path) -> tuple[FaultyStore, AcpSkills]:
    """Session ``s1`` over a `FaultyStore`."""
    store = FaultyStore()
    skills = AcpSkills(registry, store=store)
    skills.attach(RecordingClient())
    await skills.open_session("s1", str(project))
    return store, skills


async def test_a_cancel_while_a_request_records_keeps_what_was_not_recorded_yet(
    registry: SkillRegistry, project: Path
) -> None:
    """Cancelled while the reply's tool result is being written, the turn still records that
    result as it ends: the history never ends in a tool call without its result."""
    store, skills = await faulty_session(registry, project)

    async def prompt() -> None:
        prompt = [TextContentBlock(type="text", text="hi")]
        async with skills.turn("s1", prompt, run_tool=own_tool) as turn:
            await answer_with_a_tool_call(turn)
            store.hold_results = True
            await turn.request_messages()
        assert turn.response.stop_reason == "cancelled"

    async with anyio.create_task_group() as group:
        group.start_soon(prompt)
        await store.held.wait()
        skills.cancel("s1")
    history = (await skills.session("s1")).history
    assert [(m["role"], m.get("tool_call_id")) for m in history] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
    ]


async def test_a_record_failing_as_a_turn_ends_leaves_the_session_usable(
    registry: SkillRegistry, project: Path
) -> None:
    """A record that raises while a failed turn records what it added: the turn's own error
    reaches the agent and the next prompt runs (the session is not left busy)."""
    store, skills = await faulty_session(registry, project)

    async def failing_turn() -> None:
        prompt = [TextContentBlock(type="text", text="hi")]
        async with skills.turn("s1", prompt, run_tool=own_tool) as turn:
            await answer_with_a_tool_call(turn)
            store.failure = RuntimeError("the custom store broke")
            raise ConnectionError("the model endpoint went away")

    with pytest.raises(ConnectionError):
        await failing_turn()
    store.failure = None
    async with skills.turn("s1", [TextContentBlock(type="text", text="again")]) as turn:
        await turn.request_messages()
        await turn.add_reply({"content": "ok"})
    assert turn.response.stop_reason == "end_turn"


async def test_a_reply_the_record_cannot_take_is_refused_before_its_calls_run(
    registry: SkillRegistry, project: Path
) -> None:
    """A reply holding a value that is not JSON is refused with a clear error before its tool
    calls run or its text is shown; the turn can go on with a good reply."""
    client = RecordingClient()
    skills = AcpSkills(registry)
    skills.attach(client)
    await skills.open_session("s1", str(project))
    ran: list[object] = []

    async def tool(call: object) -> str:
        ran.append(call)
        return "deleted the branch"

    async with skills.turn("s1", [TextContentBlock(type="text", text="hi")], run_tool=tool) as turn:
        await turn.request_messages()
        shown = len(client.updates)
        with pytest.raises(TypeError, match="is not JSON"):
            await turn.add_reply({**agent_tool_reply("c1"), "parsed": object(), "content": "x"})
        assert ran == []
        assert len(client.updates) == shown
        await turn.add_reply({"content": "done"})
    history = (await skills.session("s1")).history
    assert [(m["role"], m["content"]) for m in history] == [("user", "hi"), ("assistant", "done")]


class SlowStore(InMemorySessionStore):
    """Each append takes ``seconds`` (a slow network disk)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        await anyio.sleep(self.seconds)
        await super().append(session_id, entry)


async def test_a_turn_that_ends_records_its_last_reply_however_slow_the_store(
    registry: SkillRegistry, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound on what a cancelled turn records as it ends is not one on a turn that ends:
    its closing reply (and the results before it) reach the record, not only memory."""
    monkeypatch.setattr("acp_skills.acp.wire.CANCEL_REPORT_SECONDS", 0.05)
    store = SlowStore(0.1)
    async with connected(registry, agent_type=ScriptedModelAgent, store=store) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        agent.replies = [skill_call("c1", "deploy"), {"content": "Deployed."}]
        session_id = await peer.new_session(project)
        with anyio.fail_after(10):
            await peer.prompt(session_id, "ship it")
        recorded = [e for e in await store.entries(session_id) if isinstance(e, HistoryEntry)]
    assert [entry.message["role"] for entry in recorded] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
