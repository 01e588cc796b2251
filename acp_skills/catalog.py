"""`SkillCatalogContributor`: puts the skill catalog into every session's prefix.

Rendering the catalog is pure and lives in `acp_skills.render`; this is the part that asks the
registry which skills a session can see, applies the catalog budget, and tells what the budget
did (a warning in the log, and `describe_catalog_fit` for people).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

import structlog

from .model import PrefixContext, PrefixMessage, PrefixNext, SkillLookupOptions, SkillSnapshot
from .registry import SkillRegistry
from .render import (
    DEFAULT_MAX_DESCRIPTION_LENGTH,
    SKILL_TOOL_NAME,
    CatalogFit,
    check_catalog_budget,
    check_max_length,
    fit_catalog,
)

__all__ = ["CatalogFitListener", "SkillCatalogContributor", "describe_catalog_fit"]

_log = structlog.get_logger(__name__)

CatalogFitListener = Callable[[PrefixContext, CatalogFit], None]
"""Called with each session's catalog outcome as the contributor composes it."""

# Catalogs kept per contributor, one per snapshot: sessions sharing a working directory and a
# registry revision share one rendering (and one outcome object).
_FITS_KEPT = 16


class SkillCatalogContributor:
    """A session-prefix contributor that puts the skill catalog ahead of the conversation.

    It asks the registry for the skills of the session's ``cwd`` and prepends one user-role
    message holding the catalog to whatever the later contributors return. It adds nothing when
    the session cannot call the skill tool (a catalog the model cannot act on only wastes
    context) or when no skill is left to list.

    With a ``budget``, the catalog is fitted as `fit_catalog` describes (the registry's
    snapshot supplies the ranks that order omission). Each distinct outcome that shortens or
    omits is logged once as a ``skill_catalog_over_budget`` warning with the counts.

    Args:
        registry: where the skills come from.
        max_length: the description bound passed to `normalize_description`.
        tool_name: the name under which the session exposes the skill tool; the catalog is only
            contributed when the session's tools include it.
        budget: the most characters the catalog message may have; ``None`` for no limit.
        pinned_skills: names always listed in full, first.
        hidden_skills: names never listed (they still load by exact name).
        on_fit: called with the session's context and its catalog's outcome every time this
            contributor composes for a session (also when it contributes nothing).

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3 or ``budget`` is neither ``None``
            nor a positive integer.
    """

    def __init__(
        self,
        registry: SkillRegistry,
        *,
        max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH,
        tool_name: str = SKILL_TOOL_NAME,
        budget: int | None = None,
        pinned_skills: Iterable[str] = (),
        hidden_skills: Iterable[str] = (),
        on_fit: CatalogFitListener | None = None,
    ) -> None:
        self._registry = registry
        self._max_length = check_max_length(max_length)
        self._tool_name = tool_name
        self._budget = check_catalog_budget(budget)
        self._pinned = tuple(pinned_skills)
        self._hidden = tuple(hidden_skills)
        self._on_fit = on_fit
        self._fits: OrderedDict[int, tuple[SkillSnapshot, CatalogFit]] = OrderedDict()

    async def __call__(self, context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        """Compose this contributor's part of the prefix.

        Args:
            context: the session being composed for.
            next: returns the messages of the contributors registered after this one.

        Returns:
            The catalog message followed by ``next()``'s messages, or ``next()``'s result itself
            when there is nothing to contribute.
        """
        if self._tool_name not in context.tool_names:
            # Checked before listing so a session without the tool never triggers discovery.
            later = await next()
            self._tell(context, CatalogFit(text=None, limit=self._budget, used=0))
            return later
        snapshot = await self._registry.snapshot(SkillLookupOptions(cwd=context.cwd))
        fit = self._fit(snapshot, context)
        later = await next()
        self._tell(context, fit)
        if fit.text is None:
            return later
        # Prepending after awaiting the rest keeps contributions in registration order.
        return (PrefixMessage(role="user", text=fit.text), *later)

    def _fit(self, snapshot: SkillSnapshot, context: PrefixContext) -> CatalogFit:
        # The registry returns the same snapshot object while its catalog for this cwd is
        # cached, so identity says "same skills": the rendering is done once for all of them.
        kept = self._fits.get(id(snapshot))
        if kept is not None and kept[0] is snapshot:
            self._fits.move_to_end(id(snapshot))
            return kept[1]
        fit = fit_catalog(
            snapshot.skills,
            self._max_length,
            tool_name=self._tool_name,
            budget=self._budget,
            pinned=self._pinned,
            hidden=self._hidden,
        )
        if fit.shortened or fit.omitted or not fit.within_budget:
            _log.warning(
                "skill_catalog_over_budget",
                cwd=context.cwd,
                session_id=context.session_id,
                limit=fit.limit,
                used=fit.used,
                listed=len(fit.listed),
                shortened=fit.shortened,
                omitted=len(fit.omitted),
                description_cap=fit.description_cap,
                within_budget=fit.within_budget,
            )
        # Holding the snapshot keeps its id from being reused by another object.
        self._fits[id(snapshot)] = (snapshot, fit)
        while len(self._fits) > _FITS_KEPT:
            self._fits.popitem(last=False)
        return fit

    def _tell(self, context: PrefixContext, fit: CatalogFit) -> None:
        if self._on_fit is not None:
            self._on_fit(context, fit)


def describe_catalog_fit(fit: CatalogFit) -> str:
    """What a catalog budget did, in one or two lines for a person (a CLI, ``/skills``).

    For example::

        Catalog: 7,964 of 8,000 characters; 112 skills listed, 37 descriptions shortened to
        at most 60 characters.
        9,888 skills not listed (the skill tool's query finds them): a-skill, b-skill, ...
    """
    if fit.text is None:
        first = "Catalog: empty, no skill to list"
    elif fit.limit is None:
        first = f"Catalog: {fit.used:,} characters (no budget)"
    else:
        first = f"Catalog: {fit.used:,} of {fit.limit:,} characters"
    details = []
    if fit.text is not None:
        details.append(f"{_count(len(fit.listed), 'skill')} listed")
    if fit.shortened:
        details.append(
            f"{_count(fit.shortened, 'description')} shortened to at most "
            f"{fit.description_cap} characters"
        )
    elif fit.text is not None and not fit.omitted:
        details.append("every description in full")
    if fit.hidden:
        details.append(f"{len(fit.hidden):,} hidden")
    line = f"{first}; {', '.join(details)}." if details else f"{first}."
    if not fit.within_budget:
        line += " Over budget: the catalog's own text and the pinned skills take more room."
    if not fit.omitted:
        return line
    names = ", ".join(fit.omitted[:5]) + (", ..." if len(fit.omitted) > 5 else "")
    verb = "is" if len(fit.omitted) == 1 else "are"
    return (
        f"{line}\n{_count(len(fit.omitted), 'skill')} {verb} not listed (the skill tool's query "
        f"finds them): {names}"
    )


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"
