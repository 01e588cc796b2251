"""What `McpSkillProvider` keeps of its servers' answers: each listing and each `skills/get`
entry for as long as its ``ttlMs`` says, and as widely as its ``cacheScope`` allows.

A *private* answer is kept for the one configuration that asked: its label and command line or
url, with the ``env`` or ``headers`` that carry its authorization, so a session naming the same
server with another token never sees it. A *public* answer of a streamable HTTP server is kept
for its url, so every configuration reaching that url reuses it until it is stale; a stdio
configuration starts a server process of its own, so its answers are never shared.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Generic, TypeVar

from .config import McpServer
from .listing import CacheScope, ListedSkill, Listing

_V = TypeVar("_V")


def _key(server: McpServer, scope: CacheScope) -> Hashable:
    if scope == "public" and server.url is not None:
        return ("public", server.url)
    return ("private", server)


class _Fresh(Generic[_V]):
    """Values by (who may see them, what they answer), each until its deadline."""

    def __init__(self) -> None:
        self._values: dict[tuple[Hashable, str], tuple[float, _V]] = {}

    def get(self, server: McpServer, what: str) -> _V | None:
        # The configuration's own answer first, then one its url shares.
        for scope in ("private", "public"):
            key = (_key(server, scope), what)
            if (kept := self._values.get(key)) is None:
                continue
            if time.monotonic() < kept[0]:
                return kept[1]
            del self._values[key]
        return None

    def keep(self, server: McpServer, what: str, value: _V, ttl_ms: int, scope: CacheScope) -> None:
        if ttl_ms > 0:  # 0: stale at once, asked again at the next lookup
            deadline = time.monotonic() + ttl_ms / 1000
            self._values[(_key(server, scope), what)] = (deadline, value)

    def forget(self, server: McpServer) -> None:
        mine = {_key(server, "private"), _key(server, "public")}
        for key in [key for key in self._values if key[0] in mine]:
            del self._values[key]


class KeptAnswers:
    """A server's listing and its `skills/get` entries (by uri), while fresh."""

    def __init__(self) -> None:
        self._listings: _Fresh[Listing] = _Fresh()
        self._entries: _Fresh[ListedSkill] = _Fresh()

    def listing(self, server: McpServer) -> Listing | None:
        return self._listings.get(server, "")

    def keep_listing(self, server: McpServer, listing: Listing) -> None:
        self._listings.keep(server, "", listing, listing.ttl_ms, listing.scope)

    def entry(self, server: McpServer, uri: str) -> ListedSkill | None:
        return self._entries.get(server, uri)

    def keep_entry(
        self, server: McpServer, entry: ListedSkill, ttl_ms: int, scope: CacheScope
    ) -> None:
        self._entries.keep(server, entry.uri, entry, ttl_ms, scope)

    def forget(self, server: McpServer) -> None:
        """Drop every answer ``server`` could see: a changed skill makes them all suspect."""
        self._listings.forget(server)
        self._entries.forget(server)
