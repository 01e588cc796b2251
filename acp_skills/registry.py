"""The provider seam, its hooks and validator, and `SkillRegistry` (contract §3, §4)."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol, runtime_checkable

import anyio

from .diagnostics import Diagnostic, provider_failed, shadow_diagnostic
from .errors import SkillContractError
from .model import (
    DirectoryResource,
    OpaqueResource,
    ShadowedSkill,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    UrlResource,
    is_skill_name,
    require_positive_int,
    shared_fields,
    summary_of,
)
from .quiet_log import get_logger

RUNTIME_PROVIDER = "runtime"
RUNTIME_RANK = 250
_RUNTIME_ORDER = -1  # sorts runtime skills ahead of every provider when ranks tie
_HOOKS = ("on_register", "on_dispose", "cacheable", "diagnose", "read_path", "find_uri")

_BASES = (DirectoryResource, UrlResource, OpaqueResource)
_NO_OPTIONS = SkillLookupOptions()
_log = get_logger(__name__)
_Key = tuple[SkillLookupOptions, int]  # a frozen lookup's fields and the revision


@runtime_checkable
class SkillProvider(Protocol):
    """A source of skills; ``get`` receives the very candidate ``list`` returned."""

    @property
    def name(self) -> str: ...

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]: ...

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None: ...


def _string_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


# Each field's check and how a violation is named: 'skill "x" with a non-string source None'.
_CHECKS: tuple[tuple[str, str, Callable[[object], bool]], ...] = (
    ("when_to_use", "a non-string", _string_or_none),
    ("disable_model_invocation", "a non-boolean", lambda v: isinstance(v, bool)),
    ("user_invocable", "a non-boolean", lambda v: isinstance(v, bool)),
    ("source", "a non-string", lambda v: isinstance(v, str)),
    ("resource_base", "an invalid", lambda v: v is None or isinstance(v, _BASES)),
    ("path", "a non-string", _string_or_none),
)
_OWN_CHECKS: dict[type, tuple[str, str, Callable[[object], bool]]] = {
    SkillCandidate: (
        "rank",
        "an invalid",
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    ),
    SkillDefinition: ("content", "a non-string", lambda v: isinstance(v, str)),
}


def validate_offer(
    value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]
) -> None:
    """Check a candidate or a definition: else `SkillContractError` naming the field."""
    if not isinstance(value, kind):
        wrong = f"a non-{'candidate' if kind is SkillCandidate else 'definition'} value {value!r}"
        raise SkillContractError(provider, wrong)
    name, description = value.name, value.description
    if not is_skill_name(name):
        raise SkillContractError(provider, f"an invalid name {name!r}")
    if not isinstance(description, str) or not description or description.isspace():
        raise SkillContractError(
            provider, f'skill "{name}" with an empty or non-string description'
        )
    if value.provider != provider:
        wrong = f"provider {value.provider!r} instead of {provider!r}"
        raise SkillContractError(provider, f'skill "{name}" with {wrong}')
    for field, wrong, check in (*_CHECKS, _OWN_CHECKS[kind]):
        if not check(found := getattr(value, field)):
            raise SkillContractError(provider, f'skill "{name}" with {wrong} {field} {found!r}')


@dataclass(slots=True, eq=False)
class ProviderHandle:
    """A registration: ``dispose()`` removes it (idempotent), ``invalidate()`` marks it changed."""

    registry: SkillRegistry
    provider: SkillProvider
    order: int
    hooks: dict[str, Callable[..., Any]]  # found once, when it was registered

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


class _RuntimeSkills:
    """The in-process skills, a provider ahead of every other; an offer's locator is its skill."""

    name = RUNTIME_PROVIDER

    def __init__(self) -> None:
        self.offers: dict[str, SkillCandidate] = {}

    def has(self, candidate: SkillCandidate) -> bool:
        return self.offers.get(candidate.name) is candidate

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]:
        return tuple(self.offers.values())

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        return candidate.locator if self.has(candidate) else None  # type: ignore[return-value]


class _Catalog(NamedTuple):
    snapshot: SkillSnapshot
    visible: tuple[SkillSummary, ...]  # what `list` returns, made once per cached catalog


@dataclass(slots=True)
class _Shared:
    task: asyncio.Task[_Catalog]
    waiters: int = 0  # the callers awaiting it; the last to leave cancels it


@dataclass(slots=True)
class _Answer:
    registration: ProviderHandle
    candidates: Sequence[SkillCandidate] = ()
    failed: bool = False
    cacheable: bool = True  # the provider vouches for it staying current until it invalidates


