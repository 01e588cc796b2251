"""acp-skills: skills with progressive disclosure for Agent Client Protocol agents.

The public API is re-exported here. `acp_skills.acp` is public too (the ACP glue: `AcpSkills`,
`PromptTurn` and the pure builders); `AcpSkills` is also reachable from here, imported on first
use, so that ``import acp_skills`` alone loads neither the ACP SDK nor pydantic. Every other
module is an implementation detail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .catalog import (
    CatalogFit,
    SkillCatalogContributor,
    describe_catalog_fit,
    fit_catalog,
    render_catalog,
)
from .content import render_skill_content
from .diagnostics import Diagnostic
from .errors import SkillContractError
from .fs import DirEntry, FileReadError, LocalFileSystem, SkillFileSystem
from .jsonl_store import JsonlSessionStore
from .local import LocalSkillProvider
from .model import (
    DirectoryResource,
    OpaqueResource,
    PrefixContext,
    PrefixContributor,
    PrefixMessage,
    PrefixNext,
    ResourceBase,
    ShadowedSkill,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    UrlResource,
    is_skill_name,
)
from .prefix import SessionPrefix
from .provider import ProviderHandle, SkillProvider
from .record import (
    HeaderEntry,
    HeaderReason,
    HistoryEntry,
    InMemorySessionStore,
    RecordEntry,
    SessionRecord,
    SessionStore,
)
from .registry import SkillRegistry
from .session import PrefixedSession
from .text import normalize_description
from .tool import SkillTool, ToolResult

if TYPE_CHECKING:
    from .acp import AcpSkills

__all__ = [
    "AcpSkills",
    "CatalogFit",
    "Diagnostic",
    "DirEntry",
    "DirectoryResource",
    "FileReadError",
    "HeaderEntry",
    "HeaderReason",
    "HistoryEntry",
    "InMemorySessionStore",
    "JsonlSessionStore",
    "LocalFileSystem",
    "LocalSkillProvider",
    "OpaqueResource",
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
    "ShadowedSkill",
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
    "describe_catalog_fit",
    "fit_catalog",
    "is_skill_name",
    "normalize_description",
    "render_catalog",
    "render_skill_content",
]


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name imported from here.

    def __getattr__(name: str) -> Any:
        # PEP 562: the ACP glue is imported only when an agent reaches for it.
        if name == "AcpSkills":
            from .acp import AcpSkills

            return AcpSkills
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
