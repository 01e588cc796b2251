"""``--mcp-server`` and ``--mcp-timeout`` (the commands and the demo agent share them) and how
the MCP servers are shown. The ``mcp`` extra is optional: without it the options say so."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Sequence
from typing import Any

from demo_agent.settings import positive_float

# `acp_skills.mcp` (the mcp SDK, pydantic) is loaded only when --mcp-server is given: the
# commands start on the core alone (pinned by tests/test_cli.py).
_MCP_MODULE = "acp_skills.mcp"

TIMEOUT_VARIABLE = "ACP_SKILLS_MCP_TIMEOUT"
DEFAULT_TIMEOUT = 10.0


def add_mcp_options(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--mcp-server LABEL=COMMAND|URL`` and ``--mcp-timeout SECONDS``."""
    parser.add_argument(
        "--mcp-server",
        action="append",
        metavar="LABEL=COMMAND|URL",
        help="an MCP server whose skills join every session (repeatable): a command run over "
        "stdio (split by shell rules) or an http(s) URL (streamable HTTP)",
    )
    parser.add_argument(
        "--mcp-timeout",
        type=positive_float,
        metavar="SECONDS",
        help=f"the MCP listing deadline (default: ${TIMEOUT_VARIABLE}, else {DEFAULT_TIMEOUT:g})",
    )


def mcp_provider_from(options: Sequence[str], timeout: float | None) -> Any:
    """The `McpSkillProvider` for ``--mcp-server`` values; ``SystemExit`` with the reason when
    a value is malformed or the ``mcp`` extra is missing."""
    try:
        mcp = importlib.import_module(_MCP_MODULE)
    except ImportError:
        raise SystemExit(
            "--mcp-server needs the mcp extra: pip install 'acp-skills[mcp]'"
        ) from None
    if timeout is None:
        variable = os.environ.get(TIMEOUT_VARIABLE, "").strip()
        try:
            timeout = positive_float(variable) if variable else DEFAULT_TIMEOUT
        except argparse.ArgumentTypeError as error:
            raise SystemExit(f"{TIMEOUT_VARIABLE}: {error}") from None
    try:
        servers = [mcp.parse_server_option(option) for option in options]
    except ValueError as error:
        raise SystemExit(f"--mcp-server: {error}") from None
    return mcp.McpSkillProvider(servers=servers, timeout=timeout)


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
