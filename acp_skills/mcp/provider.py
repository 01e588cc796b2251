"""`McpSkillProvider`: the skills of a session's MCP servers, listed lazily and loaded with
verification (contract §14). Rank 600: every local root wins a name clash."""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..content import Refusal
from ..frontmatter import ParsedSkill, parse_skill_file
from ..model import SkillCandidate, SkillDefinition, SkillLookupOptions, UrlResource, shared_fields
from ..quiet_log import get_logger
from .config import McpServer

if TYPE_CHECKING:
    from .listing import ListedSkill, Listing
    from .pool import McpPool


def _sdk(module: str) -> Any:
    # The modules on the mcp SDK are loaded on first use: importing the SDK costs an agent's
    # start-up about as much again as the rest, and most sessions name no MCP server.
    return importlib.import_module(f"{__package__}.{module}")


MCP_RANK: Final = 600
# The pair trust keeps for a skill's listed frontmatter: its uri with this fragment.
FRONTMATTER_FRAGMENT: Final = "#frontmatter"
MCP_SOURCE: Final = "mcp"
LISTING_DEADLINE: Final = 10.0
RETRY_AFTER: Final = 60.0  # a failed server is left alone this long

_log = get_logger(__name__)


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

    served: frozenset[tuple[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        # The pairs trust keeps, worked out once (every lookup asks trust about every skill):
        # (uri, digest) of each listed file, and one for the listed frontmatter (the catalog's
        # text comes from the listing, before any file is read). A dynamic skill lists no files.
        listed = json.dumps(self.skill.frontmatter, sort_keys=True, ensure_ascii=False)
        digest = "sha256:" + hashlib.sha256(listed.encode("utf-8", "surrogatepass")).hexdigest()
        pairs = {(self.skill.uri + FRONTMATTER_FRAGMENT, digest)}
        pairs.update((file.uri, file.digest) for file in (self.skill.files or {}).values())
        object.__setattr__(self, "served", frozenset(pairs))


@dataclass(slots=True)
class ServerState:
    """What `/skills` and doctor show of one server."""

    server: McpServer
    connected: bool = False
    skills: int = 0
    failure: str | None = None
    failed_at: float | None = None
    supports_skills: bool | None = None


class McpSkillProvider:
    """Lists and loads skills of ``servers`` (for every lookup, as ``--mcp-server`` gives
    them) and then of those in ``options.servers`` (the session's `McpServer` values) through
    ``pool``; a server slower than ``timeout`` seconds to list is skipped."""

    def __init__(
        self,
        pool: McpPool | None = None,
        *,
        servers: Sequence[McpServer] = (),
        timeout: float = LISTING_DEADLINE,
    ) -> None:
        self.name = "mcp"
        self._opened = pool
        self._fixed = tuple(servers)
        self._timeout = timeout
        self._listings: dict[McpServer, tuple[float, Listing]] = {}
        self.servers: dict[McpServer, ServerState] = {}

    @property
    def _pool(self) -> McpPool:
        if self._opened is None:
            self._opened = _sdk("pool").McpPool()
        return self._opened

    def cacheable(self, options: SkillLookupOptions) -> bool:
        # The listing keeps its own ttlMs; the registry asks again every time there are servers.
        return not self._servers_of(options)

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        """Each server's skills in the session's order; a failing server is skipped, told."""
        found: list[SkillCandidate] = []
        for server in self._servers_of(options):
            listing = await self._listing(server)
            for skill in listing.skills if listing is not None else ():
                if (candidate := self._candidate(server, skill)) is not None:
                    found.append(candidate)
        return found

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        """One `resources/read` of the ``SKILL.md``, verified against the listing."""
        locator = candidate.locator
        if not isinstance(locator, McpLocator):
            return None
        server, skill, listing = locator.server, locator.skill, _sdk("listing")
        session = await self._pool.connection(server).session()
        data = listing.text_of(await session.read_resource(skill.uri), skill.uri)
        listed = skill.files.get(skill.uri) if skill.files is not None else None
        text = data.decode("utf-8", "replace") if data is not None else None
        if (
            text is None
            or (listed is not None and not listing.matches(data, listed))
            or not listing.same_frontmatter(text, skill.frontmatter)
        ):
            self._listings.pop(server, None)
            raise Refusal(
                f'Error: skill "{candidate.name}" changed on its server since it was listed'
            )
        parsed = parse_skill_file(text)
        body = parsed.body if isinstance(parsed, ParsedSkill) else text
        values = shared_fields(candidate, SkillDefinition)
        values.update(content=body, path=None)
        return SkillDefinition(**values)

    async def read_path(self, candidate: SkillCandidate, path: str, *, limit: int) -> str:
        """The text of ``path`` (relative to the skill's base uri): only a manifest file, and
        verified like the ``SKILL.md``; a ``"dynamic"`` skill's file is size-capped and its text
        says it is unverified. Anything else is a `Refusal`."""
        locator = candidate.locator
        if not isinstance(locator, McpLocator):
            raise Refusal(f'Error: skill "{candidate.name}" is not served by an MCP server')
        skill, name, listing = locator.skill, candidate.name, _sdk("listing")
        cannot = f'Error: cannot read "{path}" of skill "{name}"'
        if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            raise Refusal(f"{cannot}: not a relative path")
        uri = skill.base_uri + path
        listed = skill.files.get(uri) if skill.files is not None else None
        if skill.files is not None and listed is None:
            raise Refusal(f"{cannot}: not in its manifest")
        if listed is not None and listed.size > limit:
            raise Refusal(f"{cannot}: the file is {listed.size} bytes, over the {limit}-byte limit")
        session = await self._pool.connection(locator.server).session()
        data: bytes | None = listing.text_of(await session.read_resource(uri), uri)
        if data is None:
            raise Refusal(f"{cannot}: no text at {uri}")
        if listed is None:
            if len(data) > limit:
                raise Refusal(f"{cannot}: over the {limit}-byte limit")
            return f"[unverified: this skill's files are not listed by its server]\n{data.decode()}"
        if not listing.matches(data, listed):
            self._listings.pop(locator.server, None)
            raise Refusal(f'Error: skill "{name}" changed on its server since it was listed')
        return data.decode("utf-8", "replace")

    async def release(self, server: object) -> None:
        """No session names ``server`` any more: close its connection (a stdio server's
        process stops), unless it is one of the fixed servers every lookup uses."""
        if isinstance(server, McpServer) and server not in self._fixed:
            self._listings.pop(server, None)
            await self._pool.release(server)

    def states(self, options: SkillLookupOptions) -> tuple[ServerState, ...]:
        """What is known of each server a lookup with ``options`` uses, in its order."""
        return tuple(
            self.servers.get(server) or ServerState(server) for server in self._servers_of(options)
        )

    async def aclose(self) -> None:
        """Close every connection this provider opened."""
        if self._opened is not None:
            await self._opened.aclose()

    async def _listing(self, server: McpServer) -> Listing | None:
        now = time.monotonic()
        state = self.servers.setdefault(server, ServerState(server))
        if (kept := self._listings.get(server)) is not None and now < kept[0]:
            return kept[1]
        if state.failed_at is not None and now - state.failed_at < RETRY_AFTER:
            return None
        reason: str | None = None
        listing: Listing | None = None
        with anyio.move_on_after(self._timeout) as scope:
            try:
                connection = self._pool.connection(server)
                session = await connection.session()
                state.connected, state.supports_skills = True, connection.supports_skills(session)
                listing = _sdk("listing").Listing((), 0)
                if state.supports_skills:
                    listing = await _sdk("listing").list_skills(session)
            except Exception as error:
                # The SDK's task groups wrap the real failure: name the first leaf, not
                # "unhandled errors".
                leaf: BaseException = error
                while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
                    leaf = leaf.exceptions[0]
                reason = f"{type(leaf).__name__}: {leaf}" if str(leaf) else repr(leaf)
        if scope.cancelled_caught:
            reason = f"no answer within {self._timeout} s"
        if reason is not None or listing is None:
            state.connected, state.failure, state.failed_at = False, reason, time.monotonic()
            _log.warning("mcp_server_skipped", server=server.label, reason=reason)
            await self._pool.release(server)
            # The others still count; `cacheable` keeps this degraded catalog out of the cache.
            return None
        state.failure, state.failed_at, state.skills = None, None, len(listing.skills)
        if listing.ttl_ms > 0:
            self._listings[server] = (time.monotonic() + listing.ttl_ms / 1000, listing)
        return listing

    def _candidate(self, server: McpServer, skill: ListedSkill) -> SkillCandidate | None:
        name, description = skill.frontmatter.get("name"), skill.frontmatter.get("description")
        if not isinstance(name, str) or not isinstance(description, str):
            return None
        when = skill.frontmatter.get("when_to_use", skill.frontmatter.get("when-to-use"))
        hint = skill.frontmatter.get("argument-hint")
        # allowed-tools is ignored: a server never widens what the agent may do.
        return SkillCandidate(
            name=name,
            description=description,
            when_to_use=when if isinstance(when, str) else None,
            disable_model_invocation=skill.frontmatter.get("disable-model-invocation") is True,
            user_invocable=skill.frontmatter.get("user-invocable") is not False,
            source=f"{MCP_SOURCE}:{server.label}",
            provider=self.name,
            resource_base=UrlResource(url=skill.base_uri),
            rank=MCP_RANK,
            locator=McpLocator(server=server, skill=skill),
            path=None,
            metadata=None,
            argument_hint=hint if isinstance(hint, str) else None,
        )

    def _servers_of(self, options: SkillLookupOptions) -> tuple[McpServer, ...]:
        # The fixed servers first; a session naming one of them again does not list it twice.
        extra = (s for s in options.servers if isinstance(s, McpServer) and s not in self._fixed)
        return (*self._fixed, *extra)
