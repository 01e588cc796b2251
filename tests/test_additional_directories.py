"""A session's additional directories (contract §15, ``additionalDirectories`` on
``session/new``, ``load`` and ``resume``): each one's project adds its project skills after the
session's own and before custom directories, in the order given; each project is gated by its
own trust decision, one question covering every pending source; catalogs are cached per set of
directories; ``_skills/list`` by session shows them. The local provider and the registry on
real directories; the demo agent in this process (`tests.acp_peer.demo_peer`)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry
from tests.acp_peer import WAIT_SECONDS, DemoPeer, demo_peer
from tests.sandbox import Sandbox, write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


def git_project(path: Path, *skills: str, directory: str = ".agents") -> Path:
    """A repository at ``path`` with project skills ``skills`` under ``directory``/skills."""
    (path / ".git").mkdir(parents=True)
    for name in skills:
        write_skill(path / directory / "skills", name, f"{name} of {path.name}.")
    return path


def provider(tmp_path: Path, custom: Path | None = None) -> LocalSkillProvider:
    return LocalSkillProvider(
        dsh_home=tmp_path / "home" / ".dsh",
        agents_home=tmp_path / "home" / ".agents",
        custom_skill_dirs=[custom] if custom is not None else [],
        watch=False,
    )


def scope(cwd: Path, *directories: Path) -> SkillLookupOptions:
    return SkillLookupOptions(cwd=str(cwd), additional_directories=tuple(map(str, directories)))


# -- discovery -------------------------------------------------------------------------------


async def test_each_directory_adds_its_projects_roots_after_the_sessions_own(
    tmp_path: Path,
) -> None:
    """The roots are the session's project's, then each additional directory's project's in
    the order given (`.dsh` before `.agents`), then the custom directories."""
    own, first, second = (git_project(tmp_path / name) for name in ("own", "first", "second"))
    custom = tmp_path / "custom"
    roots = await provider(tmp_path, custom).roots(scope(own, second / "src", first))
    project_roots = [(root.path, root.source) for root in roots if root.source != "user-dsh"]
    assert project_roots[:7] == [
        (str(own / ".dsh" / "skills"), "project-dsh"),
        (str(own / ".agents" / "skills"), "project-agents"),
        (str(second / ".dsh" / "skills"), "project-dsh"),
        (str(second / ".agents" / "skills"), "project-agents"),
        (str(first / ".dsh" / "skills"), "project-dsh"),
        (str(first / ".agents" / "skills"), "project-agents"),
        (str(custom), "custom"),
    ]


async def test_a_directory_of_the_sessions_own_project_adds_nothing(tmp_path: Path) -> None:
    """A subdirectory of the session's project (or the project again) scans no root twice."""
    own = git_project(tmp_path / "own")
    (own / "docs").mkdir()
    alone = await provider(tmp_path).roots(scope(own))
    assert await provider(tmp_path).roots(scope(own, own / "docs", own)) == alone


async def test_name_clashes_follow_the_order_of_the_roots(tmp_path: Path) -> None:
    """The session's project beats an additional directory's, the first additional directory
    beats the second, and any of them beats a custom directory."""
    own = git_project(tmp_path / "own", "shared")
    first = git_project(tmp_path / "first", "shared", "only-first", "both")
    second = git_project(tmp_path / "second", "only-second", "both", "custom-too")
    custom = tmp_path / "custom"
    write_skill(custom, "custom-too", "The custom one.")
    registry = SkillRegistry()
    registry.register_provider(provider(tmp_path, custom))
    snapshot = await registry.snapshot(scope(own, first, second))
    winners = {skill.name: skill.description for skill in snapshot.skills}
    assert winners == {
        "shared": "shared of own.",
        "only-first": "only-first of first.",
        "both": "both of first.",
        "only-second": "only-second of second.",
        "custom-too": "custom-too of second.",
    }


async def test_catalogs_are_kept_apart_by_their_additional_directories(tmp_path: Path) -> None:
    """A lookup with additional directories and one without never share a cached catalog."""
    own = git_project(tmp_path / "own", "mine")
    other = git_project(tmp_path / "other", "theirs")
    registry = SkillRegistry()
    registry.register_provider(provider(tmp_path))
    names = [
        [s.name for s in (await registry.snapshot(options)).skills]
        for options in (scope(own), scope(own, other), scope(own), scope(own, other))
    ]
    assert names == [["mine"], ["mine", "theirs"], ["mine"], ["mine", "theirs"]]


# -- the demo agent --------------------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """The agent's world, with its project a repository of one project skill."""
    sandbox = Sandbox.create(tmp_path / "world")
    git_project(sandbox.project, "review")
    return sandbox


async def open_with(agent: DemoPeer, cwd: Path, *directories: Path) -> str:
    with anyio.fail_after(WAIT_SECONDS):
        created = await agent.conn.new_session(
            cwd=str(cwd), mcp_servers=[], additional_directories=[str(d) for d in directories]
        )
    return created.session_id


async def trust_of(agent: DemoPeer, session_id: str) -> dict[str, str]:
    listed = await agent.ext("skills/list", {"sessionId": session_id})
    return {skill["name"]: skill["trust"] for skill in listed["skills"]}


def trust(mode: str) -> dict[str, str]:
    return {"ACP_SKILLS_TRUST": mode}


async def test_the_agent_advertises_additional_directories(sandbox: Sandbox) -> None:
    """``sessionCapabilities.additionalDirectories`` is advertised: editors send the field
    only to an agent that does."""
    async with demo_peer(sandbox) as agent:
        capabilities = agent.initialized.model_dump(by_alias=True, exclude_none=True)
        assert "additionalDirectories" in capabilities["agentCapabilities"]["sessionCapabilities"]


