"""Trust as a person meets it in the demo agent: the question at the first prompt, each answer
(the four options, a cancelled question, an error answer) and what follows, the modes, and what
is remembered across a restart. The real agent runs in this process (`tests.acp_peer.demo_peer`),
its client answering the question as told; every frame, the question's included, is checked
against the ACP schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.acp_peer import (
    SDK_WITHDRAWS_CANCELLED_REQUESTS,
    DemoPeer,
    RecordingClient,
    demo_peer,
)
from tests.sandbox import Sandbox, write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

OPTIONS = [
    {"optionId": "allow_once", "name": "Trust for this session", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Trust this project", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Not now", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Never for this project", "kind": "reject_always"},
]


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    sandbox = Sandbox.create(tmp_path / "world")
    (sandbox.project / ".git").mkdir()
    skills = sandbox.project / ".agents" / "skills"
    write_skill(skills, "review", "Review the change against the checklist.")
    write_skill(skills, "lint", "The project's lint steps.")
    # A user skill of the same name: offered while the project's `lint` waits for trust.
    write_skill(sandbox.home / ".agents" / "skills", "lint", "My own lint routine.")
    sandbox.write_skill("notes", "Take notes of the meeting.")
    return sandbox


def trust_env(tmp_path: Path, mode: str | None = "ask") -> dict[str, str]:
    # An empty value counts as unset (the suite's own mode would otherwise be passed on).
    env = {"ACP_SKILLS_TRUST_FILE": str(tmp_path / "config" / "trust.json")}
    env["ACP_SKILLS_TRUST"] = mode if mode is not None else ""
    return env


def stored(tmp_path: Path) -> list[dict[str, str]]:
    path = tmp_path / "config" / "trust.json"
    if not path.exists():
        return []
    return list(json.loads(path.read_text(encoding="utf-8"))["projects"])


async def catalog_text(agent: DemoPeer, session_id: str) -> str:
    prefix = await agent.ext("skills/prefix", {"sessionId": session_id})
    return "\n".join(message["text"] for message in prefix["messages"])


async def listed_trust(agent: DemoPeer, session_id: str) -> dict[str, str]:
    listed = await agent.ext("skills/list", {"sessionId": session_id})
    return {entry["name"]: entry["trust"] for entry in listed["skills"]}


async def answer_in_an_earlier_agent(sandbox: Sandbox, tmp_path: Path, answer: str) -> None:
    """One agent's first session in the project is asked and answers ``answer``; it stops."""
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer=answer) as agent:
        await agent.ask(await agent.open_session(), "hello")


def last_commands(client: RecordingClient, session_id: str) -> set[str]:
    updates = [
        u
        for u in client.session_updates(session_id)
        if u.session_update == "available_commands_update"
    ]
    return {command.name for command in updates[-1].available_commands}


def trust_calls(client: RecordingClient, session_id: str) -> list[Any]:
    return [
        u
        for u in client.tool_updates(session_id)
        if (getattr(u, "tool_call_id", "") or "").startswith("trust-")
    ]


def question_follows_its_card(agent: DemoPeer, session_id: str) -> bool:
    """On the wire the one question follows its tool_call, so the card has a call to show."""
    [asked] = agent.wire.frame_indexes(
        lambda frame: frame.message.get("method") == "session/request_permission"
    )
    call_id = agent.wire.frames[asked].message["params"]["toolCall"]["toolCallId"]
    cards = agent.wire.frame_indexes(
        lambda frame: (
            frame.message.get("method") == "session/update"
            and frame.message["params"]["sessionId"] == session_id
            and frame.message["params"]["update"].get("sessionUpdate") == "tool_call"
            and frame.message["params"]["update"].get("toolCallId") == call_id
        )
    )
    return bool(cards) and cards[0] < asked


