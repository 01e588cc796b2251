"""Everything the model reads about skills, rendered in one place: pure values in, text out.

    render_catalog         the catalog message: names and one-line descriptions
    render_skill_content   a loaded skill: where its resources are, then its body verbatim
    normalize_description  one safe catalog line (cleaned, collapsed, cut, escaped)
    shorten_description    the same without escaping, for what an editor shows literally

The catalog carries names and one-line descriptions and nothing else: no ``when_to_use``,
source, provider, path or body ever reaches it, so the model has to call the ``skill`` tool to
learn more (progressive disclosure).
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable

from .model import (
    SKILL_FILE_NAME,
    DirectoryResource,
    OpaqueResource,
    SkillDefinition,
    SkillSummary,
    UrlResource,
)
from .safe_text import remove_unsafe_characters

__all__ = [
    "DEFAULT_MAX_DESCRIPTION_LENGTH",
    "SKILL_TOOL_NAME",
    "check_max_length",
    "cut",
    "is_flat_skill",
    "normalize_description",
    "render_catalog",
    "render_skill_content",
    "shorten_description",
]

SKILL_TOOL_NAME = "skill"
DEFAULT_MAX_DESCRIPTION_LENGTH = 500

# `str.split()` already breaks on every character `str.isspace()` accepts: ASCII whitespace,
# NEL, the no-break spaces (U+00A0, U+202F), the Unicode space separators and the line and
# paragraph separators. U+FEFF is not whitespace to Python, yet it is what a byte-order mark left
# in the middle of concatenated text looks like, so it is folded in too. Other invisible format
# characters (U+200B, U+200C, U+200D, U+2060) are deliberately kept: the joiners carry meaning in
# emoji sequences and in scripts such as Persian, and none of them can break a catalog line.
_BYTE_ORDER_MARK = "\ufeff"

_ELLIPSIS = "..."


def cut(text: str, limit: int) -> str:
    """``text`` itself when it has at most ``limit`` code points, else its start and ``...``
    within ``limit`` (at least 3)."""
    if len(text) <= limit:
        return text
    # Python strings index code points, so an emoji counts as one and is never split into
    # surrogate halves (a combining sequence can still be cut between its code points).
    return text[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def check_max_length(max_length: object) -> int:
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
    limit = check_max_length(max_length)
    cleaned = remove_unsafe_characters(text)
    collapsed = " ".join(cleaned.replace(_BYTE_ORDER_MARK, " ").split())
    return cut(collapsed, limit)


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
    tool_name: str = SKILL_TOOL_NAME,
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
    limit = check_max_length(max_length)
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


def is_flat_skill(skill_file: str | None, base: DirectoryResource) -> bool:
    """Whether a skill is a flat ``<name>.md``: a file lying directly in its resource directory
    under a name other than ``SKILL.md``.

    Such a directory is a skills root, shared with every other skill in it, so it has no
    resources of this skill to read (contract §7). A bundle's file is its directory's
    ``SKILL.md``; a skill with no file, or a file elsewhere, owns its directory.
    """
    if skill_file is None:
        return False
    folder, file_name = os.path.split(os.path.normpath(skill_file))
    return file_name != SKILL_FILE_NAME and os.path.normcase(folder) == os.path.normcase(
        os.path.normpath(base.path)
    )


def _escape_attribute(value: str) -> str:
    # `>` needs no escaping inside a quoted attribute, but escaping it too keeps the opening tag
    # unambiguous for a model reading it and costs nothing for grammar-valid names.
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def _escape_text(value: str) -> str:
    # The same escaping as catalog descriptions: `&` first, so entities are not escaped twice.
    # Hints carry provider-given text (an opaque base's description): no control characters.
    return html.escape(remove_unsafe_characters(value), quote=False)


def _resource_hints(definition: SkillDefinition) -> list[str]:
    base = definition.resource_base
    if isinstance(base, DirectoryResource):
        hints = [
            f"Base directory: {_escape_text(base.path)}",
            "Relative paths in this skill (scripts, references, assets) resolve against that "
            "directory.",
        ]
        if not is_flat_skill(definition.path, base) and not definition.disable_model_invocation:
            # A flat skill's directory is shared with other skills: nothing to read there. A
            # skill the model may not load (a person invoked it) serves it no files either.
            hints.append(
                f"To read one of its files, call the `{SKILL_TOOL_NAME}` tool with this skill's "
                "name and the file's path relative to that directory as `path`."
            )
    elif isinstance(base, UrlResource):
        hints = [
            f"Base URL: {_escape_text(base.url)}",
            "Relative paths in this skill (scripts, references, assets) resolve against that URL.",
        ]
    elif isinstance(base, OpaqueResource):
        hints = [f"How to reach this skill's resources: {_escape_text(base.description)}"]
    else:
        hints = [
            "This skill has no resource directory or URL; any resources it refers to are "
            f'managed by the skill provider "{_escape_text(definition.provider)}".'
        ]
    hints.append(
        "Load a resource this skill refers to only when the task needs it, not ahead of time."
    )
    return hints


def render_skill_content(definition: SkillDefinition) -> str:
    """Render a loaded skill as the text the model receives.

    The name is escaped for an attribute (``&``, ``"``, ``<``, ``>``), the resource hints like
    catalog descriptions (``&``, ``<``, ``>``), and the body is kept verbatim: it is the skill
    author's Markdown, and escaping it would change the instructions. The directory's contents
    are never listed and ``when_to_use`` is never included.

    Args:
        definition: the loaded skill.

    Returns:
        The ``<skill_content>`` block, lines joined with ``\\n``, without a trailing newline.
    """
    return "\n".join(
        [
            f'<skill_content name="{_escape_attribute(definition.name)}">',
            "<skill_resources>",
            *_resource_hints(definition),
            "</skill_resources>",
            "",
            "<skill_instructions>",
            definition.content,
            "</skill_instructions>",
            "</skill_content>",
        ]
    )
