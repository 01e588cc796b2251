"""The session table (`acp_skills.acp.sessions`): live instances bounded, idle ones let go."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError
from acp.schema import TextContentBlock

from acp_skills import SkillDefinition, SkillRegistry
from acp_skills.acp import AcpSkills
from acp_skills.acp.sessions import IDLE_PER_LIVE
from tests.acp_peer import RecordingClient, fixture_registry, make_project, write_fixture_skills

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
    from its record, as ``session/load`` would: its history, and the skills of now."""
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
    assert "late" in turn.prefix[0].text
    assert [m["content"] for m in messages[len(turn.prefix) :]] == ["first", "one", "second"]
    session = await skills.session("s1")
    assert [h.reason for h in [session.last_header] if h is not None] == ["resume"]


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
