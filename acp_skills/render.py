"""Everything the model reads about skills, rendered in one place: pure values in, text out.

    render_catalog         the catalog message: names and one-line descriptions
    fit_catalog            the same within a character budget, with what the budget did
    render_skill_content   a loaded skill: where its resources are, then its body verbatim
    render_skill_matches   the answer to the tool's ``query``: matching names and descriptions
    normalize_description  one safe catalog line (cleaned, collapsed, cut, escaped)
    shorten_description    the same without escaping, for what an editor shows literally

The catalog carries names and one-line descriptions and nothing else: no ``when_to_use``,
source, provider, path or body ever reaches it, so the model has to call the ``skill`` tool to
learn more (progressive disclosure).
"""

from __future__ import annotations

import html
import operator
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .model import (
    SKILL_FILE_NAME,
    DirectoryResource,
    OpaqueResource,
    SkillDefinition,
    SkillSummary,
    UrlResource,
)
from .safe_text import remove_unsafe_characters
from .search import SkillMatch

__all__ = [
    "BUDGET_DESCRIPTION_FLOOR",
    "DEFAULT_MAX_DESCRIPTION_LENGTH",
    "SKILL_TOOL_NAME",
    "CatalogFit",
    "check_catalog_budget",
    "check_max_length",
    "cut",
    "fit_catalog",
    "is_flat_skill",
    "normalize_description",
    "render_catalog",
    "render_skill_content",
    "render_skill_matches",
    "shorten_description",
]

SKILL_TOOL_NAME = "skill"
DEFAULT_MAX_DESCRIPTION_LENGTH = 500

BUDGET_DESCRIPTION_FLOOR = 60
"""A budget never cuts a description below this many code points: shorter than that, a summary
stops telling the model what the skill is for, and omitting skills serves it better."""

# `str.split()` already breaks on every character `str.isspace()` accepts: ASCII whitespace,
# NEL, the no-break spaces (U+00A0, U+202F), the Unicode space separators and the line and
# paragraph separators. U+FEFF is not whitespace to Python, yet it is what a byte-order mark left
# in the middle of concatenated text looks like, so it is folded in too. Other invisible format
# characters (U+200B, U+200C, U+200D, U+2060) are deliberately kept: the joiners carry meaning in
# emoji sequences and in scripts such as Persian, and none of them can break a catalog line.
_BYTE_ORDER_MARK = "\ufeff"

_ELLIPSIS = "..."

# A search answer is a short list to choose from; the full text comes with loading the skill.
_MATCH_DESCRIPTION_MAX = 200


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
    budget: int | None = None,
    pinned: Iterable[str] = (),
    hidden: Iterable[str] = (),
) -> str | None:
    """Render the catalog message for a set of model-visible skills.

    Skills marked ``disable_model_invocation`` are left out even if the caller passes them (for
    instance a whole snapshot), so the catalog can never advertise a skill the tool refuses.
    Without ``budget``, ``pinned`` and ``hidden`` the skills are listed by name with their
    normalized descriptions; the budget's steps are described in `fit_catalog`, which returns
    what they did along with the text.

    Args:
        skills: the skills to list, in any order; they are sorted by name (code-point order).
        max_length: the description bound passed to `normalize_description`.
        tool_name: the name of the tool the guidance tells the model to call.
        budget: the most characters the whole message may have; ``None`` for no limit.
        pinned: names of skills always listed in full, first.
        hidden: names of skills never listed.

    Returns:
        One text wrapped in ``<system-reminder>`` tags, or ``None`` when there is nothing to list.

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3, or ``budget`` is neither ``None``
            nor a positive integer.
    """
    return fit_catalog(
        skills, max_length, tool_name=tool_name, budget=budget, pinned=pinned, hidden=hidden
    ).text


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogFit:
    """A rendered catalog and what its budget did to it.

    Attributes:
        text: the catalog message, or ``None`` when no skill is left to list.
        limit: the budget in characters, or ``None`` for no limit.
        used: the characters (code points) of ``text``; 0 without text.
        shortened: how many descriptions the budget cut (the ``max_length`` bound, which
            applies with or without a budget, does not count).
        omitted: the skills left out for lack of room, sorted by name; the model finds them
            with the tool's ``query``.
        listed: the skills listed, in catalog order.
        hidden: the skills left out because a person hid them, sorted by name.
        description_cap: the uniform description length the budget chose, or ``None`` when
            it shortened nothing.
    """

    text: str | None
    limit: int | None
    used: int
    shortened: int = 0
    omitted: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    description_cap: int | None = None

    @property
    def within_budget(self) -> bool:
        """Whether ``text`` fits the budget (always, without one). A budget smaller than the
        text around the list and the pinned skills cannot be met: they are there anyway."""
        return self.limit is None or self.used <= self.limit


