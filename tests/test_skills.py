"""`AcpSkills`, the facade (contract §9): capabilities, extension methods, lifetime, and the
catalog budget's options through it (§12).

Sessions run over the real in-memory ACP connection of `tests/acp_peer.py` where the wire
matters, and through the turn API directly otherwise.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import TextContentBlock
from structlog.testing import capture_logs

from acp_skills import (
    LocalSkillProvider,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillRegistry,
    render_catalog,
)
from acp_skills.acp import AcpSkills, PromptTurn
from acp_skills.acp.skills import EXTENSION_METHODS, FOLLOWER_TASK_NAME
from tests.acp_peer import (
    COMMANDS,
    CONFIG,
    DEPLOY_RAW_DESCRIPTION,
    METHODS,
    SYSTEM,
    RecordingClient,
    connected,
    fixture_registry,
    make_project,
    write_fixture_skills,
    write_skill,
)
from tests.providers import ListProvider, candidate

pytestmark = pytest.mark.sdk


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    return write_fixture_skills(tmp_path)


@pytest.fixture
def registry(tmp_path: Path, skills_dir: Path) -> SkillRegistry:
    return fixture_registry(tmp_path, skills_dir)


@pytest.fixture
def guide(skills_dir: Path) -> str:
    """The deploy skill's guide, as the absolute real path the client is asked to read."""
    return os.path.realpath(skills_dir / "deploy" / "references" / "guide.md")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def test_capability_meta_names_version_and_methods() -> None:
    """The capability entry is ``{"acp-skills": {"version", "methods"}}``."""
    assert AcpSkills.capability_meta() == {"acp-skills": {"version": "1", "methods": METHODS}}
    assert list(EXTENSION_METHODS) == METHODS


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("skills/list", True),
        ("_skills/prefix", True),
        ("skills/reload", True),
        ("skills/bogus", False),
        ("other/list", False),
    ],
    ids=["list", "underscored-prefix", "reload", "bogus", "other"],
)
def test_handles_names_only_our_methods(method: str, expected: bool) -> None:
    """`handles` accepts the method name with or without its leading underscore."""
    assert AcpSkills(SkillRegistry()).handles(method) is expected


@pytest.mark.anyio
async def test_ext_method_rejects_an_unknown_skills_method() -> None:
    """The facade itself answers ``_skills/bogus`` with method-not-found."""
    with pytest.raises(RequestError) as caught:
        await AcpSkills(SkillRegistry()).ext_method("skills/bogus", {})
    assert (caught.value.code, caught.value.data) == (-32601, {"method": "_skills/bogus"})


# -- capabilities ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_initialize_advertises_the_extension_in_agent_capabilities_meta(
    registry: SkillRegistry,
) -> None:
    """The initialize response carries ``agentCapabilities._meta["acp-skills"]``."""
    async with connected(registry) as peer:
        result = peer.wire.response_to("initialize")["result"]
    assert result["agentCapabilities"]["_meta"] == {
        "acp-skills": {"version": "1", "methods": METHODS}
    }
    capabilities = peer.initialized.agent_capabilities
    assert capabilities is not None
    assert capabilities.field_meta == AcpSkills.capability_meta()


# -- extension methods -----------------------------------------------------------------------


def listed(name: str, **overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": name,
        "description": "",
        "source": "custom",
        "provider": "local",
        "userInvocable": True,
        "disableModelInvocation": False,
        "trust": "trusted",
    }
    entry.update(overrides)
    return entry


LISTED = [
    listed("compare", description="Compare a < b & c"),
    listed("deploy", description=DEPLOY_RAW_DESCRIPTION),
    listed("internal", description="Model-only helper.", userInvocable=False),
    listed("secret", description="Only a person may run this.", disableModelInvocation=True),
]


