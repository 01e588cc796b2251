"""A session's MCP servers (contract §14, docs/mcp.md): a request's ``mcpServers`` as
`McpServer` values, each connected while a live session names it; their reports."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol

import anyio
import anyio.abc

from ..diagnostics import Markdown, server_line
from ..model import SkillLookupOptions, SkillSnapshot
from ..quiet_log import get_logger
from ..text import terminal_safe
from .wire import field

_log = get_logger(__name__)

_MCP_MODULE = "acp_skills.mcp"


class ServerCloser(Protocol):
    """What starts connecting to a server a session names, closes a server no session uses,
    and tells how each fares (`McpSkillProvider`)."""

    def connect(self, server: Any) -> None: ...

    async def release(self, server: Any) -> None: ...

    def states(self, options: SkillLookupOptions) -> Sequence[Any]: ...


class SessionServers:
    """Each live session's servers, counted per server; ``provider`` (``None`` without an MCP
    client) connects to one as a session names it, and closes it when its count drops to 0."""

    def __init__(self, provider: ServerCloser | None) -> None:
        self.provider = provider
        # Where a server's close runs when set (`AcpSkills`' task group): a request that lets a
        # server go answers without waiting for its process to end.
        self.tasks: anyio.abc.TaskGroup | None = None
        self._by_session: dict[str, tuple[Hashable, ...]] = {}
        self._users: dict[Hashable, int] = {}
        self._closing: dict[Hashable, anyio.Event] = {}  # set once that server is closed

    def from_request(self, entries: Sequence[object] | None) -> tuple[Hashable, ...]:
        """A request's ``mcpServers`` as `McpServer` values, in order; unusable ones warned of."""
        if not entries:
            return ()
        if self.provider is None:
            labels = [str(field(entry, "name")) for entry in entries]
            _log.warning("mcp_servers_ignored", servers=labels, reason="no MCP client")
            return ()
        mcp = importlib.import_module(_MCP_MODULE)
        found: dict[Hashable, None] = {}  # in order, each once
        for entry in entries:
            try:
                found[mcp.McpServer.from_acp(entry)] = None
            except ValueError as error:
                _log.warning("mcp_server_unusable", server=field(entry, "name"), reason=str(error))
        return tuple(found)

    async def bind(self, session_id: str, servers: tuple[Hashable, ...]) -> None:
        """``session_id`` (now live) uses ``servers``, each connecting from now on (once a
        close of it underway has ended); its previous instance's others go."""
        previous = self._by_session.pop(session_id, ())
        self._by_session[session_id] = servers
        for server in servers:
            self._users[server] = self._users.get(server, 0) + 1
        for server in servers:
            # Connecting while the old connection closes would list over it, then lose it.
            while (closing := self._closing.get(server)) is not None:
                await closing.wait()
            if self.provider is not None and self._users.get(server, 0) > 0:
                self.provider.connect(server)
        await self._let_go(previous)

    async def unbind(self, session_id: str) -> None:
        """``session_id`` is no longer live (released, or the connection ended)."""
        await self._let_go(self._by_session.pop(session_id, ()))

    async def _let_go(self, servers: Iterable[Hashable]) -> None:
        for server in servers:
            left = self._users.get(server, 0) - 1
            if left > 0:
                self._users[server] = left
                continue
            self._users.pop(server, None)
            if self.provider is None:
                continue
            closed = self._closing[server] = anyio.Event()
            if self.tasks is not None:
                self.tasks.start_soon(self._close, self.provider, server, closed)
            else:
                await self._close(self.provider, server, closed)

    async def _close(self, provider: ServerCloser, server: Hashable, closed: anyio.Event) -> None:
        try:
            # Ended, not abandoned, when the agent stops: its process group goes with it.
            with anyio.CancelScope(shield=True):
                await provider.release(server)
        except Exception as error:  # a close that failed must not end the agent
            _log.warning("mcp_server_close_failed", server=str(server), error=repr(error))
        finally:
            if self._closing.get(server) is closed:
                del self._closing[server]
            closed.set()


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
    return [
        {
            "name": shadowed.skill.name,
            **{
                side: {"source": skill.source, "provider": skill.provider}
                for side, skill in (("winner", shadowed.winner), ("loser", shadowed.skill))
            },
        }
        for shadowed in snapshot.shadowed
    ]
