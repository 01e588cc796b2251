"""The public API: what `acp_skills` and `acp_skills.acp` export is pinned here."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import acp_skills
import acp_skills.acp

PUBLIC = [
    "AcpSkills",
    "Diagnostic",
    "DirectoryResource",
    "JsonlSessionStore",
    "LocalFileSystem",
    "LocalSkillProvider",
    "OpaqueResource",
    "PrefixMessage",
    "PrefixedSession",
    "SessionPrefix",
    "SkillCandidate",
    "SkillCatalogContributor",
    "SkillContractError",
    "SkillDefinition",
    "SkillFileSystem",
    "SkillLookupOptions",
    "SkillProvider",
    "SkillRegistry",
    "SkillSnapshot",
    "SkillSummary",
    "SkillTool",
    "ToolResult",
    "UrlResource",
    "is_skill_name",
    "normalize_description",
    "render_catalog",
    "render_skill_content",
]

ACP_PUBLIC = ["AcpSkills", "GuardedTransport", "PromptTurn", "ToolCall", "open_stdio"]


def test_package_exports_exactly_the_public_api() -> None:
    """`acp_skills.__all__` lists the public names, and each of them exists."""
    assert acp_skills.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(acp_skills, name) is not None


def test_the_two_public_modules_export_at_most_thirty_one_names() -> None:
    """A small surface: ``acp_skills`` and ``acp_skills.acp`` together name at most 31."""
    assert len(set(PUBLIC) | set(ACP_PUBLIC)) <= 31


def test_acp_module_exports_exactly_its_public_api() -> None:
    """`acp_skills.acp.__all__` lists the ACP glue's public names, and each of them exists."""
    assert sorted(acp_skills.acp.__all__) == sorted(ACP_PUBLIC)
    for name in ACP_PUBLIC:
        assert getattr(acp_skills.acp, name) is not None


# What a fresh interpreter shows after each import: other tests capture logs, which
# configures structlog in this one, and have imported everything long ago.
FRESH_IMPORTS = """
import json, sys
import structlog
facts = {}
import acp_skills
facts["loaded by acp_skills"] = sorted(m for m in ("acp", "pydantic") if m in sys.modules)
acp_skills.AcpSkills
facts["loaded by AcpSkills"] = sorted(m for m in ("acp", "pydantic") if m in sys.modules)
import acp_skills.acp
facts["structlog configured"] = structlog.is_configured()
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def fresh_imports() -> dict[str, Any]:
    """`FRESH_IMPORTS` run once, in a new interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", FRESH_IMPORTS], capture_output=True, text=True, check=True
    )
    facts: dict[str, Any] = json.loads(result.stdout)
    return facts


def test_library_never_configures_logging(fresh_imports: dict[str, Any]) -> None:
    """Importing the whole library leaves structlog unconfigured (only applications do that)."""
    assert fresh_imports["structlog configured"] is False


def test_importing_the_package_loads_neither_the_acp_sdk_nor_pydantic(
    fresh_imports: dict[str, Any],
) -> None:
    """``import acp_skills`` alone stays light: the ACP glue is imported on first use."""
    assert fresh_imports["loaded by acp_skills"] == []
    assert fresh_imports["loaded by AcpSkills"] == ["acp", "pydantic"]


# What docs/integration.md ("The layers underneath") names as public beyond the two modules.
DOCUMENTED_FOR_APPLICATIONS = {
    "acp_skills": None,
    "acp_skills.acp": None,
    "acp_skills.mcp": None,
    "acp_skills.cli.settings": None,
    "acp_skills.text": {"terminal_safe"},
}


def _imports(package: str) -> list[tuple[str, str, set[str]]]:
    """Every ``import``/``from`` in ``package``'s files: (file, module, names)."""
    found = []
    for path in sorted((Path(__file__).parent.parent / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.append((path.name, node.module, {alias.name for alias in node.names}))
            elif isinstance(node, ast.Import):
                found.extend((path.name, alias.name, set()) for alias in node.names)
    return found


def test_the_library_imports_nothing_of_its_demo() -> None:
    """The demo agent is an edge on the library, never the other way round."""
    assert [i for i in _imports("acp_skills") if i[1].split(".")[0] == "demo_agent"] == []


def test_the_demo_agent_uses_only_what_the_docs_call_public() -> None:
    """``demo_agent`` imports `acp_skills`, `acp_skills.acp`, `acp_skills.mcp`,
    `acp_skills.cli.settings` and `acp_skills.text.terminal_safe`, nothing else."""
    for file, module, names in _imports("demo_agent"):
        if module.split(".")[0] != "acp_skills":
            continue
        if {f"{module}.{name}" for name in names} <= DOCUMENTED_FOR_APPLICATIONS.keys():
            continue  # `from acp_skills.cli import settings`
        assert module in DOCUMENTED_FOR_APPLICATIONS, (file, module)
        allowed = DOCUMENTED_FOR_APPLICATIONS[module]
        assert allowed is None or names <= allowed, (file, module, names)
