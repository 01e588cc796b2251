"""A session's MCP servers: the ``mcpServers`` of ``session/new`` and ``session/load`` made
`McpServer` values (contract §14), and which live sessions use each one, so that a stdio
server no live session names any more is closed.

`acp_skills.mcp` (the ``mcp`` extra) is loaded only when a session names a server: an agent
without the extra serves sessions as before, and says once that it ignores their servers.
"""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from acp.schema import HttpMcpServer, McpServerStdio

from ..model import SkillLookupOptions, SkillSnapshot
from ..quiet_log import get_logger
from ..report import Markdown, server_json, server_line
from ..text import remove_unsafe_characters, terminal_safe
from .wire import field

_log = get_logger(__name__)

_MCP_MODULE = "acp_skills.mcp"


class ServerCloser(Protocol):
    """What closes a server no session uses and tells how each fares (`McpSkillProvider`)."""

    async def release(self, server: Any) -> None: ...

    def states(self, options: SkillLookupOptions) -> Sequence[Any]: ...


class SessionServers:
    """Each live session's servers, counted per server; ``provider`` (an `McpSkillProvider`,
    or ``None`` when the agent has no MCP client) closes a server when its count drops to 0."""

    def __init__(self, provider: ServerCloser | None) -> None:
        self.provider = provider
        self._by_session: dict[str, tuple[Hashable, ...]] = {}
        self._users: dict[Hashable, int] = {}

    def from_request(self, entries: Sequence[object] | None) -> tuple[Hashable, ...]:
        """A request's ``mcpServers`` as `McpServer` values, in order; unusable ones warned of."""
        if not entries:
            return ()
        if self.provider is None:
            labels = [str(field(entry, "name")) for entry in entries]
            _log.warning("mcp_servers_ignored", servers=labels, reason="no MCP client")
            return ()
        mcp = importlib.import_module(_MCP_MODULE)
        found: list[Hashable] = []
        for entry in entries:
            try:
                server = _server_of(mcp.McpServer, entry)
            except (TypeError, ValueError) as error:
                label = field(entry, "name")
                _log.warning("mcp_server_unusable", server=label, reason=str(error))
                continue
            if server not in found:
                found.append(server)
        return tuple(found)

    async def bind(self, session_id: str, servers: tuple[Hashable, ...]) -> None:
        """``session_id`` (now live) uses ``servers``; its previous instance's others go."""
        previous = self._by_session.pop(session_id, ())
        self._by_session[session_id] = servers
        for server in servers:
            self._users[server] = self._users.get(server, 0) + 1
        await self._let_go(previous)

    async def unbind(self, session_id: str) -> None:
        """``session_id`` is no longer live (released, or the connection ended)."""
        await self._let_go(self._by_session.pop(session_id, ()))

    def users(self, server: Hashable) -> int:
        """How many live sessions name ``server``."""
        return self._users.get(server, 0)

    async def _let_go(self, servers: Iterable[Hashable]) -> None:
        for server in servers:
            left = self._users.get(server, 0) - 1
            if left > 0:
                self._users[server] = left
                continue
            self._users.pop(server, None)
            if self.provider is not None:
                await self.provider.release(server)


def servers_json(provider: ServerCloser | None, options: SkillLookupOptions) -> list[Any]:
    """Each server a lookup with ``options`` uses: how it fares, for ``_skills/list``."""
    states = provider.states(options) if provider is not None else ()
    return [server_json(state) for state in states]


def servers_report(
    provider: ServerCloser | None, options: SkillLookupOptions, snapshot: SkillSnapshot
) -> str:
    """The ``/skills`` lines on each MCP server and each MCP skill a local one hides, or ""."""
    clean = terminal_safe  # a line of the report: a line feed in a name must not forge one
    lines: list[str] = []
    states = list(provider.states(options)) if provider is not None else []
    if states:
        lines += [f"**MCP servers** ({len(states)})", ""]
    lines.extend(f"- {server_line(state, Markdown())}" for state in states)
    clashes = [s for s in snapshot.shadowed if s.skill.source.startswith("mcp:")]
    if clashes:
        lines += [*([""] if lines else []), "**Name clashes with MCP skills**", ""]
        for clash in clashes:
            server = clean(clash.skill.source.removeprefix("mcp:"))
            lines.append(
                f"- `{clean(clash.skill.name)}` of MCP server `{server}` is hidden by the "
                f"skill of the same name from {clean(clash.winner.source)}"
            )
    return "\n".join(lines)


def shadowed_json(snapshot: SkillSnapshot) -> list[dict[str, Any]]:
    """Every name clash of the snapshot: the name, the winner's and the loser's origins."""
    clean = remove_unsafe_characters
    return [
        {
            "name": shadowed.skill.name,
            **{
                side: {"source": clean(skill.source), "provider": clean(skill.provider)}
                for side, skill in (("winner", shadowed.winner), ("loser", shadowed.skill))
            },
        }
        for shadowed in snapshot.shadowed
    ]


def _server_of(make: Any, entry: object) -> Hashable:
    if isinstance(entry, McpServerStdio) or (
        field(entry, "type") is None and field(entry, "command")
    ):
        pairs = _pairs(field(entry, "env"))
        args = field(entry, "args") or ()
        if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
            raise TypeError("its args are not a list of strings")
        command = field(entry, "command")
        return make(label=_label(entry), command=command, args=tuple(args), env=pairs)  # type: ignore[no-any-return]
    if isinstance(entry, HttpMcpServer) or field(entry, "type") == "http":
        url, headers = field(entry, "url"), _pairs(field(entry, "headers"))
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError("its url is not an http or https url")
        return make(label=_label(entry), url=url, headers=headers)  # type: ignore[no-any-return]
    raise ValueError(
        f"a server of type {field(entry, 'type')!r} is not supported (stdio and http are)"
    )


def _label(entry: object) -> str:
    label = field(entry, "name")
    if not isinstance(label, str) or not label.strip():
        raise ValueError("it has no name")
    return label.strip()


def _pairs(items: object) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for item in items if isinstance(items, list | tuple) else ():
        name = item.get("name") if isinstance(item, Mapping) else field(item, "name")
        value = item.get("value") if isinstance(item, Mapping) else field(item, "value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("a name/value pair is not two strings")
        pairs.append((name, value))
    return tuple(pairs)
