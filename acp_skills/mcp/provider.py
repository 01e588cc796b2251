"""`McpSkillProvider`: the skills of a session's MCP servers, listed lazily and loaded with
verification (contract §14, §14a). Rank 600: every local root wins a name clash. Every request
to a server is under the deadline; what a server gets wrong is a diagnostic, never a failed
lookup."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

import anyio

from .._scan import build_skill
from ..content import cannot_read, unread_path
from ..diagnostics import (
    Diagnostic,
    log_diagnostic,
    mcp_server_unavailable,
    mcp_skill_invalid,
)
from ..errors import ReadError, Refusal
from ..frontmatter import ParsedSkill, canonical_json, parse_skill_file
from ..model import SkillCandidate, SkillDefinition, SkillLookupOptions, UrlResource, shared_fields
from ..quiet_log import get_logger
from .config import McpServer
from .listing import NOTHING, ListedSkill, Listing, list_skills, matches, text_of, unlisted
from .pool import McpConnection, McpPool
from .transport import TOO_LARGE, TransportFactory

# The SDK loads with this module, as an agent that may meet MCP servers starts: never later,
# when the code on disk may no longer be the code that started (tests/test_private_checkout.py).
if TYPE_CHECKING:
    from mcp import ClientSession


MCP_RANK: Final = 600
# The pair trust keeps for a skill's listed frontmatter: its uri with this fragment.
FRONTMATTER_FRAGMENT: Final = "#frontmatter"
# The digest trust keeps for the SKILL.md of a skill listed without a manifest ("dynamic"): no
# listed digest looks like it, so a switch between the two is a change either way.
DYNAMIC_DIGEST: Final = "dynamic"
MCP_SOURCE: Final = "mcp"
LISTING_DEADLINE: Final = 10.0
RETRY_AFTER: Final = 60.0  # a failed server is left alone this long
DEFAULT_MAX_RESOURCE_BYTES: Final = 1_048_576  # as the `skill` tool's cap on a file

_log = get_logger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpLocator:
    """Where a candidate came from: what a load verifies against, and what trust keys on
    (`acp_skills.trust.ServedLocator`)."""

    server: McpServer
    skill: ListedSkill

    @property
    def server_label(self) -> str:
        return self.server.label

    @property
    def server_identity(self) -> str:
        return self.server.identity

    @property
    def skill_uri(self) -> str:
        return self.skill.uri

    @property
    def dynamic(self) -> bool:
        """Whether the server lists no manifest for the skill (``"resources": "dynamic"``):
        its files, ``SKILL.md`` included, are not verified, and the question that asks for
        trust should say so."""
        return self.skill.files is None

    served: frozenset[tuple[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        # The pairs trust keeps, worked out once (every lookup asks trust about every skill):
        # one for the listed frontmatter (the catalog's text comes from the listing, before any
        # file is read), and one for every listed file, or, for a dynamic skill, its SKILL.md
        # marked dynamic: a skill that switches between the two never keeps its trust.
        listed = canonical_json(self.skill.frontmatter)
        digest = "sha256:" + hashlib.sha256(listed.encode("utf-8", "surrogatepass")).hexdigest()
        pairs = {(self.skill.uri + FRONTMATTER_FRAGMENT, digest)}
        if self.skill.files is None:
            pairs.add((self.skill.uri, DYNAMIC_DIGEST))
        else:
            pairs.update((file.uri, file.digest) for file in self.skill.files.values())
        object.__setattr__(self, "served", frozenset(pairs))


@dataclass(slots=True)
class ServerState:
    """What `/skills` and doctor show of one server: how it fares, and the entries of its last
    listing that were left out (``rejected``)."""

    server: McpServer
    connected: bool = False
    skills: int = 0
    failure: str | None = None
    failed_at: float | None = None
    supports_skills: bool | None = None
    rejected: tuple[Diagnostic, ...] = ()


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
        self._listings: dict[McpServer, tuple[float, Listing]] = {}
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
        """Each server's skills in the session's order; a failing server is skipped, told."""
        found: list[SkillCandidate] = []
        for server in self._servers_of(options):
            listing = await self._listing(server)
            found.extend(self._candidate(server, skill) for skill in listing.skills)
        return found

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
            self._listings.pop(server, None)
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
            self._listings.pop(locator.server, None)
            raise Refusal(f'Error: skill "{name}" changed on its server since it was listed')
        return data.decode("utf-8", "replace")

    async def release(self, server: object) -> None:
        """No session names ``server`` any more: close its connection within the deadline (a
        stdio server's process group ends), unless it is one of the fixed servers every lookup
        uses. What it failed at is forgotten: a session naming it again starts afresh."""
        if isinstance(server, McpServer) and server not in self._fixed:
            self._listings.pop(server, None)
            self.servers.pop(server, None)
            await self._pool.release(server)

    def states(self, options: SkillLookupOptions) -> tuple[ServerState, ...]:
        """What is known of each server a lookup with ``options`` uses, in its order."""
        return tuple(
            self.servers.get(server) or ServerState(server) for server in self._servers_of(options)
        )

    async def aclose(self) -> None:
        """Close every connection this provider opened (each within the deadline)."""
        if self._opened is not None:
            await self._opened.aclose()

    async def _listing(self, server: McpServer) -> Listing:
        now = time.monotonic()
        state = self.servers.setdefault(server, ServerState(server))
        if (kept := self._listings.get(server)) is not None and now < kept[0]:
            return kept[1]
        if state.failed_at is not None and now - state.failed_at < RETRY_AFTER:
            return NOTHING

        async def listed(session: ClientSession, connection: McpConnection) -> Listing:
            state.connected, state.supports_skills = True, connection.supports_skills(session)
            if not state.supports_skills:
                return NOTHING
            return await list_skills(session, lambda: connection.received)

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
        if listing.ttl_ms > 0:
            self._listings[server] = (time.monotonic() + listing.ttl_ms / 1000, listing)
        return listing

    async def _read(self, locator: McpLocator, uri: str, about: str) -> bytes | None:
        """The text at ``uri`` as UTF-8 bytes (``None``: the server sent none)."""

        async def read(session: ClientSession, connection: McpConnection) -> bytes | None:
            del connection
            return text_of(await session.read_resource(uri), uri)

        try:
            return await self._ask(locator.server, read)
        except _Unavailable as unavailable:
            label = locator.server.label
            if unavailable.spent:  # its use ends, as if a listing had been that large
                state = self.servers.setdefault(locator.server, ServerState(locator.server))
                state.connected, state.failure = False, unavailable.reason
                state.failed_at = math.inf
                await self._pool.release(locator.server, at_once=True)
            raise Refusal(
                f'Error: cannot read {about} from MCP server "{label}": {unavailable.reason}'
            ) from None

    async def _ask(
        self, server: McpServer, request: Callable[[ClientSession, McpConnection], Awaitable[_T]]
    ) -> _T:
        # Connecting and the request, under the deadline; `_Unavailable` says why not, in words
        # for a person (a server that exited: its status and the end of its stderr).
        connection = self._pool.connection(server)
        try:
            with anyio.move_on_after(self._timeout):
                return await request(await connection.session(), connection)
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