@pytest.mark.parametrize(
    ("answer", "admitted", "decision"),
    [
        ("allow_once", True, None),
        ("allow_always", True, "trusted"),
        ("reject_once", False, None),
        ("reject_always", False, "refused"),
        ("cancelled", False, None),
        ("error", False, None),
    ],
    ids=["allow-once", "allow-always", "not-now", "never", "cancelled", "error-answer"],
)
async def test_each_answer_admits_or_withholds_the_project_skills(
    sandbox: Sandbox, tmp_path: Path, answer: str, admitted: bool, decision: str | None
) -> None:
    """The first prompt asks once; the answer decides the catalog, commands and list."""
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer=answer) as agent:
        client = agent.client
        session_id = await agent.open_session()
        assert await listed_trust(agent, session_id) == {
            "lint": "pending",
            "notes": "trusted",
            "review": "pending",
        }
        assert await agent.ask(session_id, "hello") == "end_turn"
        (question,) = client.questions
        assert [o.model_dump(by_alias=True, exclude_none=True) for o in question["options"]] == (
            OPTIONS
        )
        assert question_follows_its_card(agent, session_id)
        start, end = trust_calls(client, session_id)
        assert start.session_update == "tool_call"
        assert (start.kind, start.title) == ("read", "Trust 2 skills from project?")
        shown = start.content[0].content.text
        assert "review: Review the change against the checklist." in shown
        assert str(sandbox.project / ".agents" / "skills" / "review" / "SKILL.md") in shown
        assert question["tool_call"].tool_call_id == start.tool_call_id
        assert end.status == ("completed" if admitted else "failed")
        catalog = await catalog_text(agent, session_id)
        assert ("`review`" in catalog) is admitted
        assert "`notes`" in catalog
        # The user's own `lint` stands in while the project's waits.
        assert ("The project's lint steps." in catalog) is admitted
        assert ("My own lint routine." in catalog) is not admitted
        assert ("review" in last_commands(client, session_id)) is admitted
        state = {"allow_once": "session", "allow_always": "trusted"}.get(answer)
        state = state or ("refused" if decision == "refused" else "pending")
        assert (await listed_trust(agent, session_id))["review"] == state
        assert stored(tmp_path) == (
            [{"path": str(sandbox.project), "decision": decision}] if decision else []
        )
        # Later turns of this instance never ask again.
        await agent.ask(session_id, "hello again")
        assert len(client.questions) == 1
        # A new session asks again only while nothing is stored.
        other = await agent.open_session()
        await agent.ask(other, "hello")
        assert len(client.questions) == (1 if decision else 2)


