"""The provider seam: `SkillProvider`, its optional hooks (``on_register``, ``on_dispose``,
``cacheable``, ``diagnose``), checked at registration, the optional abilities `PathReader` and
`UriFinder`, and `validate_offer` (contract §4)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .errors import SkillContractError
from .model import (
    DirectoryResource,
    OpaqueResource,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    UrlResource,
    is_skill_name,
)
from .quiet_log import get_logger

if TYPE_CHECKING:
    from .diagnostics import Diagnostic

_log = get_logger(__name__)


@runtime_checkable
class ProviderHandle(Protocol):
    """What `SkillRegistry.register_provider` returns."""

    def dispose(self) -> None:
        """Remove the provider and drop every cached catalog. Idempotent."""

    def invalidate(self) -> None:
        """Tell the registry the provider's skills changed. Inert once disposed or replaced."""


@runtime_checkable
class SkillProvider(Protocol):
    """A source of skills (``name`` unique; ``runtime`` reserved). ``get`` receives the very
    candidate ``list`` returned, and ``None`` from it means the skill can no longer load."""

    @property
    def name(self) -> str: ...

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]: ...

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None: ...


@runtime_checkable
class PathReader(Protocol):
    """A provider that reads its skills' files itself (an MCP server's, under a url): the
    ``skill`` tool's ``path`` goes to it instead of the skill's directory."""

    async def read_path(self, candidate: SkillCandidate, path: str, *, limit: int) -> str:
        """The text of ``path`` (relative, already checked) in ``candidate``'s bundle, at most
        ``limit`` bytes; a `Refusal` with the reason otherwise."""
        ...


@runtime_checkable
class UriFinder(Protocol):
    """A provider that finds a skill by the uri of its ``SKILL.md`` (an MCP server's, which may
    serve skills it does not list): the ``skill`` tool's ``name`` may be such a uri."""

    async def find_uri(self, uri: str, options: SkillLookupOptions) -> SkillCandidate | None:
        """The skill at ``uri`` for a lookup with ``options``, or ``None`` when this provider
        serves none there; a `Refusal` with the reason when it cannot tell or cannot use it."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderHooks:
    """A provider's optional hooks, bound (``None`` when absent)."""

    on_register: Callable[[ProviderHandle], None] | None = None
    on_dispose: Callable[[ProviderHandle], None] | None = None
    cacheable: Callable[[SkillLookupOptions], bool] | None = None
    diagnose: Callable[[SkillLookupOptions], Awaitable[Sequence[Diagnostic]]] | None = None

    def vouches_for(self, provider: str, options: SkillLookupOptions) -> bool:
        # No when it raises: not cached is always correct, merely slower.
        if self.cacheable is None:
            return True
        try:
            return self.cacheable(options) is True
        except Exception as error:
            _log.warning("skill_provider_cacheable_failed", provider=provider, error=repr(error))
            return False

    def disposed(self, provider: str, handle: ProviderHandle) -> None:
        try:
            if self.on_dispose is not None:
                self.on_dispose(handle)
        except Exception as error:
            _log.warning("skill_provider_dispose_failed", provider=provider, error=repr(error))


_HOOKS = ("on_register", "on_dispose", "cacheable", "diagnose")


def provider_hooks(provider: SkillProvider) -> ProviderHooks:
    """The hooks ``provider`` implements; ``TypeError`` for one that cannot be called as one."""
    found = {hook: getattr(provider, hook, None) for hook in _HOOKS}
    for hook, value in found.items():
        if value is not None and not callable(value):
            raise TypeError(
                f'skill provider "{provider.name}": hook {hook} is not callable, got {value!r}'
            )
        # Only `diagnose` is awaited; an async `cacheable` would answer a coroutine, never True.
        if hook != "diagnose" and inspect.iscoroutinefunction(value):
            raise TypeError(f'skill provider "{provider.name}": hook {hook} must not be async')
    return ProviderHooks(**found)


def validate_offer(
    value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]
) -> None:
    """Check a candidate (from ``list``) or definition (from ``get``): `SkillContractError`."""
    if (problem := _offer_problem(value, provider, kind)) is not None:
        raise SkillContractError(provider, problem)


def _offer_problem(
    value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]
) -> str | None:
    # Runs for every skill of every discovery: messages are formatted only for a violation.
    if not isinstance(value, kind):
        return f"a non-{'candidate' if kind is SkillCandidate else 'definition'} value {value!r}"
    name = value.name
    if not is_skill_name(name):
        return f"an invalid name {name!r}"
    description = value.description
    if not isinstance(description, str) or not description or description.isspace():
        return f'skill "{name}" with an empty or non-string description'
    if value.when_to_use is not None and not isinstance(value.when_to_use, str):
        return f'skill "{name}" with a non-string when_to_use {value.when_to_use!r}'
    if not isinstance(value.disable_model_invocation, bool):
        flag = value.disable_model_invocation
        return f'skill "{name}" with a non-boolean disable_model_invocation {flag!r}'
    if not isinstance(value.user_invocable, bool):
        return f'skill "{name}" with a non-boolean user_invocable {value.user_invocable!r}'
    if not isinstance(value.source, str):
        return f'skill "{name}" with a non-string source {value.source!r}'
    if value.provider != provider:
        return f'skill "{name}" with provider {value.provider!r} instead of {provider!r}'
    base = value.resource_base
    if base is not None and not (
        (isinstance(base, DirectoryResource) and isinstance(base.path, str) and base.path)
        or (isinstance(base, UrlResource) and isinstance(base.url, str) and base.url)
        or (isinstance(base, OpaqueResource) and isinstance(base.description, str))
    ):
        return f'skill "{name}" with an invalid resource_base {base!r}'
    if isinstance(value, SkillDefinition):
        if not isinstance(value.content, str):
            return f'skill "{name}" with non-string content'
    else:
        rank = value.rank
        if isinstance(rank, bool) or not isinstance(rank, int | float) or not math.isfinite(rank):
            return f'skill "{name}" with an invalid rank {rank!r}'
    if value.path is not None and not isinstance(value.path, str):
        return f'skill "{name}" with a non-string path {value.path!r}'
    return None
