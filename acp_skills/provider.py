"""The provider seam (contract §3, §4): `SkillProvider`, its optional hooks, and the one
validator of what a provider returns."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

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


@runtime_checkable
class ProviderHandle(Protocol):
    """What `SkillRegistry.register_provider` returns."""

    def dispose(self) -> None:
        """Remove the provider and drop every cached catalog. Idempotent."""

    def invalidate(self) -> None:
        """Tell the registry the provider's skills changed. Inert once disposed or replaced."""


@runtime_checkable
class SkillProvider(Protocol):
    """A source of skills (``name`` unique; ``runtime`` reserved); ``get`` receives the very
    candidate ``list`` returned. Optional hooks (docs/architecture.md): ``on_register``,
    ``on_dispose``, ``cacheable``, ``diagnose``, ``read_path``, ``find_uri``."""

    @property
    def name(self) -> str: ...

    async def list(self, options: SkillLookupOptions) -> Sequence[SkillCandidate]: ...

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None: ...


_HOOKS = ("on_register", "on_dispose", "cacheable", "diagnose", "read_path", "find_uri")


def provider_hooks(provider: SkillProvider) -> dict[str, Callable[..., Any]]:
    """The optional hooks ``provider`` has, by name (a misspelled one is never called); an
    ``async`` ``cacheable`` is a ``TypeError``."""
    hooks = {hook: found for hook in _HOOKS if (found := getattr(provider, hook, None)) is not None}
    if inspect.iscoroutinefunction(hooks.get("cacheable")):  # it would answer a coroutine, not True
        raise TypeError(f'skill provider "{provider.name}": cacheable must not be async')
    return hooks


def _valid_base(base: object) -> bool:
    return base is None or (
        (isinstance(base, DirectoryResource) and isinstance(base.path, str) and bool(base.path))
        or (isinstance(base, UrlResource) and isinstance(base.url, str) and bool(base.url))
        or (isinstance(base, OpaqueResource) and isinstance(base.description, str))
    )


def _finite_rank(rank: object) -> bool:
    return not isinstance(rank, bool) and isinstance(rank, int | float) and math.isfinite(rank)


# Each field's check and how a violation is named: 'skill "x" with a non-string source None'.
_CHECKS: tuple[tuple[str, str, Callable[[object], bool]], ...] = (
    ("when_to_use", "a non-string", lambda v: v is None or isinstance(v, str)),
    ("disable_model_invocation", "a non-boolean", lambda v: isinstance(v, bool)),
    ("user_invocable", "a non-boolean", lambda v: isinstance(v, bool)),
    ("source", "a non-string", lambda v: isinstance(v, str)),
    ("resource_base", "an invalid", _valid_base),
    ("path", "a non-string", lambda v: v is None or isinstance(v, str)),
)
_ALL_CHECKS: dict[type, tuple[tuple[str, str, Callable[[object], bool]], ...]] = {
    SkillCandidate: (*_CHECKS, ("rank", "an invalid", _finite_rank)),
    SkillDefinition: (*_CHECKS, ("content", "a non-string", lambda v: isinstance(v, str))),
}


def offer_problem(
    value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]
) -> str | None:
    """What breaks the contract in a candidate (from ``list``) or definition (from ``get``)."""
    if not isinstance(value, kind):
        return f"a non-{'candidate' if kind is SkillCandidate else 'definition'} value {value!r}"
    name, description = value.name, value.description
    if not is_skill_name(name):
        return f"an invalid name {name!r}"
    if not isinstance(description, str) or not description or description.isspace():
        return f'skill "{name}" with an empty or non-string description'
    if value.provider != provider:
        return f'skill "{name}" with provider {value.provider!r} instead of {provider!r}'
    for field, wrong, check in _ALL_CHECKS[kind]:
        if not check(found := getattr(value, field)):
            return f'skill "{name}" with {wrong} {field} {found!r}'
    return None


def validate_offer(
    value: object, provider: str, kind: type[SkillCandidate | SkillDefinition]
) -> None:
    """Check a candidate (from ``list``) or definition (from ``get``): `SkillContractError`."""
    if (problem := offer_problem(value, provider, kind)) is not None:
        raise SkillContractError(provider, problem)
