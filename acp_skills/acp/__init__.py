"""ACP glue: skills inside any agent built on the official ``agent-client-protocol`` SDK
(docs/integration.md). The only part of the library that imports the SDK (and pydantic)."""

from __future__ import annotations

from .skills import AcpSkills
from .stdio import open_stdio
from .transport import GuardedTransport
from .turn import PromptTurn

__all__ = ["AcpSkills", "GuardedTransport", "PromptTurn", "open_stdio"]
