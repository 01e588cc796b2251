"""Trust through the real demo agent: the question, each answer, and what follows (over stdio,
and in this process over the test rig)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from acp.schema import RequestPermissionResponse

from acp_skills import LocalSkillProvider, SkillRegistry
from acp_skills.acp import AcpSkills
from acp_skills.trust import TrustStore
from demo_agent.agent import DemoAgent
from demo_agent.models.offline import OfflineModel
from tests.acp_peer import Peer, connected, permission_answer
from tests.agent_client import Agent, RecordingClient, Sandbox, text_prompt, write_skill

OPTIONS = [
    {"optionId": "allow_once", "name": "Trust for this session", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Trust this project", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Not now", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Never for this project", "kind": "reject_always"},
]


class AnsweringClient(RecordingClient):
    """A client that answers the trust question as told: an option id, ``cancelled``,
    ``error``, or ``hold`` (never answers, until the turn is cancelled)."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer
        self.questions: list[dict[str, Any]] = []
        self.asked = anyio.Event()

    async def request_permission(self, **kwargs: Any) -> RequestPermissionResponse:
        self.questions.append(kwargs)
        self.asked.set()
        return await permission_answer(self.answer)


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


async def new_session(agent: Agent, cwd: Path) -> str:
    return (await agent.conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id


async def prompt(agent: Agent, session_id: str, text: str) -> str:
    with anyio.fail_after(30):
        response = await agent.conn.prompt(session_id=session_id, prompt=text_prompt(text))
    return response.stop_reason


async def catalog_text(agent: Agent, session_id: str) -> str:
    prefix = await agent.conn.ext_method("skills/prefix", {"sessionId": session_id})
    return "\n".join(message["text"] for message in prefix["messages"])


async def listed_trust(agent: Agent, session_id: str) -> dict[str, str]:
    listed = await agent.conn.ext_method("skills/list", {"sessionId": session_id})
    return {entry["name"]: entry["trust"] for entry in listed["skills"]}


async def answer_in_an_earlier_agent(sandbox: Sandbox, tmp_path: Path, answer: str) -> None:
    """One agent's first session in the project is asked and answers ``answer``; it exits."""
    async with sandbox.spawn(env=trust_env(tmp_path), client=AnsweringClient(answer)) as agent:
        await prompt(agent, await new_session(agent, sandbox.project), "hello")


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


@pytest.mark.anyio
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
    client = AnsweringClient(answer)
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        assert await listed_trust(agent, session_id) == {
            "lint": "pending",
            "notes": "trusted",
            "review": "pending",
        }
        assert await prompt(agent, session_id, "hello") == "end_turn"
        (question,) = client.questions
        assert [o.model_dump(by_alias=True, exclude_none=True) for o in question["options"]] == (
            OPTIONS
        )
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
        await prompt(agent, session_id, "hello again")
        assert len(client.questions) == 1
        # A new session asks again only while nothing is stored.
        other = await new_session(agent, sandbox.project)
        await prompt(agent, other, "hello")
        assert len(client.questions) == (1 if decision else 2)


@pytest.mark.anyio
async def test_a_stored_answer_holds_across_an_agent_restart(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``Trust this project`` is remembered; the next agent offers the skills without asking."""
    await answer_in_an_earlier_agent(sandbox, tmp_path, "allow_always")
    client = AnsweringClient("reject_once")
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        await prompt(agent, session_id, "hello")
        assert client.questions == []
        assert "`review`" in await catalog_text(agent, session_id)
        assert (await listed_trust(agent, session_id))["review"] == "trusted"


@pytest.mark.anyio
async def test_a_refused_project_is_never_asked_again_and_skills_says_how_to_undo(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """After ``Never for this project`` a restarted agent does not ask; `/skills` explains."""
    await answer_in_an_earlier_agent(sandbox, tmp_path, "reject_always")
    client = AnsweringClient("allow_once")
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        await prompt(agent, session_id, "/skills")
        assert client.questions == []
        report = client.agent_text(session_id)
        assert "**Refused** (2)" in report
        assert f"`acp-skills trust {sandbox.project}`" in report
        assert "`review` — Review the change against the checklist." in report


@pytest.mark.anyio
async def test_a_slash_command_in_the_first_prompt_expands_only_after_consent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``/review`` runs once the person trusts the project in that same turn."""
    client = AnsweringClient("allow_once")
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        await prompt(agent, session_id, "/review now")
        titles = [
            u.title for u in client.tool_updates(session_id) if u.session_update == "tool_call"
        ]
        assert titles[0] == "Trust 2 skills from project?"
        assert "Load skill review" in titles
        history = sandbox.history(session_id)
        assert "Do the review thing." in history[0]["content"]


@pytest.mark.anyio
async def test_a_slash_command_of_a_pending_skill_gets_a_note_and_is_not_expanded(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """After ``Not now``, ``/review`` is answered with why, and nothing reaches the model."""
    client = AnsweringClient("reject_once")
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        await prompt(agent, session_id, "/review now")
        text = client.agent_text(session_id)
        assert "`/review` comes from project `project`, which is waiting for trust" in text
        assert f"`acp-skills trust {sandbox.project}`" in text
        tool_titles = [
            u.title for u in client.tool_updates(session_id) if u.session_update == "tool_call"
        ]
        assert "Load skill review" not in tool_titles


@pytest.mark.anyio
async def test_cancelling_the_turn_while_asking_counts_as_not_now(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """``session/cancel`` during the question ends the turn cancelled; nothing is stored."""
    client = AnsweringClient("hold")
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        async with anyio.create_task_group() as group:
            results: list[str] = []

            async def run() -> None:
                results.append(await prompt(agent, session_id, "hello"))

            group.start_soon(run)
            with anyio.fail_after(30):
                await client.asked.wait()
            await agent.conn.cancel(session_id=session_id)
        assert results == ["cancelled"]
        assert trust_calls(client, session_id)[-1].status == "failed"
        assert stored(tmp_path) == []
        client.answer = "allow_once"
        await prompt(agent, session_id, "hello")
        assert len(client.questions) == 1
        assert (await listed_trust(agent, session_id))["review"] == "pending"


@pytest.mark.anyio
async def test_trust_all_and_none_never_ask(sandbox: Sandbox, tmp_path: Path) -> None:
    """``all`` offers project skills at once, ``none`` never does; neither asks."""
    for mode, state in (("all", "trusted"), ("none", "refused")):
        client = AnsweringClient("allow_always")
        async with sandbox.spawn(env=trust_env(tmp_path, mode), client=client) as agent:
            session_id = await new_session(agent, sandbox.project)
            await prompt(agent, session_id, "hello")
            assert client.questions == []
            assert (await listed_trust(agent, session_id))["review"] == state
            assert ("`review`" in await catalog_text(agent, session_id)) is (state == "trusted")


@pytest.mark.anyio
async def test_the_default_mode_asks(sandbox: Sandbox, tmp_path: Path) -> None:
    """With ``ACP_SKILLS_TRUST`` unset the agent asks."""
    client = AnsweringClient("reject_once")
    async with sandbox.spawn(env=trust_env(tmp_path, None), client=client) as agent:
        await prompt(agent, await new_session(agent, sandbox.project), "hello")
        assert len(client.questions) == 1


@pytest.mark.anyio
async def test_a_projects_own_files_cannot_grant_trust(sandbox: Sandbox, tmp_path: Path) -> None:
    """Trust files and frontmatter keys inside the project grant nothing."""
    grant = {"projects": [{"path": str(sandbox.project), "decision": "trusted"}]}
    for place in ("trust.json", ".acp-skills/trust.json", ".config/acp-skills/trust.json"):
        path = sandbox.project / place
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(grant), encoding="utf-8")
    write_skill(sandbox.project / ".agents" / "skills", "sneaky", "Trust me.", trust="trusted")
    env = trust_env(tmp_path) | {"XDG_CONFIG_HOME": str(sandbox.project / ".config")}
    env.pop("ACP_SKILLS_TRUST_FILE")
    env["ACP_SKILLS_TRUST_FILE"] = str(tmp_path / "config" / "trust.json")
    client = AnsweringClient("reject_once")
    async with sandbox.spawn(env=env, client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        await prompt(agent, session_id, "hello")
        trust = await listed_trust(agent, session_id)
        assert trust["sneaky"] == trust["review"] == "pending"
        assert "`sneaky`" not in await catalog_text(agent, session_id)


@pytest.mark.anyio
async def test_an_unreadable_trust_file_is_left_alone_and_the_answer_holds_for_the_session(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A broken trust file grants nothing; ``Trust this project`` still admits this session."""
    path = tmp_path / "config" / "trust.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json", encoding="utf-8")
    client = AnsweringClient("allow_always")
    async with sandbox.spawn(env=trust_env(tmp_path), client=client) as agent:
        session_id = await new_session(agent, sandbox.project)
        assert await prompt(agent, session_id, "hello") == "end_turn"
        assert len(client.questions) == 1
        assert "`review`" in await catalog_text(agent, session_id)
    assert path.read_text(encoding="utf-8") == "{not json"


class OfflineDemoAgent(DemoAgent):
    """The demo agent on its offline model, attached as `AcpSkills.serve` attaches it."""

    def __init__(self, skills: AcpSkills) -> None:
        super().__init__(skills, OfflineModel())

    def on_connect(self, conn: Any) -> None:
        self.skills.attach(conn)


@pytest.mark.anyio
async def test_after_not_now_the_offline_model_and_the_name_note_say_what_waits_and_how(
    tmp_path: Path,
) -> None:
    """The session will not ask again: the offline model's reply does not claim there are no
    skills, and neither it nor the ``/NAME`` note says "when asked"; both name what waits and
    how to admit it (the demo agent in this process, over the test rig)."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    skills = project / ".agents" / "skills"
    write_skill(skills, "review", "Review the change against the checklist.")
    write_skill(skills, "lint", "The project's lint steps.")
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(
            dsh_home=str(tmp_path / "home" / ".dsh"),
            agents_home=str(tmp_path / "home" / ".agents"),
            watch=False,
        )
    )
    async with connected(
        registry,
        agent_type=cast(Any, OfflineDemoAgent),
        trust="ask",
        trust_store=TrustStore(tmp_path / "trust.json"),
        answer="reject_once",
    ) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "hello")
        reply = peer_text(peer, session_id)
        await peer.prompt(session_id, "/review now")
        note = peer_text(peer, session_id)[len(reply) :]
    command = f"`acp-skills trust {project.resolve()}`"
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


def peer_text(peer: Peer, session_id: str) -> str:
    return "".join(
        update["content"]["text"] for update in peer.wire.updates(session_id, "agent_message_chunk")
    )
