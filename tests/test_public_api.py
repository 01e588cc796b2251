"""The public API: what `acp_skills` and `acp_skills.acp` export is pinned here."""

from __future__ import annotations

import subprocess
import sys

import acp_skills
import acp_skills.acp

PUBLIC = [
    "AcpSkills",
    "DirEntry",
    "DirectoryResource",
    "FileReadError",
    "GuardedTransport",
    "HeaderEntry",
    "HeaderReason",
    "HistoryEntry",
    "InMemorySessionStore",
    "JsonlSessionStore",
    "LocalFileSystem",
    "LocalSkillProvider",
    "OpaqueResource",
    "ParsedSkill",
    "PrefixContext",
    "PrefixContributor",
    "PrefixMessage",
    "PrefixNext",
    "PrefixedSession",
    "ProviderHandle",
    "RecordEntry",
    "ResourceBase",
    "SessionPrefix",
    "SessionRecord",
    "SessionStore",
    "SkillCandidate",
    "SkillCatalogContributor",
    "SkillContractError",
    "SkillDefinition",
    "SkillFileProblem",
    "SkillFileSystem",
    "SkillLookupOptions",
    "SkillProvider",
    "SkillRegistry",
    "SkillSnapshot",
    "SkillSummary",
    "SkillTool",
    "ToolResult",
    "UrlResource",
    "decode_skill_bytes",
    "is_skill_name",
    "normalize_description",
    "open_stdio",
    "parse_skill_file",
    "render_catalog",
    "render_skill_content",
]

ACP_PUBLIC = [
    "EXTENSION_METHODS",
    "EXTENSION_NAME",
    "AcpClient",
    "AcpSkills",
    "InvokedSkill",
    "SkillTurn",
    "available_commands",
    "check_cwd",
    "find_invocations",
    "is_absolute_cwd",
    "prompt_text",
    "skill_tool_call_end",
    "skill_tool_call_start",
]


def test_package_exports_exactly_the_public_api() -> None:
    """`acp_skills.__all__` lists the public names, and each of them exists."""
    assert acp_skills.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(acp_skills, name) is not None


def test_acp_module_exports_exactly_its_public_api() -> None:
    """`acp_skills.acp.__all__` lists the ACP glue's public names, and each of them exists."""
    assert sorted(acp_skills.acp.__all__) == sorted(ACP_PUBLIC)
    for name in ACP_PUBLIC:
        assert getattr(acp_skills.acp, name) is not None


def test_library_never_configures_logging() -> None:
    """Importing the whole library leaves structlog unconfigured (only applications do that)."""
    # A fresh interpreter: other tests capture logs, which configures structlog in this one.
    probe = (
        "import acp_skills, acp_skills.acp, acp_skills.transport, structlog; "
        "print(structlog.is_configured())"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