@pytest.mark.anyio
async def test_skills_list_by_session_and_by_cwd(registry: SkillRegistry, project: Path) -> None:
    """``_skills/list`` answers every resolved skill, sorted, for a session or a cwd."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        by_session = await peer.ext("skills/list", {"sessionId": session_id})
        by_cwd = await peer.ext("skills/list", {"cwd": str(project)})
        frame = peer.wire.response_to("_skills/list")
    assert by_session == {"skills": LISTED, "problems": [], "shadowed": [], "mcpServers": []}
    assert by_cwd == {"skills": LISTED, "problems": [], "shadowed": [], "mcpServers": []}
    assert frame["result"] == {"skills": LISTED, "problems": [], "shadowed": [], "mcpServers": []}


@pytest.mark.parametrize(
    ("params", "data"),
    [
        (
            {"cwd": "relative/dir"},
            {"cwd": "relative/dir", "reason": "cwd must be an absolute path"},
        ),
        ({"sessionId": "nope"}, {"sessionId": "nope", "reason": "unknown session"}),
        ({}, {"reason": "pass sessionId or cwd"}),
    ],
    ids=["relative-cwd", "unknown-session", "neither"],
)
@pytest.mark.anyio
async def test_skills_list_rejects_bad_params(
    registry: SkillRegistry, params: dict[str, Any], data: dict[str, Any]
) -> None:
    """A relative cwd, an unknown session or no selector is a -32602 error."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.ext("skills/list", params)
    assert (caught.value.code, str(caught.value), caught.value.data) == (
        -32602,
        "Invalid params",
        data,
    )


@pytest.mark.anyio
async def test_skills_prefix_before_and_after_the_first_turn(
    registry: SkillRegistry, project: Path
) -> None:
    """``_skills/prefix``: nothing composed before the first turn; catalog and header after."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        before = await peer.ext("skills/prefix", {"sessionId": session_id})
        await peer.prompt(session_id, "hello")
        after = await peer.ext("skills/prefix", {"sessionId": session_id})
    catalog = render_catalog(await registry.list(SkillLookupOptions(cwd=str(project))))
    assert catalog is not None
    assert before == {"composed": False, "messages": [], "header": None, "budget": None}
    messages = [{"role": "user", "text": catalog}]
    assert after == {
        "composed": True,
        "messages": messages,
        "header": {
            "reason": "initial",
            "config": CONFIG,
            "system": SYSTEM,
            "tools": [peer.skills._kit.tool_spec(searchable=False)],
            "messagePrefix": messages,
        },
        "budget": {"limit": None, "used": len(catalog), "shortened": 0, "omitted": []},
    }


@pytest.mark.anyio
async def test_skills_prefix_for_an_unknown_session_is_invalid_params(
    registry: SkillRegistry,
) -> None:
    """``_skills/prefix`` with an unknown session id is a -32602 error."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.ext("skills/prefix", {"sessionId": "nope"})
    assert (caught.value.code, caught.value.data) == (
        -32602,
        {"sessionId": "nope", "reason": "unknown session"},
    )


@pytest.mark.anyio
async def test_skills_reload_keeps_running_prefixes_and_new_sessions_see_new_skills(
    registry: SkillRegistry, skills_dir: Path, project: Path
) -> None:
    """``_skills/reload`` bumps the revision; a running session keeps its frozen prefix."""
    async with connected(registry) as peer:
        running = await peer.new_session(project)
        await peer.prompt(running, "compose now")
        before = await peer.ext("skills/prefix", {"sessionId": running})
        write_skill(skills_dir, "hotfix", "Ship a hotfix.", body="Do it.")
        revision = registry.revision
        reloaded = await peer.ext("skills/reload", {})
        after = await peer.ext("skills/prefix", {"sessionId": running})
        # The running session's slash commands do follow the new state.
        await peer.wire.wait_for(lambda: len(peer.wire.commands(running)) == 3)
        fresh = await peer.new_session(project)
        await peer.prompt(fresh, "compose now")
        fresh_prefix = await peer.ext("skills/prefix", {"sessionId": fresh})
    assert reloaded == {"revision": revision + 1}
    assert after["messages"] == before["messages"]
    assert "`hotfix`" not in before["messages"][0]["text"]
    assert "`hotfix`" in fresh_prefix["messages"][0]["text"]
    assert "hotfix" in [command["name"] for command in peer.wire.commands(running)[-1]]


