"""What an MCP skill carries back to its server (`McpLocator`: the entry a load verifies
against, and the pairs trust keys on) and what is known of each server (`ServerState`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final

from ..diagnostics import Diagnostic
from ..frontmatter import canonical_json
from .config import McpServer
from .listing import ListedSkill

# The pair trust keeps for a skill's listed frontmatter: its uri with this fragment.
FRONTMATTER_FRAGMENT: Final = "#frontmatter"
# The digest trust keeps for the SKILL.md of a skill listed without a manifest ("dynamic"): no
# listed digest looks like it, so a switch between the two is a change either way.
DYNAMIC_DIGEST: Final = "dynamic"


@dataclass(frozen=True, slots=True, kw_only=True)
class McpLocator:
    """Where a candidate came from: what a load verifies against, and what trust keys on
    (`acp_skills.trust.ServedLocator`)."""

    server: McpServer
    skill: ListedSkill

    @property
    def server_label(self) -> str:
        return self.server.label

    @property
    def server_identity(self) -> str:
        return self.server.identity

    @property
    def skill_uri(self) -> str:
        return self.skill.uri

    @property
    def dynamic(self) -> bool:
        """Whether the server lists no manifest for the skill (``"resources": "dynamic"``):
        its files, ``SKILL.md`` included, are not verified, and the question that asks for
        trust should say so."""
        return self.skill.files is None

    served: frozenset[tuple[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        # The pairs trust keeps, worked out once (every lookup asks trust about every skill):
        # one for the listed frontmatter (the catalog's text comes from the listing, before any
        # file is read), and one for every listed file, or, for a dynamic skill, its SKILL.md
        # marked dynamic: a skill that switches between the two never keeps its trust.
        listed = canonical_json(self.skill.frontmatter)
        digest = "sha256:" + hashlib.sha256(listed.encode("utf-8", "surrogatepass")).hexdigest()
        pairs = {(self.skill.uri + FRONTMATTER_FRAGMENT, digest)}
        if self.skill.files is None:
            pairs.add((self.skill.uri, DYNAMIC_DIGEST))
        else:
            pairs.update((file.uri, file.digest) for file in self.skill.files.values())
        object.__setattr__(self, "served", frozenset(pairs))


@dataclass(slots=True)
class ServerState:
    """What `/skills` and doctor show of one server: how it fares, and the entries of its last
    listing that were left out (``rejected``)."""

    server: McpServer
    connected: bool = False
    skills: int = 0
    failure: str | None = None
    failed_at: float | None = None
    supports_skills: bool | None = None
    rejected: tuple[Diagnostic, ...] = ()
