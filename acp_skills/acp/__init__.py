"""ACP glue (docs/integration.md): the only part of the library that imports the ACP SDK."""

from __future__ import annotations

from .skills import AcpSkills
from .transport import GuardedTransport, open_stdio
from .turn import PromptTurn

__all__ = ["AcpSkills", "GuardedTransport", "PromptTurn", "open_stdio"]
