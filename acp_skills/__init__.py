"""acp-skills: skills with progressive disclosure for ACP agents; the public API. `AcpSkills` is
imported on first use, so ``import acp_skills`` loads neither the ACP SDK nor pydantic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .catalog import SkillCatalogContributor, render_catalog
from .content import render_skill_content
from .diagnostics import Diagnostic
from .errors import SkillContractError
from .fs import LocalFileSystem, SkillFileSystem
from .jsonl_store import JsonlSessionStore
from .local import LocalSkillProvider
from .model import (
    DirectoryResource,
    OpaqueResource,
    PrefixMessage,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    UrlResource,
    is_skill_name,
)
from .prefix import SessionPrefix
from .registry import SkillProvider, SkillRegistry
from .session import PrefixedSession
from .text import normalize_description
from .tool import SkillTool, ToolResult

if TYPE_CHECKING:
    from .acp import AcpSkills

__all__ = [
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

if not TYPE_CHECKING:  # hidden from type checkers, which would accept any name from here

    def __getattr__(name: str) -> Any:  # PEP 562
        if name == "AcpSkills":
            from .acp import AcpSkills

            return AcpSkills
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
