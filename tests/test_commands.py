"""Slash commands (`acp_skills.acp.commands`): the announcer that follows a session's response,
its first turn and registry changes; and the library's own ``/skills`` and "no such command".

Through `AcpSkills` over a real in-memory ACP connection (`tests/acp_peer.py`), with an agent
that drives its model loop with `PromptTurn.requests`, as the demo agent does; the pure builders
are checked as tables.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import (
    McpServerStdio,
    NewSessionResponse,
    PromptResponse,
    TextContentBlock,
)

from acp_skills import (
    Diagnostic,
    SkillDefinition,
    SkillRegistry,
    SkillSnapshot,
)
from acp_skills.acp import AcpSkills
from acp_skills.acp.commands import (
    BUILTIN_COMMANDS,
    SKILLS_COMMAND_DESCRIPTION,
    invocable,
    leading_slash_word,
    skills_report,
)
from acp_skills.mcp import McpSkillProvider
from acp_skills.trust import TrustStore
from tests.acp_peer import (
    COMMANDS,
    SKILLS_BUILTIN,
    Peer,
    ScriptedModelAgent,
    SkillsAgent,
    connected,
    fixture_registry,
    write_fixture_skills,
    write_skill,
)
from tests.events import named_pipe, write_pipe
from tests.mcp_http import SERVER, write_served_skill
from tests.providers import candidate

pytestmark = pytest.mark.sdk

# -- slash commands --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_commands_update_follows_the_session_new_response(
    registry: SkillRegistry, project: Path
) -> None:
    """``available_commands_update`` goes out after the ``session/new`` response, not before."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        incoming = peer.wire.incoming()
    response_at = next(
        index
        for index, message in enumerate(incoming)
        if message.get("result", {}).get("sessionId") == session_id
    )
    update_at = next(
        index
        for index, message in enumerate(incoming)
        if message.get("method") == "session/update"
        and message["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )
    assert response_at < update_at
    assert peer.wire.commands(session_id) == [COMMANDS]


@pytest.mark.anyio
async def test_commands_are_user_invocable_skills_with_literal_descriptions_and_hints(
    registry: SkillRegistry, project: Path
) -> None:
    """Advertised: user-invocable skills only, descriptions not escaped, hint only when set."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
    [commands] = peer.wire.commands(session_id)
    assert commands == COMMANDS
    assert "internal" not in [command["name"] for command in commands]


@pytest.mark.anyio
async def test_commands_are_sent_again_at_the_first_prompt_turn_only(
    registry: SkillRegistry, project: Path
) -> None:
    """The first prompt turn re-sends the commands (editors may drop the first); later don't."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "hello")
        after_first = peer.wire.commands(session_id)
        await peer.prompt(session_id, "hello again")
        after_second = peer.wire.commands(session_id)
    assert after_first == [COMMANDS, COMMANDS]
    assert after_second == after_first


@pytest.mark.anyio
async def test_a_changed_skill_set_sends_a_new_commands_update(
    registry: SkillRegistry, project: Path
) -> None:
    """Registering and then disposing a runtime skill each send the session a fresh update."""
    hotfix = {"name": "hotfix", "description": "Ship a hotfix."}
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        dispose = registry.register(
            SkillDefinition(name="hotfix", description="Ship a hotfix.", content="Do it.")
        )
        await peer.wire.wait_for(lambda: len(peer.wire.commands(session_id)) == 2)
        dispose()
        await peer.wire.wait_for(lambda: len(peer.wire.commands(session_id)) == 3)
    assert peer.wire.commands(session_id) == [
        COMMANDS,
        [COMMANDS[0], COMMANDS[1], hotfix, COMMANDS[2], SKILLS_BUILTIN],
        COMMANDS,
    ]


@pytest.mark.anyio
async def test_a_changed_skill_set_reaches_every_live_session(
    registry: SkillRegistry, project: Path
) -> None:
    """However many sessions are open, each one is told when its commands change."""
    async with connected(registry) as peer:
        sessions = [await peer.new_session(project) for _ in range(40)]

        def every_session_has(count: int) -> bool:
            return all(len(peer.wire.commands(sid)) == count for sid in sessions)

        await peer.wire.wait_for(lambda: every_session_has(1))
        registry.register(
            SkillDefinition(name="hotfix", description="Ship a hotfix.", content="Do it.")
        )
        await peer.wire.wait_for(lambda: every_session_has(2))
    assert all(len(peer.wire.commands(session_id)[1]) == 5 for session_id in sessions)


@pytest.mark.anyio
async def test_an_invalidation_that_changes_nothing_sends_no_update(
    registry: SkillRegistry, project: Path
) -> None:
    """``registry.invalidate()`` with the same skills on disk sends no new commands update."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        registry.invalidate()
        # The refresh and this request share one discovery; the refresh resumes first, so an
        # update it sent would be on the wire before this response.
        await peer.ext("skills/list", {"sessionId": session_id})
        await peer.prompt(session_id, "first turn")  # a forced re-send, as a positive control
    assert peer.wire.commands(session_id) == [COMMANDS, COMMANDS]


@pytest.mark.anyio
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


class OpeningAgent(SkillsAgent):
    """Says when a prompt arrived (``prompted``);
    with ``hold_opening`` set, answers ``session/new`` only once it is set (after ``opened``)."""

    def __init__(self, skills: AcpSkills) -> None:
        super().__init__(skills)
        self.prompted, self.opened = anyio.Event(), anyio.Event()
        self.hold_opening: anyio.Event | None = None

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        opened = await super().new_session(cwd, mcp_servers)
        self.opened.set()
        if self.hold_opening is not None:
            await self.hold_opening.wait()
        return opened

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        self.prompted.set()
        return await super().prompt(session_id, prompt, **kwargs)


def timeline(peer: Peer, session_id: str) -> list[str]:
    """What the client saw of a session, in wire order: each answer to a request naming it
    (``<- session/prompt``) and each update's kind; a commands update as its command names."""
    asked = {
        message["id"]: message["method"]
        for direction, message in peer.wire.frames
        if direction == "outgoing"
        and "id" in message
        and message.get("method") in ("session/new", "session/load", "session/prompt")
    }
    seen: list[str] = []
    for message in peer.wire.incoming():
        if message.get("method") == "session/update":
            if message["params"]["sessionId"] != session_id:
                continue
            update = message["params"]["update"]
            kind = update["sessionUpdate"]
            if kind == "available_commands_update":
                kind = "commands: " + " ".join(c["name"] for c in update["availableCommands"])
            seen.append(kind)
        elif "method" not in message and message.get("id") in asked:
            method = asked[message["id"]]
            result = message.get("result") or {}
            if method != "session/new" or result.get("sessionId") == session_id:
                seen.append(f"<- {method}")
    return seen


@pytest.mark.anyio
async def test_commands_go_out_once_when_an_mcp_listing_arrives_during_the_first_turn(
    tmp_path: Path, project: Path
) -> None:
    """The list that follows a slow MCP listing goes out once, however many lookups waited
    for it (the opening's, the first turn's, a registry change's): a turn is running, so the
    editor has the session and needs no resend. Later prompts send nothing; ``session/load``
    sends the list after its answer and once more at its first turn. (The server is a
    process, reached over stdio as a provider given no ``transport`` reaches its servers.)"""

    served = tmp_path / "served"
    write_served_skill(served, "deploy-app", "Deploy the app.", "Run make deploy.")
    released = named_pipe(tmp_path / "listing-released")
    args = [SERVER, str(served), "--hold-listing", str(released)]
    server = McpServerStdio(name="team", command=sys.executable, args=args, env=[])
    mcp = McpSkillProvider(timeout=60)
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    registry.register_provider(mcp)

    async def prompt(text: str) -> None:
        await peer.conn.prompt(
            session_id=session_id, prompt=[TextContentBlock(type="text", text=text)]
        )

    try:
        async with connected(registry, agent_type=OpeningAgent, mcp=mcp) as peer:
            agent = peer.agent
            assert isinstance(agent, OpeningAgent)
            with anyio.fail_after(60):
                opened = await peer.conn.new_session(cwd=str(project), mcp_servers=[server])
                session_id = opened.session_id
                async with anyio.create_task_group() as group:
                    group.start_soon(prompt, "first")  # as an editor does: no waiting
                    await agent.prompted.wait()
                    registry.invalidate()  # the registry follower looks the commands up too
                    await write_pipe(released)  # once the listing is held
                await prompt("second")
                await prompt("third")
                sent = len(peer.wire.commands(session_id))
                await peer.conn.load_session(
                    cwd=str(project), session_id=session_id, mcp_servers=[server]
                )
                await peer.wire.wait_for(lambda: len(peer.wire.commands(session_id)) > sent)
                await prompt("fourth")
                await prompt("fifth")
    finally:
        await mcp.aclose()
    commands = "commands: compare deploy deploy-app secret skills"
    assert timeline(peer, session_id) == [
        "<- session/new",
        commands,
        "<- session/prompt",
        "<- session/prompt",
        "<- session/prompt",
        *["user_message_chunk"] * 3,  # the replay
        "<- session/load",
        commands,
        commands,  # the one resend: the first went out before any turn of this instance
        "<- session/prompt",
        "<- session/prompt",
    ]


@pytest.mark.anyio
async def test_no_commands_update_reaches_a_session_before_its_opening_answer(
    registry: SkillRegistry, project: Path
) -> None:
    """A registry change while ``session/new`` is still being answered sends that session
    nothing (the editor would drop it): its list goes out once, after the answer."""
    hotfix = SkillDefinition(name="hotfix", description="Ship a hotfix.", content="Do it.")
    async with connected(registry, agent_type=OpeningAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, OpeningAgent)
        first = await peer.new_session(project)
        agent.opened, agent.hold_opening = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as group:
            opening = group.start_soon
            answers: list[str] = []

            async def open_second() -> None:
                response = await peer.conn.new_session(cwd=str(project), mcp_servers=[])
                answers.append(response.session_id)

            opening(open_second)
            await agent.opened.wait()
            # The follower refreshes the least recently used session first: the second one,
            # once the first is used again. The first one's update shows the round is over.
            await peer.ext("skills/list", {"sessionId": first})
            registry.register(hotfix)
            await peer.wire.wait_for(lambda: len(peer.wire.commands(first)) == 2)
            agent.hold_opening.set()
        [second] = answers
        await peer.wire.wait_for(lambda: len(peer.wire.commands(second)) >= 1)
        await peer.prompt(second, "hello")
    with_hotfix = "commands: compare deploy hotfix secret skills"
    assert timeline(peer, second) == [
        "<- session/new",
        with_hotfix,
        with_hotfix,
        "<- session/prompt",
    ]


# -- the library's own commands ---------------------------------------------------------------


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    """deploy, compare, internal (model-only), secret (person-only), and one broken file."""
    root = write_fixture_skills(tmp_path)
    broken = root / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_text("---\nname: broken\ndescription: [\n---\n", encoding="utf-8")
    return root


@pytest.fixture
def registry(tmp_path: Path, skills_dir: Path) -> SkillRegistry:
    return fixture_registry(tmp_path, skills_dir)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def shown(peer: Peer, session_id: str) -> str:
    return "".join(
        u["content"]["text"] for u in peer.wire.updates(session_id, "agent_message_chunk")
    )


@pytest.mark.anyio
async def test_skills_is_answered_without_the_model_and_not_recorded(
    registry: SkillRegistry, project: Path, skills_dir: Path
) -> None:
    """``/skills``: the skills and problems are shown; no model request; nothing recorded."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        response = await peer.prompt(session_id, "/skills")
        session = await peer.skills.session(session_id)
        answer = shown(peer, session_id)
        assert (response.stop_reason, agent.requests, session.history) == ("end_turn", [], ())
        # The catalog is composed by the first turn that asks the model, not by this one.
        assert not session.composed
        [turn] = agent.turns
        assert turn.finished
        assert peer.wire.updates(session_id, "tool_call") == []

        await peer.prompt(session_id, "hello")
        assert len(agent.requests) == 1
        assert session.composed
    assert answer.startswith(f"**Skills for `{project}`** (4)\n")
    assert "- `/deploy` — Deploy the app to production. (custom)" in answer
    assert "- `internal` — Model-only helper. (custom, model only)" in answer
    assert "- `/secret` — Only a person may run this. (custom, hidden from the model)" in answer
    assert "**Problems** (1 error)" in answer
    assert (
        f"- `{skills_dir / 'broken' / 'SKILL.md'}:4`: error `yaml-invalid`: invalid YAML" in answer
    )
    assert f"Run `acp-skills doctor --cwd {project}` in a terminal for details." in answer


@pytest.mark.anyio
async def test_skills_without_problems_says_so(tmp_path: Path, project: Path) -> None:
    """Clean skills: the list, then "No problems found."."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "  /skills please")
        answer = shown(peer, session_id)
    assert answer.endswith("No problems found.")
    assert "**Problems**" not in answer


@pytest.mark.parametrize(
    ("prompt", "note"),
    [
        ("/nope", "`/nope` is not a command here."),
        ("/deplo now", "`/deplo` is not a command here."),
        ("/Deploy staging", "`/Deploy` is not a command here."),
        ("/internal", "`/internal` is not a command here."),
    ],
    ids=["unknown", "typo", "capitalised", "model-only"],
)
@pytest.mark.anyio
async def test_a_slash_word_that_is_no_command_gets_a_note_instead_of_the_model(
    registry: SkillRegistry, project: Path, prompt: str, note: str
) -> None:
    """The note names the commands that exist; the model is not asked; nothing is recorded."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        response = await peer.prompt(session_id, prompt)
        history = (await peer.skills.session(session_id)).history
        answer = shown(peer, session_id)
    assert (response.stop_reason, agent.requests, history) == ("end_turn", [], ())
    assert answer == (
        f"{note}\n\nCommands: `/compare`, `/deploy`, `/secret`, `/skills`.\n\n"
        "Nothing was sent to the model."
    )


@pytest.mark.parametrize(
    "prompt",
    [
        "please /nope",
        "/deploy now",
        "5/8 of the tests fail",
        "/usr/bin/env is missing",
        pytest.param(
            "/tmp is full",
            marks=pytest.mark.skipif(sys.platform == "win32", reason="needs /tmp"),
        ),
    ],
    ids=["not-first", "a-skill", "fraction", "a-path", "an-existing-directory"],
)
@pytest.mark.anyio
async def test_other_prompts_still_reach_the_model(
    registry: SkillRegistry, project: Path, prompt: str
) -> None:
    """Only a leading slash word that is no command is intercepted; ``/tmp`` is a path."""
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, prompt)
    assert len(agent.requests) == 1


@pytest.mark.anyio
async def test_skills_stays_the_report_when_a_skill_is_named_skills(
    registry: SkillRegistry, project: Path
) -> None:
    """A person's own ``skills`` skill neither replaces the built-in command nor hides the
    report: ``/skills`` is the library's, and the report says why that skill is no command."""
    registry.register(
        SkillDefinition(name="skills", description="My own skills helper.", content="Mine.")
    )
    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(project)
        [commands] = peer.wire.commands(session_id)
        await peer.prompt(session_id, "/skills")
        answer = shown(peer, session_id)
    assert [c for c in commands if c["name"] == "skills"] == [SKILLS_BUILTIN]
    assert peer.wire.updates(session_id, "tool_call") == []  # no skill ran
    assert agent.requests == []
    assert answer.startswith(f"**Skills for `{project}`**")
    assert (
        "- `skills` — My own skills helper. (runtime, not a command: `/skills` is this report)"
        in (answer)
    )


@pytest.mark.anyio
async def test_skills_list_carries_the_problems(registry: SkillRegistry, project: Path) -> None:
    """``_skills/list`` has ``problems``: the same records, in their JSON shape."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        listed = await peer.ext("skills/list", {"sessionId": session_id})
    [problem] = listed["problems"]
    assert list(problem) == ["code", "severity", "path", "line", "message"]
    assert (problem["code"], problem["severity"], problem["line"]) == ("yaml-invalid", "error", 4)
    assert problem["path"].endswith("broken/SKILL.md")


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("/skills", "skills"),
        ("  /skills now", "skills"),
        ("\n/Deploy\tx", "Deploy"),
        ("/run_tests", "run_tests"),
        ("/a/b", None),
        ("/deploy.", None),
        ("please /skills", None),
        ("/", None),
        ("/-x", None),
        ("", None),
    ],
)
def test_leading_slash_word(text: str, word: str | None) -> None:
    """A word only when the prompt opens with it, followed by whitespace or the end."""
    assert leading_slash_word(text) == word


def test_the_built_in_is_always_advertised_and_no_skill_takes_its_name() -> None:
    """``/skills`` is always offered; a skill called ``skills`` is never a command."""
    [offered] = BUILTIN_COMMANDS
    assert (offered.name, offered.description) == ("skills", SKILLS_COMMAND_DESCRIPTION)
    skills = [candidate("deploy", provider="p"), candidate("skills", provider="p")]
    assert [skill.name for skill in invocable(skills)] == ["deploy"]


@pytest.mark.anyio
async def test_skills_reports_what_the_catalog_budget_did(tmp_path: Path, project: Path) -> None:
    """With a catalog budget, ``/skills`` says what it did to the session's catalog."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    async with connected(registry, agent_type=ScriptedModelAgent, catalog_budget=700) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "/skills")
        answer = shown(peer, session_id)
        fit = await peer.skills.catalog_fit(session_id)
    assert fit is None  # nothing was frozen: /skills asks no model
    assert "Catalog: " in answer
    assert " of 700 characters; 3 skills listed" in answer


@pytest.fixture
def untrusted(project: Path) -> Path:
    """The project as a repository whose skills wait for trust: ``skills`` and a ``deploy``
    that shadows the person's own."""
    (project / ".git").mkdir()
    root = project / ".agents" / "skills"
    write_skill(root, "skills", "The project's take on /skills.", body="Project text.")
    write_skill(root, "deploy", "The project's deploy.", body="Project deploy.")
    return project


@pytest.mark.anyio
async def test_a_pending_project_skill_named_skills_never_hides_the_report(
    registry: SkillRegistry, untrusted: Path, tmp_path: Path
) -> None:
    """``/skills`` in an untrusted project is the library's report, listing the project's
    ``skills`` as waiting, not a note that it was not run."""
    store = TrustStore(tmp_path / "trust.json")
    async with connected(registry, trust="ask", trust_store=store, answer="reject_once") as peer:
        session_id = await peer.new_session(untrusted)
        await peer.prompt(session_id, "/skills")
        answer = shown(peer, session_id)
        [commands] = peer.wire.commands(session_id)[-1:]
        # Later in a prompt it is plain text: no skill of that name could have run there.
        await peer.prompt(session_id, "what does /skills show?")
        assert shown(peer, session_id) == answer
    assert answer.startswith(f"**Skills for `{untrusted}`**")
    assert "was not run" not in answer
    assert "**Waiting for trust** (2)" in answer
    assert "- `skills` — The project's take on /skills. (project `project`)" in answer
    assert [c for c in commands if c["name"] == "skills"] == [SKILLS_BUILTIN]


@pytest.mark.anyio
async def test_no_was_not_run_note_when_the_persons_own_skill_of_that_name_ran(
    registry: SkillRegistry, untrusted: Path, tmp_path: Path
) -> None:
    """While the project's ``deploy`` waits, ``/deploy`` runs the person's own ``deploy``, and
    nobody is told that ``/deploy`` was not run."""
    store = TrustStore(tmp_path / "trust.json")
    async with connected(
        registry,
        agent_type=ScriptedModelAgent,
        trust="ask",
        trust_store=store,
        answer="reject_once",
    ) as peer:
        agent = peer.agent
        assert isinstance(agent, ScriptedModelAgent)
        session_id = await peer.new_session(untrusted)
        await peer.prompt(session_id, "/deploy staging")
        answer = shown(peer, session_id)
    [end] = [e for e in peer.wire.updates(session_id, "tool_call_update") if e.get("content")]
    text = end["content"][0]["content"]["text"]
    assert "Run `scripts/deploy.sh`." in text
    assert "Project deploy." not in text
    assert "was not run" not in answer


@pytest.mark.anyio
async def test_skills_says_how_many_changes_the_sessions_catalog_predates(
    tmp_path: Path, project: Path
) -> None:
    """Skills changed on disk after a session froze its catalog: its ``/skills`` lists them
    as they are now and says the catalog predates the changes (a skill added, one removed, a
    description edited; not an edit of whitespace, nor one to a skill no catalog lists) and
    that a new session has them. A new session's ``/skills`` says nothing of the kind."""
    skills_dir = write_fixture_skills(tmp_path)
    registry = fixture_registry(tmp_path, skills_dir)

    def edit(name: str, old: str, new: str) -> None:
        path = skills_dir / name / "SKILL.md"
        path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")

    async with connected(registry, agent_type=ScriptedModelAgent) as peer:
        running = await peer.new_session(project)
        await peer.prompt(running, "hello")  # the catalog is frozen here
        write_skill(skills_dir, "release", "Publish a release.", body="Tag it.")
        shutil.rmtree(skills_dir / "compare")
        edit("deploy", "Deploy the app", "Ship the app")
        edit("internal", "Model-only helper.", "Model-only \\n  helper.")
        edit("secret", "Only a person may run this.", "Only people run this.")
        await peer.ext("skills/reload", {})
        await peer.prompt(running, "/skills")
        report = shown(peer, running)
        fresh = await peer.new_session(project)
        await peer.prompt(fresh, "hello")
        await peer.prompt(fresh, "/skills")
        fresh_report = shown(peer, fresh)
    assert "- `/deploy` — Ship the app to production. (custom)" in report
    assert (
        "This session's catalog predates 3 changes to the skills above: 1 added (`release`); "
        "1 removed (`compare`); 1 with a new description (`deploy`). The model here keeps the "
        "catalog the session began with; a new session has them."
    ) in report
    assert "predates" not in fresh_report


@pytest.mark.parametrize(
    ("cwd", "header", "hint"),
    [
        (
            "/work/my project",
            "**Skills for `/work/my project`** (0)",
            "Run `acp-skills doctor --cwd '/work/my project'` in a terminal for details.",
        ),
        (
            "/work/a`b",
            "**Skills for ``/work/a`b``** (0)",
            "Run ``acp-skills doctor --cwd '/work/a`b'`` in a terminal for details.",
        ),
    ],
    ids=["space", "backtick"],
)
def test_the_doctor_hint_is_a_command_to_paste_whatever_the_path(
    cwd: str, header: str, hint: str
) -> None:
    """The ``/skills`` report quotes the path for the shell, and a backtick in it does not
    end the code span early."""
    problem = Diagnostic(code="yaml-invalid", severity="error", path=None, message="bad")
    report = skills_report(cwd, SkillSnapshot(skills=(), complete=True), [problem])
    assert report.splitlines()[0] == header
    assert report.splitlines()[-1] == hint
