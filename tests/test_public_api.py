"""The public API: what `acp_skills` and `acp_skills.acp` export is pinned here."""

from __future__ import annotations

import json
import subprocess
import sys
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

ACP_PUBLIC = ["AcpSkills", "GuardedTransport", "PromptTurn", "open_stdio"]


def test_package_exports_exactly_the_public_api() -> None:
    """`acp_skills.__all__` lists the public names, and each of them exists."""
    assert acp_skills.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(acp_skills, name) is not None


def test_the_two_public_modules_export_at_most_thirty_names() -> None:
    """A small surface: ``acp_skills`` and ``acp_skills.acp`` together name at most 30."""
    assert len(set(PUBLIC) | set(ACP_PUBLIC)) <= 30


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
