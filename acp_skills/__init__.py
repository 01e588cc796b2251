"""acp-skills: skills with progressive disclosure for Agent Client Protocol agents.

The public API is re-exported here; everything else is private to its module.
"""

from __future__ import annotations

from .catalog import SkillCatalogContributor, normalize_description, render_catalog
from .errors import SkillContractError
from .local import LocalSkillProvider
from .model import (
    DirectoryResource,
    OpaqueResource,
    PrefixContext,
    PrefixMessage,
    ResourceBase,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    UrlResource,
    is_skill_name,
)
from .prefix import PrefixContributor, PrefixedSession, PrefixNext, SessionPrefix
from .provider import ProviderHandle, SkillProvider
from .record import (
    HeaderEntry,
    HeaderReason,
    HistoryEntry,
    InMemorySessionStore,
    JsonlSessionStore,
    RecordEntry,
    SessionRecord,
    SessionStore,
)
from .registry import SkillRegistry
from .tool import SkillTool, ToolResult, render_skill_content

__all__ = [
    "DirectoryResource",
    "HeaderEntry",
    "HeaderReason",
    "HistoryEntry",
    "InMemorySessionStore",
    "JsonlSessionStore",
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
    "SkillCandidate",
    "SkillCatalogContributor",
    "SkillContractError",
    "SkillDefinition",
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
