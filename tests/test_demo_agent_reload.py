"""Live reload end to end: the real demo agent in this process (`tests.acp_peer.demo_peer`),
real skill files edited while it runs, and nothing but the files telling it (no
``_skills/reload``).

Every wait ends on what the agent does (an update it sends, a change of its skills, a line it
logs); nothing depends on how fast the watcher is.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.acp_peer import DemoPeer, RecordingClient, demo_peer
from tests.sandbox import Sandbox, write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

NOTES_BODY = "# Meeting notes\n\n1. List every action item with its owner.\n"
RELEASE_BODY = "# Release\n\n1. Tag the release.\n2. Publish the package.\n"
RELEASE_BODY_EDITED = "# Release\n\n1. Run the tests.\n2. Tag the release.\n"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    return Sandbox.create(tmp_path)


async def prefix_messages(agent: DemoPeer, session_id: str) -> list[dict[str, Any]]:
    answer = await agent.ext("skills/prefix", {"sessionId": session_id})
    messages: list[dict[str, Any]] = answer["messages"]
    return messages


def commands_sent(client: RecordingClient, session_id: str) -> list[list[str]]:
    """The skill command names of each ``available_commands_update`` the session got, in
    order (the built-in ``/skills`` left out)."""
    return [
        [command.name for command in update.available_commands if command.name != "skills"]
        for update in client.session_updates(session_id)
        if update.session_update == "available_commands_update"
    ]


async def test_a_new_skill_reaches_lists_new_sessions_and_commands_but_not_running_prefixes(
    sandbox: Sandbox,
) -> None:
    """A skill written to disk shows up in ``_skills/list``, in a new session's catalog and in
    the open session's commands, while the running session keeps its frozen prefix."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox) as agent:
        client = agent.client
        a = await agent.open_session()
        assert await agent.ask(a, "hello") == "end_turn"
        frozen = await prefix_messages(agent, a)
        assert "alpha-notes" in frozen[0]["text"]
        assert commands_sent(client, a)[-1] == ["alpha-notes"]

        sandbox.write_skill("beta-release", "Publish a new release.", RELEASE_BODY)
        await agent.until_listed(a, ["alpha-notes", "beta-release"])
        # The open session's commands are re-sent without anything being asked.
        await client.wait_until(
            lambda: commands_sent(client, a)[-1] == ["alpha-notes", "beta-release"]
        )
        # Its prefix stays as composed, for this and later turns.
        assert await prefix_messages(agent, a) == frozen
        assert await agent.ask(a, "hello again") == "end_turn"
        assert await prefix_messages(agent, a) == frozen
        assert "beta-release" not in frozen[0]["text"]

        b = await agent.open_session()
        mark = len(client.updates)
        assert await agent.ask(b, "please run beta-release now") == "end_turn"
        assert (
            "- `beta-release`: Publish a new release."
            in (await prefix_messages(agent, b))[0]["text"]
        )
        [(status, text)] = client.tool_results(b, mark)
        assert status == "completed"
        assert RELEASE_BODY.strip() in text


async def test_an_edited_body_and_a_deleted_skill_reach_the_skill_tool(sandbox: Sandbox) -> None:
    """The tool serves a body edited on disk, and calls a skill deleted on disk unknown, even in
    a session whose frozen catalog still lists it."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    sandbox.write_skill("beta-release", "Publish a new release.", RELEASE_BODY)
    async with demo_peer(sandbox) as agent:
        client = agent.client
        a = await agent.open_session()
        assert await agent.ask(a, "hello") == "end_turn"

        sandbox.write_skill("beta-release", "Publish a new release.", RELEASE_BODY_EDITED)
        shutil.rmtree(sandbox.skills_dir / "alpha-notes")
        await agent.until_listed(a, ["beta-release"])
        await client.wait_until(lambda: commands_sent(client, a)[-1] == ["beta-release"])

        mark = len(client.updates)
        assert await agent.ask(a, "please run alpha-notes now") == "end_turn"
        assert client.tool_results(a, mark) == [
            ("failed", 'Error: skill "alpha-notes" is unknown or no longer available')
        ]
        mark = len(client.updates)
        assert await agent.ask(a, "please run beta-release now") == "end_turn"
        [(status, text)] = client.tool_results(a, mark)
        assert status == "completed"
        assert RELEASE_BODY_EDITED.strip() in text


async def test_skills_of_an_open_sessions_project_are_watched(sandbox: Sandbox) -> None:
    """A project skill written after the session opened (its skills directory did not even
    exist) reaches that session's list and commands."""
    project = sandbox.project
    (project / ".git").mkdir()
    async with demo_peer(sandbox) as agent:
        client = agent.client
        a = await agent.open_session(project / "src")
        assert await agent.ask(a, "hello") == "end_turn"
        assert await agent.listed(a) == []

        write_skill(project / ".agents" / "skills", "lint-rules", "Apply the lint rules.")
        await agent.until_listed(a, ["lint-rules"])
        await client.wait_until(lambda: commands_sent(client, a)[-1] == ["lint-rules"])


