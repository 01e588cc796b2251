"""Skills from MCP servers (the MCP Skills extension, SEP-2640; contract §14). Needs the extra
``acp-skills[mcp]``."""

from .config import McpServer, parse_server_option
from .pool import McpPool
from .provider import McpSkillProvider

__all__ = ["McpPool", "McpServer", "McpSkillProvider", "parse_server_option"]
