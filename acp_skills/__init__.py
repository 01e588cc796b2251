"""acp-skills: skills with progressive disclosure for Agent Client Protocol agents.

The public API is re-exported here; everything else is private to its module.
"""

from __future__ import annotations

from .errors import SkillContractError
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
from .provider import ProviderHandle, SkillProvider
from .registry import SkillRegistry

__all__ = [
    "DirectoryResource",
    "OpaqueResource",
    "PrefixContext",
    "PrefixMessage",
    "ProviderHandle",
    "ResourceBase",
    "SkillCandidate",
    "SkillContractError",
    "SkillDefinition",
    "SkillLookupOptions",
    "SkillProvider",
    "SkillRegistry",
    "SkillSnapshot",
    "SkillSummary",
    "UrlResource",
    "is_skill_name",
]
