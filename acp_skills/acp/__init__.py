"""ACP glue: skills inside any agent built on the official ``agent-client-protocol`` SDK.

`AcpSkills` is the one object an agent mounts (docs/integration.md shows the whole snippet);
`PromptTurn` is what its ``turn`` yields. The pure builders in `acp_skills.acp.updates` are
public too, for agents that want the pieces without the facade.

This is the only part of the library that imports the ACP SDK (and, through it, pydantic):
``import acp_skills`` alone does not.
"""

from __future__ import annotations

from .connection import (
    DEFAULT_MAX_LIVE_SESSIONS,
    DEFAULT_MAX_REQUESTS_PER_TURN,
    EXTENSION_METHODS,
    EXTENSION_NAME,
    AcpClient,
    AcpSkills,
)
from .turn import AgentToolRunner, InvokedSkill, PromptTurn, StopReason
from .updates import (
    available_commands,
    check_cwd,
    find_invocations,
    is_absolute_cwd,
    prompt_text,
    skill_tool_call_start,
    tool_call_finished,
    tool_call_started,
)

__all__ = [
    "DEFAULT_MAX_LIVE_SESSIONS",
    "DEFAULT_MAX_REQUESTS_PER_TURN",
    "EXTENSION_METHODS",
    "EXTENSION_NAME",
    "AcpClient",
    "AcpSkills",
    "AgentToolRunner",
    "InvokedSkill",
    "PromptTurn",
    "StopReason",
    "available_commands",
    "check_cwd",
    "find_invocations",
    "is_absolute_cwd",
    "prompt_text",
    "skill_tool_call_start",
    "tool_call_finished",
    "tool_call_started",
]