async def test_a_stored_answer_holds_across_an_agent_restart(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``Trust this project`` is remembered; the next agent offers the skills without asking."""
    await answer_in_an_earlier_agent(sandbox, tmp_path, "allow_always")
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="reject_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "hello")
        assert agent.client.questions == []
        assert "`review`" in await catalog_text(agent, session_id)
        assert (await listed_trust(agent, session_id))["review"] == "trusted"


async def test_a_refused_project_is_never_asked_again_and_skills_says_how_to_undo(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """After ``Never for this project`` a restarted agent does not ask; `/skills` explains."""
    await answer_in_an_earlier_agent(sandbox, tmp_path, "reject_always")
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="allow_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "/skills")
        assert agent.client.questions == []
        report = agent.client.agent_text(session_id)
        assert "**Refused** (2)" in report
        assert f"`acp-skills trust {sandbox.project}`" in report
        assert "`review` — Review the change against the checklist." in report


async def test_skills_never_calls_the_own_skill_standing_in_for_a_refused_one_shadowed(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """While the project's `lint` is refused, `/skills` lists the person's own `lint`, which the
    session offers in its place, and no note says the refused one shadows it."""
    await answer_in_an_earlier_agent(sandbox, tmp_path, "reject_always")
    async with demo_peer(sandbox, env=trust_env(tmp_path)) as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "/skills")
        report = agent.client.agent_text(session_id)
    assert "- `/lint` — My own lint routine. (user-agents)" in report
    assert "shadowed" not in report


async def test_a_slash_command_in_the_first_prompt_expands_only_after_consent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``/review`` runs once the person trusts the project in that same turn."""
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="allow_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "/review now")
        titles = [
            u.title
            for u in agent.client.tool_updates(session_id)
            if u.session_update == "tool_call"
        ]
        assert titles[0] == "Trust 2 skills from project?"
        assert "Load skill review" in titles
        history = sandbox.history(session_id)
        assert "Do the review thing." in history[0]["content"]


async def test_a_slash_command_of_a_pending_skill_gets_a_note_and_is_not_expanded(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """After ``Not now``, ``/review`` is answered with why, and nothing reaches the model."""
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="reject_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "/review now")
        text = agent.client.agent_text(session_id)
        assert "`/review` comes from project `project`, which is waiting for trust" in text
        assert f"`acp-skills trust {sandbox.project}`" in text
        tool_titles = [
            u.title
            for u in agent.client.tool_updates(session_id)
            if u.session_update == "tool_call"
        ]
        assert "Load skill review" not in tool_titles


async def test_cancelling_the_turn_while_asking_counts_as_not_now(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``session/cancel`` during the question ends the turn cancelled; nothing is stored. On
    the SDK's 1.x line the agent's transport carries the question's withdrawal to the client."""
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="hold") as agent:
        client = agent.client
        session_id = await agent.open_session()
        async with anyio.create_task_group() as group:
            results: list[str] = []

            async def run() -> None:
                results.append(await agent.ask(session_id, "hello"))

            group.start_soon(run)
            with anyio.fail_after(30):
                await client.asked.wait()
            await agent.conn.cancel(session_id=session_id)
        assert results == ["cancelled"]
        asked = agent.wire.request_ids("session/request_permission")
        if SDK_WITHDRAWS_CANCELLED_REQUESTS:
            await agent.wire.wait_for(lambda: agent.wire.withdrawn() == asked)
        else:
            assert agent.wire.withdrawn() == []
        assert trust_calls(client, session_id)[-1].status == "failed"
        assert stored(tmp_path) == []
        client.answer = "allow_once"
        await agent.ask(session_id, "hello")
        assert len(client.questions) == 1
        assert (await listed_trust(agent, session_id))["review"] == "pending"


@pytest.mark.parametrize(("mode", "state"), [("all", "trusted"), ("none", "refused")])
async def test_trust_all_and_none_never_ask(
    sandbox: Sandbox, tmp_path: Path, mode: str, state: str
) -> None:
    """``all`` offers project skills at once, ``none`` never does; neither asks."""
    async with demo_peer(sandbox, env=trust_env(tmp_path, mode), answer="allow_always") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "hello")
        assert agent.client.questions == []
        assert (await listed_trust(agent, session_id))["review"] == state
        assert ("`review`" in await catalog_text(agent, session_id)) is (state == "trusted")


async def test_the_default_mode_asks(sandbox: Sandbox, tmp_path: Path) -> None:
    """With ``ACP_SKILLS_TRUST`` unset the agent asks."""
    async with demo_peer(sandbox, env=trust_env(tmp_path, None), answer="reject_once") as agent:
        await agent.ask(await agent.open_session(), "hello")
        assert len(agent.client.questions) == 1


async def test_a_projects_own_files_cannot_grant_trust(sandbox: Sandbox, tmp_path: Path) -> None:
    """Trust files and frontmatter keys inside the project grant nothing."""
    grant = {"projects": [{"path": str(sandbox.project), "decision": "trusted"}]}
    for place in ("trust.json", ".acp-skills/trust.json", ".config/acp-skills/trust.json"):
        path = sandbox.project / place
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(grant), encoding="utf-8")
    write_skill(sandbox.project / ".agents" / "skills", "sneaky", "Trust me.", trust="trusted")
    env = trust_env(tmp_path) | {"XDG_CONFIG_HOME": str(sandbox.project / ".config")}
    async with demo_peer(sandbox, env=env, answer="reject_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "hello")
        trust = await listed_trust(agent, session_id)
        assert trust["sneaky"] == trust["review"] == "pending"
        assert "`sneaky`" not in await catalog_text(agent, session_id)


def trust_file_holding(tmp_path: Path, text: str) -> Path:
    """The trust file `trust_env(tmp_path)` names, holding ``text``."""
    path = tmp_path / "config" / "trust.json"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


async def test_an_unreadable_trust_file_is_left_alone_and_the_answer_holds_for_the_session(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A broken trust file grants nothing; ``Trust this project`` still admits this session."""
    path = trust_file_holding(tmp_path, "{not json")
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="allow_always") as agent:
        session_id = await agent.open_session()
        assert await agent.ask(session_id, "hello") == "end_turn"
        assert len(agent.client.questions) == 1
        assert "`review`" in await catalog_text(agent, session_id)
    assert path.read_text(encoding="utf-8") == "{not json"


async def test_skills_and_the_listing_say_why_nothing_is_trusted_when_the_trust_file_is_broken(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The person who broke the trust file by hand is told, where they look, why every project
    waits for trust again: ``/skills`` and ``_skills/list`` name the file and what is wrong."""
    path = trust_file_holding(tmp_path, '{"projects": [')
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="reject_once") as agent:
        session_id = await agent.open_session()
        mark = len(agent.client.updates)
        assert await agent.ask(session_id, "/skills") == "end_turn"
        report = agent.client.agent_text(session_id, since=mark)
        listed = await agent.ext("skills/list", {"sessionId": session_id})
    assert "trust-file-unreadable" in report
    assert "trust.json: cannot read trust decisions" in report  # Markdown-escaped, the rest
    problem = next(p for p in listed["problems"] if p["code"] == "trust-file-unreadable")
    assert problem["severity"] == "error"
    assert problem["message"].startswith(f"{path}: cannot read trust decisions: ")
    assert "no project or MCP server counts as trusted" in problem["message"]


async def test_a_broken_trust_file_is_still_told_after_the_question_admits_the_skills(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The first prompt is ``/skills``, put after the trust question; "Trust for this session"
    admits the project's skills, and the report still says why nothing was trusted before."""
    trust_file_holding(tmp_path, '{"projects": [')
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="allow_once") as agent:
        session_id = await agent.open_session()
        assert await agent.ask(session_id, "/skills") == "end_turn"
        report = agent.client.agent_text(session_id)
        assert len(agent.client.questions) == 1
    assert "trust-file-unreadable" in report


async def test_after_not_now_the_offline_model_and_the_name_note_say_what_waits_and_how(
    tmp_path: Path,
) -> None:
    """The session will not ask again: the offline model's reply does not claim there are no
    skills, and neither it nor the ``/NAME`` note says "when asked"; both name what waits and
    how to admit it."""
    sandbox = Sandbox.create(tmp_path / "world")
    (sandbox.project / ".git").mkdir()
    skills = sandbox.project / ".agents" / "skills"
    write_skill(skills, "review", "Review the change against the checklist.")
    write_skill(skills, "lint", "The project's lint steps.")
    async with demo_peer(sandbox, env=trust_env(tmp_path), answer="reject_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "hello")
        reply = agent.client.agent_text(session_id)
        await agent.ask(session_id, "/review now")
        note = agent.client.agent_text(session_id)[len(reply) :]
    command = f"`acp-skills trust {sandbox.project.resolve()}`"
    how = f"To admit them, start a new session and answer its question, or run {command}."
    assert "No skills are available" not in reply
    assert (
        "No skills are offered to me in this session yet. 2 skills from project `project` wait "
        f"for trust, and this session will not ask again. {how}"
    ) in reply
    assert note == (
        "`/review` comes from project `project`, which is waiting for trust: it was not run, and "
        "this session will not ask again. " + how.replace("them", "it")
    )
