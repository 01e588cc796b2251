"""Skills from MCP servers (the MCP Skills extension; contract §14), extra ``acp-skills[mcp]``."""

from .config import McpServer, parse_server_option
from .provider import McpSkillProvider

__all__ = ["McpServer", "McpSkillProvider", "parse_server_option"]
