"""The catalog budget in the demo agent: the real agent in this process (`tests.acp_peer`).

``--catalog-budget``, ``--pin`` and ``--hide`` (and their variables), the ``skill`` tool's schema
as recorded in each request header, the warning on stderr, and the offline model finding a skill
the catalog left out with ``query``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from demo_agent.__main__ import parse_args
from tests.acp_peer import DemoPeer, demo_peer
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

AREAS = ["billing", "search", "checkout", "accounts", "reports", "shipping"]


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox.create(tmp_path)


def write_many_skills(sandbox: Sandbox) -> None:
    """Thirty generic skills and one about zebras, enough to overflow a 1,500 budget."""
    for i in range(30):
        area = AREAS[i % len(AREAS)]
        sandbox.write_skill(
            f"team-{i:02d}",
            f"Maintains the {area} module of service number {i}, following the conventions "
            "its owners wrote down.",
        )
    sandbox.write_skill(
        "zebra-census",
        "Counts zebras in savanna photographs taken by camera traps.",
        "# Zebra census\n\n1. Open the camera trap folder.\n2. Count each zebra once.\n",
    )


async def turn(agent: DemoPeer, text: str) -> tuple[str, dict[str, Any]]:
    """A new session, one prompt; the session id and its ``_skills/prefix`` afterwards."""
    session_id = await agent.open_session()
    assert await agent.ask(session_id, text) == "end_turn"
    return session_id, await agent.ext("skills/prefix", {"sessionId": session_id})


def skill_properties(prefix: dict[str, Any]) -> set[str]:
    tools = prefix["header"]["tools"]
    return set(tools[0]["function"]["parameters"]["properties"])


async def test_default_budget_keeps_a_small_catalog_whole(sandbox: Sandbox) -> None:
    """Under the default 8,000 characters nothing changes and the schema has no query."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.")
    async with demo_peer(sandbox) as agent:
        _, prefix = await turn(agent, "hello")
    [catalog] = prefix["messages"]
    assert prefix["budget"] == {
        "limit": 8000,
        "used": len(catalog["text"]),
        "shortened": 0,
        "omitted": [],
    }
    assert skill_properties(prefix) == {"name", "path"}


async def test_an_omitted_skill_is_found_with_query_and_loaded(sandbox: Sandbox) -> None:
    """Over budget: the schema gains query, the model searches, then loads the skill by name."""
    write_many_skills(sandbox)
    async with demo_peer(sandbox, "--catalog-budget", "1500") as agent:
        session_id, prefix = await turn(agent, "count the zebras in my camera trap photos")
        titles = [
            update.title
            for update in agent.client.tool_updates(session_id)
            if update.session_update == "tool_call"
        ]
        reply = agent.client.agent_text(session_id)
    assert skill_properties(prefix) == {"name", "path", "query"}
    budget = prefix["budget"]
    assert budget["limit"] == 1500
    assert budget["used"] <= 1500
    assert "zebra-census" in budget["omitted"]
    [catalog] = prefix["messages"]
    assert "zebra" not in catalog["text"]
    assert titles == [
        "Find skills: count the zebras in my camera trap photos",
        "Load skill zebra-census",
    ]
    assert "I loaded the `zebra-census` skill" in reply
    [warning] = [line for line in agent.log.splitlines() if "skill_catalog_over_budget" in line]
    assert "limit=1500" in warning
    assert f"omitted={len(budget['omitted'])}" in warning
    assert f"shortened={budget['shortened']}" in warning


async def test_pinned_and_hidden_skills_from_flags_and_environment(sandbox: Sandbox) -> None:
    """--pin leads the catalog in full; ACP_SKILLS_HIDE keeps a skill out of it."""
    write_many_skills(sandbox)
    env = {"ACP_SKILLS_HIDE": "team-00, team-01"}
    async with demo_peer(
        sandbox, "--catalog-budget", "none", "--pin", "zebra-census", env=env
    ) as agent:
        _, prefix = await turn(agent, "hello")
    [catalog] = prefix["messages"]
    entries = [line for line in catalog["text"].splitlines() if line.startswith("- `")]
    assert entries[0] == (
        "- `zebra-census`: Counts zebras in savanna photographs taken by camera traps."
    )
    assert "team-00" not in catalog["text"]
    assert "team-01" not in catalog["text"]
    assert len(entries) == 29
    assert prefix["budget"]["limit"] is None


async def test_a_pinned_or_hidden_name_no_skill_has_is_one_warning(sandbox: Sandbox) -> None:
    """A typo in --pin or ACP_SKILLS_HIDE is logged once per catalog fitted, naming the name;
    a second session over the same skills does not repeat it."""
    write_many_skills(sandbox)
    env = {"ACP_SKILLS_HIDE": "team-00, no-such-hidden"}
    async with demo_peer(
        sandbox,
        # Without watching, the skills stay cached from the start: until a watch is live
        # each lookup is a new set of skills, and its catalog warns again, as documented.
        "--no-watch",
        "--catalog-budget",
        "none",
        "--pin",
        "zebra-censsus",
        env=env,
    ) as agent:
        await turn(agent, "hello")
        _, prefix = await turn(agent, "hello again")
    assert "team-00" not in prefix["messages"][0]["text"]
    warnings = [line for line in agent.log.splitlines() if "skill_name_unknown" in line]
    assert len(warnings) == 2
    [pin] = [line for line in warnings if "setting=pin" in line]
    [hide] = [line for line in warnings if "setting=hide" in line]
    assert "zebra-censsus" in pin
    assert "no-such-hidden" in hide
    assert "team-00" not in hide


# -- the command line --------------------------------------------------------------------------


def test_budget_flags_and_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags win over variables; "none" lifts the budget; names split on commas or spaces."""
    monkeypatch.setenv("ACP_SKILLS_CATALOG_BUDGET", "2000")
    monkeypatch.setenv("ACP_SKILLS_PIN", "deploy-app, review-code  tests")
    monkeypatch.setenv("ACP_SKILLS_HIDE", "")
    from_env = parse_args([]).settings
    assert (from_env.catalog_budget, from_env.pinned, from_env.hidden) == (
        2000,
        ("deploy-app", "review-code", "tests"),
        (),
    )
    argv = ["--catalog-budget", "None", "--pin", "a", "--pin", "b", "--hide", "c"]
    from_flags = parse_args(argv).settings
    assert (from_flags.catalog_budget, from_flags.pinned, from_flags.hidden) == (
        None,
        ("a", "b"),
        ("c",),
    )
    monkeypatch.delenv("ACP_SKILLS_CATALOG_BUDGET")
    assert parse_args([]).settings.catalog_budget == 8000


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--catalog-budget", "0"], {}, "--catalog-budget: must be at least 1: '0'"),
        ([], {"ACP_SKILLS_CATALOG_BUDGET": "lots"}, "ACP_SKILLS_CATALOG_BUDGET: not a whole"),
        (["--pin", "Deploy"], {}, "--pin: not a skill name: 'Deploy'"),
        ([], {"ACP_SKILLS_HIDE": "ok,no_way"}, "ACP_SKILLS_HIDE: not a skill name: 'no_way'"),
    ],
    ids=["zero-budget", "budget-env", "pin-flag", "hide-env"],
)
def test_bad_budget_settings_are_usage_errors(
    argv: list[str],
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad budget or name exits with status 2 and says which setting is wrong."""
    for name in ("ACP_SKILLS_CATALOG_BUDGET", "ACP_SKILLS_PIN", "ACP_SKILLS_HIDE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
