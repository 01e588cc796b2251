"""acp-skills: skills with progressive disclosure for Agent Client Protocol agents.

The public API is re-exported here. `acp_skills.acp` is public too (the ACP glue and its pure
builders, for agents that want the pieces without the `AcpSkills` facade); every other module is
an implementation detail.
"""

from __future__ import annotations

from .acp import AcpSkills
from .catalog import SkillCatalogContributor, normalize_description, render_catalog
from .errors import SkillContractError
from .frontmatter import ParsedSkill, SkillFileProblem, decode_skill_bytes, parse_skill_file
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
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    UrlResource,
    is_skill_name,
)
from .prefix import PrefixedSession, SessionPrefix
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
from .tool import SkillTool, ToolResult, render_skill_content
from .transport import GuardedTransport, open_stdio

__all__ = [
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
