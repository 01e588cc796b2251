"""``--mcp-server`` and ``--mcp-timeout`` (the commands and the demo agent share them) and how
the MCP servers are shown. The ``mcp`` extra is optional: without it, ``--mcp-server`` is
refused before anything runs, with the command that installs it."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Sequence
from typing import Any

from demo_agent.settings import SettingError, positive_float

from ..model import SkillLookupOptions
from .install import extra_install_hint

# `acp_skills.mcp` (the mcp SDK, pydantic) is loaded only when --mcp-server is given: the
# commands start on the core alone (pinned by tests/test_cli.py). Its connections need the
# SDK itself, so that module is what tells whether the extra is installed.
_MCP_MODULE = "acp_skills.mcp"
_MCP_SDK_MODULE = "acp_skills.mcp.pool"

TIMEOUT_VARIABLE = "ACP_SKILLS_MCP_TIMEOUT"
DEFAULT_TIMEOUT = 10.0


def add_mcp_options(parser: argparse.ArgumentParser, meaning: str | None = None) -> None:
    """Add the repeatable ``--mcp-server LABEL=COMMAND|URL`` (``meaning``: what it is for, when
    not a server whose skills join every session) and ``--mcp-timeout SECONDS``."""
    meaning = meaning or "an MCP server whose skills join every session (repeatable)"
    parser.add_argument(
        "--mcp-server",
        action="append",
        metavar="LABEL=COMMAND|URL",
        help=f"{meaning}: a command run over stdio (split by shell rules) or an http(s) URL "
        "(streamable HTTP)",
    )
    parser.add_argument(
        "--mcp-timeout",
        type=positive_float,
        metavar="SECONDS",
        help=f"the MCP listing deadline (default: ${TIMEOUT_VARIABLE}, else {DEFAULT_TIMEOUT:g})",
    )


def mcp_provider_from(options: Sequence[str], timeout: float | None) -> Any:
    """The `McpSkillProvider` for ``--mcp-server`` values (none: for the sessions' own
    servers); `SettingError` with the reason, in one line, when a value is malformed or the
    ``mcp`` extra is not installed (with the command that installs it in the form this
    package was installed, `extra_install_hint`)."""
    try:
        mcp = importlib.import_module(_MCP_MODULE)
        if options:  # else the SDK is loaded by the first session that names a server
            importlib.import_module(_MCP_SDK_MODULE)
    except ImportError as error:
        missing = f"no module {error.name!r}" if error.name else str(error)
        raise SettingError(
            f"--mcp-server needs the mcp extra, which is not installed ({missing}): "
            + extra_install_hint("mcp")
        ) from None
    timeout = mcp_timeout(timeout)
    try:
        servers = [mcp.parse_server_option(option) for option in options]
    except ValueError as error:
        raise SettingError(f"--mcp-server: {error}") from None
    return mcp.McpSkillProvider(servers=servers, timeout=timeout)


def mcp_timeout(flag: float | None) -> float:
    """``--mcp-timeout``, else ``ACP_SKILLS_MCP_TIMEOUT``, else 10 s; `SettingError` for a
    variable that is not a positive number."""
    if flag is not None:
        return flag
    variable = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        return positive_float(variable) if variable else DEFAULT_TIMEOUT
    except argparse.ArgumentTypeError as error:
        raise SettingError(f"{TIMEOUT_VARIABLE}: {error}") from None


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
