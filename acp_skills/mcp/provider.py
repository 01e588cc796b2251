"""`McpSkillProvider`: the skills of MCP servers (contract §14, §14a, §16; docs/mcp.md)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, TypeVar

import anyio

from ..diagnostics import Diagnostic, log_diagnostic, mcp_server_unavailable, mcp_skill_invalid
from ..errors import ReadError, Refusal
from ..frontmatter import ParsedSkill, build_skill, canonical_json, parse_skill_file
from ..model import (
    SKILL_FILE_NAME,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    UrlResource,
    shared_fields,
)
from ..quiet_log import get_logger
from ..text import quote
from ..tool import DEFAULT_MAX_RESOURCE_BYTES, cannot_read, unread_path
from .config import McpServer
from .connection import McpConnection, leaf_reason, load_transport
from .listing import (
    NOTHING,
    SKILLS_EXTENSION,
    TOO_LARGE,
    ListedSkill,
    Listing,
    ResponseTooLarge,
    unlisted,
)
from .listing import McpLocator as McpLocator  # documented here too (docs/mcp.md)

# `.transport` imports the MCP SDK, loaded off the event loop (`load_sdk`, `_reach`), so an
# agent that mounts this provider starts without it.
if TYPE_CHECKING:
    from mcp import ClientSession

    from .transport import TransportFactory

MCP_RANK: Final = 600  # every local root wins a name clash
RETRY_AFTER: Final = 60.0  # a failed server is left alone this long
MAX_CONFIRMED: Final = 32  # uris a server confirmed but does not list, kept per server

_log = get_logger(__name__)
_T = TypeVar("_T")


@dataclass(slots=True)
class ServerState:
    """What `/skills` and doctor show of one server."""

    server: McpServer
    connected: bool = False
    skills: int = 0
    failure: str | None = None
    failed_at: float | None = None
    supports_skills: bool | None = None
    rejected: tuple[Diagnostic, ...] = ()


class _Unavailable(Exception):
    """A server could not be asked; the message says why."""


class McpSkillProvider:
    """The skills of ``servers`` (every lookup's), then of ``options.servers`` (a session's)."""

    def __init__(
        self,
        *,
        servers: Sequence[McpServer] = (),
        timeout: float = 10.0,
        max_resource_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
        transport: TransportFactory | None = None,
    ) -> None:
        self.name = "mcp"
        self.servers: dict[McpServer, ServerState] = {}
        self._fixed = tuple(servers)
        self._timeout = timeout
        self._max_resource_bytes = max_resource_bytes
        self._transport = transport
        self._connections: dict[McpServer, McpConnection] = {}
        self._lent: dict[McpServer, ClientSession] = {}
        self._first: dict[McpServer, asyncio.Future[Listing]] = {}  # started as a session opens
        # (configuration, or a public answer's url; uri, "" for the listing) -> (until, answer)
        self._kept: dict[tuple[Hashable, str], tuple[float, Listing]] = {}
        self._confirmed: dict[McpServer, tuple[str, ...]] = {}  # oldest first

    def cacheable(self, options: SkillLookupOptions) -> bool:
        # Each listing keeps its own ttlMs; the registry asks again every time there are servers.
        return not self._servers_of(options)

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Each server's listed skills, then those it confirmed by uri; a failing one skipped."""
        found: list[SkillCandidate] = []
        for server in self._servers_of(options):
            listing = await self._joined_listing(server)
            skills = [*listing.skills, *await self._confirmed_skills(server, listing)]
            found.extend(self._candidate(server, skill) for skill in skills)
        return found

    async def find_uri(self, uri: str, options: SkillLookupOptions) -> SkillCandidate | None:
        """The skill at ``uri``: listed, else confirmed by `skills/get` (and counted among its
        server's skills from then on); ``None`` when no server serves it."""
        if not (servers := self._servers_of(options)):
            return None
        if not uri.endswith("/" + SKILL_FILE_NAME):
            raise Refusal(
                f"Error: {quote(uri)} is not the uri of a skill: a skill is named by the uri of "
                f'its {SKILL_FILE_NAME}, such as "skill://deploy-app/{SKILL_FILE_NAME}"'
            )
        for server in servers:  # a listed entry needs no request (the extension's own advice)
            for skill in (await self._joined_listing(server)).skills:
                if skill.uri == uri:
                    return self._candidate(server, skill)
        unasked: list[str] = []
        for server in servers:
            try:
                entry = await self._entry(server, uri)
            except _Unavailable as why:  # skipped, and told as any skipped server
                unasked.append(f'MCP server "{server.label}" could not be asked: {why}')
                continue
            if entry is not None:
                confirmed = (*(u for u in self._confirmed.get(server, ()) if u != uri), uri)
                self._confirmed[server] = confirmed[-MAX_CONFIRMED:]
                return self._candidate(server, entry)
        if unasked:
            gone = "is not served by any server of this session that could be asked"
            raise Refusal(f"Error: skill {quote(uri)} {gone}; {'; '.join(unasked)}")
        return None

    async def diagnose(self, options: SkillLookupOptions) -> tuple[Diagnostic, ...]:
        """Skipped servers and rejected entries of the last lookups."""
        found: list[Diagnostic] = []
        for state in self.states(options):
            if state.failure is not None:
                found.append(mcp_server_unavailable(state.server.label, state.failure))
            found.extend(state.rejected)
        return tuple(found)

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        """One `resources/read` of the ``SKILL.md``, capped and verified against the listing."""
        if not isinstance(locator := candidate.locator, McpLocator):
            return None
        name, limit = candidate.name, self._max_resource_bytes

        def over(size: int) -> Refusal:
            return Refusal(f'Error: skill "{name}" is {size} bytes, over the {limit}-byte limit')

        data = await self._fetch(locator, locator.skill.uri, f'skill "{name}"', limit, over)
        parsed = parse_skill_file(data.decode("utf-8", "replace")) if data is not None else None
        listed = canonical_json(locator.skill.parsed.fields)
        if not isinstance(parsed, ParsedSkill) or canonical_json(parsed.fields) != listed:
            raise self._changed(locator)
        values = shared_fields(candidate, SkillDefinition) | {"content": parsed.body, "path": None}
        return SkillDefinition(**values)

    async def read_path(self, candidate: SkillCandidate, path: str, *, limit: int) -> str:
        """A manifest file of the skill, verified (a dynamic skill's: any below its base uri)."""
        if not isinstance(locator := candidate.locator, McpLocator):
            raise Refusal(f'Error: skill "{candidate.name}" is not served by an MCP server')
        skill, name = locator.skill, candidate.name
        # As on disk, `scripts/` and `./notes.md` name `scripts` and `notes.md`; the tool has
        # refused absolute paths and `..` (`tool.check_resource_path`).
        segments = [part for part in path.split("/") if part not in ("", ".")]
        uri = skill.base_uri + "/".join(segments)
        if skill.files is not None and uri not in skill.files:
            missing = unlisted(skill, segments)
            raise unread_path(name, path, missing, limit=limit, within="the skill's manifest")

        def over(size: int) -> Refusal:
            return unread_path(name, path, ReadError(failure="too_large", size=size), limit=limit)

        data = await self._fetch(locator, uri, f'"{path}" of skill "{name}"', limit, over)
        if data is None:
            raise cannot_read(name, path, f"its server sent no text for {uri}")
        text = data.decode("utf-8", "replace")
        if skill.files is None:
            return f"[unverified: this skill's files are not listed by its server]\n{text}"
        return text

    async def load_sdk(self) -> None:
        """Import the MCP SDK now, in a worker thread (`AcpSkills.initialize` starts it)."""
        with contextlib.suppress(Exception):  # an `mcp` that does not import: each server says so
            await load_transport()

    def connect(self, server: object) -> None:
        """A session names ``server``: connect and list it in the background now."""
        if isinstance(server, McpServer) and server not in self._first:
            task = self._first[server] = asyncio.ensure_future(self._listing(server))
            task.add_done_callback(partial(self._first_done, server))

    async def share(self, server: McpServer, session: ClientSession) -> None:
        """Reach ``server`` over the agent's own handshaken ``session``, never closed here."""
        if session.server_capabilities is None:
            raise ValueError(
                f'the session lent for MCP server "{server.label}" has had no handshake: '
                "lend it after its discover()"
            )
        await self._cancel_first(server)
        self._lent[server] = session
        await self._close(server)

    def unshare(self, server: McpServer) -> None:
        """Stop using the session lent for ``server``."""
        self._lent.pop(server, None)

    async def release(self, server: object) -> None:
        """No session names ``server``: close it (unless fixed) and forget what it said."""
        if isinstance(server, McpServer) and server not in self._fixed:
            await self._cancel_first(server)
            self._forget(server)
            self._confirmed.pop(server, None)
            self.servers.pop(server, None)
            await self._close(server)

    def states(self, options: SkillLookupOptions) -> tuple[ServerState, ...]:
        """What is known of each server of ``options``, in order."""
        return tuple(self.servers.get(s) or ServerState(s) for s in self._servers_of(options))

    async def aclose(self) -> None:
        """Close every connection this provider opened."""
        await asyncio.gather(*(self._cancel_first(server) for server in list(self._first)))
        connections, self._connections, self._lent = list(self._connections.values()), {}, {}
        await asyncio.gather(*(connection.aclose() for connection in connections))

    async def _joined_listing(self, server: McpServer) -> Listing:
        if (task := self._first.get(server)) is not None:
            await asyncio.wait({task})  # a cancelled lookup leaves it going
            if not task.cancelled() and task.exception() is None:
                return task.result()
        return await self._listing(server)

    def _first_done(self, server: McpServer, task: asyncio.Future[Listing]) -> None:
        if self._first.get(server) is task:
            del self._first[server]
        if not task.cancelled():
            task.exception()  # retrieved: a lookup that comes later lists anew

    async def _cancel_first(self, server: McpServer) -> None:
        if (task := self._first.pop(server, None)) is not None:
            task.cancel()
            await asyncio.wait({task})

    async def _listing(self, server: McpServer) -> Listing:
        if (kept := self._fresh(server, "")) is not None:
            return kept
        if _resting(state := self._state(server)):
            return NOTHING
        try:
            reached = await self._reach(server)
            from .transport import list_skills

            listing = await self._ask(server, reached, list_skills) or NOTHING
        except _Unavailable as unavailable:
            await self._skip(server, str(unavailable))
            return NOTHING
        rejected = tuple(mcp_skill_invalid(server.label, e.uri, e.reason) for e in listing.rejected)
        if rejected != state.rejected:  # told once, not at every lookup
            for record in rejected:
                log_diagnostic(_log, record, server=server.label)
        state.failure, state.failed_at = None, None
        state.skills, state.rejected = len(listing.skills), rejected
        self._keep(server, "", listing)
        return listing

    async def _confirmed_skills(
        self, server: McpServer, listing: Listing
    ) -> tuple[ListedSkill, ...]:
        # As each entry says now: one no longer served is forgotten, one unreadable sits out.
        listed = {skill.uri for skill in listing.skills}
        found: list[ListedSkill] = []
        for uri in [uri for uri in self._confirmed.get(server, ()) if uri not in listed]:
            try:
                entry = await self._entry(server, uri)
            except (_Unavailable, Refusal):
                continue
            if entry is None:
                self._confirmed[server] = tuple(u for u in self._confirmed[server] if u != uri)
            else:
                found.append(entry)
        return tuple(found)

    async def _entry(self, server: McpServer, uri: str) -> ListedSkill | None:
        # `skills/get`, kept while fresh; None: no skill there, or no skills extension.
        if (got := self._fresh(server, uri)) is None:
            if _resting(state := self._state(server)):
                raise _Unavailable(state.failure or "it failed a moment ago")
            try:
                reached = await self._reach(server)
                from .transport import get_skill

                got = await self._ask(server, reached, partial(get_skill, uri=uri))
            except _Unavailable as unavailable:
                await self._skip(server, str(unavailable))
                raise
            if got is None:
                return None
            self._keep(server, uri, got)
        if got.rejected:
            raise Refusal(
                f'Error: MCP server "{server.label}" serves {quote(uri)}, but its entry cannot '
                f"be used: {got.rejected[0].reason}"
            )
        return got.skills[0]

    async def _fetch(
        self, locator: McpLocator, uri: str, about: str, limit: int, over: Callable[[int], Refusal]
    ) -> bytes | None:
        # Capped by its listed size and its size read, verified; None: the server sent no text.
        skill = locator.skill
        listed = skill.files.get(uri) if skill.files is not None else None
        if listed is not None and listed.size > limit:
            raise over(listed.size)
        try:
            reached = await self._reach(locator.server)
            from .transport import read_text

            data = await self._ask(locator.server, reached, partial(read_text, uri=uri))
        except _Unavailable as why:
            label = locator.server.label
            raise Refusal(f'Error: cannot read {about} from MCP server "{label}": {why}') from None
        if data is not None and len(data) > limit:
            raise over(len(data))
        if data is not None and listed is not None:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            if (len(data), digest) != (listed.size, listed.digest):
                raise self._changed(locator)
        return data

    def _changed(self, locator: McpLocator) -> Refusal:
        self._forget(locator.server)  # every answer it gave is suspect now
        name = locator.skill.parsed.name
        return Refusal(f'Error: skill "{name}" changed on its server since it was listed')

    async def _reach(self, server: McpServer) -> McpConnection | ClientSession:
        # The session lent for it, else its connection, started first (a stdio server spawns)
        # while the SDK loads off the event loop.
        reached: McpConnection | ClientSession | None = self._lent.get(server)
        if reached is None:
            reached = self._connections.get(server)
            if reached is None or reached.failed:
                reached = McpConnection(server, self._timeout, self._transport)
                self._connections[server] = reached
        try:
            await load_transport()
        except Exception as error:  # an `mcp` found that does not import: the server is skipped
            raise _Unavailable(f"the MCP SDK cannot be loaded: {leaf_reason(error)}") from None
        return reached

    async def _ask(
        self,
        server: McpServer,
        reached: McpConnection | ClientSession,
        request: Callable[[ClientSession], Awaitable[_T]],
    ) -> _T | None:
        # The handshake and `request` under the deadline; None: no skills extension.
        state = self._state(server)
        try:
            with anyio.move_on_after(self._timeout):
                session = await reached.session() if isinstance(reached, McpConnection) else reached
                capabilities = session.server_capabilities
                extensions = (capabilities.extensions if capabilities else None) or {}
                state.connected, state.supports_skills = True, SKILLS_EXTENSION in extensions
                return await request(session) if state.supports_skills else None
            reason = f"no answer within {self._timeout:g} s"
        except ResponseTooLarge:  # a listing over the cap, its pages counted together
            reason = TOO_LARGE
        except Exception as error:
            ended = reached.ended if isinstance(reached, McpConnection) else None
            reason = ended or leaf_reason(error)
        if reason == TOO_LARGE:
            await self._fail(server, reason)
        raise _Unavailable(reason)

    async def _skip(self, server: McpServer, reason: str) -> None:
        # A request it failed: told (`/skills`, doctor, the log), and the server left alone.
        log_diagnostic(_log, mcp_server_unavailable(server.label, reason), server=server.label)
        await self._fail(server, reason)

    async def _fail(self, server: McpServer, reason: str) -> None:
        state = self._state(server)
        state.connected, state.failure = False, reason
        # Not asked again for a while; one that sent too much, not while a session names it.
        state.failed_at = math.inf if reason == TOO_LARGE else time.monotonic()
        await self._close(server, at_once=True)  # its process group ends now

    async def _close(self, server: McpServer, *, at_once: bool = False) -> None:
        if (found := self._connections.pop(server, None)) is not None:
            await found.aclose(at_once=at_once)

    def _state(self, server: McpServer) -> ServerState:
        return self.servers.setdefault(server, ServerState(server))

    def _fresh(self, server: McpServer, uri: str) -> Listing | None:
        # Every stale answer goes at each lookup, of whichever server: none outlives its ttlMs.
        now = time.monotonic()
        for key in [key for key, (until, _) in self._kept.items() if until <= now]:
            del self._kept[key]
        for owner in (server, server.url):
            if (kept := self._kept.get((owner, uri))) is not None:
                return kept[1]
        return None

    def _keep(self, server: McpServer, uri: str, listing: Listing) -> None:
        # A private answer for the configuration that asked (its env or headers authorize it);
        # a public one of an HTTP server for its url (a stdio server is a process of its own).
        if listing.ttl_ms > 0:
            owner = server.url if listing.scope == "public" and server.url is not None else server
            self._kept[(owner, uri)] = (time.monotonic() + listing.ttl_ms / 1000, listing)

    def _forget(self, server: McpServer) -> None:
        for key in [key for key in self._kept if key[0] in (server, server.url)]:
            del self._kept[key]

    def _candidate(self, server: McpServer, skill: ListedSkill) -> SkillCandidate:
        # allowed-tools is ignored: a server never widens what the agent may do.
        return build_skill(
            SkillCandidate,
            self.name,
            skill.parsed,
            f"mcp:{server.label}",
            UrlResource(url=skill.base_uri),
            None,
            rank=MCP_RANK,
            locator=McpLocator(server, skill),
        )

    def _servers_of(self, options: SkillLookupOptions) -> tuple[McpServer, ...]:
        extra = (s for s in options.servers if isinstance(s, McpServer) and s not in self._fixed)
        return (*self._fixed, *extra)


def _resting(state: ServerState) -> bool:
    # A server that failed is left alone for a while (one that sent too much: for good).
    return state.failed_at is not None and time.monotonic() - state.failed_at < RETRY_AFTER
