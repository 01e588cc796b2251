"""The catalog budget through `AcpSkills` (contract §12): the session's schema, frozen outcome,
``_skills/prefix`` and options.

Sessions run over the real in-memory ACP connection of `tests/test_acp.py` where the wire
matters, and through `AcpSkills`' turn API directly otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from acp.helpers import text_block
from structlog.testing import capture_logs

from acp_skills import SkillCandidate, SkillDefinition, SkillRegistry, fit_catalog
from acp_skills.acp import AcpSkills, PromptTurn
from tests.providers import ListProvider, candidate
from tests.test_acp import connected

pytestmark = pytest.mark.anyio

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
    async with skills.turn(session_id, [text_block("hello")], system="s") as turn:
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


async def test_schema_gains_query_only_when_the_catalog_omits_skills(tmp_path: Path) -> None:
    """A roomy budget keeps the plain schema; a tight one adds `query` for that session."""
    roomy = AcpSkills(registry_of(many_skills()), catalog_budget=100_000)
    tight = AcpSkills(registry_of(many_skills()), catalog_budget=1500)
    plain = await first_turn(roomy, "s1", tmp_path)
    searching = await first_turn(tight, "s1", tmp_path)
    assert plain.tools[0] == roomy.skill_tool_spec
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


async def test_a_session_with_query_finds_and_loads_an_omitted_skill(tmp_path: Path) -> None:
    """The model searches with `query`, gets `name: description` lines, loads one by name."""
    skills = AcpSkills(registry_of(many_skills()), catalog_budget=1500)
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


async def test_a_session_without_omission_refuses_query(tmp_path: Path) -> None:
    """Where the catalog lists everything, `query` is an unexpected argument."""
    skills = AcpSkills(registry_of(many_skills()))
    await first_turn(skills, "s1", tmp_path)
    await another_turn(skills, "s1", [{"query": "zebras"}])
    [result] = await tool_results(skills, "s1")
    assert result == (
        'Error: the skill tool needs a "name" argument: the exact name of a skill from the catalog'
    )


async def test_budget_outcome_is_frozen_with_the_session(tmp_path: Path) -> None:
    """Skills added later change neither a running session's catalog nor its schema."""
    few = [candidate(f"few-{i}", provider="p", description="A short one.") for i in range(3)]
    provider = ListProvider("p", few)
    registry = SkillRegistry()
    registry.register_provider(provider)
    skills = AcpSkills(registry, catalog_budget=1500)
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


async def test_a_released_session_comes_back_with_its_schema(tmp_path: Path) -> None:
    """Released while idle and reopened from its record, a session keeps outcome and schema."""
    skills = AcpSkills(registry_of(many_skills()), catalog_budget=1500, max_live_sessions=1)
    first = await first_turn(skills, "s1", tmp_path)
    fit = await skills.catalog_fit("s1")
    await first_turn(skills, "s2", tmp_path)
    assert [sid for sid, _ in skills._sessions.running()] == ["s2"]  # s1 was released
    again = await another_turn(skills, "s1")
    assert again.tools == first.tools
    assert await skills.catalog_fit("s1") == fit
    session = await skills.session("s1")
    assert session.last_header is not None
    assert session.last_header.reason == "initial"  # same request: no "change" header


async def test_a_loaded_session_composes_its_budget_afresh(tmp_path: Path) -> None:
    """``session/load`` is a new instance: its catalog and schema follow the skills of now."""
    provider = ListProvider("p", many_skills())
    registry = SkillRegistry()
    registry.register_provider(provider)
    skills = AcpSkills(registry, catalog_budget=1500)
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


async def test_pinned_and_hidden_skills_in_a_session(tmp_path: Path) -> None:
    """Pinned lead the catalog in full; hidden are not listed, not found, yet load by name."""
    skills = AcpSkills(
        registry_of(many_skills()),
        catalog_budget=1500,
        pinned_skills=["skill-29"],
        hidden_skills=["zebra-census"],
    )
    turn = await first_turn(skills, "s1", tmp_path)
    [catalog] = turn.prefix
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


async def test_the_warning_names_the_counts_once(tmp_path: Path) -> None:
    """Sessions sharing one over-budget catalog produce one warning with its counts."""
    skills = AcpSkills(registry_of(many_skills()), catalog_budget=1500)
    with capture_logs() as logs:
        await first_turn(skills, "s1", tmp_path)
        await first_turn(skills, "s2", tmp_path)
    warnings = [entry for entry in logs if entry["event"] == "skill_catalog_over_budget"]
    assert len(warnings) == 1
    expected = fit_catalog(many_skills(), budget=1500)
    assert (warnings[0]["omitted"], warnings[0]["shortened"], warnings[0]["used"]) == (
        len(expected.omitted),
        expected.shortened,
        expected.used,
    )


async def test_skills_prefix_reports_the_budget(tmp_path: Path) -> None:
    """``_skills/prefix`` has "budget": null before the first turn, the outcome after."""
    registry = registry_of(many_skills())
    async with connected(registry, catalog_budget=1500) as peer:
        session_id = await peer.new_session(tmp_path)
        before = await peer.ext("skills/prefix", {"sessionId": session_id})
        peer.agent.tool_calls = [{"query": "zebras"}]
        await peer.prompt(session_id, "hello")
        after = await peer.ext("skills/prefix", {"sessionId": session_id})
    expected = fit_catalog(many_skills(), budget=1500)
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


async def test_an_unlimited_catalog_reports_a_null_limit(tmp_path: Path) -> None:
    """Without a budget the outcome has limit null, nothing shortened or omitted."""
    skills = AcpSkills(registry_of(many_skills()))
    turn = await first_turn(skills, "s1", tmp_path)
    [catalog] = turn.prefix
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert (fit.limit, fit.used, fit.shortened, fit.omitted) == (None, len(catalog.text), 0, ())


async def test_a_session_without_skills_reports_an_empty_catalog(tmp_path: Path) -> None:
    """No skill at all: no catalog message, used 0, and the plain schema."""
    skills = AcpSkills(SkillRegistry(), catalog_budget=100)
    turn = await first_turn(skills, "s1", tmp_path)
    assert turn.prefix == ()
    fit = await skills.catalog_fit("s1")
    assert fit is not None
    assert (fit.text, fit.used, fit.omitted) == (None, 0, ())
    assert turn.tools[0] == skills.skill_tool_spec


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
async def test_invalid_budget_options_are_rejected(options: dict[str, Any], message: str) -> None:
    """Budget and names are checked when AcpSkills is built."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        AcpSkills(SkillRegistry(), **options)


async def test_a_runtime_skill_registered_later_is_searchable(tmp_path: Path) -> None:
    """The search follows the registry: a skill registered after the catalog froze is found."""
    registry = registry_of(many_skills())
    skills = AcpSkills(registry, catalog_budget=1500)
    await first_turn(skills, "s1", tmp_path)
    registry.register(
        SkillDefinition(name="okapi-watch", description="Spots okapis in forests.", content="x")
    )
    await another_turn(skills, "s1", [{"query": "okapis"}])
    [result] = await tool_results(skills, "s1")
    assert result.splitlines()[1] == "okapi-watch: Spots okapis in forests."