@pytest.mark.anyio
async def test_unknown_extension_method_is_method_not_found(registry: SkillRegistry) -> None:
    """``_skills/bogus`` gets -32601 naming the method."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.ext("skills/bogus", {})
        frame = peer.wire.response_to("_skills/bogus")
    assert frame["error"] == {
        "code": -32601,
        "message": "Method not found",
        "data": {"method": "_skills/bogus"},
    }
    assert caught.value.code == -32601


# -- control characters never reach the editor or the model ----------------------------------

TROJAN_DESCRIPTION = "Run\x1b[2J \u202eexe.evil\u202c now\x00\ud800\nplease\x85\x9b"


@pytest.mark.anyio
async def test_descriptions_reach_the_editor_and_the_model_without_control_characters(
    registry: SkillRegistry, project: Path
) -> None:
    """A runtime skill with controls, bidi overrides and a lone surrogate in its description,
    hint and source: commands, ``_skills/list`` and the catalog arrive clean over the wire."""
    registry.register(
        SkillDefinition(
            name="trojan",
            description=TROJAN_DESCRIPTION,
            source="runtime\u202e",
            argument_hint="[env\u2066]\x07",
            content="body",
        )
    )
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "hello")
        listed = await peer.ext("skills/list", {"sessionId": session_id})
        prefix = await peer.ext("skills/prefix", {"sessionId": session_id})
        commands = peer.wire.commands(session_id)
    assert [c for c in commands[-1] if c["name"] == "trojan"] == [
        {
            "name": "trojan",
            "description": "Run[2J exe.evil now\ufffd please",
            "input": {"hint": "[env]"},
        }
    ]
    [entry] = [skill for skill in listed["skills"] if skill["name"] == "trojan"]
    # The editor gets the whole description, line breaks included, without the controls.
    assert (entry["description"], entry["source"]) == (
        "Run[2J exe.evil now\ufffd\nplease\n",
        "runtime",
    )
    [catalog] = prefix["messages"]
    assert "\n- `trojan`: Run[2J exe.evil now\ufffd please\n" in catalog["text"]


# -- lifetime ------------------------------------------------------------------------------


@pytest.mark.anyio
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


# -- the catalog budget ----------------------------------------------------------------------

TOPICS = [
    "deploy the service",
    "review a diff",
    "write unit tests",
    "format SQL queries",
    "summarize application logs",
    "translate documentation",
    "plan a release",
    "rotate leaked keys",
    "profile slow code",
    "clean a dataset",
]


def many_skills() -> list[SkillCandidate]:
    """Thirty skills over three ranks, plus one easy to find by its words."""
    skills = [
        candidate(
            f"skill-{i:02d}",
            provider="p",
            rank=100 * (1 + i % 3),
            description=f"Helps to {TOPICS[i % len(TOPICS)]} in project number {i}, with care "
            "for the conventions the team already follows in that area.",
        )
        for i in range(30)
    ]
    skills.append(
        candidate(
            "zebra-census",
            provider="p",
            rank=500,
            description="Counts zebras in savanna photographs taken by camera traps.",
        )
    )
    return skills


def registry_of(skills: list[SkillCandidate]) -> SkillRegistry:
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", skills))
    return registry


async def first_turn(skills: AcpSkills, session_id: str, cwd: Path) -> PromptTurn:
    """Open a session and run one turn that makes one model request."""
    await skills.open_session(session_id, str(cwd))
    return await another_turn(skills, session_id)


async def another_turn(
    skills: AcpSkills, session_id: str, calls: list[dict[str, Any]] | None = None
) -> PromptTurn:
    async with skills.turn(
        session_id, [TextContentBlock(type="text", text="hello")], system="s"
    ) as turn:
        await turn.request_messages()
        for number, arguments in enumerate(calls or []):
            await turn.call_tool(f"call-{number}", "skill", arguments)
        await turn.add_reply({"content": "ok"})
    return turn


async def tool_results(skills: AcpSkills, session_id: str) -> list[str]:
    """The texts of the session's recorded tool results, oldest first."""
    session = await skills.session(session_id)
    return [str(m["content"]) for m in session.history if m.get("role") == "tool"]


def skill_parameters(turn: PromptTurn) -> dict[str, Any]:
    parameters: dict[str, Any] = turn.tools[0]["function"]["parameters"]
    return parameters


