"""The provider seam: how a source of skills plugs into a `SkillRegistry`, and its optional hooks.

A provider implements `SkillProvider`; it may also implement any of the hook protocols below.
`provider_hooks` checks them when the provider is registered: a hook that is not callable, or an
attribute whose name is a near miss of a hook's (``on_registered``, ``cachable``), is a
``TypeError`` there rather than a hook silently never called.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .model import SkillCandidate, SkillDefinition, SkillLookupOptions

if TYPE_CHECKING:
    from .diagnostics import Diagnostic

__all__ = [
    "CacheableProvider",
    "DiagnosingProvider",
    "DisposableProvider",
    "ProviderHandle",
    "ProviderHooks",
    "RegisteringProvider",
    "SkillProvider",
    "provider_hooks",
]


@runtime_checkable
class ProviderHandle(Protocol):
    """What `SkillRegistry.register_provider` returns."""

    def dispose(self) -> None:
        """Remove the provider and drop every cached catalog. Idempotent."""

    def invalidate(self) -> None:
        """Tell the registry the provider's skills changed. Inert once disposed or replaced."""


@runtime_checkable
class SkillProvider(Protocol):
    """A source of skills.

    ``name`` is unique within a registry (``runtime`` is reserved). Remote providers connect,
    authenticate and discover inside ``list``. The registry hands ``get`` the very candidate
    object ``list`` returned, and the caller's options object itself. ``get`` returning ``None``
    means the skill can no longer be loaded.
    """

    @property
    def name(self) -> str: ...

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]: ...

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None: ...


class RegisteringProvider(Protocol):
    """Called once, right after registration, so the provider can invalidate itself later."""

    def on_register(self, handle: ProviderHandle) -> None: ...


class DisposableProvider(Protocol):
    """Called once when that registration is disposed, to release what it holds for it."""

    def on_dispose(self, handle: ProviderHandle) -> None: ...


class CacheableProvider(Protocol):
    """Asked after each ``list``: ``False`` keeps catalogs built from that answer out of the
    cache (the provider cannot promise to invalidate, say because its watcher is down)."""

    def cacheable(self, options: SkillLookupOptions) -> bool: ...


class DiagnosingProvider(Protocol):
    """What is wrong with its skills for ``options`` (`SkillRegistry.diagnose` gathers it)."""

    async def diagnose(self, options: SkillLookupOptions) -> Sequence[Diagnostic]: ...


@dataclass(frozen=True, slots=True)
class ProviderHooks:
    """The optional hooks a provider implements, bound to it (``None`` when it has none)."""

    on_register: Callable[[ProviderHandle], None] | None = None
    on_dispose: Callable[[ProviderHandle], None] | None = None
    cacheable: Callable[[SkillLookupOptions], bool] | None = None
    diagnose: Callable[[SkillLookupOptions], Awaitable[Sequence[Diagnostic]]] | None = None


_HOOKS = ("on_register", "on_dispose", "cacheable", "diagnose")
_KNOWN = frozenset({"name", "list", "get", *_HOOKS})


def provider_hooks(provider: SkillProvider) -> ProviderHooks:
    """The hooks ``provider`` implements, checked.

    Raises:
        TypeError: a hook attribute is not callable, or a public attribute's name is a near
            miss of a hook's name (a misspelled hook would otherwise never be called).
    """
    found = {}
    for hook in _HOOKS:
        value = getattr(provider, hook, None)
        if value is not None and not callable(value):
            raise TypeError(
                f'skill provider "{provider.name}": hook {hook} is not callable, got {value!r}'
            )
        found[hook] = value
    for attribute in dir(provider):
        if attribute.startswith("_") or attribute in _KNOWN:
            continue
        near = difflib.get_close_matches(attribute, _HOOKS, n=1, cutoff=0.8)
        if near:
            raise TypeError(
                f'skill provider "{provider.name}" has {attribute!r}, which is not a provider '
                f"hook; did you mean {near[0]!r}?"
            )
    return ProviderHooks(**found)
