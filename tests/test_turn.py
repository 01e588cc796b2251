"""`AcpSkills.turn` and the session lifecycle it owns: cancellation, released sessions, owners.

The agent and the client talk over a real in-memory ACP connection (`tests/test_acp.py`'s
`connected` pair); the agent here drives its turns through `PromptTurn`, as an agent author's
code does.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.helpers import text_block

from acp_skills import SkillDefinition, SkillRegistry
from acp_skills.acp import AcpSkills
from acp_skills.acp.skills import FOLLOWER_TASK_NAME
from tests.providers import ListProvider, candidate
from tests.test_acp import SkillsAgent, connected, fixture_registry, write_fixture_skills

pytestmark = pytest.mark.anyio


class ScriptedModelAgent(SkillsAgent):
    """A test agent whose model answers from a script of assistant messages, one per request.

    ``gate`` (when set) is awaited before each answer, so a test can hold a turn open.
    """

    def __init__(self, skills: AcpSkills) -> None:
        super().__init__(skills)
        self.replies: list[dict[str, Any]] = []
        self.gate: anyio.Event | None = None
        self.waiting = anyio.Event()
        self.requests: list[list[dict[str, Any]]] = []

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        async with self.skills.turn(session_id, prompt, system="test") as turn:
            self.turns.append(turn)
            async for messages in turn.requests():
                self.requests.append(messages)
                if self.gate is not None:
                    self.waiting.set()
                    await self.gate.wait()
                await turn.add_reply(self.replies.pop(0) if self.replies else {"content": "ok"})
        return turn.response


@pytest.fixture
def registry(tmp_path: Path) -> SkillRegistry:
    """deploy, compare, internal (model-only) and secret (person-only), on disk."""
    return fixture_registry(tmp_path, write_fixture_skills(tmp_path))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def skill_call(call_id: str, name: str) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "skill", "arguments": f'{{"name": "{name}"}}'},
            }
        ],
    }


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

        async def run_tool(name: str, arguments: object) -> str:
            ran.append((name, arguments))
            return "42"

        async with peer.skills.turn(session_id, [text_block("x")], run_tool=run_tool) as turn:
            answer = await turn.call_tool("t1", "calc", '{"expr": "6*7"}')
        async with peer.skills.turn(session_id, [text_block("y")]) as turn:
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


async def test_a_cancelled_tool_call_still_gets_a_result_in_the_record(
    registry: SkillRegistry, project: Path
) -> None:
    """Cancelled while the agent's own tool runs: the call is answered with an error."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        started = anyio.Event()

        async def run_tool(name: str, arguments: object) -> str:
            started.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        call = {
            "content": "",
            "tool_calls": [{"id": "t1", "function": {"name": "wait", "arguments": "{}"}}],
        }
        async with anyio.create_task_group() as group:

            async def run() -> None:
                prompt = [text_block("wait")]
                async with peer.skills.turn(session_id, prompt, run_tool=run_tool) as turn:
                    await turn.request_messages()
                    await turn.add_reply(call)
                assert turn.response.stop_reason == "cancelled"

            group.start_soon(run)
            with anyio.fail_after(5):
                await started.wait()
            peer.skills.cancel(session_id)
        history = (await peer.skills.session(session_id)).history
        await peer.ext("skills/list", {"sessionId": session_id})
    assert history[-1]["role"] == "tool"
    assert history[-1]["tool_call_id"] == "t1"
    assert str(history[-1]["content"]).startswith("Error: the turn was cancelled")
    [end] = [u for u in peer.wire.updates(session_id, "tool_call_update")]
    assert end["status"] == "failed"


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
    session_id = "s1"
    await skills.open_session(session_id, str(project))
    async with anyio.create_task_group() as group:

        async def run() -> None:
            async with skills.turn(session_id, [text_block("hi")]) as turn:
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
    async with skills.turn(session_id, [text_block("again")]) as turn:
        await turn.request_messages()
    assert session.composed


async def test_a_second_turn_while_one_runs_is_an_invalid_request(
    registry: SkillRegistry, project: Path
) -> None:
    """Two turns of one session at once: the second is refused with -32600."""
    skills = AcpSkills(registry)
    await skills.open_session("s1", str(project))
    async with skills.turn("s1", [text_block("one")]):
        with pytest.raises(RequestError) as caught:
            async with skills.turn("s1", [text_block("two")]):
                pass
    assert caught.value.code == -32600


async def test_requests_stop_at_the_turn_limit(registry: SkillRegistry, project: Path) -> None:
    """A model that calls tools forever is stopped with ``max_turn_requests``."""
    skills = AcpSkills(registry, max_requests_per_turn=3)
    await skills.open_session("s1", str(project))
    async with skills.turn("s1", [text_block("loop")]) as turn:
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
    await skills.open_session("s1", str(project))

    async def loop_without_replies() -> None:
        async with skills.turn("s1", [text_block("x")]) as turn:
            async for _messages in turn.requests():
                pass

    with pytest.raises(RuntimeError, match="add_reply"):
        await loop_without_replies()


async def test_idle_sessions_beyond_the_bound_are_released_and_come_back_unchanged(
    registry: SkillRegistry, project: Path
) -> None:
    """With room for two, the third session releases the first, which reopens as it was."""
    skills = AcpSkills(registry, max_live_sessions=2)
    await skills.open_session("s1", str(project))
    async with skills.turn("s1", [text_block("first")]) as turn:
        await turn.request_messages()
        await turn.add_reply({"content": "one"})
    frozen = turn.prefix
    await skills.open_session("s2", str(project))
    registry.register(SkillDefinition(name="late", description="Added later.", content="x"))
    await skills.open_session("s3", str(project))
    live = [sid for sid in ("s1", "s2", "s3") if skills._sessions.peek(sid) is not None]
    assert live == ["s2", "s3"]
    assert skills.has_session("s1")
    async with skills.turn("s1", [text_block("second")]) as turn:
        messages = await turn.request_messages()
    # The released session kept its frozen catalog (without "late") and its history.
    assert turn.prefix == frozen
    assert [m["content"] for m in messages[len(frozen) :]] == ["first", "one", "second"]
    session = await skills.session("s1")
    assert [h.reason for h in [session.last_header] if h is not None] == ["initial"]


async def test_a_registry_change_from_another_thread_reaches_the_sessions(
    registry: SkillRegistry, project: Path
) -> None:
    """A runtime skill registered from a worker thread sends a fresh commands update."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        thread_names: list[str] = []

        def register() -> None:
            thread_names.append(threading.current_thread().name)
            registry.register(
                SkillDefinition(name="hotfix", description="Ship a hotfix.", content="Do it.")
            )

        await anyio.to_thread.run_sync(register)
        await peer.wire.wait_for(lambda: len(peer.wire.commands(session_id)) == 2)
    assert thread_names != [threading.current_thread().name]
    assert [c["name"] for c in peer.wire.commands(session_id)[1]] == [
        "compare",
        "deploy",
        "hotfix",
        "secret",
        "skills",
    ]


async def test_leaving_the_skills_context_ends_its_background_task(
    registry: SkillRegistry,
) -> None:
    """``async with AcpSkills(...)`` owns its registry follower; nothing outlives the block."""

    def follower_tasks() -> int:
        gc.collect()
        return sum(1 for task in asyncio.all_tasks() if task.get_name() == FOLLOWER_TASK_NAME)

    before = follower_tasks()
    async with AcpSkills(registry):
        assert follower_tasks() == before + 1
    assert follower_tasks() == before
