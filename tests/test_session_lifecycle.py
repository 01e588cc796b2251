"""The session lifecycle editors use (contract §15): ``session/list``, ``session/resume`` and
``session/close``, advertised in ``sessionCapabilities``. The real demo agent runs in this
process (`tests.acp_peer.demo_peer`); a restart is a second agent on the same state directory.
`AcpSkills` mounted on its own connection (`tests.acp_peer.connected`) shows the servers a
closed session lets go. Every frame is checked against the ACP schema."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    CloseSessionResponse,
    InitializeResponse,
    ListSessionsResponse,
    McpServerStdio,
    ResumeSessionResponse,
    TextContentBlock,
)

from acp_skills import SkillLookupOptions
from acp_skills.acp import AcpSkills
from acp_skills.record import InMemorySessionStore
from tests.acp_peer import (
    WAIT_SECONDS,
    Peer,
    ScriptedModelAgent,
    connected,
    demo_peer,
    fixture_registry,
    make_project,
    write_fixture_skills,
)
from tests.doc_snippets import load_snippet, serve
from tests.sandbox import Sandbox, write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

# `sessionCapabilities` as advertised: each one supported (`additionalDirectories`: its own tests).
EVERYTHING: dict[str, Any] = {"list": {}, "resume": {}, "close": {}, "additionalDirectories": {}}


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """The demo agent's private world; a restart is a second agent over the same one."""
    return Sandbox.create(tmp_path / "world")


async def listed(agent: Peer, cwd: Path | None = None, cursor: str | None = None) -> Any:
    with anyio.fail_after(WAIT_SECONDS):
        answer: ListSessionsResponse = await agent.conn.list_sessions(
            cwd=str(cwd) if cwd is not None else None, cursor=cursor
        )
    return answer


async def resume(agent: Peer, session_id: str, cwd: Path) -> None:
    """``session/resume``, then the commands update that follows its response."""
    sent = len(agent.wire.commands(session_id))
    with anyio.fail_after(WAIT_SECONDS):
        answer = await agent.conn.resume_session(
            session_id=session_id, cwd=str(cwd), mcp_servers=[]
        )
    assert isinstance(answer, ResumeSessionResponse)
    await agent.wire.wait_for(lambda: len(agent.wire.commands(session_id)) > sent)


async def close(agent: Peer, session_id: str) -> None:
    with anyio.fail_after(WAIT_SECONDS):
        answer = await agent.conn.close_session(session_id=session_id)
    assert answer is None or isinstance(answer, CloseSessionResponse)


def advertised(initialized: InitializeResponse) -> dict[str, Any]:
    """``agentCapabilities.sessionCapabilities`` as it went on the wire."""
    capabilities = initialized.model_dump(by_alias=True, exclude_none=True)["agentCapabilities"]
    return dict(capabilities.get("sessionCapabilities", {}))


def text(words: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=words)


def conversation_updates(agent: Peer, session_id: str) -> list[dict[str, Any]]:
    kinds = ("user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update")
    return [u for kind in kinds for u in agent.wire.updates(session_id, kind)]


# -- advertised ------------------------------------------------------------------------------


async def test_the_agent_advertises_list_resume_and_close(sandbox: Sandbox) -> None:
    """``initialize`` says the agent lists, resumes and closes sessions (and takes additional
    directories)."""
    async with demo_peer(sandbox) as agent:
        assert advertised(agent.initialized) == EVERYTHING


# -- session/list ----------------------------------------------------------------------------


