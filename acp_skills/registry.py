"""`SkillRegistry`: merges providers into one catalog, resolves name clashes, caches (contract §4).

First wins (unlike pluggy's last-registered-first): lower ``rank``; then earlier provider
registration (runtime skills win rank ties against every provider); then earlier position in
the provider's ``list()``. Winners are sorted by name. Only complete catalogs are cached, keyed by
``(cwd, additional directories, servers, revision)``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import anyio

from .diagnostics import Diagnostic, provider_failed, shadow_diagnostic
from .model import (
    ShadowedSkill,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    is_skill_name,
    require_positive_int,
    shared_fields,
    summary_of,
)
from .provider import ProviderHandle, SkillProvider, offer_problem, provider_hooks, validate_offer
from .quiet_log import get_logger

RUNTIME_PROVIDER = "runtime"
RUNTIME_RANK = 250
_RUNTIME_ORDER = -1  # sorts runtime skills ahead of every provider when ranks tie

_log = get_logger(__name__)
# (cwd, additional directories, servers, revision)
_Key = tuple[str | None, tuple[str, ...], tuple[Hashable, ...], int]


@dataclass(slots=True, eq=False)
class _Registration:
    registry: SkillRegistry
    provider: SkillProvider
    order: int
    hooks: dict[str, Callable[..., Any]]  # as found when it was registered

    def dispose(self) -> None:
        if self.registry._remove(self) and (on_dispose := self.hooks.get("on_dispose")):
            try:
                on_dispose(self)
            except Exception as error:
                name = self.provider.name
                _log.warning("skill_provider_dispose_failed", provider=name, error=repr(error))

    def invalidate(self) -> None:
        if self.registry._is_current(self):
            self.registry.invalidate()

    def vouches_for(self, options: SkillLookupOptions) -> bool:
        # No when it raises: not cached is always correct, merely slower.
        if (cacheable := self.hooks.get("cacheable")) is None:
            return True
        try:
            return cacheable(options) is True
        except Exception as error:
            name = self.provider.name
            _log.warning("skill_provider_cacheable_failed", provider=name, error=repr(error))
            return False


class _RuntimeSkills:
    """The in-process skills, a provider ahead of every other; an offer's locator is its skill."""

    name = RUNTIME_PROVIDER

    def __init__(self) -> None:
        self.offers: dict[str, SkillCandidate] = {}

    def has(self, candidate: SkillCandidate) -> bool:
        offer = self.offers.get(candidate.name)
        return offer is not None and offer.locator is candidate.locator

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        return tuple(self.offers.values())

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        return candidate.locator if self.has(candidate) else None  # type: ignore[return-value]


class _Catalog(NamedTuple):
    winners: dict[str, SkillCandidate]
    snapshot: SkillSnapshot
    visible: tuple[SkillSummary, ...]  # what `list` returns


@dataclass(slots=True)
class _Shared:
    task: asyncio.Task[_Catalog]
    waiters: int = 0  # the callers awaiting it; the last to leave cancels it


@dataclass(slots=True)
class _Answer:
    registration: _Registration
    candidates: Sequence[SkillCandidate] = ()
    failed: bool = False
    cacheable: bool = True  # the provider vouches for it staying current until it invalidates


