"""`McpSkillProvider`: the skills of a session's MCP servers, listed lazily and loaded with
verification (contract §14, §14a), or found by the uri of their ``SKILL.md`` (`skills/get`).
Rank 600: every local root wins a name clash. Every request to a server is under the deadline;
what a server gets wrong is a diagnostic, never a failed lookup."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Final, TypeVar

import anyio

from ..content import cannot_read, unread_path
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
from .config import McpServer
from .kept import KeptAnswers
from .listing import (
    NOTHING,
    GotSkill,
    ListedSkill,
    Listing,
    get_skill,
    list_skills,
    matches,
    text_of,
    unlisted,
)
from .locator import McpLocator as McpLocator
from .locator import ServerState as ServerState
from .pool import McpConnection, McpPool, Underway
from .transport import TOO_LARGE, ResponseTooLarge, TransportFactory

# The SDK loads with this module, as an agent that may meet MCP servers starts: never later,
# when the code on disk may no longer be the code that started (tests/test_private_checkout.py).
if TYPE_CHECKING:
    from mcp import ClientSession


MCP_RANK: Final = 600
MCP_SOURCE: Final = "mcp"
LISTING_DEADLINE: Final = 10.0
RETRY_AFTER: Final = 60.0  # a failed server is left alone this long
DEFAULT_MAX_RESOURCE_BYTES: Final = 1_048_576  # as the `skill` tool's cap on a file
# The uris a server confirmed by `skills/get` that it does not list, remembered per server (the
# oldest forgotten first): each is asked about again whenever its entry is stale.
MAX_CONFIRMED: Final = 32

_log = get_logger(__name__)
_T = TypeVar("_T")


class McpSkillProvider:
    """Lists and loads skills of ``servers`` (for every lookup, as ``--mcp-server`` gives
    them) and then of those in ``options.servers`` (the session's `McpServer` values) through
    ``pool``. Each request to a server (connect, list, read, close) is under ``timeout``
    seconds; a ``SKILL.md`` or file over ``max_resource_bytes`` is refused.

    Without a ``pool``, one is made on first use, which opens each connection through
    ``transport`` (an `acp_skills.mcp.transport.TransportFactory`: given a server's
    configuration, the streams of an MCP client session); by default the server's command is
    run over stdio, or its url reached over streamable HTTP.

    Raises:
        ValueError: both a ``pool`` and a ``transport`` were given (a pool has its own).
    """

    def __init__(
        self,
        pool: McpPool | None = None,
        *,
        servers: Sequence[McpServer] = (),
        timeout: float = LISTING_DEADLINE,
        max_resource_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
        transport: TransportFactory | None = None,
    ) -> None:
        if pool is not None and transport is not None:
            raise ValueError("give an MCP pool or a transport, not both: a pool has its own")
        self.name = "mcp"
        self._opened = pool
        self._transport = transport
        self._fixed = tuple(servers)
        self._timeout = timeout
        self._max_resource_bytes = max_resource_bytes
        self._kept = KeptAnswers()
        self._first_listings = Underway[Listing]()  # started as a session names a server
        self._confirmed: dict[McpServer, OrderedDict[str, None]] = {}
        self.servers: dict[McpServer, ServerState] = {}

    @property
    def _pool(self) -> McpPool:
        if self._opened is None:
            self._opened = McpPool(timeout=self._timeout, transport=self._transport)
        return self._opened

    def cacheable(self, options: SkillLookupOptions) -> bool:
        # The listing keeps its own ttlMs; the registry asks again every time there are servers.
        return not self._servers_of(options)

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Each server's skills in the session's order, the ones it confirmed by uri after the
        ones it lists; a failing server is skipped, told."""
        found: list[SkillCandidate] = []
        for server in self._servers_of(options):
            listing = await self._first_listings.join(server, partial(self._listing, server))
            skills = [*listing.skills, *await self._confirmed_skills(server, listing)]
            found.extend(self._candidate(server, skill) for skill in skills)
        return found

    async def find_uri(self, uri: str, options: SkillLookupOptions) -> SkillCandidate | None:
        """The skill whose ``SKILL.md`` is at ``uri`` on a server of ``options``: the first
        server (in the session's order) that lists it, else the first that answers `skills/get`
        for it, which from then on counts it among its skills. ``None`` when none serves it; a
        `Refusal` for a uri that names no ``SKILL.md``, an entry that cannot be used, or servers
        that could not be asked."""
        if not (servers := self._servers_of(options)):
            return None
        if not uri.endswith("/" + SKILL_FILE_NAME):
            raise Refusal(
                f"Error: {quote(uri)} is not the uri of a skill: a skill is named by the uri of "
                f'its {SKILL_FILE_NAME}, such as "skill://deploy-app/{SKILL_FILE_NAME}"'
            )
        for server in servers:  # a listed entry needs no request (the extension's own advice)
            listed = await self._first_listings.join(server, partial(self._listing, server))
            for skill in listed.skills:
                if skill.uri == uri:
                    return self._candidate(server, skill)
        unasked: list[str] = []
        for server in servers:
            try:
                entry = await self._entry(server, uri)
            except _Unavailable as unavailable:
                unasked.append(f'"{server.label}": {unavailable.reason}')
                continue
            if entry is not None:
                confirmed = self._confirmed.setdefault(server, OrderedDict())
                confirmed[uri] = None
                confirmed.move_to_end(uri)
                while len(confirmed) > MAX_CONFIRMED:
                    confirmed.popitem(last=False)
                return self._candidate(server, entry)
        if unasked:
            raise Refusal(
                f"Error: no MCP server of this session could be asked about {quote(uri)}: "
                + "; ".join(unasked)
            )
        return None

    async def diagnose(self, options: SkillLookupOptions) -> tuple[Diagnostic, ...]:
        """Each server of ``options`` that the last lookup skipped (`mcp-server-unavailable`)
        and each entry its last listing left out (`mcp-skill-invalid`); asks no server."""
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
        locator = candidate.locator
        if not isinstance(locator, McpLocator):
            return None
        server, skill, name = locator.server, locator.skill, candidate.name
        listed = skill.files.get(skill.uri) if skill.files is not None else None
        limit = self._max_resource_bytes
        if listed is not None and listed.size > limit:
            raise Refusal(_over(f'skill "{name}"', listed.size, limit))
        data = await self._read(locator, skill.uri, f'skill "{name}"')
        if data is not None and len(data) > limit:
            raise Refusal(_over(f'skill "{name}"', len(data), limit))
        text = data.decode("utf-8", "replace") if data is not None else ""
        parsed = parse_skill_file(text) if data is not None else None
        if (
            not isinstance(parsed, ParsedSkill)
            or (listed is not None and data is not None and not matches(data, listed))
            or canonical_json(parsed.fields) != canonical_json(skill.frontmatter)
        ):
            self._kept.forget(server)
            raise Refusal(f'Error: skill "{name}" changed on its server since it was listed')
        values = shared_fields(candidate, SkillDefinition)
        values.update(content=parsed.body, path=None)
        return SkillDefinition(**values)

    async def read_path(self, candidate: SkillCandidate, path: str, *, limit: int) -> str:
        """The text of ``path`` (relative to the skill's base uri): only a manifest file, and
        verified like the ``SKILL.md``; a ``"dynamic"`` skill's file is size-capped and its text
        says it is unverified. Anything else is a `Refusal`, in the words a skill on disk gets
        (`acp_skills.content.unread_path`): a directory of the manifest is answered with its
        names, a path that differs from a listed one only in case with that one."""
        locator = candidate.locator
        if not isinstance(locator, McpLocator):
            raise Refusal(f'Error: skill "{candidate.name}" is not served by an MCP server')
        skill, name = locator.skill, candidate.name
        # As on disk, `scripts/` and `./notes.md` name `scripts` and `notes.md`.
        segments = [part for part in path.split("/") if part not in ("", ".")]
        if path.startswith("/") or ".." in segments:
            raise cannot_read(name, path, "not a relative path")
        uri = skill.base_uri + "/".join(segments)
        listed = skill.files.get(uri) if skill.files is not None else None
        if skill.files is not None and listed is None:
            missing = unlisted(skill, segments)
            raise unread_path(name, path, missing, limit=limit, within="the skill's manifest")
        if listed is not None and listed.size > limit:
            raise unread_path(name, path, _too_large(listed.size), limit=limit)
        data = await self._read(locator, uri, f'"{path}" of skill "{name}"')
        if data is None:
            raise cannot_read(name, path, f"its server sent no text for {uri}")
        if len(data) > limit:
            raise unread_path(name, path, _too_large(len(data)), limit=limit)
        if listed is None:
            text = data.decode("utf-8", "replace")
            return f"[unverified: this skill's files are not listed by its server]\n{text}"
        if not matches(data, listed):
            self._kept.forget(locator.server)
            raise Refusal(f'Error: skill "{name}" changed on its server since it was listed')
        return data.decode("utf-8", "replace")

    def connect(self, server: object) -> None:
        """A session names ``server``: connect and list it in the background now, so that the
        session's first lookup waits only for what is not ready yet (and takes that listing if
        it comes while it is under way). What fails is told as by a lookup."""
        if isinstance(server, McpServer):
            self._first_listings.start(server, partial(self._listing, server))

    async def share(self, server: McpServer, session: ClientSession) -> None:
        """List and load ``server``'s skills over ``session``, a client session the agent keeps
        open for tools of its own: the server is connected once (`McpPool.share`)."""
        await self._first_listings.cancel(server)  # it would go over the connection that goes
        await self._pool.share(server, session)

    def unshare(self, server: McpServer) -> None:
        """Stop using the session shared for ``server`` (`McpPool.unshare`)."""
        self._pool.unshare(server)

    async def release(self, server: object) -> None:
        """No session names ``server`` any more: close its connection within the deadline (a
        stdio server's process group ends), unless it is one of the fixed servers every lookup
        uses; a shared session stays open. What it failed at is forgotten: a session naming it
        again starts afresh."""
        if isinstance(server, McpServer) and server not in self._fixed:
            await self._first_listings.cancel(server)
            self._kept.forget(server)
            self._confirmed.pop(server, None)
            self.servers.pop(server, None)
            await self._pool.release(server)

    def states(self, options: SkillLookupOptions) -> tuple[ServerState, ...]:
        """What is known of each server a lookup with ``options`` uses, in its order."""
        return tuple(
            self.servers.get(server) or ServerState(server) for server in self._servers_of(options)
        )

    async def aclose(self) -> None:
        """Close every connection this provider opened (each within the deadline)."""
        await self._first_listings.aclose()
        if self._opened is not None:
            await self._opened.aclose()

    async def _listing(self, server: McpServer) -> Listing:
        state = self.servers.setdefault(server, ServerState(server))
        if (kept := self._kept.listing(server)) is not None:
            return kept
        if _resting(state):
            return NOTHING

        async def listed(session: ClientSession, connection: McpConnection) -> Listing:
            state.connected, state.supports_skills = True, connection.supports_skills(session)
            if not state.supports_skills:
                return NOTHING
            return await list_skills(session)

        try:
            listing = await self._ask(server, listed)
        except _Unavailable as unavailable:
            state.connected, state.failure = False, unavailable.reason
            # Not asked again for a while; a server that sent too much, never in this session.
            state.failed_at = math.inf if unavailable.spent else time.monotonic()
            record = mcp_server_unavailable(server.label, unavailable.reason)
            log_diagnostic(_log, record, server=server.label)
            await self._pool.release(server, at_once=True)  # its process group ends now
            # The others still count; `cacheable` keeps this degraded catalog out of the cache.
            return NOTHING
        rejected = tuple(
            mcp_skill_invalid(server.label, entry.uri, entry.reason) for entry in listing.rejected
        )
        if rejected != state.rejected:  # told once, not at every lookup
            for record in rejected:
                log_diagnostic(_log, record, server=server.label)
        state.failure, state.failed_at = None, None
        state.skills, state.rejected = len(listing.skills), rejected
        self._kept.keep_listing(server, listing)
        return listing

    async def _confirmed_skills(
        self, server: McpServer, listing: Listing
    ) -> tuple[ListedSkill, ...]:
        # The uris the server confirmed and does not list, each as its entry says now: one it
        # no longer serves is forgotten; one it cannot be asked about sits this lookup out.
        listed = {skill.uri for skill in listing.skills}
        found: tuple[ListedSkill, ...] = ()
        confirmed = self._confirmed.get(server, OrderedDict())
        for uri in [uri for uri in confirmed if uri not in listed]:
            try:
                entry = await self._entry(server, uri)
            except (_Unavailable, Refusal):
                continue
            if entry is None:
                confirmed.pop(uri, None)
            else:
                found += (entry,)
        return found

    async def _entry(self, server: McpServer, uri: str) -> ListedSkill | None:
        """The server's own entry for ``uri`` (`skills/get`, kept while fresh); ``None`` when
        it serves no skill there or declares no skills extension."""
        if (kept := self._kept.entry(server, uri)) is not None:
            return kept
        state = self.servers.setdefault(server, ServerState(server))
        if _resting(state):
            raise _Unavailable(state.failure or "it failed a moment ago", spent=False)

        async def got(session: ClientSession, connection: McpConnection) -> GotSkill | None:
            if not connection.supports_skills(session):
                return None
            return await get_skill(session, uri)

        try:
            answer = await self._ask(server, got)
        except _Unavailable as unavailable:
            await self._end_if_spent(server, unavailable)
            raise
        if answer is None:
            return None
        if not isinstance(entry := answer.entry, ListedSkill):
            raise Refusal(
                f'Error: MCP server "{server.label}" serves {quote(uri)}, but its entry cannot '
                f"be used: {entry.reason}"
            )
        self._kept.keep_entry(server, entry, answer.ttl_ms, answer.scope)
        return entry

    async def _read(self, locator: McpLocator, uri: str, about: str) -> bytes | None:
        """The text at ``uri`` as UTF-8 bytes (``None``: the server sent none)."""

        async def read(session: ClientSession, connection: McpConnection) -> bytes | None:
            del connection
            return text_of(await session.read_resource(uri), uri)

        try:
            return await self._ask(locator.server, read)
        except _Unavailable as unavailable:
            await self._end_if_spent(locator.server, unavailable)
            raise Refusal(
                f'Error: cannot read {about} from MCP server "{locator.server.label}": '
                f"{unavailable.reason}"
            ) from None

    async def _end_if_spent(self, server: McpServer, unavailable: _Unavailable) -> None:
        if unavailable.spent:  # its use ends, as if a listing had been that large
            state = self.servers.setdefault(server, ServerState(server))
            state.connected, state.failure = False, unavailable.reason
            state.failed_at = math.inf
            await self._pool.release(server, at_once=True)

    async def _ask(
        self, server: McpServer, request: Callable[[ClientSession, McpConnection], Awaitable[_T]]
    ) -> _T:
        # Connecting and the request, under the deadline; `_Unavailable` says why not, in words
        # for a person (a server that exited: its status and the end of its stderr).
        connection = self._pool.connection(server)
        try:
            with anyio.move_on_after(self._timeout):
                return await request(await connection.session(), connection)
        except ResponseTooLarge:  # a listing over the cap, its pages counted together
            raise _Unavailable(TOO_LARGE, spent=True) from None
        except Exception as error:
            reason = connection.ended or _leaf_reason(error)
        else:  # the deadline passed (an answer returns above)
            reason = f"no answer within {self._timeout:g} s"
        raise _Unavailable(reason, spent=connection.ended == TOO_LARGE)

    def _candidate(self, server: McpServer, skill: ListedSkill) -> SkillCandidate:
        # allowed-tools is ignored: a server never widens what the agent may do.
        return build_skill(
            SkillCandidate,
            self.name,
            skill.parsed,
            f"{MCP_SOURCE}:{server.label}",
            UrlResource(url=skill.base_uri),
            None,
            rank=MCP_RANK,
            locator=McpLocator(server=server, skill=skill),
        )

    def _servers_of(self, options: SkillLookupOptions) -> tuple[McpServer, ...]:
        # The fixed servers first; a session naming one of them again does not list it twice.
        extra = (s for s in options.servers if isinstance(s, McpServer) and s not in self._fixed)
        return (*self._fixed, *extra)


def _resting(state: ServerState) -> bool:
    # A server that failed is left alone for a while (one that sent too much: for good).
    return state.failed_at is not None and time.monotonic() - state.failed_at < RETRY_AFTER


class _Unavailable(Exception):
    def __init__(self, reason: str, *, spent: bool) -> None:
        super().__init__(reason)
        self.reason, self.spent = reason, spent


def _leaf_reason(error: BaseException) -> str:
    # The SDK's task groups wrap the real failure: name the first leaf, not "unhandled errors".
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}" if str(error) else repr(error)


def _too_large(size: int) -> ReadError:
    return ReadError(failure="too_large", size=size)


def _over(what: str, size: int, limit: int) -> str:
    return f"Error: {what} is {size} bytes, over the {limit}-byte limit"
