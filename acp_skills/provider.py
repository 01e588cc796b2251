"""The provider seam: how a source of skills plugs into a `SkillRegistry`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .model import SkillCandidate, SkillDefinition, SkillLookupOptions


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

    Optional hooks, looked up by name:

    * ``on_register(handle: ProviderHandle) -> None``: called once, right after registration, so
      the provider can invalidate itself later (for instance from a file watcher);
    * ``on_dispose(handle: ProviderHandle) -> None``: called once when that registration is
      disposed, so the provider can release what it holds for it (the watcher's thread);
    * ``cacheable(options: SkillLookupOptions) -> bool``: asked after each ``list``; ``False``
      keeps catalogs built from that answer out of the registry's cache (the provider cannot
      promise to invalidate when it changes, say because its watcher is down), so every lookup
      discovers afresh until it says ``True`` again.
    * ``async diagnose(options) -> Sequence[Diagnostic]`` (`acp_skills.diagnostics`): what is
      wrong with its skills for ``options``, which `SkillRegistry.diagnose` gathers for the
      ``/skills`` command, ``_skills/list`` and the ``acp-skills`` command line.
    """

    @property
    def name(self) -> str: ...

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]: ...

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None: ...