async def test_sessions_are_listed_after_a_restart_newest_first(sandbox: Sandbox) -> None:
    """Sessions recorded by an earlier agent are listed by the next one, newest first, each
    with its cwd, its first prompt as its title, and an ISO 8601 time; a session nobody
    prompted has no record and is not listed."""
    async with demo_peer(sandbox) as agent:
        first = await agent.open_session()
        await agent.ask(first, "Tidy the release notes\nand the changelog")
        second = await agent.open_session()
        await agent.ask(second, "Explain the build")
        await agent.ask(first, "One more thing")  # `first` is now the newest
        await agent.open_session()  # never prompted: no record
    async with demo_peer(sandbox) as restarted:
        answer = await listed(restarted)
    assert [info.session_id for info in answer.sessions] == [first, second]
    assert [info.title for info in answer.sessions] == [
        "Tidy the release notes and the changelog",
        "Explain the build",
    ]
    assert {info.cwd for info in answer.sessions} == {str(sandbox.project)}
    stamps = [datetime.fromisoformat(info.updated_at) for info in answer.sessions]
    assert stamps == sorted(stamps, reverse=True)
    assert answer.next_cursor is None


async def test_a_listing_by_cwd_keeps_that_directory_by_real_path(sandbox: Sandbox) -> None:
    """``cwd`` naming a link to the project lists the project's sessions and no others."""
    elsewhere = sandbox.root / "elsewhere"
    elsewhere.mkdir()
    (sandbox.root / "link").symlink_to(sandbox.project)
    async with demo_peer(sandbox) as agent:
        here = await agent.open_session()
        await agent.ask(here, "here")
        there = await agent.open_session(elsewhere)
        await agent.ask(there, "there")
        by_link = await listed(agent, sandbox.root / "link")
        by_other = await listed(agent, elsewhere)
    assert [info.session_id for info in by_link.sessions] == [here]
    assert [info.session_id for info in by_other.sessions] == [there]


async def test_a_session_loaded_in_another_directory_is_listed_there_under_its_first_prompt(
    sandbox: Sandbox,
) -> None:
    """Loaded and prompted in another directory, a session is listed there and no longer in
    the first, still titled by its first prompt."""
    elsewhere = sandbox.root / "elsewhere"
    elsewhere.mkdir()
    async with demo_peer(sandbox) as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "Started in the project")
        await agent.load_session(session_id, elsewhere)
        await agent.ask(session_id, "Went on elsewhere")
        in_project = await listed(agent, sandbox.project)
        [info] = (await listed(agent, elsewhere)).sessions
    assert in_project.sessions == []
    assert (info.session_id, info.cwd, info.title) == (
        session_id,
        str(elsewhere),
        "Started in the project",
    )


async def test_a_record_without_a_summary_is_listed_once_reopened_under_its_first_prompt(
    sandbox: Sandbox,
) -> None:
    """A record from before summaries existed is not listed; reopened and prompted, it is,
    titled by its first prompt."""
    async with demo_peer(sandbox) as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "The very first question")
    shutil.rmtree(sandbox.state_dir / "sessions" / "index")
    async with demo_peer(sandbox) as restarted:
        assert (await listed(restarted)).sessions == []
        await restarted.load_session(session_id, sandbox.project)
        await restarted.ask(session_id, "A later question")
        [info] = (await listed(restarted)).sessions
    assert (info.session_id, info.title) == (session_id, "The very first question")


async def test_a_summary_that_cannot_be_written_is_said_and_written_later(
    sandbox: Sandbox,
) -> None:
    """The turns go on; a warning says why; once writing works again the next turn writes
    the summary, titled by the first prompt."""
    index = sandbox.state_dir / "sessions" / "index"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text("in the way", encoding="utf-8")
    async with demo_peer(sandbox) as agent:
        session_id = await agent.open_session()
        assert await agent.ask(session_id, "First") == "end_turn"
        assert await agent.ask(session_id, "Second") == "end_turn"
        assert (await listed(agent)).sessions == []
        assert await agent.log_lines_with("session_summary_not_written")
        index.unlink()
        await agent.ask(session_id, "Third")
        [info] = (await listed(agent)).sessions
    assert info.title == "First"


async def test_a_relative_cwd_or_a_made_up_cursor_is_invalid_params(sandbox: Sandbox) -> None:
    """Both are -32602, and the agent goes on serving."""
    async with demo_peer(sandbox) as agent:
        for cwd, cursor in (("relative/dir", None), (None, "page-2")):
            with pytest.raises(RequestError) as refused:
                await agent.conn.list_sessions(cwd=cwd, cursor=cursor)
            assert refused.value.code == -32602
        assert (await listed(agent)).sessions == []