class SkillRegistry:
    """The provider registry (contract §4). A bound < 1 or a timeout <= 0 is a ``ValueError``."""

    def __init__(
        self, collect_cache_max_entries: int = 128, provider_timeout: float | None = 30.0
    ) -> None:
        self._cache_bound = require_positive_int(
            "collect_cache_max_entries", collect_cache_max_entries
        )
        if provider_timeout is not None and not provider_timeout > 0:
            raise ValueError(f"provider_timeout must be > 0 or None, got {provider_timeout!r}")
        self._provider_timeout = provider_timeout
        self._runtime = _RuntimeSkills()
        runtime = _Registration(self, self._runtime, _RUNTIME_ORDER, {})
        self._providers: dict[str, _Registration] = {RUNTIME_PROVIDER: runtime}
        self._listeners: list[Callable[[], None]] = []
        self._order = itertools.count()
        self._revision = 0
        self._cache: OrderedDict[_Key, _Catalog] = OrderedDict()
        self._inflight: dict[_Key, _Shared] = {}
        # Guards the revision and the cache against an invalidation from another thread.
        self._lock = threading.Lock()

    @property
    def revision(self) -> int:
        """Bumped by every change to the provider set and every invalidation."""
        return self._revision

    def register_provider(self, provider: SkillProvider) -> ProviderHandle:
        """Add a provider last; its ``on_register`` gets the handle (raising there undoes it).
        A reserved, taken, empty or non-string name is a ``ValueError``."""
        name = provider.name
        if not isinstance(name, str) or not name:
            raise ValueError(f"skill provider name must be a non-empty string, got {name!r}")
        if name == RUNTIME_PROVIDER:
            raise ValueError(f'skill provider name "{RUNTIME_PROVIDER}" is reserved')
        if name in self._providers:
            raise ValueError(f'skill provider "{name}" is already registered')
        registration = _Registration(self, provider, next(self._order), provider_hooks(provider))
        self._providers[name] = registration
        self.invalidate()
        if (on_register := registration.hooks.get("on_register")) is not None:
            try:
                on_register(registration)
            except BaseException:
                # The caller gets no handle to dispose of: undo, without `on_dispose`.
                self._remove(registration)
                raise
        return registration

    def register(self, skill: SkillDefinition) -> Callable[[], None]:
        """Add an in-process skill (rank 250); returns its disposer. Bad fields: ``ValueError``."""
        stored = replace(skill, provider=RUNTIME_PROVIDER)
        if (problem := offer_problem(stored, RUNTIME_PROVIDER, SkillDefinition)) is not None:
            raise ValueError(f"invalid runtime skill: {problem}")
        if skill.name in self._runtime.offers:
            _log.warning("runtime_skill_ignored", skill=skill.name, reason="already registered")
            return lambda: None
        offer = SkillCandidate(
            **shared_fields(stored, SkillCandidate), rank=RUNTIME_RANK, locator=stored
        )
        self._runtime.offers[skill.name] = offer

        def dispose() -> None:
            if self._runtime.offers.get(offer.name) is offer:
                del self._runtime.offers[offer.name]
                self.invalidate()

        self.invalidate()
        return dispose

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every invalidation; returns an unsubscriber."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def invalidate(self) -> None:
        """Bump the revision, drop every cached catalog and notify listeners (on this thread)."""
        with self._lock:
            self._revision += 1
            self._cache.clear()
        for listener in tuple(self._listeners):
            try:
                listener()
            except Exception as error:
                _log.warning("skill_change_listener_failed", error=repr(error))

    def _remove(self, registration: _Registration) -> bool:
        if not self._is_current(registration):
            return False
        del self._providers[registration.provider.name]
        self.invalidate()
        return True

    def _is_current(self, registration: _Registration) -> bool:
        return self._providers.get(registration.provider.name) is registration

    async def list(self, options: SkillLookupOptions | None = None) -> list[SkillSummary]:
        """Model-visible skills (``disable_model_invocation`` excluded), sorted by name."""
        return list((await self._collect(options or SkillLookupOptions())).visible)

    async def snapshot(self, options: SkillLookupOptions | None = None) -> SkillSnapshot:
        """Every resolved skill, model-visible or not, and whether discovery was complete."""
        return (await self._collect(options or SkillLookupOptions())).snapshot

    async def diagnose(self, options: SkillLookupOptions | None = None) -> tuple[Diagnostic, ...]:
        """Each ``diagnose`` hook's records (or a ``provider-failed`` one), then the shadowed."""
        options = options or SkillLookupOptions()
        snapshot = await self.snapshot(options)
        found: list[Diagnostic] = []
        for registration in list(self._providers.values()):
            if (diagnose := registration.hooks.get("diagnose")) is not None:
                records, failure = await self._ask("diagnose()", diagnose, options)
                name = registration.provider.name
                found.extend(records if failure is None else [provider_failed(name, failure)])
        found.extend(shadow_diagnostic(shadowed) for shadowed in snapshot.shadowed)
        return tuple(found)

    async def get(
        self, name: str, options: SkillLookupOptions | None = None
    ) -> SkillDefinition | None:
        """The winning skill called ``name`` in full, or ``None``. Provider errors propagate."""
        if not is_skill_name(name):
            return None
        options = options or SkillLookupOptions()
        winner = (await self._collect(options)).winners.get(name)
        return None if winner is None else await self.load(winner, options)

    async def load(
        self, candidate: SkillCandidate, options: SkillLookupOptions | None = None
    ) -> SkillDefinition | None:
        """Load a skill of a `snapshot` without discovering again; ``None`` when it cannot."""
        if (registration := self._providers.get(candidate.provider)) is None:
            return None
        name, started = candidate.provider, time.perf_counter()
        loaded = await registration.provider.get(candidate, options or SkillLookupOptions())
        took = round((time.perf_counter() - started) * 1000, 3)
        found = loaded is not None
        _log.debug(
            "skill_loaded", skill=candidate.name, provider=name, found=found, duration_ms=took
        )
        if loaded is None:
            return None
        validate_offer(loaded, name, SkillDefinition)
        if loaded.name != candidate.name:  # renamed since discovery: what we cached is stale
            _log.warning(
                "skill_renamed", skill=candidate.name, provider=name, loaded_name=loaded.name
            )
            self.invalidate()
            return None
        return loaded

    async def read_path(self, candidate: SkillCandidate, path: str, *, limit: int) -> str | None:
        """``path`` read by ``candidate``'s provider if it reads its own files, else ``None``."""
        registration = self._providers.get(candidate.provider)
        if registration is None or (read_path := registration.hooks.get("read_path")) is None:
            return None
        text: str = await read_path(candidate, path, limit=limit)
        return text

    async def find_uri(
        self, uri: str, options: SkillLookupOptions | None = None
    ) -> SkillCandidate | None:
        """The skill whose ``SKILL.md`` is at ``uri``, from the first provider with ``find_uri``
        serving one there, listed or shadowed alike; else ``None``. Provider errors propagate."""
        for registration in list(self._providers.values()):
            if (find_uri := registration.hooks.get("find_uri")) is None:
                continue
            found: SkillCandidate | None = await find_uri(uri, options or SkillLookupOptions())
            if found is not None:
                validate_offer(found, registration.provider.name, SkillCandidate)
                return found
        return None

    async def _collect(self, options: SkillLookupOptions) -> _Catalog:
        key = _key(options, self._revision)
        if (cached := self._cache.get(key)) is not None:
            return cached
        if (shared := self._inflight.get(key)) is None:
            shared = self._inflight[key] = _Shared(asyncio.ensure_future(self._discover(options)))
            shared.task.add_done_callback(lambda _task: self._forget(key, shared))
        shared.waiters += 1
        try:
            # Shielded: one caller's cancellation must not cancel what the others share.
            return await asyncio.shield(shared.task)
        finally:
            shared.waiters -= 1
            if shared.waiters == 0 and not shared.task.done():
                # Unpublish first (a newcomer starts afresh), then cancel and wait for it to
                # unwind, so no provider call outlives its callers.
                self._forget(key, shared)
                shared.task.cancel()
                await asyncio.wait([shared.task])

    def _forget(self, key: _Key, shared: _Shared) -> None:
        if self._inflight.get(key) is shared:
            del self._inflight[key]
        # Retrieved, so an abandoned task's exception is never reported as unretrieved.
        if shared.task.done() and not shared.task.cancelled():
            shared.task.exception()

    async def _discover(self, options: SkillLookupOptions) -> _Catalog:
        answers, revision = await self._run_pass(options)
        if revision != self._revision:
            # Perhaps a provider we heard is gone: listen again; if it moves again, do not cache.
            answers, revision = await self._run_pass(options)
        complete = revision == self._revision and not any(a.failed for a in answers)
        catalog = self._resolve(answers, complete)
        if complete and all(answer.cacheable for answer in answers):
            with self._lock:
                if revision == self._revision:  # else invalidated meanwhile: already stale
                    self._cache[_key(options, revision)] = catalog
                    while len(self._cache) > self._cache_bound:
                        self._cache.popitem(last=False)
        return catalog

    async def _run_pass(self, options: SkillLookupOptions) -> tuple[Sequence[_Answer], int]:
        answers = [_Answer(registration) for registration in self._providers.values()]
        revision = self._revision
        # Heard concurrently: one slow remote provider does not delay every other one.
        async with anyio.create_task_group() as group:
            for answer in answers:
                group.start_soon(self._listen, answer, options)
        return answers, revision

    async def _listen(self, answer: _Answer, options: SkillLookupOptions) -> None:
        provider = answer.registration.provider
        candidates, failure = await self._ask("list()", provider.list, options)
        if failure is None:
            answer.candidates = tuple(candidates)
            answer.cacheable = answer.registration.vouches_for(options)
        else:
            answer.failed = True
            _log.warning("skill_provider_skipped", provider=provider.name, reason=failure)

    async def _ask(
        self,
        what: str,
        call: Callable[[SkillLookupOptions], Awaitable[Any]],
        options: SkillLookupOptions,
    ) -> tuple[Any, str | None]:
        # A provider's answer, or why there is none; the caller's own cancellation propagates.
        with anyio.move_on_after(self._provider_timeout):
            try:
                return await call(options), None
            except Exception as error:
                return None, f"{what} raised {error!r}"
        return None, f"{what} took longer than {self._provider_timeout} s"

    def _resolve(self, answers: Sequence[_Answer], complete: bool) -> _Catalog:
        # (order, position) is unique: sorting never compares two skills. A skill of a provider
        # (or a runtime skill) removed during the pass is not live: it must not surface even in
        # an incomplete answer.
        ranked: list[tuple[int | float, int, int, SkillCandidate, bool]] = []
        for answer in answers:
            # Validated in the caller's task: a plain SkillContractError, not an exception group.
            registration = answer.registration
            name, order = registration.provider.name, registration.order
            live = self._is_current(registration)
            for position, candidate in enumerate(answer.candidates):
                validate_offer(candidate, name, SkillCandidate)
                alive = live and (order != _RUNTIME_ORDER or self._runtime.has(candidate))
                ranked.append((candidate.rank, order, position, candidate, alive))
        ranked.sort()
        winners: dict[str, SkillCandidate] = {}
        shadowed: list[ShadowedSkill] = []
        for *_, skill, live in ranked:
            if (kept := winners.get(skill.name)) is None:
                if live:
                    winners[skill.name] = skill
                continue
            shadowed.append(ShadowedSkill(skill=skill, winner=kept))
            loser = {"provider": skill.provider, "path": skill.path}
            winner = {"winner_provider": kept.provider, "winner_path": kept.path}
            _log.warning("skill_shadowed", skill=skill.name, **loser, **winner)
        ordered = {name: winners[name] for name in sorted(winners)}
        skills = tuple(ordered.values())
        snapshot = SkillSnapshot(skills=skills, complete=complete, shadowed=tuple(shadowed))
        visible = tuple(summary_of(skill) for skill in skills if not skill.disable_model_invocation)
        return _Catalog(ordered, snapshot, visible)


def _key(options: SkillLookupOptions, revision: int) -> _Key:
    return (options.cwd, options.additional_directories, options.servers, revision)
