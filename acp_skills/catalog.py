"""`SkillCatalogContributor`: puts the skill catalog into every session's prefix.

Rendering the catalog is pure and lives in `acp_skills.render`; this is the part that asks the
registry which skills a session can see.
"""

from __future__ import annotations

from collections.abc import Sequence

from .model import PrefixContext, PrefixMessage, PrefixNext, SkillLookupOptions
from .registry import SkillRegistry
from .render import (
    DEFAULT_MAX_DESCRIPTION_LENGTH,
    SKILL_TOOL_NAME,
    check_max_length,
    render_catalog,
)

__all__ = ["SkillCatalogContributor"]


class SkillCatalogContributor:
    """A session-prefix contributor that puts the skill catalog ahead of the conversation.

    It asks the registry for the model-visible skills of the session's ``cwd`` and prepends one
    user-role message holding the catalog to whatever the later contributors return. It adds
    nothing when the session cannot call the skill tool (a catalog the model cannot act on only
    wastes context) or when no skill is visible.

    Args:
        registry: where the skills come from.
        max_length: the description bound passed to `normalize_description`.
        tool_name: the name under which the session exposes the skill tool; the catalog is only
            contributed when the session's tools include it.

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3.
    """

    def __init__(
        self,
        registry: SkillRegistry,
        *,
        max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH,
        tool_name: str = SKILL_TOOL_NAME,
    ) -> None:
        self._registry = registry
        self._max_length = check_max_length(max_length)
        self._tool_name = tool_name

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
            return await next()
        skills = await self._registry.list(SkillLookupOptions(cwd=context.cwd))
        catalog = render_catalog(skills, self._max_length, tool_name=self._tool_name)
        later = await next()
        if catalog is None:
            return later
        # Prepending after awaiting the rest keeps contributions in registration order.
        return (PrefixMessage(role="user", text=catalog), *later)