# -- session/resume --------------------------------------------------------------------------


async def test_resume_reopens_a_session_without_replaying_it(sandbox: Sandbox) -> None:
    """After a restart, ``session/resume`` sends no conversation back, and the next prompt
    goes on with the recorded history under a prefix composed afresh."""
    async with demo_peer(sandbox) as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "Remember the word pelican")
    async with demo_peer(sandbox) as restarted:
        await resume(restarted, session_id, sandbox.project)
        assert conversation_updates(restarted, session_id) == []
        prefix = await restarted.ext("skills/prefix", {"sessionId": session_id})
        assert prefix["composed"] is False
        assert await restarted.ask(session_id, "And now?") == "end_turn"
        prefix = await restarted.ext("skills/prefix", {"sessionId": session_id})
        assert prefix["composed"] is True
    users = [entry for entry in sandbox.read_record(session_id) if entry["type"] == "history"]
    said = [entry["message"]["_display"] for entry in users if entry["message"]["role"] == "user"]
    assert said == ["Remember the word pelican", "And now?"]


async def test_resume_of_an_unknown_session_is_invalid_params(sandbox: Sandbox) -> None:
    """An id with no record is -32602."""
    async with demo_peer(sandbox) as agent:
        with pytest.raises(RequestError) as refused:
            await agent.conn.resume_session(
                session_id="never-was", cwd=str(sandbox.project), mcp_servers=[]
            )
        assert refused.value.code == -32602


async def test_a_resumed_session_asks_for_trust_again(sandbox: Sandbox, tmp_path: Path) -> None:
    """A once-answer holds for its instance only: the resumed instance asks again."""
    (sandbox.project / ".git").mkdir()
    write_skill(sandbox.project / ".agents" / "skills", "review", "Review the change.")
    env = {"ACP_SKILLS_TRUST": "ask"}
    async with demo_peer(sandbox, env=env, answer="allow_once") as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "hello")
        await agent.ask(session_id, "again")
        assert len(agent.questions(session_id)) == 1
        await resume(agent, session_id, sandbox.project)
        await agent.ask(session_id, "after resuming")
        assert len(agent.questions(session_id)) == 2


# -- session/close ---------------------------------------------------------------------------


