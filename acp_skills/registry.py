"""`SkillRegistry`: merges providers into one catalog, resolves name clashes, caches.

Resolution order (first wins), written here because everything else leans on it:

1. ``rank`` — lower wins (project skills 100/200, runtime skills 250, custom 300, user 400/500);
2. provider registration order — earlier wins; runtime skills win rank ties against every
   provider (unlike pluggy, where the last registered plugin runs first);
3. position in the provider's own ``list()`` result — earlier wins.

The winners are then sorted by name (plain code-point order) so consumers are deterministic.

Caching: only *complete* catalogs are cached, keyed by ``(cwd, revision)``. Every change to the
provider set (register, dispose, invalidate, runtime skills) bumps ``revision`` and clears the
cache, so a disposed provider can never leave a stale skill behind. Discovery that overlaps such
a change is retried once and, if the set moved again, returned uncached as incomplete. A
provider that cannot vouch for its answer staying current (its ``cacheable(options)`` says no,
say because its file watcher is down) keeps the catalog out of the cache without making it
incomplete.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import anyio
import structlog

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
    summary_fields,
)
from .provider import ProviderHooks, SkillProvider, provider_hooks

__all__ = ["RUNTIME_PROVIDER", "RUNTIME_RANK", "SkillRegistry"]

RUNTIME_PROVIDER = "runtime"
RUNTIME_RANK = 250

_log = structlog.get_logger(__name__)

# Sorts runtime skills ahead of every provider when ranks tie.
_RUNTIME_ORDER = -1


class _Registration:
    """One registered provider and its checked hooks. Identity matters: a handle only acts on
    its own registration."""

    __slots__ = ("hooks", "order", "provider")

    def __init__(self, provider: SkillProvider, order: int, hooks: ProviderHooks) -> None:
        self.provider = provider
        self.order = order
        self.hooks = hooks


class _Handle:
    """The `ProviderHandle` returned by `SkillRegistry.register_provider`."""

    __slots__ = ("_registration", "_registry")

    def __init__(self, registry: SkillRegistry, registration: _Registration) -> None:
        self._registry = registry
        self._registration = registration

    def dispose(self) -> None:
        if self._registry._dispose(self._registration):
            self._registry._tell_disposed(self._registration, self)

    def invalidate(self) -> None:
        if self._registry._is_current(self._registration):
            self._registry.invalidate()


@dataclass(frozen=True, slots=True)
class _ResolvedSkill:
    candidate: SkillCandidate
    # None for runtime skills, whose candidate's locator is the definition itself.
    registration: _Registration | None


class _Catalog:
    """One resolution: the winners by name, the snapshot, and the model-visible summaries
    (built on first use: the agent reads snapshots only)."""

    __slots__ = ("_visible", "snapshot", "winners")

    def __init__(self, winners: dict[str, _ResolvedSkill], snapshot: SkillSnapshot) -> None:
        self.winners = winners
        self.snapshot = snapshot
        self._visible: tuple[SkillSummary, ...] | None = None

    @property
    def visible(self) -> tuple[SkillSummary, ...]:
        visible = self._visible
        if visible is None:
            # Two threads racing here would both build the same tuple: harmless.
            visible = tuple(
                SkillSummary(**summary_fields(skill))
                for skill in self.snapshot.skills
                if not skill.disable_model_invocation
            )
            self._visible = visible
        return visible


@dataclass(slots=True)
class _SharedDiscovery:
    task: asyncio.Task[_Catalog]
    waiters: int = 0


@dataclass(slots=True)
class _ProviderAnswer:
    """What one provider answered during one discovery pass."""

    registration: _Registration
    candidates: Sequence[SkillCandidate] = ()
    failed: bool = False
    # Whether the provider vouches for this answer staying current until it invalidates.
    cacheable: bool = True


@dataclass(slots=True)
class _DiscoveryRound:
    offers: list[_ProviderAnswer] = field(default_factory=list)
    runtime: tuple[SkillDefinition, ...] = ()
    revision: int = 0


class SkillRegistry:
    """The provider registry. An instance, never a global: each agent owns one.

    Args:
        collect_cache_max_entries: how many complete catalogs (one per ``cwd``) to keep; the
            oldest inserted is evicted first. An integer >= 1.
        provider_timeout: seconds a provider's ``list()`` may take before it is skipped for
            that discovery, or ``None`` for no limit.

    Raises:
        ValueError: on a bound that is not an integer >= 1, or a negative timeout.
    """

    def __init__(
        self,
        collect_cache_max_entries: int = 128,
        provider_timeout: float | None = 30.0,
    ) -> None:
        require_positive_int("collect_cache_max_entries", collect_cache_max_entries)
        if provider_timeout is not None and not provider_timeout > 0:
            raise ValueError(f"provider_timeout must be > 0 or None, got {provider_timeout!r}")
        self._cache_bound = collect_cache_max_entries
        self._provider_timeout = provider_timeout
        self._providers: dict[str, _Registration] = {}
        self._runtime: dict[str, SkillDefinition] = {}
        self._listeners: list[Callable[[], None]] = []
        self._order = itertools.count()
        self._revision = 0
        self._cache: OrderedDict[tuple[str | None, int], _Catalog] = OrderedDict()
        self._inflight: dict[tuple[str | None, int], _SharedDiscovery] = {}
        # Guards the revision and the cache against an invalidation from another thread.
        self._lock = threading.Lock()

    # -- registration ------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """A counter bumped by every change to the provider set or an explicit invalidation."""
        return self._revision

    def register_provider(self, provider: SkillProvider) -> _Handle:
        """Add a provider, after every provider registered before it.

        Returns:
            A handle whose ``dispose()`` removes the provider (idempotent) and whose
            ``invalidate()`` drops cached catalogs while the registration is live.

        Raises:
            ValueError: if the name is ``runtime`` (reserved) or already registered.
            TypeError: a hook is not callable or an attribute is a misspelled hook
                (`provider_hooks`).
        """
        name = provider.name
        if not isinstance(name, str) or not name:
            raise ValueError(f"skill provider name must be a non-empty string, got {name!r}")
        if name == RUNTIME_PROVIDER:
            raise ValueError(f'skill provider name "{RUNTIME_PROVIDER}" is reserved')
        if name in self._providers:
            raise ValueError(f'skill provider "{name}" is already registered')
        registration = _Registration(provider, next(self._order), provider_hooks(provider))
        self._providers[name] = registration
        handle = _Handle(self, registration)
        self.invalidate()
        if registration.hooks.on_register is not None:
            try:
                registration.hooks.on_register(handle)
            except BaseException:
                # The caller gets no handle, so it could never dispose of a half-registered
                # provider: undo the registration before passing the error on (without calling
                # `on_dispose`: the provider never accepted this handle).
                self._dispose(registration)
                raise
        return handle

    def register(self, skill: SkillDefinition) -> Callable[[], None]:
        """Add an in-process skill (rank 250, provider ``runtime``).

        A second skill with a name already registered here is ignored with a warning; its
        disposer does nothing, so the loser can never remove the winner.

        Returns:
            A disposer that removes the skill (idempotent).

        Raises:
            ValueError: if the name breaks the grammar or the description is empty.
        """
        if not is_skill_name(skill.name):
            raise ValueError(f"runtime skill name {skill.name!r} is not a valid skill name")
        if not isinstance(skill.description, str) or not skill.description.strip():
            raise ValueError(f'runtime skill "{skill.name}" needs a non-empty description')
        if not isinstance(skill.content, str):
            raise ValueError(f'runtime skill "{skill.name}" content must be a string')
        if skill.name in self._runtime:
            _log.warning("runtime_skill_ignored", skill=skill.name, reason="already registered")
            return _noop
        stored = replace(skill, provider=RUNTIME_PROVIDER)
        self._runtime[skill.name] = stored

        def dispose() -> None:
            if self._runtime.get(stored.name) is stored:
                del self._runtime[stored.name]
                self.invalidate()

        self.invalidate()
        return dispose

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every invalidation. Returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def invalidate(self) -> None:
        """Bump the revision, drop every cached catalog and notify listeners.

        Safe to call from any thread (a file watcher's, say); listeners then run on that
        thread, so a listener that touches an event loop must hand over to it
        (``loop.call_soon_threadsafe``), as `AcpSkills` does.
        """
        with self._lock:
            self._revision += 1
            self._cache.clear()
        for listener in tuple(self._listeners):
            try:
                listener()
            except Exception as error:
                _log.warning("skill_change_listener_failed", error=repr(error))

    def _dispose(self, registration: _Registration) -> bool:
        if not self._is_current(registration):
            return False
        del self._providers[registration.provider.name]
        self.invalidate()
        return True

    def _tell_disposed(self, registration: _Registration, handle: _Handle) -> None:
        # The provider's chance to release what it holds for this registration (a file
        # watcher's thread). Disposal has happened whatever the hook does.
        on_dispose = registration.hooks.on_dispose
        if on_dispose is None:
            return
        try:
            on_dispose(handle)
        except Exception as error:
            _log.warning(
                "skill_provider_dispose_failed",
                provider=registration.provider.name,
                error=repr(error),
            )

    def _is_current(self, registration: _Registration) -> bool:
        return self._providers.get(registration.provider.name) is registration

    # -- lookups -------------------------------------------------------------------------------

    async def list(self, options: SkillLookupOptions | None = None) -> list[SkillSummary]:
        """Model-visible skills (``disable_model_invocation`` excluded), sorted by name."""
        catalog = await self._collect(options or SkillLookupOptions())
        return list(catalog.visible)

    async def snapshot(self, options: SkillLookupOptions | None = None) -> SkillSnapshot:
        """Every resolved skill, model-visible or not, and whether discovery was complete."""
        catalog = await self._collect(options or SkillLookupOptions())
        return catalog.snapshot

    async def diagnose(self, options: SkillLookupOptions | None = None) -> tuple[Diagnostic, ...]:
        """Every problem found with the skills of ``options.cwd``, fresh from the providers.

        Each provider that defines ``diagnose(options)`` (as `LocalSkillProvider` does) is asked,
        in registration order, within the provider timeout; one that fails gives a
        ``provider-failed`` record instead. Then comes one record per shadowed skill of the
        current resolution (`snapshot`).

        Raises:
            SkillContractError: a provider returned a malformed candidate (from `snapshot`).
        """
        options = options or SkillLookupOptions()
        snapshot = await self.snapshot(options)
        found: list[Diagnostic] = []
        for registration in list(self._providers.values()):
            provider = registration.provider
            diagnose = registration.hooks.diagnose
            if diagnose is None:
                continue
            with anyio.move_on_after(self._provider_timeout) as scope:
                try:
                    found.extend(await diagnose(options))
                except Exception as error:
                    found.append(provider_failed(provider.name, error))
            if scope.cancelled_caught:
                found.append(
                    provider_failed(
                        provider.name, f"diagnose() took longer than {self._provider_timeout} s"
                    )
                )
        found.extend(shadow_diagnostic(shadowed) for shadowed in snapshot.shadowed)
        return tuple(found)

    async def get(
        self, name: str, options: SkillLookupOptions | None = None
    ) -> SkillDefinition | None:
        """Load the full definition of the winning skill called ``name``.

        Returns ``None`` for an invalid or unknown name, or when the provider can no longer load
        it. A provider's exception propagates.

        Raises:
            SkillContractError: the provider returned a malformed definition.
        """
        if not is_skill_name(name):
            return None
        options = options or SkillLookupOptions()
        catalog = await self._collect(options)
        winner = catalog.winners.get(name)
        if winner is None:
            return None
        return await self.load(winner.candidate, options)

    async def load(
        self, candidate: SkillCandidate, options: SkillLookupOptions | None = None
    ) -> SkillDefinition | None:
        """Load the full definition of a skill taken from a `snapshot`, without discovering again.

        Callers that already hold a snapshot use this instead of `get`: when discovery is
        incomplete (a provider timed out) nothing is cached, and `get` would wait for the slow
        provider a second time. Returns ``None`` when the skill's provider (or the runtime skill
        itself) is gone, or the provider can no longer load it.

        Raises:
            SkillContractError: the provider returned a malformed definition.
        """
        options = options or SkillLookupOptions()
        if candidate.provider == RUNTIME_PROVIDER:
            definition = candidate.locator
            if isinstance(definition, SkillDefinition) and self._is_live_runtime(definition):
                return definition
            return None
        registration = self._providers.get(candidate.provider)
        if registration is None:
            return None
        provider = registration.provider
        started = time.perf_counter()
        definition = await provider.get(candidate, options)
        _log.debug(
            "skill_loaded",
            skill=candidate.name,
            provider=provider.name,
            found=definition is not None,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        if definition is None:
            return None
        _validate(definition, provider.name, SkillDefinition)
        if definition.name != candidate.name:
            # The file was renamed between discovery and load: what we cached is stale.
            _log.warning(
                "skill_renamed",
                skill=candidate.name,
                provider=provider.name,
                loaded_name=definition.name,
            )
            self.invalidate()
            return None
        return definition

    def _is_live_runtime(self, definition: SkillDefinition) -> bool:
        return self._runtime.get(definition.name) is definition

    # -- collection ----------------------------------------------------------------------------

    async def _collect(self, options: SkillLookupOptions) -> _Catalog:
        key = (options.cwd, self._revision)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        shared = self._inflight.get(key)
        if shared is None:
            shared = _SharedDiscovery(asyncio.ensure_future(self._discover(options)))
            self._inflight[key] = shared
            shared.task.add_done_callback(lambda _task: self._forget(key, shared))
        shared.waiters += 1
        try:
            # Shielded: one caller being cancelled must not cancel the discovery the other
            # waiters share. The last waiter to leave cancels it (below), so nothing outlives
            # the callers that asked for it.
            return await asyncio.shield(shared.task)
        finally:
            shared.waiters -= 1
            if shared.waiters == 0 and not shared.task.done():
                # Unpublish first, so a caller arriving now starts afresh instead of joining a
                # discovery that is being cancelled.
                self._forget(key, shared)
                shared.task.cancel()
                # Wait for it to unwind, so no provider call outlives the last caller. This
                # caller is already being cancelled, so wait() is not interrupted again.
                await asyncio.wait([shared.task])

    def _forget(self, key: tuple[str | None, int], shared: _SharedDiscovery) -> None:
        if self._inflight.get(key) is shared:
            del self._inflight[key]
        # Retrieve the outcome so an abandoned task's exception is never reported as unretrieved.
        if shared.task.done() and not shared.task.cancelled():
            shared.task.exception()

    async def _discover(self, options: SkillLookupOptions) -> _Catalog:
        attempt = await self._run_pass(options)
        if attempt.revision != self._revision:
            # The provider set changed while we listened: what we heard may include a provider
            # that is gone. Listen once more; if it moves again, answer without caching.
            attempt = await self._run_pass(options)
        stable = attempt.revision == self._revision
        complete = stable and not any(offer.failed for offer in attempt.offers)
        catalog = self._resolve(attempt, complete=complete)
        if complete and all(offer.cacheable for offer in attempt.offers):
            self._store((options.cwd, attempt.revision), catalog)
        return catalog

    async def _run_pass(self, options: SkillLookupOptions) -> _DiscoveryRound:
        current = _DiscoveryRound(
            offers=[_ProviderAnswer(registration) for registration in self._providers.values()],
            runtime=tuple(self._runtime.values()),
            revision=self._revision,
        )
        # Providers are started in registration order and listened to concurrently, so one
        # slow remote provider does not add its latency to every other one.
        async with anyio.create_task_group() as group:
            for offer in current.offers:
                group.start_soon(self._listen, offer, options)
        return current

    async def _listen(self, offer: _ProviderAnswer, options: SkillLookupOptions) -> None:
        provider = offer.registration.provider
        with anyio.move_on_after(self._provider_timeout) as scope:
            try:
                offer.candidates = tuple(await provider.list(options))
            except Exception as error:
                offer.failed = True
                _log.warning(
                    "skill_provider_skipped",
                    provider=provider.name,
                    reason=f"list() raised {error!r}",
                )
                return
        offer.cacheable = _vouches_for(offer.registration, options)
        if scope.cancelled_caught:
            offer.failed = True
            _log.warning(
                "skill_provider_skipped",
                provider=provider.name,
                reason=f"list() took longer than {self._provider_timeout} s",
            )

    def _resolve(self, attempt: _DiscoveryRound, *, complete: bool) -> _Catalog:
        # (rank, order, position, skill): (order, position) is unique, so sorting these tuples
        # never compares two skills, and needs no key function.
        ranked: list[tuple[int | float, int, int, _ResolvedSkill]] = []
        for position, definition in enumerate(attempt.runtime):
            candidate = _runtime_candidate(definition)
            ranked.append((RUNTIME_RANK, _RUNTIME_ORDER, position, _ResolvedSkill(candidate, None)))
        live: list[_Registration] = []
        for offer in attempt.offers:
            # Validation happens after listening, in the caller's task, so a contract violation
            # surfaces as a plain SkillContractError rather than inside an exception group.
            registration = offer.registration
            name = registration.provider.name
            order = registration.order
            # A provider removed during the pass must not surface even in an uncached,
            # incomplete answer; asked once per provider, not once per skill.
            if self._is_current(registration):
                live.append(registration)
            for position, candidate in enumerate(offer.candidates):
                _validate(candidate, name, SkillCandidate)
                ranked.append(
                    (candidate.rank, order, position, _ResolvedSkill(candidate, registration))
                )
        ranked.sort()
        winners: dict[str, _ResolvedSkill] = {}
        shadowed: list[ShadowedSkill] = []
        for *_, entry in ranked:
            name = entry.candidate.name
            kept = winners.get(name)
            if kept is None:
                owner = entry.registration
                if owner in live if owner is not None else self._is_live(entry):
                    winners[name] = entry
                continue
            shadowed.append(ShadowedSkill(skill=entry.candidate, winner=kept.candidate))
            _log.warning(
                "skill_shadowed",
                skill=name,
                provider=entry.candidate.provider,
                path=entry.candidate.path,
                winner_provider=kept.candidate.provider,
                winner_path=kept.candidate.path,
            )
        ordered = {name: winners[name] for name in sorted(winners)}
        skills = tuple(winner.candidate for winner in ordered.values())
        return _Catalog(
            winners=ordered,
            snapshot=SkillSnapshot(skills=skills, complete=complete, shadowed=tuple(shadowed)),
        )

    def _is_live(self, winner: _ResolvedSkill) -> bool:
        if winner.registration is not None:
            return self._is_current(winner.registration)
        definition = winner.candidate.locator
        return isinstance(definition, SkillDefinition) and self._is_live_runtime(definition)

    def _store(self, key: tuple[str | None, int], catalog: _Catalog) -> None:
        with self._lock:
            if key[1] != self._revision:
                return  # invalidated meanwhile (perhaps from another thread): already stale
            self._cache[key] = catalog
            while len(self._cache) > self._cache_bound:
                self._cache.popitem(last=False)


def _noop() -> None:
    return None


def _vouches_for(registration: _Registration, options: SkillLookupOptions) -> bool:
    """Whether the provider lets its answer for ``options`` be cached (by default it does)."""
    cacheable = registration.hooks.cacheable
    if cacheable is None:
        return True
    try:
        return cacheable(options) is True
    except Exception as error:
        # Not cached is always correct, merely slower.
        _log.warning(
            "skill_provider_cacheable_failed",
            provider=registration.provider.name,
            error=repr(error),
        )
        return False


def _runtime_candidate(definition: SkillDefinition) -> SkillCandidate:
    fields = summary_fields(definition)
    fields["provider"] = RUNTIME_PROVIDER
    return SkillCandidate(
        **fields,
        rank=RUNTIME_RANK,
        locator=definition,
        path=definition.path,
        metadata=definition.metadata,
        argument_hint=definition.argument_hint,
    )


# -- contract validation ---------------------------------------------------------------------


def _validate(value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]) -> None:
    """Raise `SkillContractError` naming the first way ``value`` breaks the provider contract
    (contract §4): the summary fields, then a candidate's rank or a definition's content, then
    the path."""
    problem = _contract_problem(value, provider, kind)
    if problem is not None:
        raise SkillContractError(provider, problem)


def _contract_problem(
    value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]
) -> str | None:
    if not isinstance(value, kind):
        what = "candidate" if kind is SkillCandidate else "definition"
        return f"a non-{what} value {value!r}"
    name = value.name
    if not is_skill_name(name):
        return f"an invalid name {name!r}"
    where = f'skill "{name}" with'
    if not isinstance(value.description, str) or not value.description.strip():
        return f"{where} an empty or non-string description"
    if value.when_to_use is not None and not isinstance(value.when_to_use, str):
        return f"{where} a non-string when_to_use {value.when_to_use!r}"
    if not isinstance(value.disable_model_invocation, bool):
        return f"{where} a non-boolean disable_model_invocation {value.disable_model_invocation!r}"
    if not isinstance(value.user_invocable, bool):
        return f"{where} a non-boolean user_invocable {value.user_invocable!r}"
    if not isinstance(value.source, str):
        return f"{where} a non-string source {value.source!r}"
    if value.provider != provider:
        return f"{where} provider {value.provider!r} instead of {provider!r}"
    base = value.resource_base
    if base is not None and not (
        (isinstance(base, DirectoryResource) and isinstance(base.path, str) and base.path)
        or (isinstance(base, UrlResource) and isinstance(base.url, str) and base.url)
        or (isinstance(base, OpaqueResource) and isinstance(base.description, str))
    ):
        return f"{where} an invalid resource_base {base!r}"
    if isinstance(value, SkillDefinition):
        if not isinstance(value.content, str):
            return f"{where} non-string content"
    else:
        rank = value.rank
        if isinstance(rank, bool) or not isinstance(rank, int | float) or not math.isfinite(rank):
            return f"{where} an invalid rank {rank!r}"
    if value.path is not None and not isinstance(value.path, str):
        return f"{where} a non-string path {value.path!r}"
    return None