class SkillRegistry:
    """The provider registry (contract §4); a bound out of range is a ``ValueError``."""

    def __init__(
        self, collect_cache_max_entries: int = 128, provider_timeout: float | None = 30.0
    ) -> None:
        self._cache_bound = require_positive_int(
            "collect_cache_max_entries", collect_cache_max_entries
        )
        if provider_timeout is not None and not provider_timeout > 0:
            raise ValueError(f"provider_timeout must be more than 0, got {provider_timeout!r}")
        self._provider_timeout = provider_timeout
        self._runtime = _RuntimeSkills()
        runtime = ProviderHandle(self, self._runtime, _RUNTIME_ORDER, {})
        self._providers: dict[str, ProviderHandle] = {RUNTIME_PROVIDER: runtime}
        self._listeners: list[Callable[[], None]] = []
        self._order = itertools.count()
        self._revision = 0
        self._cache: OrderedDict[_Key, _Catalog] = OrderedDict()
        self._inflight: dict[_Key, _Shared] = {}
        self._lock = threading.Lock()  # an invalidation may come from another thread

    @property
    def revision(self) -> int:
        """Bumped by every change to the provider set and every invalidation."""
        return self._revision

    def register_provider(self, provider: SkillProvider) -> ProviderHandle:
        """Add a provider last; its ``on_register`` gets the handle (raising there undoes it)."""
        name = provider.name
        if name == RUNTIME_PROVIDER:
            raise ValueError(f'skill provider name "{RUNTIME_PROVIDER}" is reserved')
        if name in self._providers:
            raise ValueError(f'skill provider "{name}" is already registered')
        hooks = {hook: found for hook in _HOOKS if (found := getattr(provider, hook, None))}
        registration = ProviderHandle(self, provider, next(self._order), hooks)
        self._providers[name] = registration
        self.invalidate()
        if (on_register := hooks.get("on_register")) is not None:
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
        validate_offer(stored, RUNTIME_PROVIDER, SkillDefinition)
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
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

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

    def _remove(self, registration: ProviderHandle) -> bool:
        if not self._is_current(registration):
            return False
        del self._providers[registration.provider.name]
        self.invalidate()
        return True

    def _is_current(self, registration: ProviderHandle) -> bool:
        return self._providers.get(registration.provider.name) is registration

    def _hook(self, provider: str, hook: str) -> Callable[..., Any] | None:
        registration = self._providers.get(provider)
        return None if registration is None else registration.hooks.get(hook)

    async def list(self, options: SkillLookupOptions = _NO_OPTIONS) -> list[SkillSummary]:
        """Model-visible skills (``disable_model_invocation`` excluded), sorted by name."""
        return list((await self._collect(options)).visible)

    async def snapshot(self, options: SkillLookupOptions = _NO_OPTIONS) -> SkillSnapshot:
        """Every resolved skill, model-visible or not, and whether discovery was complete."""
        return (await self._collect(options)).snapshot

    async def diagnose(self, options: SkillLookupOptions = _NO_OPTIONS) -> tuple[Diagnostic, ...]:
        """Each ``diagnose`` hook's records (or a ``provider-failed`` one), then the shadowed."""
        snapshot = await self.snapshot(options)
        found: list[Diagnostic] = []
        for name in list(self._providers):
            if (diagnose := self._hook(name, "diagnose")) is not None:
                records, failure = await self._ask("diagnose()", diagnose, options)
                found.extend(records if failure is None else [provider_failed(name, failure)])
        found.extend(shadow_diagnostic(shadowed) for shadowed in snapshot.shadowed)
        return tuple(found)

    async def get(
        self, name: str, options: SkillLookupOptions = _NO_OPTIONS
    ) -> SkillDefinition | None:
        """The winning skill called ``name`` in full, or ``None``. Provider errors propagate."""
        if not is_skill_name(name):
            return None
        found = (await self._collect(options)).snapshot.skills
        winner = next((skill for skill in found if skill.name == name), None)
        return None if winner is None else await self.load(winner, options)

    async def load(
        self, candidate: SkillCandidate, options: SkillLookupOptions = _NO_OPTIONS
    ) -> SkillDefinition | None:
        """Load a skill of a `snapshot` without discovering again; ``None`` when it cannot."""
        if (registration := self._providers.get(candidate.provider)) is None:
            return None
        name, started = candidate.provider, time.perf_counter()
        loaded = await registration.provider.get(candidate, options)
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
        if (read_path := self._hook(candidate.provider, "read_path")) is None:
            return None
        text: str = await read_path(candidate, path, limit=limit)
        return text

    async def find_uri(
        self, uri: str, options: SkillLookupOptions = _NO_OPTIONS
    ) -> SkillCandidate | None:
        """The skill at ``uri`` of the first provider whose ``find_uri`` serves one, or ``None``."""
        for name in list(self._providers):
            if (find_uri := self._hook(name, "find_uri")) is None:
                continue
            found: SkillCandidate | None = await find_uri(uri, options)
            if found is not None:
                validate_offer(found, name, SkillCandidate)
                return found
        return None

    async def _collect(self, options: SkillLookupOptions) -> _Catalog:
        key = (options, self._revision)
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
                    self._cache[(options, revision)] = catalog
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
        cacheable = answer.registration.hooks.get("cacheable")
        candidates, failure = await self._ask("list()", provider.list, options)
        if failure is not None:
            answer.failed = True
            _log.warning("skill_provider_skipped", provider=provider.name, reason=failure)
            return
        answer.candidates = tuple(candidates)
        try:  # no when it raises: not cached is always correct, merely slower
            answer.cacheable = cacheable is None or cacheable(options) is True
        except Exception as error:
            answer.cacheable = False
            _log.warning(
                "skill_provider_cacheable_failed", provider=provider.name, error=repr(error)
            )

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
        # (order, position) is unique: sorting never compares two skills. A skill removed during
        # the pass must not surface even in an incomplete answer. Validated in the caller's task.
        ranked: list[tuple[int | float, int, int, SkillCandidate, bool]] = []
        for answer in answers:
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
        for *_, skill, alive in ranked:
            if (kept := winners.get(skill.name)) is None:
                if alive:
                    winners[skill.name] = skill
                continue
            shadowed.append(ShadowedSkill(skill=skill, winner=kept))
            loser = {"provider": skill.provider, "path": skill.path}
            winner = {"winner_provider": kept.provider, "winner_path": kept.path}
            _log.warning("skill_shadowed", skill=skill.name, **loser, **winner)
        skills = tuple(winners[name] for name in sorted(winners))
        snapshot = SkillSnapshot(skills=skills, complete=complete, shadowed=tuple(shadowed))
        visible = tuple(summary_of(skill) for skill in skills if not skill.disable_model_invocation)
        return _Catalog(snapshot, visible)