async def test_a_sessions_listing_shows_the_skills_of_its_additional_directories(
    sandbox: Sandbox,
) -> None:
    """``_skills/list`` by session has the other project's skills; by ``cwd`` it has not."""
    other = git_project(sandbox.root / "other", "deploy")
    async with demo_peer(sandbox, env=trust("all")) as agent:
        session_id = await open_with(agent, sandbox.project, other)
        assert await trust_of(agent, session_id) == {"deploy": "trusted", "review": "trusted"}
        by_cwd = await agent.ext("skills/list", {"cwd": str(sandbox.project)})
    assert [skill["name"] for skill in by_cwd["skills"]] == ["review"]


async def test_one_question_covers_every_project_and_each_keeps_its_own_decision(
    sandbox: Sandbox,
) -> None:
    """Neither project decided: one question names both, and "Trust this project" stores a
    decision for each. A later session with a third project asks about that one alone."""
    other = git_project(sandbox.root / "other", "deploy")
    third = git_project(sandbox.root / "third", "publish")
    async with demo_peer(sandbox, env=trust("ask"), answer="allow_always") as agent:
        first = await open_with(agent, sandbox.project, other)
        assert await trust_of(agent, first) == {"deploy": "pending", "review": "pending"}
        await agent.ask(first, "hello")
        [question] = agent.questions(first)
        assert question["toolCall"]["title"] == "Trust 2 skills from other, project?"
        assert await trust_of(agent, first) == {"deploy": "trusted", "review": "trusted"}
        later = await open_with(agent, sandbox.project, third, other)
        assert await trust_of(agent, later) == {
            "deploy": "trusted",
            "publish": "pending",
            "review": "trusted",
        }
        await agent.ask(later, "hello")
        [question] = agent.questions(later)
        assert question["toolCall"]["title"] == "Trust 1 skill from third?"


async def test_a_refused_project_stays_out_while_the_others_are_offered(
    sandbox: Sandbox,
) -> None:
    """ "Never for this project" for a session in the other project alone refuses that one;
    a session with both then withholds only it."""
    other = git_project(sandbox.root / "other", "deploy")
    async with demo_peer(sandbox, env=trust("ask"), answer="reject_always") as agent:
        await agent.ask(await agent.open_session(other), "hello")
    async with demo_peer(sandbox, env=trust("ask"), answer="allow_once") as agent:
        session_id = await open_with(agent, sandbox.project, other)
        assert await trust_of(agent, session_id) == {"deploy": "refused", "review": "pending"}
        await agent.ask(session_id, "hello")
        assert await trust_of(agent, session_id) == {"deploy": "refused", "review": "session"}


async def test_load_and_resume_take_additional_directories_too(sandbox: Sandbox) -> None:
    """A session reopened with another directory sees that directory's skills, and the
    listing reports the directories it was last opened with."""
    other = git_project(sandbox.root / "other", "deploy")
    async with demo_peer(sandbox, env=trust("all")) as agent:
        session_id = await agent.open_session()
        await agent.ask(session_id, "hello")
        assert await trust_of(agent, session_id) == {"review": "trusted"}
        for reopen in (agent.conn.load_session, agent.conn.resume_session):
            with anyio.fail_after(WAIT_SECONDS):
                await reopen(
                    session_id=session_id,
                    cwd=str(sandbox.project),
                    mcp_servers=[],
                    additional_directories=[str(other)],
                )
            assert await trust_of(agent, session_id) == {"deploy": "trusted", "review": "trusted"}
        await agent.ask(session_id, "again")
        [info] = (await agent.conn.list_sessions()).sessions
    assert info.additional_directories == [str(other)]


@pytest.mark.parametrize(
    "directories",
    [["relative/dir"], ["/fine", "also/relative"], ["/x"] * 65],
    ids=["relative", "one-of-two-relative", "too-many"],
)
async def test_directories_that_are_not_absolute_or_too_many_are_invalid_params(
    sandbox: Sandbox, directories: list[str]
) -> None:
    """A relative directory, or more than 64, is -32602; the agent goes on serving."""
    async with demo_peer(sandbox) as agent:
        with pytest.raises(RequestError) as refused:
            await open_with(agent, sandbox.project, *map(Path, directories))
        assert refused.value.code == -32602
        assert await agent.open_session()


async def test_a_multi_root_thread_reopens_from_the_history_as_zed_reopens_it(
    sandbox: Sandbox,
) -> None:
    """Zed's flow (docs/zed.md): a thread of two folders, closed; the history lists it with
    both; reopened with what the listing gave (``session/load``), it replays and offers the
    skills of both folders."""
    other = git_project(sandbox.root / "other", "deploy")
    async with demo_peer(sandbox, env=trust("all")) as agent:
        session_id = await open_with(agent, sandbox.project, other)
        await agent.ask(session_id, "Release both")
        with anyio.fail_after(WAIT_SECONDS):
            await agent.conn.close_session(session_id=session_id)
            [info] = (await agent.conn.list_sessions()).sessions  # no cwd, as Zed asks
            await agent.conn.load_session(
                session_id=info.session_id,
                cwd=info.cwd,
                mcp_servers=[],
                additional_directories=info.additional_directories,
            )
        assert (info.cwd, info.additional_directories) == (str(sandbox.project), [str(other)])
        assert await trust_of(agent, session_id) == {"deploy": "trusted", "review": "trusted"}
        replayed = agent.wire.updates(session_id, "user_message_chunk")
        assert [update["content"]["text"] for update in replayed] == ["Release both"]
