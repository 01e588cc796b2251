"""The offline model decides the same on every turn when it reuses what it derived from a
catalog, with more skills than Python's regex cache holds and with catalogs that change."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

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
