"""ACP glue (docs/integration.md): the only part of the library that imports the ACP SDK."""

from __future__ import annotations

from .skills import AcpSkills
from .stdio import open_stdio
from .transport import GuardedTransport
from .turn import PromptTurn, ToolCall

__all__ = ["AcpSkills", "GuardedTransport", "PromptTurn", "ToolCall", "open_stdio"]
