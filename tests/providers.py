"""Small in-memory skill providers used by the tests (real providers, not mocks)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_skills import (
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillRegistry,
    SkillTool,
    ToolResult,
)
from acp_skills.registry import ProviderHandle

# The session's working directory the tool tests look skills up for.
CWD = "/work/project"


def names(skills: Any) -> list[str]:
    """The names of skills (summaries, candidates, definitions), in order."""
    return [skill.name for skill in skills]


def candidate(
    name: str,
    /,
    *,
    provider: str,
    rank: float = 100,
    description: str | None = None,
    **fields: object,
) -> SkillCandidate:
    """A well-formed candidate; ``fields`` override anything (to build malformed ones too)."""
    values: dict[str, object] = {
        "name": name,
        "description": description or f"The {name} skill",
        "source": "test",
        "provider": provider,
        "rank": rank,
        "locator": name,
        "path": f"/skills/{provider}/{name}.md",
    }
    values.update(fields)
    return SkillCandidate(**values)  # type: ignore[arg-type]


@dataclass
class ListProvider:
    """Serves a fixed list of candidates; bodies are ``body of <name>``.

    ``before_list`` runs inside every ``list()`` call, before it answers: tests use it to hang,
    raise, or change the registry mid-discovery.
    """

    name: str
    candidates: list[SkillCandidate] = field(default_factory=list)
    before_list: Callable[[], Awaitable[None]] | None = None
    list_calls: int = 0
    get_calls: int = 0
    seen_options: list[SkillLookupOptions] = field(default_factory=list)
    seen_candidates: list[SkillCandidate] = field(default_factory=list)
    handle: ProviderHandle | None = None
    definition_override: object = None

    def on_register(self, handle: ProviderHandle) -> None:
        self.handle = handle

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        self.list_calls += 1
        self.seen_options.append(options)
        if self.before_list is not None:
            await self.before_list()
        return list(self.candidates)

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        self.get_calls += 1
        self.seen_options.append(options)
        self.seen_candidates.append(candidate)
        if self.definition_override is not None:
            return self.definition_override  # type: ignore[return-value]
        return definition_of(candidate)


def definition_of(found: SkillCandidate, **overrides: object) -> SkillDefinition:
    values: dict[str, object] = {
        "name": found.name,
        "description": found.description,
        "when_to_use": found.when_to_use,
        "disable_model_invocation": found.disable_model_invocation,
        "user_invocable": found.user_invocable,
        "source": found.source,
        "provider": found.provider,
        "resource_base": found.resource_base,
        "content": f"body of {found.name}",
        "path": found.path,
        "argument_hint": found.argument_hint,
    }
    values.update(overrides)
    return SkillDefinition(**values)  # type: ignore[arg-type]


# -- golden files ----------------------------------------------------------------------------

GOLDEN_DIR = Path(__file__).parent / "golden"


def assert_matches_golden(file_name: str, actual: str) -> None:
    """Compare ``actual`` byte for byte with ``tests/golden/<file_name>``.

    To accept a deliberate change, regenerate the files and review the diff:
    ``UPDATE_GOLDEN=1 pytest tests/test_catalog.py tests/test_tool.py``.
    """
    golden = GOLDEN_DIR / file_name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(actual.encode("utf-8"))
        return
    if not golden.exists():
        raise AssertionError(f"{golden} is missing; run the tests with UPDATE_GOLDEN=1")
    expected = golden.read_bytes()
    if actual.encode("utf-8") != expected:
        # This module is not assertion-rewritten by pytest, so build the diff ourselves.
        diff = difflib.unified_diff(
            expected.decode("utf-8", "replace").splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=str(golden),
            tofile="actual",
        )
        raise AssertionError(
            f"output differs from {golden}; if the change is intended, rerun with "
            "UPDATE_GOLDEN=1\n" + "".join(diff)
        )


def error(text: str) -> ToolResult:
    """The tool's result for a refusal the model reads: ``text``, marked as an error."""
    return ToolResult(text=text, is_error=True)


def make_tool(
    *candidates: SkillCandidate, provider: ListProvider | None = None, **options: Any
) -> tuple[SkillTool, ListProvider]:
    """A `SkillTool` over a registry of one `ListProvider` holding ``candidates``."""
    provider = provider or ListProvider("p")
    provider.candidates.extend(candidates)
    registry = SkillRegistry()
    registry.register_provider(provider)
    return SkillTool(registry, **options), provider