def check_catalog_budget(budget: object) -> int | None:
    """``budget`` itself when it is ``None`` or a positive integer, else ``ValueError``.

    Raises:
        ValueError: for anything else (a bool is not an integer here).
    """
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive integer or None, got {budget!r}")
    return budget


def fit_catalog(
    skills: Iterable[SkillSummary],
    max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH,
    *,
    tool_name: str = SKILL_TOOL_NAME,
    budget: int | None = None,
    pinned: Iterable[str] = (),
    hidden: Iterable[str] = (),
) -> CatalogFit:
    """Render the catalog within ``budget`` characters and say what that took.

    Hidden skills are dropped first (they still load by exact name). Pinned skills come first,
    by name, always with their whole normalized description; the others follow by name. When
    that is longer than ``budget``:

    1. every other description is cut to the widest uniform cap that fits, at a word boundary
       with ``...``, but never below `BUDGET_DESCRIPTION_FLOOR` code points;
    2. if even the floor does not fit, the other skills are listed at the floor in the
       registry's resolution order (``rank``, then name; a plain `SkillSummary` has no rank and
       counts as rank 0) for as long as they fit, and a last line says how many are not listed
       and that the tool's ``query`` finds them.

    The result depends only on the arguments: the same skills and budget give the same bytes.
    The text is longer than the budget only when no catalog meets it (the text around the
    list, the pinned skills and the closing line already exceed it); it is then the shortest
    catalog there is.

    Args:
        skills: the skills to list, in any order.
        max_length: the description bound passed to `normalize_description`.
        tool_name: the name of the tool the guidance tells the model to call.
        budget: the most characters the whole message may have; ``None`` for no limit.
        pinned: names of skills always listed in full, first (unknown names are ignored).
        hidden: names of skills never listed (hiding wins over pinning).

    Returns:
        The text and what the budget did.

    Raises:
        ValueError: if ``max_length`` is not an integer >= 3, or ``budget`` is neither ``None``
            nor a positive integer.
    """
    bound = check_max_length(max_length)
    limit = check_catalog_budget(budget)
    hidden_names = frozenset(hidden)
    pinned_names = frozenset(pinned) - hidden_names
    # Comprehensions rather than one loop: with ten thousand skills this part is most of
    # the cost of a budgeted catalog.
    visible = [skill for skill in skills if not skill.disable_model_invocation]
    hidden_found: tuple[str, ...] = ()
    if hidden_names:
        hidden_found = tuple(sorted(s.name for s in visible if s.name in hidden_names))
        visible = [skill for skill in visible if skill.name not in hidden_names]
    first: list[_CatalogLine] = []
    if pinned_names:
        first = [_CatalogLine(s, bound) for s in visible if s.name in pinned_names]
        visible = [skill for skill in visible if skill.name not in pinned_names]
    if not first and not visible:
        return CatalogFit(text=None, limit=limit, used=0, hidden=hidden_found)
    first.sort(key=_by_name)
    frame = _CatalogFrame(tool_name, first)
    # Entries are made on first use: a budget that lists a hundred skills out of ten thousand
    # never builds (or normalizes) the other entries.
    lines = _LazyLines(bound)

    if limit is None or frame.fits(lines.of(visible), None, limit):
        return _every_skill_listed(frame, first, lines.by_name(visible), None, limit, hidden_found)

    floor = min(BUDGET_DESCRIPTION_FLOOR, bound)
    # The narrowest cut the budget may make; none when the bound is already at the floor.
    narrowest = floor if floor < bound else None
    by_rank = _resolution_order(visible)
    if narrowest is not None and frame.fits(lines.of(by_rank), narrowest, limit):
        # Step 1. Lengths only grow with the cap, so the widest cap that fits is found by
        # bisection: the floor fits and `bound` (no cut at all) does not.
        fitting, too_wide = narrowest, bound
        while too_wide - fitting > 1:
            middle = (fitting + too_wide) // 2
            if frame.fits(lines.of(by_rank), middle, limit):
                fitting = middle
            else:
                too_wide = middle
        return _every_skill_listed(
            frame, first, lines.by_name(visible), fitting, limit, hidden_found
        )

    # Step 2: the floor for everyone does not fit either. List by rank while there is room for
    # the skill and for the closing line counting what is left out.
    room = limit - frame.length()
    kept = 0
    for line in lines.of(by_rank):
        cost = line.length(narrowest) + 1
        if cost + frame.omission_cost(len(by_rank) - kept - 1) > room:
            break
        room -= cost
        kept += 1
    shortest_omission = frame.length() + frame.omission_cost(len(by_rank))
    if (
        kept == 0
        and shortest_omission > limit
        and frame.fits(lines.of(by_rank), narrowest, shortest_omission)
    ):
        # No catalog meets the budget (the pinned skills, or the text around the list, take it
        # all). Then keep the shortest one: with a few short entries, listing them all at the
        # floor is shorter than the closing line that would replace them.
        return _every_skill_listed(
            frame, first, lines.by_name(visible), narrowest, limit, hidden_found
        )
    listed = list(lines.of(by_rank[:kept]))
    text = frame.render(listed, narrowest, omitted=len(by_rank) - kept)
    return CatalogFit(
        text=text,
        limit=limit,
        used=len(text),
        shortened=sum(line.is_cut(narrowest) for line in listed),
        omitted=tuple(sorted(map(_by_name, by_rank[kept:]))),
        listed=_names(first, listed),
        hidden=hidden_found,
        description_cap=narrowest,
    )