@pytest.mark.anyio
async def test_schema_gains_query_only_when_the_catalog_omits_skills(tmp_path: Path) -> None:
    """A roomy budget keeps the plain schema; a tight one adds `query` for that session."""
    roomy = AcpSkills(registry_of(many_skills()), catalog_budget=100_000)
    roomy.attach(RecordingClient())  # the editor a turn reports to
    tight = AcpSkills(registry_of(many_skills()), catalog_budget=1500)
    tight.attach(RecordingClient())  # the editor a turn reports to
    plain = await first_turn(roomy, "s1", tmp_path)
    searching = await first_turn(tight, "s1", tmp_path)
    assert plain.tools[0] == roomy._kit.tool_spec(searchable=False)
    assert "query" not in skill_parameters(plain)["properties"]
    assert set(skill_parameters(searching)["properties"]) == {"name", "path", "query"}
    assert "required" not in skill_parameters(searching)
    assert searching.tools[0]["function"]["description"] == tight.tool.description_for(
        searchable=True
    )
    fit = await tight.catalog_fit("s1")
    assert fit is not None
    assert fit.omitted
    assert "zebra-census" in fit.omitted
    # The recorded request header carries the very schema the model was given.
    header = (await tight.session("s1")).last_header
    assert header is not None
    assert header.tools[0] == searching.tools[0]


@pytest.mark.anyio
async def test_a_session_with_query_finds_and_loads_an_omitted_skill(tmp_path: Path) -> None:
    """The model searches with `query`, gets `name: description` lines, loads one by name."""
    skills = AcpSkills(registry_of(many_skills()), catalog_budget=1500)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await first_turn(skills, "s1", tmp_path)
    turn = await another_turn(
        skills,
        "s1",
        [{"query": "count zebras in photos"}, {"name": "zebra-census"}, {}],
    )
    results = await tool_results(skills, "s1")
    assert results[0].splitlines()[1] == (
        "zebra-census: Counts zebras in savanna photographs taken by camera traps."
    )
    assert '<skill_content name="zebra-census">' in results[1]
    assert results[2].startswith('Error: the skill tool needs either "name"')
    assert turn.stop_reason == "end_turn"


@pytest.mark.anyio
async def test_a_session_without_omission_refuses_query(tmp_path: Path) -> None:
    """Where the catalog lists everything, `query` is an unexpected argument."""
    skills = AcpSkills(registry_of(many_skills()))
    skills.attach(RecordingClient())  # the editor a turn reports to
    await first_turn(skills, "s1", tmp_path)
    await another_turn(skills, "s1", [{"query": "zebras"}])
    [result] = await tool_results(skills, "s1")
    assert result == (
        'Error: unexpected argument "query"; the skill tool accepts only "name" and "path"'
    )


@pytest.mark.anyio
async def test_budget_outcome_is_frozen_with_the_session(tmp_path: Path) -> None:
    """Skills added later change neither a running session's catalog nor its schema."""
    few = [candidate(f"few-{i}", provider="p", description="A short one.") for i in range(3)]
    provider = ListProvider("p", few)
    registry = SkillRegistry()
    registry.register_provider(provider)
    skills = AcpSkills(registry, catalog_budget=1500)
    skills.attach(RecordingClient())  # the editor a turn reports to
    before = await first_turn(skills, "s1", tmp_path)
    provider.candidates.extend(many_skills())
    assert provider.handle is not None
    provider.handle.invalidate()
    later = await another_turn(skills, "s1")
    assert "query" not in skill_parameters(later)["properties"]
    assert later.tools == before.tools
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert fit.omitted == ()
    # A new session sees the new skills, over budget, with search.
    fresh = await first_turn(skills, "s2", tmp_path)
    assert "query" in skill_parameters(fresh)["properties"]


@pytest.mark.anyio
async def test_a_loaded_session_composes_its_budget_afresh(tmp_path: Path) -> None:
    """``session/load`` is a new instance: its catalog and schema follow the skills of now."""
    provider = ListProvider("p", many_skills())
    registry = SkillRegistry()
    registry.register_provider(provider)
    skills = AcpSkills(registry, catalog_budget=1500)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await first_turn(skills, "s1", tmp_path)
    del provider.candidates[3:]
    assert provider.handle is not None
    provider.handle.invalidate()
    await skills.load_session("s1", str(tmp_path))
    assert await skills.catalog_fit("s1") is None  # not composed yet
    loaded = await another_turn(skills, "s1")
    assert "query" not in skill_parameters(loaded)["properties"]
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert fit.omitted == ()


