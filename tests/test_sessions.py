"""The session table (`acp_skills.acp.sessions`): live instances bounded, idle ones let go."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError
from acp.schema import TextContentBlock

from acp_skills import SkillDefinition, SkillRegistry
from acp_skills.acp import AcpSkills
from acp_skills.acp.sessions import IDLE_PER_LIVE
from acp_skills.acp.turn import PromptTurn
from acp_skills.record import HeaderEntry, InMemorySessionStore, RecordEntry
from acp_skills.trust import TrustStore
from tests.acp_peer import (
    WAIT_SECONDS,
    RecordingClient,
    fixture_registry,
    make_project,
    write_fixture_skills,
    write_skill,
)

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


@pytest.fixture
def registry(tmp_path: Path) -> SkillRegistry:
    """deploy, compare, internal (model-only) and secret (person-only), on disk."""
    return fixture_registry(tmp_path, write_fixture_skills(tmp_path))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def live_ids(skills: AcpSkills) -> list[str]:
    return [session_id for session_id, _live in skills._sessions.running()]


async def test_idle_sessions_beyond_the_bound_are_let_go_and_come_back_from_their_record(
    registry: SkillRegistry, project: Path
) -> None:
    """With room for two, the third session lets the first go; its next prompt opens it again
    from its record as it was: its history, its frozen prefix, no ``resume`` header."""
    skills = AcpSkills(registry, max_live_sessions=2)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await skills.open_session("s1", str(project))
    async with skills.turn("s1", [TextContentBlock(type="text", text="first")]) as turn:
        await turn.request_messages()
        await turn.add_reply({"content": "one"})
    await skills.open_session("s2", str(project))
    registry.register(SkillDefinition(name="late", description="Added later.", content="x"))
    await skills.open_session("s3", str(project))
    assert live_ids(skills) == ["s2", "s3"]
    assert "s1" in skills._sessions
    async with skills.turn("s1", [TextContentBlock(type="text", text="second")]) as turn:
        messages = await turn.request_messages()
    assert "late" not in turn.prefix[0].text
    assert [m["content"] for m in messages[len(turn.prefix) :]] == ["first", "one", "second"]
    entries = await skills.store.entries("s1")
    assert [entry.reason for entry in entries if isinstance(entry, HeaderEntry)] == ["initial"]


async def test_idle_sessions_let_go_are_bounded_and_the_oldest_is_forgotten(
    registry: SkillRegistry, project: Path
) -> None:
    """With one live session, the table remembers `IDLE_PER_LIVE` idle ones let go at most."""
    skills = AcpSkills(registry, max_live_sessions=1)
    skills.attach(RecordingClient())  # the editor a turn reports to
    count = IDLE_PER_LIVE + 2
    for index in range(count):
        await skills.open_session(f"s{index}", str(project))
    assert live_ids(skills) == [f"s{count - 1}"]
    remembered = [f"s{index}" for index in range(count) if f"s{index}" in skills._sessions]
    # The live one, and the most recently let go up to the bound.
    assert remembered == [f"s{index}" for index in range(1, count)]
    assert "s0" not in skills._sessions


async def test_a_forgotten_session_is_unknown_to_a_prompt_but_loads_from_its_record(
    registry: SkillRegistry, project: Path
) -> None:
    """Forgotten is not lost: ``session/load`` reopens it from its record, history and all."""
    skills = AcpSkills(registry, max_live_sessions=1)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await skills.open_session("first", str(project))
    async with skills.turn("first", [TextContentBlock(type="text", text="remember me")]) as turn:
        await turn.request_messages()
        await turn.add_reply({"content": "noted"})
    for index in range(IDLE_PER_LIVE + 1):
        await skills.open_session(f"other-{index}", str(project))
    assert "first" not in skills._sessions
    with pytest.raises(RequestError) as caught:
        await skills.session("first")
    assert caught.value.code == -32602
    session = await skills.load_session("first", str(project))
    assert [m["content"] for m in session.history] == ["remember me", "noted"]
    assert "first" in skills._sessions


async def test_a_busy_session_is_not_released(registry: SkillRegistry, project: Path) -> None:
    """A session whose turn is running stays live past the bound; it is let go once idle."""
    skills = AcpSkills(registry, max_live_sessions=1)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await skills.open_session("busy", str(project))
    async with skills.turn("busy", [TextContentBlock(type="text", text="hold on")]) as turn:
        await skills.open_session("next", str(project))
        assert live_ids(skills) == ["busy", "next"]
        await turn.request_messages()
        await turn.add_reply({"content": "done"})
    await skills.open_session("third", str(project))
    assert live_ids(skills) == ["third"]


async def one_turn(skills: AcpSkills, session_id: str, text: str) -> PromptTurn:
    async with skills.turn(session_id, [TextContentBlock(type="text", text=text)]) as turn:
        await turn.request_messages()
        await turn.add_reply({"content": "ok"})
    return turn


def commands_sent(client: RecordingClient, session_id: str) -> int:
    return sum(
        1
        for sent_to, update in client.updates
        if sent_to == session_id and update.session_update == "available_commands_update"
    )


async def test_a_session_let_go_while_idle_keeps_its_trust_answers_and_commands(
    registry: SkillRegistry, project: Path, tmp_path: Path
) -> None:
    """Nothing was closed from the editor's side: reopened, the session is not asked about its
    project again (its "Trust for this session" holds) nor sent its commands again."""
    (project / ".git").mkdir()
    write_skill(project / ".agents" / "skills", "review", "Review the change.", body="Review.")
    client = RecordingClient(answer="allow_once")
    store = TrustStore(tmp_path / "trust.json")
    skills = AcpSkills(registry, max_live_sessions=1, trust="ask", trust_store=store)
    skills.attach(client)
    await skills.open_session("s1", str(project))
    first = await one_turn(skills, "s1", "first")
    sent = commands_sent(client, "s1")
    await skills.open_session("s2", str(project))
    assert live_ids(skills) == ["s2"]
    second = await one_turn(skills, "s1", "second")
    assert "review" in second.prefix[0].text
    assert second.prefix == first.prefix
    assert len(client.questions) == 1
    assert commands_sent(client, "s1") == sent
    listed = await skills.ext_method("_skills/list", {"sessionId": "s1"})
    assert {skill["name"]: skill["trust"] for skill in listed["skills"]}["review"] == "session"


async def test_reading_a_session_let_go_while_idle_does_not_open_it(
    registry: SkillRegistry, project: Path
) -> None:
    """``_skills/list``, ``_skills/prefix`` and `catalog_fit` answer for a session let go while
    idle from what is remembered and its record: no other session is let go for them."""
    skills = AcpSkills(registry, max_live_sessions=1)
    skills.attach(RecordingClient())
    await skills.open_session("s1", str(project))
    turn = await one_turn(skills, "s1", "first")
    before = await skills.ext_method("_skills/prefix", {"sessionId": "s1"})
    fit = await skills.catalog_fit("s1")
    await skills.open_session("s2", str(project))
    assert await skills.ext_method("_skills/prefix", {"sessionId": "s1"}) == before
    assert before["messages"] == [{"role": "user", "text": turn.prefix[0].text}]
    assert await skills.catalog_fit("s1") == fit
    assert fit is not None
    listed = await skills.ext_method("_skills/list", {"sessionId": "s1"})
    assert "deploy" in [skill["name"] for skill in listed["skills"]]
    assert live_ids(skills) == ["s2"]


async def test_two_prompts_for_a_session_let_go_while_idle_open_it_once(
    registry: SkillRegistry, project: Path
) -> None:
    """Two prompts arriving together for a session let go while idle share its one reopened
    instance: the second is refused as a turn already running, the first is recorded."""
    skills = AcpSkills(registry, max_live_sessions=1)
    skills.attach(RecordingClient())
    await skills.open_session("s1", str(project))
    await skills.open_session("s2", str(project))
    entered, refused, release = anyio.Event(), anyio.Event(), anyio.Event()
    codes: list[int] = []

    async def prompt(text: str) -> None:
        try:
            async with skills.turn("s1", [TextContentBlock(type="text", text=text)]) as turn:
                entered.set()
                await turn.request_messages()
                await release.wait()
                await turn.add_reply({"content": "ok " + text})
        except RequestError as error:
            codes.append(error.code)
            refused.set()

    async with anyio.create_task_group() as group:
        group.start_soon(prompt, "one")
        group.start_soon(prompt, "two")
        with anyio.fail_after(WAIT_SECONDS):
            await entered.wait()
            await refused.wait()
        release.set()
    assert codes == [-32600]  # "a prompt turn is already running"
    history = (await skills.session("s1")).history
    assert len(history) == 2
    assert history[1]["content"] == "ok " + str(history[0]["content"])


class HeldStore(InMemorySessionStore):
    """Holds the next read of a record until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold, self.holding, self.release = False, anyio.Event(), anyio.Event()

    async def entries(self, session_id: str) -> list[RecordEntry]:
        if self.hold:
            self.hold = False
            self.holding.set()
            await self.release.wait()
        return await super().entries(session_id)