async def test_close_cancels_the_running_turn_and_later_prompts_are_refused(
    tmp_path: Path,
) -> None:
    """A turn still waiting on its model ends ``cancelled`` when its session is closed; a
    prompt for the closed session is -32602, and the agent goes on serving the others."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    project = make_project(tmp_path)
    async with connected(registry, agent_type=ClosingAgent) as peer:
        agent: ClosingAgent = peer.agent
        session_id = await peer.new_session(project)
        other = await peer.new_session(project)
        agent.gate = anyio.Event()
        stops: list[str] = []
        async with anyio.create_task_group() as group:

            async def prompt() -> None:
                stops.append(await peer.ask(session_id, "hello"))

            group.start_soon(prompt)
            with anyio.fail_after(WAIT_SECONDS):
                await agent.waiting.wait()
            await close(peer, session_id)
        assert stops == ["cancelled"]
        agent.gate = None
        with pytest.raises(RequestError) as refused:
            await peer.ask(session_id, "still there?")
        assert refused.value.code == -32602
        assert await peer.ask(other, "hello") == "end_turn"


async def test_a_closed_session_keeps_its_record_for_load_and_resume(sandbox: Sandbox) -> None:
    """Closed, the session is still listed, and ``session/load`` replays it."""
    async with demo_peer(sandbox) as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "Keep this")
        await close(agent, session_id)
        assert [info.session_id for info in (await listed(agent)).sessions] == [session_id]
        await agent.load_session(session_id, sandbox.project)
        replayed = agent.wire.updates(session_id, "user_message_chunk")
        assert [update["content"]["text"] for update in replayed] == ["Keep this"]
        await close(agent, session_id)
        await resume(agent, session_id, sandbox.project)
        assert await agent.ask(session_id, "back again") == "end_turn"


async def test_closing_an_unknown_session_is_invalid_params(sandbox: Sandbox) -> None:
    """An id neither open nor recorded is -32602."""
    async with demo_peer(sandbox) as agent:
        with pytest.raises(RequestError) as refused:
            await agent.conn.close_session(session_id="never-was")
        assert refused.value.code == -32602


class RecordingCloser:
    """The seam that closes a server no live session uses: records each release."""

    def __init__(self) -> None:
        self.released: list[str] = []

    def connect(self, server: Any) -> None:
        """Connecting is not what these tests look at."""

    async def release(self, server: Any) -> None:
        self.released.append(server.label)

    def states(self, options: SkillLookupOptions) -> Sequence[Any]:
        return []


def stdio(label: str) -> McpServerStdio:
    return McpServerStdio(name=label, command="/bin/true", args=[], env=[])


async def test_close_lets_go_of_the_servers_only_that_session_used(tmp_path: Path) -> None:
    """Closing one session releases the server only it named, not the one another session
    still uses; closing that one releases the rest."""
    closer = RecordingCloser()
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    project = make_project(tmp_path)
    async with connected(registry, agent_type=ClosingAgent, mcp=closer) as peer:
        first = await peer.new_session(project, mcp_servers=[stdio("own"), stdio("shared")])
        second = await peer.new_session(project, mcp_servers=[stdio("shared")])
        await close(peer, first)
        assert closer.released == ["own"]
        await close(peer, second)
        assert closer.released == ["own", "shared"]


class ClosingAgent(ScriptedModelAgent):
    """The rig's agent with ``session/close`` mounted as an agent author mounts it."""

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        await self.skills.close_session(session_id)


async def test_the_documented_lifecycle_handlers_list_resume_and_close(tmp_path: Path) -> None:
    """docs/integration.md's lifecycle block, as written, advertises and serves all three, and
    its sessions take additional directories."""
    registry = fixture_registry(tmp_path, write_fixture_skills(tmp_path))
    project = make_project(tmp_path)
    other = tmp_path / "other"
    write_skill(other / ".agents" / "skills", "publish", "Publish the release.")
    module = load_snippet("## Listing, resuming and closing sessions")
    agent = module.ListingAgent()
    agent.skills = AcpSkills(registry)
    async with serve(agent) as (conn, _frames):
        with anyio.fail_after(WAIT_SECONDS):
            initialized = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert advertised(initialized) == EVERYTHING
            opened = await conn.new_session(
                cwd=str(project), mcp_servers=[], additional_directories=[str(other)]
            )
            session = opened.session_id
            await conn.prompt(session_id=session, prompt=[text("Ship the release")])
            skills = await conn.ext_method("skills/list", {"sessionId": session})
            assert "publish" in [skill["name"] for skill in skills["skills"]]
            [info] = (await conn.list_sessions()).sessions
            assert (info.session_id, info.title) == (session, "Ship the release")
            await conn.close_session(session_id=session)
            await conn.resume_session(session_id=session, cwd=str(project), mcp_servers=[])
            again = await conn.prompt(session_id=session, prompt=[text("and again")])
    assert again.stop_reason == "end_turn"


async def test_a_store_that_cannot_list_is_an_internal_error_saying_why() -> None:
    """A store's `OSError` while listing is -32603 naming it, not an exception out of
    `list_sessions` (which the SDK would log with a traceback)."""

    class Unlistable(InMemorySessionStore):
        async def list_sessions(self, *, cwd: str | None = None, cursor: str | None = None) -> Any:
            raise PermissionError(13, "Permission denied", "/state/sessions/index")

    with pytest.raises(RequestError) as refused:
        await AcpSkills(store=Unlistable()).list_sessions()
    assert refused.value.code == -32603
    assert refused.value.data == {
        "reason": "the session records cannot be listed: Permission denied: /state/sessions/index"
    }
