"""The demo agent's offline model (`demo_agent.models.offline`): which skill a prompt clearly
asks for, what it answers without one, from a tool result, or after a search; and that it decides
the same on every turn when it reuses what it derived from a catalog, with more skills than
Python's regex cache holds and with catalogs that change."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from acp_skills import (
    DirectoryResource,
    SkillDefinition,
    SkillRegistry,
    SkillSummary,
    SkillTool,
    render_catalog,
    render_skill_content,
)
from demo_agent.models import ModelRequest
from demo_agent.models.offline import OfflineModel, choose_skill, parse_catalog

pytestmark = pytest.mark.anyio

SKILL_TOOL = {
    "type": "function",
    "function": {"name": "skill", "description": "Load a skill.", "parameters": {}},
}


def big_catalog(count: int, topic: str) -> dict[str, str]:
    return {
        f"skill-{index:05d}": f"Handles {topic} task number {index} &amp; its follow-ups."
        for index in range(count)
    }


def catalog_text(catalog: Mapping[str, str]) -> str:
    lines = "\n".join(f"- `{name}`: {text}" for name, text in catalog.items())
    return f"<available_skills>\n{lines}\n</available_skills>"


async def decide(catalog_message: str, prompt: str) -> Any:
    async def ignore(_text: str) -> None:
        return None

    messages = [{"role": "user", "content": catalog_message}, {"role": "user", "content": prompt}]
    reply = await OfflineModel().complete(
        ModelRequest(system="s", tools=[SKILL_TOOL], messages=messages), ignore
    )
    return [json.loads(call.arguments) for call in reply.tool_calls] or reply.text


async def test_repeated_turns_on_a_large_catalog_decide_like_the_first() -> None:
    """Turn after turn on one 1,000-skill catalog, each decision matches a fresh evaluation."""
    text = catalog_text(big_catalog(1_000, "billing"))
    parsed = parse_catalog([{"role": "user", "content": text}])
    assert parsed["skill-00007"] == "Handles billing task number 7 & its follow-ups."
    # What the model decided before it reused anything, prompt by prompt.
    expectations = [
        ("use skill-00005", "skill-00005"),
        ("please run skill 00999 now", "skill-00999"),
        ("use skill-00005 and skill-00123", "skill-00005"),
        ("SKILL-00042 please", "skill-00042"),
        ("use skill-00005x", None),
        ("skill-0000", None),
        ("tell me a joke", None),
        ("use skill-00005", "skill-00005"),
    ]
    for prompt, expected in expectations:
        assert choose_skill(prompt, parsed) == expected
        got = await decide(text, prompt)
        if expected is None:
            assert isinstance(got, str)
        else:
            assert got == [{"name": expected}]


async def test_a_changed_catalog_is_read_afresh() -> None:
    """A request with another catalog never gets a decision derived from the previous one."""
    first = catalog_text({"pdf-tools": "Fill in and merge PDF forms."})
    second = catalog_text({"spreadsheet-tools": "Fill in and merge spreadsheet forms."})
    assert await decide(first, "fill in and merge these forms") == [{"name": "pdf-tools"}]
    assert await decide(second, "fill in and merge these forms") == [{"name": "spreadsheet-tools"}]
    assert await decide(first, "use pdf-tools") == [{"name": "pdf-tools"}]
    assert "pdf-tools" not in await decide(second, "use pdf-tools")


def test_parse_catalog_returns_a_copy_the_caller_may_change() -> None:
    """Changing what parse_catalog returned leaves the next answer untouched."""
    messages = [{"role": "user", "content": catalog_text({"alpha-notes": "Take notes."})}]
    parse_catalog(messages).clear()
    assert parse_catalog(messages) == {"alpha-notes": "Take notes."}


# -- which skill a prompt asks for, and the answers ------------------------------------------

CATALOG = {
    "code-review": "Review a diff or a branch for correctness, security and readability "
    "before it is merged.",
    "commit-message": "Write a clear git commit message for staged changes.",
    "python-style": "House conventions for Python code: typing, error handling, logging.",
}
TWIN_CATALOG = {
    "backend-lint": "Check formatting and style of Python files.",
    "frontend-lint": "Check formatting and style of TypeScript files.",
}


@pytest.mark.parametrize(
    ("prompt", "catalog", "expected"),
    [
        pytest.param("run code-review on my branch", CATALOG, "code-review", id="names-exactly"),
        pytest.param(
            "can you do a code review of this?", CATALOG, "code-review", id="names-with-spaces"
        ),
        pytest.param(
            "check the diff for security problems",
            CATALOG,
            "code-review",
            id="matches-one-description",
        ),
        pytest.param(
            "check the formatting and style", TWIN_CATALOG, None, id="matches-two-equally"
        ),
        pytest.param("what is the weather like today?", CATALOG, None, id="nothing-matches"),
        pytest.param("security", CATALOG, None, id="one-shared-word-is-not-enough"),
        pytest.param("hello", {}, None, id="empty-catalog"),
        pytest.param(
            "commit the python code",
            {"git-commit": "Commit staged python code.", "py-style": "Style python code."},
            None,
            id="two-words-against-three-is-not-clear",
        ),
        pytest.param(
            "review the branch diff for security",
            {**CATALOG, "branch-tools": "Create a branch."},
            "code-review",
            id="four-words-against-one-is-clear",
        ),
        pytest.param("use python style please", CATALOG, "python-style", id="words-not-name"),
        pytest.param("commit-message, not code-review", CATALOG, "commit-message", id="longest"),
    ],
)
def test_offline_choose_skill(
    prompt: str, catalog: Mapping[str, str], expected: str | None
) -> None:
    """The offline model picks a skill only when the prompt clearly asks for one."""
    assert choose_skill(prompt, catalog) == expected


def catalog_message(catalog: Mapping[str, str]) -> dict[str, Any]:
    text = render_catalog(
        [SkillSummary(name=name, description=text) for name, text in catalog.items()]
    )
    assert text is not None
    return {"role": "user", "content": text}


def loaded_skill_text() -> str:
    definition = SkillDefinition(
        name="code-review",
        description=CATALOG["code-review"],
        content="# Review\n\n1. Read the whole change.\n2. Report findings by severity.\n",
        resource_base=DirectoryResource(path="/skills/code-review"),
    )
    return render_skill_content(definition)


def tool_exchange(result: str) -> list[dict[str, Any]]:
    call = {
        "id": "call-1",
        "type": "function",
        "function": {"name": "skill", "arguments": '{"name": "code-review"}'},
    }
    return [
        catalog_message(CATALOG),
        {"role": "user", "content": "please review my branch"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call-1", "content": result},
    ]


@pytest.mark.parametrize(
    ("messages", "tools", "expected_call", "expected_text"),
    [
        pytest.param(
            [catalog_message(CATALOG), {"role": "user", "content": "use python-style please"}],
            [SKILL_TOOL],
            "python-style",
            [],
            id="names-a-skill-calls-the-tool",
        ),
        pytest.param(
            [catalog_message(CATALOG), {"role": "user", "content": "use python-style please"}],
            [],
            None,
            ["Available skills:", "- `python-style`:"],
            id="no-skill-tool-no-call",
        ),
        pytest.param(
            [catalog_message(CATALOG), {"role": "user", "content": "tell me a joke"}],
            [SKILL_TOOL],
            None,
            [
                "None of the available skills clearly matches your request.",
                "- `code-review`: Review a diff",
                "- `commit-message`:",
                "- `python-style`:",
                "Name one of them",
            ],
            id="nothing-matches-lists-skills",
        ),
        pytest.param(
            [{"role": "user", "content": "tell me a joke"}],
            [SKILL_TOOL],
            None,
            [
                "No skills are available in this session.",
                "`.agents/skills/<name>/SKILL.md`",
                "start the agent with `--examples`",
            ],
            id="no-catalog",
        ),
        pytest.param(
            tool_exchange(loaded_skill_text()),
            [SKILL_TOOL],
            None,
            [
                "I loaded the `code-review` skill.",
                "1. Read the whole change.",
                "2. Report findings by severity.",
            ],
            id="tool-result-answers-from-instructions",
        ),
        pytest.param(
            tool_exchange(
                render_skill_content(
                    SkillDefinition(
                        name="code-review",
                        description="Review.",
                        content="".join(f"{n}. Step {n}.\n" for n in range(1, 8)),
                    )
                )
            ),
            [SKILL_TOOL],
            None,
            ["6. Step 6.", "(and 1 more step)"],
            id="one-step-left-is-one-step",
        ),
        pytest.param(
            tool_exchange('Error: skill "code-review" is unknown or no longer available'),
            [SKILL_TOOL],
            None,
            [
                "I tried to load a skill, but it failed:",
                'Error: skill "code-review" is unknown or no longer available',
            ],
            id="error-tool-result-reports-error",
        ),
    ],
)
async def test_offline_model_complete(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    expected_call: str | None,
    expected_text: list[str],
) -> None:
    """The offline model calls the skill tool, lists skills, or answers from a tool result."""
    streamed: list[str] = []

    async def on_text(piece: str) -> None:
        streamed.append(piece)

    request = ModelRequest(system="system", tools=tools, messages=messages)
    reply = await OfflineModel().complete(request, on_text)
    if expected_call is None:
        assert reply.tool_calls == ()
        assert reply.finish == "stop"
        # Streamed line by line, like a real model streams its pieces.
        assert streamed == reply.text.splitlines(keepends=True)
        for expected in expected_text:
            assert expected in reply.text
        if not tools:
            assert "Name one of them" not in reply.text
    else:
        [call] = reply.tool_calls
        assert call.name == "skill"
        assert json.loads(call.arguments) == {"name": expected_call}
        assert reply.finish == "tool_calls"
        assert reply.text == ""
        assert streamed == []


WAITING = "2 skills from project `p` wait for trust, and this session will not ask again."


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [{"role": "user", "content": "tell me a joke"}],
            "No skills are offered to me in this session yet. " + WAITING,
        ),
        (
            [catalog_message(CATALOG), {"role": "user", "content": "tell me a joke"}],
            "and I will load it.\n" + WAITING,
        ),
    ],
    ids=["no-catalog", "with-catalog"],
)
async def test_offline_model_tells_what_waits_for_trust(
    messages: list[dict[str, Any]], expected: str
) -> None:
    """With the turn's trust note, the offline model says what waits instead of claiming there
    are no skills, and after the skills it lists."""

    async def on_text(piece: str) -> None:
        pass

    request = ModelRequest(system="s", tools=[SKILL_TOOL], messages=messages, trust_note=WAITING)
    reply = await OfflineModel().complete(request, on_text)
    assert reply.text.endswith(expected)
    assert "No skills are available" not in reply.text


# -- with the `query` argument --------------------------------------------------------------


async def offline_reply(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> Any:
    async def ignore(_text: str) -> None:
        return None

    request = ModelRequest(system="s", tools=tools, messages=messages)
    return await OfflineModel().complete(request, ignore)


async def test_offline_model_searches_only_when_the_schema_has_query() -> None:
    """No listed skill matches: with `query` it searches, without it lists the skills."""
    catalog = text_of_catalog(["alpha-notes"])
    messages = [{"role": "user", "content": catalog}, {"role": "user", "content": "zebras?"}]
    tool = SkillTool(SkillRegistry())
    plain_tool, searching_tool = (
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description_for(searchable=searchable),
                "parameters": tool.parameters_for(searchable=searchable),
            },
        }
        for searchable in (False, True)
    )
    listed = await offline_reply([plain_tool], messages)
    searched = await offline_reply([searching_tool], messages)
    assert listed.tool_calls == ()
    assert "Available skills" in listed.text
    [call] = searched.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("skill", {"query": "zebras?"})


async def test_offline_model_loads_the_best_match_or_says_none_matched() -> None:
    """After a search it loads the first match; with no match it says so and lists skills."""
    catalog = text_of_catalog(["alpha-notes"])
    asked = [{"role": "user", "content": catalog}, {"role": "user", "content": "zebras?"}]
    found = (
        "Skills matching the query, best first. Load one by calling the `skill` tool with its "
        "exact name:\nzebra-census: Counts zebras."
    )
    load = await offline_reply([], [*asked, {"role": "tool", "content": found}])
    [call] = load.tool_calls
    assert json.loads(call.arguments) == {"name": "zebra-census"}
    no_match = "No skill matches the query. Try other words for the task."
    none = await offline_reply([], [*asked, {"role": "tool", "content": no_match}])
    assert none.tool_calls == ()
    assert none.text.startswith("I searched the skills the catalog does not list")
    assert "- `alpha-notes`: Alpha." in none.text


def text_of_catalog(names: list[str]) -> str:
    catalog = render_catalog([SkillSummary(name=n, description="Alpha.") for n in names])
    assert catalog is not None
    return catalog
