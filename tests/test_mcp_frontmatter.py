"""One frontmatter reader (contract §14a): the same frontmatter, served from a local root and
listed by an MCP server, gives the same outcome: offered with the same fields, or skipped for the
same reason (over MCP with `mcp-skill-invalid` naming the server), never a failed lookup. The
server runs in this process (tests/mcp_memory.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_skills import LocalSkillProvider, SkillCandidate, SkillLookupOptions, SkillRegistry
from acp_skills.mcp import McpSkillProvider
from tests.mcp_memory import InProcess
from tests.mcp_scripted import scripted_server, served, skill_text, write_script

pytestmark = pytest.mark.anyio

# Each case: a folder, and the frontmatter as a server lists it (JSON). The local file holds the
# same fields as YAML (each value written as JSON, which YAML reads alike).
CASES: dict[str, dict[str, Any]] = {
    "plain": {"name": "plain", "description": "A plain skill."},
    "camel-flag": {
        "name": "camel-flag",
        "description": "Hidden from the model.",
        "disableModelInvocation": True,
    },
    "kebab-flag": {
        "name": "kebab-flag",
        "description": "Hidden from the model.",
        "disable-model-invocation": True,
    },
    "flag-yes": {
        "name": "flag-yes",
        "description": "Fails closed.",
        "disableModelInvocation": "yes",
    },
    "kebab-flag-yes": {
        "name": "kebab-flag-yes",
        "description": "Fails closed.",
        "disable-model-invocation": "yes",
    },
    "flag-one": {"name": "flag-one", "description": "Fails closed.", "disable-model-invocation": 1},
    "both-spellings": {
        "name": "both-spellings",
        "description": "One field twice.",
        "disableModelInvocation": False,
        "disable-model-invocation": True,
    },
    "person-only": {"name": "person-only", "description": "Model only.", "user-invocable": False},
    "person-only-camel": {
        "name": "person-only-camel",
        "description": "Model only.",
        "userInvocable": False,
    },
    "user-no": {"name": "user-no", "description": "Fails closed.", "user-invocable": "no"},
    "bad-name": {"name": "Deploy App", "description": "Not a skill name."},
    "number-name": {"name": 404, "description": "Not a string."},
    "empty-description": {"name": "empty-description", "description": ""},
    "no-description": {"name": "no-description"},
    "optional": {
        "name": "optional",
        "description": "Every optional field.",
        "whenToUse": "When asked.",
        "argumentHint": "[env]",
        "metadata": {"team": "ops", "tags": ["a", "b"]},
    },
    "snake-when": {"name": "snake-when", "description": "Snake case.", "when_to_use": "Always."},
    "kebab-when": {"name": "kebab-when", "description": "Not a known key.", "when-to-use": "No."},
    "wrong-types": {
        "name": "wrong-types",
        "description": "Dropped fields.",
        "whenToUse": 3,
        "metadata": "not a mapping",
    },
    "allowed-tools": {"name": "allowed-tools", "description": "Ignored.", "allowed-tools": "Bash"},
}


def as_yaml(frontmatter: dict[str, Any]) -> str:
    return "\n".join(f"{key}: {json.dumps(value)}" for key, value in frontmatter.items())


def outcome(skill: SkillCandidate) -> dict[str, Any]:
    return {
        "name": skill.name,
        "description": skill.description,
        "model": not skill.disable_model_invocation,
        "user": skill.user_invocable,
        "when": skill.when_to_use,
        "hint": skill.argument_hint,
        "metadata": json.loads(json.dumps(skill.metadata, default=dict)),
    }


@pytest.fixture
async def both_ways(tmp_path: Path) -> AsyncIterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each case's outcome read from a local root and listed by a server: what was offered,
    else the reason it was skipped."""
    root = tmp_path / "local"
    entries = []
    for folder, frontmatter in CASES.items():
        text = skill_text(as_yaml(frontmatter), f"Body of {folder}.")
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_text(text, encoding="utf-8")
        entries.append(served(folder, text, frontmatter))
    local = LocalSkillProvider(
        tmp_path / "h1", tmp_path / "h2", custom_skill_dirs=[str(root)], watch=False
    )
    local_registry = SkillRegistry()
    local_registry.register_provider(local)
    options = SkillLookupOptions(cwd=str(tmp_path))
    local_outcomes: dict[str, Any] = {}
    for skill in (await local_registry.snapshot(options)).skills:
        assert skill.path is not None
        local_outcomes[Path(skill.path).parent.name] = outcome(skill)
    for record in (await local.discover(options)).diagnostics:
        if record.severity == "error" and record.path is not None:
            local_outcomes[Path(record.path).parent.name] = record.message

    server = scripted_server(write_script(tmp_path / "script.json", entries))
    mcp = McpSkillProvider(timeout=30, transport=InProcess())
    mcp_registry = SkillRegistry()
    mcp_registry.register_provider(mcp)
    try:
        with anyio.fail_after(60):
            served_options = SkillLookupOptions(servers=(server,))
            snapshot = await mcp_registry.snapshot(served_options)
            mcp_outcomes: dict[str, Any] = {}
            for skill in snapshot.skills:
                folder = skill.resource_base.url.split("/")[-2]  # type: ignore[union-attr]
                mcp_outcomes[folder] = outcome(skill)
                loaded = await mcp_registry.load(skill, served_options)
                assert loaded is not None
                assert loaded.content == f"Body of {folder}."
            problems = await mcp_registry.diagnose(served_options)
        for record in problems:
            assert record.code == "mcp-skill-invalid"
            assert record.path is not None
            folder = record.path.split("/")[-2]
            prefix = f"MCP server 'team' lists skill {record.path!r} that is skipped: "
            assert record.message.startswith(prefix)
            mcp_outcomes[folder] = record.message.removeprefix(prefix)
        yield local_outcomes, mcp_outcomes
    finally:
        await mcp.aclose()


@pytest.mark.parametrize("folder", list(CASES))
async def test_a_listed_skill_fares_as_a_local_file_with_the_same_frontmatter(
    folder: str, both_ways: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Offered with the same fields, or skipped for the same reason."""
    local, over_mcp = both_ways
    assert folder in local
    assert over_mcp[folder] == local[folder]


async def test_the_table_covers_offered_hidden_and_skipped_skills(
    both_ways: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The flags and names the review found failing open are what the table pins."""
    _, over_mcp = both_ways
    assert over_mcp["camel-flag"]["model"] is False
    assert over_mcp["kebab-flag"]["model"] is False
    assert over_mcp["person-only-camel"]["user"] is False
    assert "must be true or false" in over_mcp["flag-yes"]
    assert "must be true or false" in over_mcp["kebab-flag-yes"]
    assert "not a valid skill name" in over_mcp["bad-name"]
    assert "is empty" in over_mcp["empty-description"]
    assert over_mcp["optional"]["metadata"] == {"team": "ops", "tags": ["a", "b"]}
    assert over_mcp["kebab-when"]["when"] is None
