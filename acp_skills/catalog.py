"""The skill catalog: the short list of skills the model sees at the start of a session.

Rendering is pure (summaries in, text out); only `SkillCatalogContributor` talks to the
registry. The catalog carries names and one-line descriptions and nothing else: no
``when_to_use``, source, provider, path or body ever reaches it, so the model has to call the
``skill`` tool to learn more (progressive disclosure).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from .model import PrefixContext, PrefixMessage, PrefixNext, SkillLookupOptions, SkillSummary
from .registry import SkillRegistry
from .safe_text import remove_unsafe_characters

__all__ = [
    "DEFAULT_MAX_DESCRIPTION_LENGTH",
    "SkillCatalogContributor",
    "normalize_description",
    "render_catalog",
    "shorten_description",
]

DEFAULT_MAX_DESCRIPTION_LENGTH = 500

# `str.split()` already breaks on every character `str.isspace()` accepts: ASCII whitespace,
# NEL, the no-break spaces (U+00A0, U+202F), the Unicode space separators and the line and
# paragraph separators. U+FEFF is not whitespace to Python, yet it is what a byte-order mark left
# in the middle of concatenated text looks like, so it is folded in too. Other invisible format
# characters (U+200B, U+200C, U+200D, U+2060) are deliberately kept: the joiners carry meaning in
# emoji sequences and in scripts such as Persian, and none of them can break a catalog line.
_BYTE_ORDER_MARK = "\ufeff"

_ELLIPSIS = "..."


def _check_max_length(max_length: object) -> int:
    # A bool is an int to Python, but `max_length=True` is always a mistake.
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"max_length must be an integer >= 3, got {max_length!r}")
    return max_length


def shorten_description(text: str, max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH) -> str:
    """Clean, collapse and truncate a description, without any escaping.

    First, control characters other than whitespace, DEL, C1 controls and bidirectional
    overrides and isolates are removed, and lone surrogates become U+FFFD (see
    `acp_skills.safe_text`). Then every run of whitespace (newlines, tabs, no-break spaces,
    U+FEFF, ...) becomes one space and the ends are stripped. A result longer than
    ``max_length`` code points keeps its first ``max_length - 3`` code points followed by
    ``...``. This is what an editor shows literally (slash-command descriptions); the
    model-facing catalog escapes it further.

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3.
    """
    limit = _check_max_length(max_length)
    cleaned = remove_unsafe_characters(text)
    collapsed = " ".join(cleaned.replace(_BYTE_ORDER_MARK, " ").split())
    if len(collapsed) > limit:
        # Python strings index code points, so an emoji counts as one and is never split into
        # surrogate halves (a combining sequence can still be cut between its code points).
        collapsed = collapsed[: limit - len(_ELLIPSIS)] + _ELLIPSIS
    return collapsed


def normalize_description(text: str, max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH) -> str:
    """Turn a skill description into one safe catalog line.

    `shorten_description` (unsafe characters removed, whitespace collapsed, truncated), then
    ``&``, ``<`` and ``>`` are escaped; escaping comes last so truncation never cuts an entity
    in half (the escaped text may therefore be longer than ``max_length``).

    Args:
        text: the raw description.
        max_length: the longest description kept whole, in code points; an integer >= 3 so the
            ellipsis always fits.

    Returns:
        The normalized, possibly truncated, escaped description.

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3.
    """
    return html.escape(shorten_description(text, max_length), quote=False)


def render_catalog(
    skills: Iterable[SkillSummary],
    max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH,
    *,
    tool_name: str = "skill",
) -> str | None:
    """Render the catalog message for a set of model-visible skills.

    Skills marked ``disable_model_invocation`` are left out even if the caller passes them (for
    instance a whole snapshot), so the catalog can never advertise a skill the tool refuses.

    Args:
        skills: the skills to list, in any order; they are sorted by name (code-point order).
        max_length: the description bound passed to `normalize_description`.
        tool_name: the name of the tool the guidance tells the model to call.

    Returns:
        One text wrapped in ``<system-reminder>`` tags, or ``None`` when there is nothing to list.

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3.
    """
    limit = _check_max_length(max_length)
    visible = sorted(
        (skill for skill in skills if not skill.disable_model_invocation),
        key=lambda skill: skill.name,
    )
    if not visible:
        return None
    # Registry-served names match the grammar and need no escaping; escaping anyway keeps a
    # hand-built summary from injecting markup or control characters through this function.
    entries = [
        f"- `{html.escape(remove_unsafe_characters(skill.name), quote=False)}`: "
        f"{normalize_description(skill.description, limit)}"
        for skill in visible
    ]
    lines = [
        "<system-reminder>",
        "Skills are available in this session. A skill is a packaged set of instructions for one "
        "kind of task. The catalog below gives each skill's name and a short summary.",
        "",
        "<available_skills>",
        *entries,
        "</available_skills>",
        "",
        "How to use skills:",
        f"- If the user names a skill, or the task clearly matches a skill's summary, call the "
        f"`{tool_name}` tool with that skill's exact name before you act on the task.",
        "- When more than one skill applies, load each of them and follow the complete "
        "instructions every one of them returns.",
        "- The catalog holds summaries only. Never act on a skill from its summary alone: "
        "load it first.",
        "</system-reminder>",
    ]
    return "\n".join(lines)


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
        tool_name: str = "skill",
    ) -> None:
        self._registry = registry
        self._max_length = _check_max_length(max_length)
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