@pytest.mark.anyio
async def test_pinned_and_hidden_skills_in_a_session(tmp_path: Path) -> None:
    """Pinned lead the catalog in full; hidden are not listed, not found, yet load by name."""
    skills = AcpSkills(
        registry_of(many_skills()),
        catalog_budget=1500,
        pinned_skills=["skill-29"],
        hidden_skills=["zebra-census"],
    )
    skills.attach(RecordingClient())  # the editor a turn reports to
    await first_turn(skills, "s1", tmp_path)
    [catalog] = (await skills.session("s1")).messages
    entries = [line for line in catalog.text.splitlines() if line.startswith("- `")]
    assert entries[0].startswith("- `skill-29`: Helps to clean a dataset in project number 29,")
    assert not entries[0].endswith("...")
    assert "zebra" not in catalog.text
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert fit.hidden == ("zebra-census",)
    assert "zebra-census" not in fit.omitted
    await another_turn(
        skills, "s1", [{"query": "count zebras in photos"}, {"name": "zebra-census"}]
    )
    searched, loaded = await tool_results(skills, "s1")
    assert "zebra-census" not in searched
    assert '<skill_content name="zebra-census">' in loaded


@pytest.mark.anyio
async def test_the_warning_names_the_counts_once(tmp_path: Path) -> None:
    """Sessions sharing one over-budget catalog produce one warning with its counts."""
    skills = AcpSkills(registry_of(many_skills()), catalog_budget=1500)
    skills.attach(RecordingClient())  # the editor a turn reports to
    with capture_logs() as logs:
        await first_turn(skills, "s1", tmp_path)
        await first_turn(skills, "s2", tmp_path)
    warnings = [entry for entry in logs if entry["event"] == "skill_catalog_over_budget"]
    assert len(warnings) == 1
    expected = await skills.catalog_fit("s1")
    assert expected is not None
    assert expected == await skills.catalog_fit("s2")
    assert (warnings[0]["omitted"], warnings[0]["shortened"], warnings[0]["used"]) == (
        len(expected.omitted),
        expected.shortened,
        expected.used,
    )


@pytest.mark.anyio
async def test_skills_prefix_reports_the_budget(tmp_path: Path) -> None:
    """``_skills/prefix`` has "budget": null before the first turn, the outcome after."""
    registry = registry_of(many_skills())
    async with connected(registry, catalog_budget=1500) as peer:
        session_id = await peer.new_session(tmp_path)
        before = await peer.ext("skills/prefix", {"sessionId": session_id})
        peer.agent.tool_calls = [{"query": "zebras"}]
        await peer.prompt(session_id, "hello")
        after = await peer.ext("skills/prefix", {"sessionId": session_id})
        expected = await peer.skills.catalog_fit(session_id)
    assert expected is not None
    assert before["budget"] is None
    assert after["budget"] == {
        "limit": 1500,
        "used": expected.used,
        "shortened": expected.shortened,
        "omitted": list(expected.omitted),
    }
    assert after["header"]["tools"][0]["function"]["parameters"]["properties"].keys() == {
        "name",
        "path",
        "query",
    }
    [start] = peer.wire.updates(session_id, "tool_call")
    assert start["title"] == "Find skills: zebras"
    assert start["rawInput"] == {"query": "zebras"}


@pytest.mark.anyio
async def test_an_unlimited_catalog_reports_a_null_limit(tmp_path: Path) -> None:
    """Without a budget the outcome has limit null, nothing shortened or omitted."""
    skills = AcpSkills(registry_of(many_skills()))
    skills.attach(RecordingClient())  # the editor a turn reports to
    await first_turn(skills, "s1", tmp_path)
    [catalog] = (await skills.session("s1")).messages
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert (fit.limit, fit.used, fit.shortened, fit.omitted) == (None, len(catalog.text), 0, ())


