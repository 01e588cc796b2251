"""`McpSkillProvider`: the skills of MCP servers (contract §14, §14a, §16; docs/mcp.md)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Final, TypeVar

import anyio

from ..content import DEFAULT_MAX_RESOURCE_BYTES, cannot_read, unread_path
from ..diagnostics import Diagnostic, log_diagnostic, mcp_server_unavailable, mcp_skill_invalid
from ..errors import ReadError, Refusal
from ..frontmatter import ParsedSkill, build_skill, canonical_json, parse_skill_file
from ..fs import listed_entries
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
from .config import McpServer
from .listing import NOTHING, SKILLS_EXTENSION, ListedSkill, Listing
from .listing import McpLocator as McpLocator  # documented here too (docs/mcp.md)
from .pool import Pool, TooLarge, Unavailable, leaf_reason, load_sdk

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
        self._pool = Pool(timeout, transport)
        self._listings: dict[McpServer, asyncio.Task[Listing]] = {}  # the last one started
        # (configuration, or a public answer's url; uri, "" for the listing) -> (until, answer)
        self._kept: dict[tuple[Hashable, str], tuple[float, Listing]] = {}
        self._confirmed: dict[McpServer, list[str]] = {}  # oldest first

    def cacheable(self, options: SkillLookupOptions) -> bool:
        # Each answer keeps its own ttlMs; the registry asks again every time there are servers.
        return not self._servers_of(options)

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Each server's listed skills, then those it confirmed by uri; a failing one skipped."""
        found: list[SkillCandidate] = []
        for server in self._servers_of(options):
            skills = list((await self._listing(server)).skills)
            listed = {skill.uri for skill in skills}
            for uri in [uri for uri in self._confirmed.get(server, ()) if uri not in listed]:
                # As its entry says now: one no longer served is forgotten, one unusable sits out.
                with contextlib.suppress(Unavailable, Refusal):
                    if (entry := await self._entry(server, uri)) is not None:
                        skills.append(entry)
                    # Another lookup or a release may have forgotten it during the await.
                    elif uri in (confirmed := self._confirmed.get(server, [])):
                        confirmed.remove(uri)
            found.extend(self._candidate(server, skill) for skill in skills)
        return found

    async def find_uri(self, uri: str, options: SkillLookupOptions) -> SkillCandidate | None:
        """The skill at ``uri``: listed, else confirmed by `skills/get` (then listed too)."""
        if not (servers := self._servers_of(options)):
            return None
        if not uri.endswith("/" + SKILL_FILE_NAME):
            raise Refusal(
                f"Error: {quote(uri)} is not the uri of a skill: a skill is named by the uri of "
                f'its {SKILL_FILE_NAME}, such as "skill://deploy-app/{SKILL_FILE_NAME}"'
            )
        for server in servers:  # a listed entry needs no request (the extension's own advice)
            for skill in (await self._listing(server)).skills:
                if skill.uri == uri:
                    return self._candidate(server, skill)
        unasked: list[str] = []
        for server in servers:
            try:
                entry = await self._entry(server, uri)
            except Unavailable as why:  # skipped, and told as any skipped server
                unasked.append(f'MCP server "{server.label}" could not be asked: {why}')
                continue
            if entry is not None:
                confirmed = [u for u in self._confirmed.get(server, ()) if u != uri] + [uri]
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

    async def get(self, candidate: SkillCandidate, options: SkillLookupOptions) -> SkillDefinition:
        """One `resources/read` of the ``SKILL.md``, capped and verified against the listing."""
        locator = candidate.locator
        assert isinstance(locator, McpLocator)  # the registry routes only this provider's skills
        name, limit = candidate.name, self._max_resource_bytes

        def over(size: int) -> Refusal:
            return Refusal(f'Error: skill "{name}" is {size} bytes, over the {limit}-byte limit')

        data = await self._read(locator, locator.skill.uri, f'skill "{name}"', limit, over)
        parsed = parse_skill_file(data.decode("utf-8", "replace")) if data is not None else None
        listed = canonical_json(locator.skill.parsed.fields)
        if not isinstance(parsed, ParsedSkill) or canonical_json(parsed.fields) != listed:
            said = "no text" if data is None else "frontmatter other than the listed one"
            raise self._changed(locator, f"{locator.skill.uri} was read with {said}")
        values = shared_fields(candidate, SkillDefinition) | {"content": parsed.body, "path": None}
        return SkillDefinition(**values)

    async def read_path(self, candidate: SkillCandidate, path: str, *, limit: int) -> str:
        """A manifest file of the skill, verified (a dynamic skill's: any below its base uri)."""
        locator = candidate.locator
        assert isinstance(locator, McpLocator)  # the registry routes only this provider's skills
        skill, name = locator.skill, candidate.name
        # As on disk, `scripts/` and `./notes.md` name `scripts` and `notes.md`; the tool has
        # refused absolute paths and `..` (`content.check_resource_path`).
        segments = [part for part in path.split("/") if part not in ("", ".")]
        uri = skill.base_uri + "/".join(segments)
        if skill.files is not None and uri not in skill.files:
            # A folder of the manifest answers with the names it lists there.
            folder = uri.rstrip("/") + "/"
            below = [u[len(folder) :].split("/") for u in skill.files if u.startswith(folder)]
            names = {part[0] + ("/" if len(part) > 1 else "") for part in below}
            missing = ReadError(failure="directory", entries=listed_entries(names))
            if not names:
                missing = ReadError(failure="not_found")
            raise unread_path(name, path, missing, limit=limit, within="the skill's manifest")

        def over(size: int) -> Refusal:
            return unread_path(name, path, ReadError(failure="too_large", size=size), limit=limit)

        data = await self._read(locator, uri, f'"{path}" of skill "{name}"', limit, over)
        if data is None:
            raise cannot_read(name, path, f"its server sent no text for {uri}")
        text = data.decode("utf-8", "replace")
        if skill.files is None:
            return f"[unverified: this skill's files are not listed by its server]\n{text}"
        return text

    async def load_sdk(self) -> None:
        """Import the MCP SDK now, in a worker thread (`AcpSkills.initialize` starts it)."""
        with contextlib.suppress(Unavailable):  # an `mcp` that does not import: each server says so
            await load_sdk()

    def connect(self, server: object) -> None:
        """A session names ``server``: list it in the background now; a lookup meanwhile joins."""
        task = self._listings.get(server) if isinstance(server, McpServer) else None
        if isinstance(server, McpServer) and (task is None or task.done()):
            self._listings[server] = asyncio.ensure_future(self._list(server))

    async def share(self, server: McpServer, session: ClientSession) -> None:
        """Reach ``server`` over the agent's own handshaken ``session``, never closed here."""
        if session.server_capabilities is None:
            raise ValueError(
                f'the session lent for MCP server "{server.label}" has had no handshake: '
                "lend it after its discover()"
            )
        await self._stop_listing(server)
        self._pool.lent[server] = session
        await self._pool.close(server)

    def unshare(self, server: McpServer) -> None:
        """Stop using the session lent for ``server``."""
        self._pool.lent.pop(server, None)

    async def release(self, server: object) -> None:
        """No session names ``server``: close it (unless fixed) and forget what it said."""
        if isinstance(server, McpServer) and server not in self._fixed:
            await self._stop_listing(server)
            self._forget(server)
            self._confirmed.pop(server, None)
            self.servers.pop(server, None)
            await self._pool.close(server)

    def states(self, options: SkillLookupOptions) -> tuple[ServerState, ...]:
        """What is known of each server of ``options``, in order."""
        return tuple(self.servers.get(s) or ServerState(s) for s in self._servers_of(options))

    async def aclose(self) -> None:
        """Close every connection this provider opened."""
        await asyncio.gather(*(self._stop_listing(server) for server in list(self._listings)))
        await self._pool.aclose()

    async def _listing(self, server: McpServer) -> Listing:
        self.connect(server)
        task = self._listings[server]
        await asyncio.wait({task})  # a cancelled lookup leaves it going
        return await self._list(server) if task.cancelled() else task.result()

    async def _stop_listing(self, server: McpServer) -> None:
        if (task := self._listings.pop(server, None)) is not None:
            task.cancel()
            await asyncio.wait({task})

    async def _list(self, server: McpServer) -> Listing:
        if (kept := self._fresh(server, "")) is not None:
            return kept
        try:
            listing = await self._ask(server, lambda sdk, session: sdk.list_skills(session))
        except Unavailable:
            return NOTHING
        listing, state = listing or NOTHING, self._state(server)
        rejected = tuple(mcp_skill_invalid(server.label, e.uri, e.reason) for e in listing.rejected)
        if rejected != state.rejected:  # told once, not at every lookup
            for record in rejected:
                log_diagnostic(_log, record, server=server.label)
        state.failure, state.failed_at = None, None
        state.skills, state.rejected = len(listing.skills), rejected
        self._keep(server, "", listing)
        return listing

    async def _entry(self, server: McpServer, uri: str) -> ListedSkill | None:
        # `skills/get`, kept while fresh; None: no skill there, or no skills extension.
        if (got := self._fresh(server, uri)) is None:
            got = await self._ask(server, lambda sdk, session: sdk.get_skill(session, uri))
            if got is None:
                return None
            self._keep(server, uri, got)
        if got.rejected:
            raise Refusal(
                f'Error: MCP server "{server.label}" serves {quote(uri)}, but its entry cannot '
                f"be used: {got.rejected[0].reason}"
            )
        return got.skills[0]

    async def _read(
        self, locator: McpLocator, uri: str, about: str, limit: int, over: Callable[[int], Refusal]
    ) -> bytes | None:
        # Capped by its listed size and its size read, verified; None: the server sent no text.
        listed = (locator.skill.files or {}).get(uri)
        if listed is not None and listed.size > limit:
            raise over(listed.size)
        try:
            read: bytes | None = await self._ask(
                locator.server, lambda sdk, session: sdk.read_text(session, uri), skip=False
            )
        except Unavailable as why:
            label = locator.server.label
            raise Refusal(f'Error: cannot read {about} from MCP server "{label}": {why}') from None
        if read is not None and len(read) > limit:
            raise over(len(read))
        if read is None or listed is None:  # no text, or a dynamic skill's: nothing to verify
            return read
        if len(read) != listed.size:
            raise self._changed(locator, f"{uri} is {len(read)} bytes, listed as {listed.size}")
        if (digest := "sha256:" + hashlib.sha256(read).hexdigest()) != listed.digest:
            raise self._changed(locator, f"{uri} has the digest {digest}, not the listed one")
        return read

    def _changed(self, locator: McpLocator, why: str) -> Refusal:
        self._forget(locator.server)  # every answer it gave is suspect now
        name, label = locator.skill.parsed.name, locator.server.label
        said = f'changed on its server since it was listed (MCP server "{label}": {why})'
        return Refusal(f'Error: skill "{name}" {said}')

    async def _ask(
        self,
        server: McpServer,
        request: Callable[[ModuleType, ClientSession], Awaitable[_T]],
        *,
        skip: bool = True,
    ) -> _T | None:
        # `request` under the deadline; None: no skills extension. A failure raises `Unavailable`
        # and, with `skip`, leaves the server alone a while.
        state = self._state(server)
        if state.failed_at is not None and time.monotonic() - state.failed_at < RETRY_AFTER:
            raise Unavailable(state.failure or "it failed a moment ago")
        try:
            with anyio.move_on_after(self._timeout):
                session, sdk = await self._pool.session(server)
                capabilities = session.server_capabilities
                extensions = (capabilities.extensions if capabilities else None) or {}
                state.connected, state.supports_skills = True, SKILLS_EXTENSION in extensions
                return await request(sdk, session) if state.supports_skills else None
            why: Exception = Unavailable(f"no answer within {self._timeout:g} s")
        except Exception as error:
            why = self._pool.ended(server) or error
        reason, ends = leaf_reason(why), isinstance(why, TooLarge)  # `ends`: its use, for good
        if skip or ends:  # told (`/skills`, doctor, the log), its process ended
            log_diagnostic(_log, mcp_server_unavailable(server.label, reason), server=server.label)
            state.connected, state.failure = False, reason
            state.failed_at = math.inf if ends else time.monotonic()
            await self._pool.close(server, at_once=True)
        raise Unavailable(reason)

    def _state(self, server: McpServer) -> ServerState:
        return self.servers.setdefault(server, ServerState(server))

    def _fresh(self, server: McpServer, uri: str) -> Listing | None:
        # Every stale answer goes at each lookup, of whichever server: none outlives its ttlMs.
        now = time.monotonic()
        self._kept = {key: kept for key, kept in self._kept.items() if kept[0] > now}
        kept = self._kept.get((server, uri)) or self._kept.get((server.url, uri))
        return kept[1] if kept is not None else None

    def _keep(self, server: McpServer, uri: str, listing: Listing) -> None:
        # A private answer for the configuration that asked (its env or headers authorize it);
        # a public one of an HTTP server for its url (a stdio server is a process of its own).
        if listing.ttl_ms > 0:
            owner = server.url if listing.public and server.url is not None else server
            self._kept[(owner, uri)] = (time.monotonic() + listing.ttl_ms / 1000, listing)

    def _forget(self, server: McpServer) -> None:
        self._kept = {
            key: kept for key, kept in self._kept.items() if key[0] not in (server, server.url)
        }

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
