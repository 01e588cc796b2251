"""ACP glue: skills inside any agent built on the official ``agent-client-protocol`` SDK.

`AcpSkills` is the one object an agent mounts (docs/integration.md shows the whole snippet);
`PromptTurn` is what its ``turn`` yields. `GuardedTransport` and `open_stdio` are the hardened
stdio transport `AcpSkills.serve` uses, for agents that build their own connection.

This is the only part of the library that imports the ACP SDK (and, through it, pydantic):
``import acp_skills`` alone does not.
"""

from __future__ import annotations

from .skills import AcpSkills
from .stdio import open_stdio
from .transport import GuardedTransport
from .turn import PromptTurn

__all__ = ["AcpSkills", "GuardedTransport", "PromptTurn", "open_stdio"]