@pytest.mark.anyio
async def test_a_session_without_skills_reports_an_empty_catalog(tmp_path: Path) -> None:
    """No skill at all: no catalog message, used 0, and the plain schema."""
    skills = AcpSkills(SkillRegistry(), catalog_budget=100)
    skills.attach(RecordingClient())  # the editor a turn reports to
    turn = await first_turn(skills, "s1", tmp_path)
    assert (await skills.session("s1")).messages == ()
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert (fit.text, fit.used, fit.omitted) == (None, 0, ())
    assert turn.tools[0] == skills._kit.tool_spec(searchable=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"catalog_budget": 0}, "budget must be a positive integer or None, got 0"),
        ({"catalog_budget": True}, "budget must be a positive integer or None, got True"),
        (
            {"pinned_skills": "deploy"},
            "pinned_skills must be a collection of skill names, not a string",
        ),
        (
            {"hidden_skills": ["ok", "Not A Name"]},
            "hidden_skills holds 'Not A Name', which is not a skill name",
        ),
    ],
    ids=["zero-budget", "bool-budget", "string-pins", "bad-hidden-name"],
)
@pytest.mark.anyio
async def test_invalid_budget_options_are_rejected(options: dict[str, Any], message: str) -> None:
    """Budget and names are checked when AcpSkills is built."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        AcpSkills(SkillRegistry(), **options)


@pytest.mark.anyio
async def test_a_runtime_skill_registered_later_is_searchable(tmp_path: Path) -> None:
    """The search follows the registry: a skill registered after the catalog froze is found."""
    registry = registry_of(many_skills())
    skills = AcpSkills(registry, catalog_budget=1500)
    skills.attach(RecordingClient())  # the editor a turn reports to
    await first_turn(skills, "s1", tmp_path)
    registry.register(
        SkillDefinition(name="okapi-watch", description="Spots okapis in forests.", content="x")
    )
    await another_turn(skills, "s1", [{"query": "okapis"}])
    [result] = await tool_results(skills, "s1")
    assert result.splitlines()[1] == "okapi-watch: Spots okapis in forests."


@pytest.mark.anyio
async def test_without_the_observer_the_commands_wait_for_the_first_turn(
    registry: SkillRegistry, project: Path
) -> None:
    """An agent that builds its connection without `AcpSkills.observe` still gets its commands:
    on the session's first prompt turn, never before its ``session/new`` response."""
    async with connected(registry, observe=False) as peer:
        response = await peer.conn.new_session(cwd=str(project), mcp_servers=[])
        session_id = response.session_id
        await peer.ext("skills/list", {"sessionId": session_id})  # a round trip
        assert peer.wire.commands(session_id) == []
        await peer.prompt(session_id, "hello")
        assert peer.wire.commands(session_id) == [COMMANDS]


def watchers() -> list[threading.Thread]:
    """The live-reload threads running now (docs/reload.md names them)."""
    return [thread for thread in threading.enumerate() if thread.name == "acp-skills watcher"]


@pytest.mark.anyio
async def test_the_provider_made_here_is_closed_at_the_end_and_one_passed_in_is_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``async with`` and `aclose` close the default `LocalSkillProvider` (its watcher thread
    ends); a registry passed in keeps its providers, and their watchers, as they are."""
    home = tmp_path / "home"
    (home / ".agents" / "skills").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    for variable in ("DSH_HOME", "DSH_AGENTS_HOME"):
        monkeypatch.delenv(variable, raising=False)
    here = SkillLookupOptions(cwd=str(tmp_path))
    assert watchers() == []
    async with AcpSkills() as skills:
        await skills.registry.list(here)  # the first lookup starts the watch
        assert len(watchers()) == 1
    assert watchers() == []
    skills = AcpSkills()
    await skills.registry.list(here)
    assert len(watchers()) == 1
    await skills.aclose()
    assert watchers() == []
    registry = SkillRegistry()
    handle = registry.register_provider(LocalSkillProvider(agents_home=str(home / ".agents")))
    async with AcpSkills(registry) as skills:
        await skills.registry.list(here)
    await AcpSkills(registry).aclose()
    assert len(watchers()) == 1
    handle.dispose()
    assert watchers() == []