async def test_a_session_closed_while_it_reopens_stays_closed(
    registry: SkillRegistry, project: Path
) -> None:
    """``session/close`` arriving while a prompt reopens the idle session wins: the prompt is
    refused as for an unknown session and nothing stays live for it."""
    store = HeldStore()
    skills = AcpSkills(registry, store=store, max_live_sessions=1)
    skills.attach(RecordingClient())
    await skills.open_session("s1", str(project))
    await skills.open_session("s2", str(project))
    store.hold = True
    codes: list[int] = []

    async def prompt() -> None:
        with pytest.raises(RequestError) as caught:
            await one_turn(skills, "s1", "late")
        codes.append(caught.value.code)

    async with anyio.create_task_group() as group:
        group.start_soon(prompt)
        await store.holding.wait()
        await skills.close_session("s1")
        store.release.set()
    assert codes == [-32602]
    assert live_ids(skills) == ["s2"]


async def test_a_reopen_overtaken_by_a_load_gives_way_and_nothing_hangs(
    registry: SkillRegistry, project: Path
) -> None:
    """A request reopens a session let go while idle; meanwhile ``session/load`` replaces it
    and that instance is let go in turn: the reopen gives way, and no request for it hangs."""
    store = HeldStore()
    skills = AcpSkills(registry, store=store, max_live_sessions=1)
    await skills.open_session("A", str(project))
    await skills.open_session("B", str(project))  # A is let go
    store.hold = True
    with anyio.fail_after(30):  # a reopen that waited for itself would hang here
        async with anyio.create_task_group() as group:
            group.start_soon(skills.session, "A")
            await store.holding.wait()  # the reopen waits on the record
            await skills.load_session("A", str(project))
            await skills.open_session("C", str(project))  # the loaded A is let go
            store.release.set()
        await skills.session("A")
    assert "A" in skills._sessions