def _resolution_order(skills: list[SkillSummary]) -> list[SkillSummary]:
    """``skills`` by rank, then name: the registry's resolution order."""
    try:
        return sorted(skills, key=_by_rank)
    except AttributeError:
        # A plain summary has no rank: it counts as 0.
        return sorted(skills, key=lambda skill: (getattr(skill, "rank", 0), skill.name))


class _LazyLines:
    """The catalog entries of the unpinned skills, each made once, when first needed."""

    def __init__(self, bound: int) -> None:
        self._bound = bound
        self._made: dict[int, _CatalogLine] = {}

    def of(self, skills: Iterable[SkillSummary]) -> Iterator[_CatalogLine]:
        """The entries of ``skills``, in their order, made as the iteration reaches them."""
        for skill in skills:
            line = self._made.get(id(skill))
            if line is None:
                line = self._made[id(skill)] = _CatalogLine(skill, self._bound)
            yield line

    def by_name(self, skills: Iterable[SkillSummary]) -> list[_CatalogLine]:
        return list(self.of(sorted(skills, key=_by_name)))


def _every_skill_listed(
    frame: _CatalogFrame,
    first: Sequence[_CatalogLine],
    lines: list[_CatalogLine],
    cap: int | None,
    limit: int | None,
    hidden: tuple[str, ...],
) -> CatalogFit:
    text = frame.render(lines, cap)
    shortened = sum(line.is_cut(cap) for line in lines)
    return CatalogFit(
        text=text,
        limit=limit,
        used=len(text),
        shortened=shortened,
        listed=_names(first, lines),
        hidden=hidden,
        description_cap=cap if shortened else None,
    )


def _cut_at_word(text: str, cap: int) -> str:
    """``text`` cut to at most ``cap`` code points at a word boundary, ending in ``...``.

    Only called with ``len(text) > cap``. The cut falls on the last space that leaves room for
    the ellipsis; a first word longer than that is cut inside the word. Punctuation left
    dangling before the ellipsis (``,``, ``;``, ``:``) goes too. The kept text never gets
    shorter as ``cap`` grows, which the budget's bisection relies on.
    """
    room = cap - len(_ELLIPSIS)
    if text[room] == " ":
        kept = text[:room]
    else:
        space = text.rfind(" ", 0, room)
        kept = text[:space] if space > 0 else text[:room]
    return kept.rstrip(" ,;:") + _ELLIPSIS