@pytest.mark.parametrize(
    ("args", "env"),
    [(("--no-watch",), {}), ((), {"ACP_SKILLS_WATCH": "0"})],
    ids=["flag", "variable"],
)
async def test_watching_can_be_turned_off(
    sandbox: Sandbox, args: tuple[str, ...], env: dict[str, str]
) -> None:
    """Without watching, a skill written to disk is not listed until ``_skills/reload``, and no
    watcher ever starts."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.", NOTES_BODY)
    async with demo_peer(sandbox, *args, "--log-level", "debug", env=env) as agent:
        a = await agent.open_session()
        assert await agent.listed(a) == ["alpha-notes"]
        sandbox.write_skill("beta-release", "Publish a new release.", RELEASE_BODY)
        # Cached, and nothing invalidates it.
        assert await agent.listed(a) == ["alpha-notes"]
        await agent.ext("skills/reload", {})
        assert await agent.listed(a) == ["alpha-notes", "beta-release"]
    assert "skill_watch" not in agent.log


async def test_the_agent_watches_by_default_and_stops_watching_when_its_input_ends(
    sandbox: Sandbox,
) -> None:
    """By default the watcher starts with the first lookup, and stops, without a traceback,
    when the agent's input ends (its exit status then: the robustness tier)."""
    async with demo_peer(sandbox, "--log-level", "debug") as agent:
        a = await agent.open_session()
        assert await agent.listed(a) == []
        sandbox.write_skill("beta-release", "Publish a new release.", RELEASE_BODY)
        await agent.until_listed(a, ["beta-release"])
    assert not agent.serving
    assert "skill_watch_started" in agent.log
    assert "skill_watch_stopped" in agent.log
    assert "Traceback" not in agent.log


async def test_a_broken_file_is_warned_about_once_per_change_across_thirty_edits(
    sandbox: Sandbox,
) -> None:
    """Thirty edits of a file that stays broken the same way give one warning; a different
    problem gives one more (each edit is seen: a marker skill written beside it is listed)."""
    broken = sandbox.skills_dir / "broken.md"
    broken.write_text("---\nname: broken\n---\nno description, edit 0\n")
    async with demo_peer(sandbox) as agent:
        a = await agent.open_session()
        assert await agent.listed(a) == []
        for edit in range(1, 31):
            broken.write_text(f"---\nname: broken\n---\nno description, edit {edit}\n")
            sandbox.write_skill(f"marker-{edit:02d}", "A marker of one edit.", "# Marker\n")
            await agent.until_listed(a, [f"marker-{n:02d}" for n in range(1, edit + 1)])
        broken.write_text("---\nname: Broken\ndescription: now the name is wrong\n---\n")
        sandbox.write_skill("marker-31", "The last marker.", "# Marker\n")
        await agent.until_listed(a, [f"marker-{n:02d}" for n in range(1, 32)])
    warnings = [line for line in agent.log.splitlines() if "skill_file_skipped" in line]
    assert len(warnings) == 2, warnings
    assert "description" in warnings[0]
    assert "name" in warnings[1]


async def test_changes_beside_a_missing_root_are_ignored_even_the_agents_own_log(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The agent logs at debug level into the directory it watches for a missing root to
    appear: its own log writes and other files there cause no rescan and no log line about
    them (each would be a write about itself, without end); the root appearing still counts."""
    area = tmp_path / "area"
    area.mkdir()
    missing = area / "later" / "skills"
    log, notes = area / "agent.log", area / "notes.txt"
    flags = ["--skills-dir", str(missing), "--log-file", str(log), "--log-level", "debug"]
    async with demo_peer(sandbox, *flags) as agent:
        a = await agent.open_session()
        assert await agent.listed(a) == []
        await agent.log_lines_with("skill_watch_started")
        assert await agent.listed(a) == []  # the catch-up rescan once the watch is live
        before = agent.log.count("skills_discovered")
        for edit in range(30):
            notes.write_text(f"edit {edit}\n")
            # Each lookup would rescan if anything had invalidated the skills.
            assert await agent.listed(a) == []
        rescans = agent.log.count("skills_discovered") - before
        # The root appearing is seen, and only after every earlier change was.
        write_skill(missing, "late", "Arrives in the root that was missing.", "# Late\n")
        await agent.until_listed(a, ["late"])
        # A lookup may list it before the watcher's batch is logged: wait for that line.
        await agent.log_lines_with("skill_watch_changes")
    lines = log.read_text().splitlines()
    assert rescans <= 1  # at most the catch-up, had it not happened yet
    about_files = [line for line in lines if "agent.log" in line or "notes.txt" in line]
    assert about_files == []
    assert [line for line in lines if "skill_watch_changes" in line]
