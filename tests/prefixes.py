"""What the tests of the session prefix and of session instances share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from acp_skills import PrefixedSession, PrefixMessage, SessionPrefix
from acp_skills.model import PrefixContext, PrefixNext
from acp_skills.record import HeaderEntry, SessionStore

CONFIG: dict[str, Any] = {"model": "m1", "temperature": 0.2}
SYSTEM = "You are a careful assistant."
TOOLS: list[dict[str, Any]] = [{"name": "skill", "parameters": {"type": "object"}}]


def user(text: str) -> PrefixMessage:
    return PrefixMessage(role="user", text=text)


@dataclass
class Prepend:
    """A contributor that puts its message ahead of the later ones and counts its calls."""

    text: str
    calls: int = 0
    seen: list[PrefixContext] = field(default_factory=list)

    async def __call__(self, context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        self.calls += 1
        self.seen.append(context)
        return [user(self.text), *await next()]


@dataclass
class Scripted:
    """A contributor whose behaviour a test changes between turns.

    ``fail`` raises; ``hold`` waits on ``release`` (set it to let the composition go on).
    """

    text: str = "scripted"
    fail: bool = False
    hold: bool = False
    calls: int = 0
    entered: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        self.calls += 1
        self.entered.set()
        if self.hold:
            await self.release.wait()
        if self.fail:
            raise RuntimeError("contributor failed")
        return [user(self.text), *await next()]


async def open_session(
    prefix: SessionPrefix, context: PrefixContext, store: SessionStore
) -> PrefixedSession:
    return await PrefixedSession.open(prefix, context, store)


async def headers_in(store: SessionStore, session_id: str = "s1") -> list[HeaderEntry]:
    return [entry for entry in await store.entries(session_id) if isinstance(entry, HeaderEntry)]


async def record_request(session: PrefixedSession, **request: Any) -> HeaderEntry | None:
    """The header ``session.advance`` records for ``request``, or ``None`` if it records none."""
    recorded = session.last_header
    await session.advance([], request)
    return session.last_header if session.last_header is not recorded else None


async def record_default_request(session: PrefixedSession) -> HeaderEntry | None:
    return await record_request(session, config=CONFIG, system=SYSTEM, tools=TOOLS)
