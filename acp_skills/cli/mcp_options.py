"""How the MCP servers of ``--mcp-server`` are shown by the commands."""

from __future__ import annotations

from typing import Any

from ..model import SkillLookupOptions


async def mcp_warnings(provider: Any, options: SkillLookupOptions) -> list[str]:
    """One ``warning:`` line per server the last lookup skipped and per listed skill it left
    out (for the commands that do not report every problem, as doctor does)."""
    if provider is None:
        return []
    return [f"warning: {problem.message}" for problem in await provider.diagnose(options)]


def mcp_servers_json(provider: Any) -> list[dict[str, object]]:
    """Each server a lookup has met: label, identity, connected, skills, failure reason."""
    if provider is None:
        return []
    return [
        {
            "label": state.server.label,
            "identity": state.server.identity,
            "connected": state.connected,
            "skillsExtension": state.supports_skills,
            "skills": state.skills,
            "failure": state.failure,
        }
        for state in provider.servers.values()
    ]


def mcp_server_lines(provider: Any) -> list[str]:
    """The same, one line a server (for doctor and ``/skills``)."""
    lines = []
    for server in mcp_servers_json(provider):
        if server["failure"]:
            state = f"skipped: {server['failure']}"
        elif server["skillsExtension"] is False:
            state = "connected, no skills extension"
        else:
            state = f"connected, {server['skills']} skills"
        lines.append(f"MCP server {server['label']} ({server['identity']}): {state}")
    return lines