class _CatalogLine:
    """One skill's catalog entry, normalized lazily: a budget that lists a hundred skills out
    of ten thousand needs the descriptions of little more than those hundred."""

    __slots__ = ("_bound", "_escapes", "_length", "_text", "name", "prefix", "skill")

    def __init__(self, skill: SkillSummary, bound: int) -> None:
        # Only the name for now; the rest waits for `text`.
        self.skill = skill
        self.name = skill.name
        self._bound = bound
        self._text: str | None = None
        self.prefix = ""
        self._escapes = False
        self._length = 0

    def text(self) -> str:
        """The description as the unbudgeted catalog has it, before escaping."""
        if self._text is None:
            # Registry-served names match the grammar and need no escaping; escaping anyway
            # keeps a hand-built summary from injecting markup or control characters.
            name = html.escape(remove_unsafe_characters(self.name), quote=False)
            self.prefix = f"- `{name}`: "
            self._text = shorten_description(self.skill.description, self._bound)
            self._escapes = any(mark in self._text for mark in "&<>")
            self._length = len(self.prefix) + len(self._escape(self._text))
        return self._text

    def is_cut(self, cap: int | None) -> bool:
        return cap is not None and len(self.text()) > cap

    def length(self, cap: int | None) -> int:
        text = self.text()
        if not self.is_cut(cap):
            return self._length
        assert cap is not None
        return len(self.prefix) + len(self._escape(_cut_at_word(text, cap)))

    def render(self, cap: int | None) -> str:
        text = self.text()
        if self.is_cut(cap):
            assert cap is not None
            text = _cut_at_word(text, cap)
        return self.prefix + self._escape(text)

    def _escape(self, text: str) -> str:
        return html.escape(text, quote=False) if self._escapes else text


# C-level sort keys (for skills and entries alike): Python key functions over ten thousand
# skills cost milliseconds.
_by_name = operator.attrgetter("name")
_by_rank = operator.attrgetter("rank", "name")


def _names(*groups: Sequence[_CatalogLine]) -> tuple[str, ...]:
    return tuple(line.name for group in groups for line in group)


def _omission_line(count: int, tool_name: str) -> str:
    skills = "skill is" if count == 1 else "skills are"
    return (
        f"({count} more {skills} not listed here for lack of room. To find one, call the "
        f"`{tool_name}` tool with `query` set to a few words describing the task.)"
    )


class _CatalogFrame:
    """Everything of a catalog but the unpinned skills: the text around the list, and the
    pinned skills, which are always there in full."""

    def __init__(self, tool_name: str, pinned: Sequence[_CatalogLine]) -> None:
        self._tool_name = tool_name
        self._pinned = [line.render(None) for line in pinned]
        self._head = [
            "<system-reminder>",
            "Skills are available in this session. A skill is a packaged set of instructions "
            "for one kind of task. The catalog below gives each skill's name and a short summary.",
            "",
            "<available_skills>",
            *self._pinned,
        ]
        self._tail = [
            "</available_skills>",
            "",
            "How to use skills:",
            f"- If the user names a skill, or the task clearly matches a skill's summary, call "
            f"the `{tool_name}` tool with that skill's exact name before you act on the task.",
            "- When more than one skill applies, load each of them and follow the complete "
            "instructions every one of them returns.",
            "- The catalog holds summaries only. Never act on a skill from its summary alone: "
            "load it first.",
            "</system-reminder>",
        ]
        # Lines are joined by newlines: one per line but the last.
        self._length = sum(len(line) + 1 for line in (*self._head, *self._tail)) - 1

    def length(self) -> int:
        """The characters of this frame with no unpinned skill and no omission line."""
        return self._length

    def omission_cost(self, count: int) -> int:
        """What the closing line costs when ``count`` skills are left out (with its newline)."""
        return len(_omission_line(count, self._tool_name)) + 1 if count else 0

    def fits(self, lines: Iterable[_CatalogLine], cap: int | None, limit: int) -> bool:
        """Whether the frame and every one of ``lines`` at ``cap`` fit in ``limit``.

        It stops adding at the first overflow, so a hopeless check costs little.
        """
        total = self._length
        for line in lines:
            total += line.length(cap) + 1
            if total > limit:
                return False
        return True

    def render(self, lines: Iterable[_CatalogLine], cap: int | None, *, omitted: int = 0) -> str:
        closing = [_omission_line(omitted, self._tool_name)] if omitted else []
        entries = [line.render(cap) for line in lines]
        return "\n".join([*self._head, *entries, *closing, *self._tail])


def render_skill_matches(matches: Sequence[SkillMatch], *, tool_name: str = SKILL_TOOL_NAME) -> str:
    """Render the answer to a ``query``: one ``name: description`` line per match, best first.

    Descriptions are normalized and escaped like the catalog's, and cut to 200 code points.
    With no match, the text says so and how to go on.
    """
    if not matches:
        return (
            "No skill matches the query. Try other words for the task (what it works on, the "
            "tool or kind of file involved), or load a skill from the catalog by its exact name."
        )
    lines = [
        f"Skills matching the query, best first. Load one by calling the `{tool_name}` tool "
        "with its exact name:"
    ]
    lines.extend(
        f"{html.escape(remove_unsafe_characters(match.name), quote=False)}: "
        f"{normalize_description(match.description, _MATCH_DESCRIPTION_MAX)}"
        for match in matches
    )
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
