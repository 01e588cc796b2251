"""The skill catalog (contract §6, §12): its rendering, its fit within a budget (a value), and
the session-prefix contributor."""

from __future__ import annotations

import bisect
import functools
import html
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from .model import PrefixContext, PrefixMessage, PrefixNext, SkillSnapshot, SkillSummary
from .quiet_log import get_logger
from .registry import SkillRegistry
from .text import (
    DEFAULT_MAX_DESCRIPTION_LENGTH,
    check_max_length,
    cut,
    cut_at_word,
    for_model,
    shorten_description,
)

SKILL_TOOL_NAME = "skill"

# A budget never cuts a description below this: shorter, a summary stops saying what the skill
# is for, and omitting skills serves the model better.
BUDGET_DESCRIPTION_FLOOR = 60

_log = get_logger(__name__)
_name = operator.attrgetter("name")


class CatalogSettings(TypedDict, total=False):
    """How a catalog is made; ``pinned`` names come first, ``hidden`` ones never."""

    max_length: int
    tool_name: str
    budget: int | None
    pinned: Iterable[str]
    hidden: Iterable[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogFit:
    """A rendered catalog and what its budget did to it (names sorted, ``listed`` in order)."""

    text: str | None  # None when no skill is left to list
    limit: int | None
    used: int  # code points of text
    shortened: int = 0  # descriptions the budget cut (max_length cuts do not count)
    omitted: tuple[str, ...] = ()  # for lack of room
    listed: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()  # by a person
    description_cap: int | None = None  # the uniform cap the budget chose
    truncated: int = 0  # listed descriptions cut at max_length and not shortened further
    max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH
    # Pinned or hidden names no skill has (a typo, a skill removed): worth a warning.
    unknown_pinned: tuple[str, ...] = ()
    unknown_hidden: tuple[str, ...] = ()
    # What it was made of, for `catalog_changes` (two fits that render the same are equal):
    # every skill it could list (None when no catalog was made) and the names a person hid.
    catalogued: tuple[SkillSummary, ...] | None = field(default=None, compare=False, repr=False)
    hiding: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def within_budget(self) -> bool:
        """Whether ``text`` fits (the frame and pinned skills stay even when it cannot)."""
        return self.limit is None or self.used <= self.limit


def render_catalog(
    skills: Iterable[SkillSummary], max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH
) -> str | None:
    """The catalog message of every model-visible skill, or ``None`` when there is none."""
    return fit_catalog(skills, max_length=max_length).text


def listable(skills: Sequence[SkillSummary], hidden: frozenset[str]) -> list[SkillSummary]:
    """The skills a catalog may list and a query find: model-visible, not hidden by a person."""
    return [
        skill for skill in skills if not skill.disable_model_invocation and skill.name not in hidden
    ]


class _Line:
    __slots__ = ("name", "over_max_length", "prefix", "text")

    def __init__(self, skill: SkillSummary, bound: int) -> None:
        self.name = skill.name
        self.prefix = f"- `{for_model(skill.name)}`: "
        # Cleaning never lengthens a text: this bound cuts nothing, and one pass tells both.
        whole = shorten_description(skill.description, max(bound, len(skill.description)))
        self.text = cut(whole, bound)
        self.over_max_length = len(whole) > bound

    def is_cut(self, cap: int | None) -> bool:
        return cap is not None and len(self.text) > cap

    def render(self, cap: int | None) -> str:
        text = cut_at_word(self.text, cap) if cap is not None and self.is_cut(cap) else self.text
        return self.prefix + html.escape(text, quote=False)


def fit_catalog(skills: Iterable[SkillSummary], **settings: Unpack[CatalogSettings]) -> CatalogFit:
    """Render the catalog within ``budget`` characters and say what that took (contract §12)."""
    for key in settings.keys() - CatalogSettings.__annotations__.keys():
        raise TypeError(f"unexpected catalog setting {key!r}")
    bound = check_max_length(settings.get("max_length", DEFAULT_MAX_DESCRIPTION_LENGTH))
    limit = settings.get("budget")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"budget must be a positive integer or None, got {limit!r}")
    tool_name = settings.get("tool_name", SKILL_TOOL_NAME)
    skills, hiding = list(skills), frozenset(settings.get("hidden", ()))
    pinning = frozenset(settings.get("pinned", ()))
    known = {skill.name for skill in skills} if hiding or pinning else set()
    catalogued = listable(skills, hiding)
    visible = [skill for skill in catalogued if skill.name not in pinning]
    first = sorted((_Line(s, bound) for s in catalogued if s.name in pinning), key=_name)
    hidden = (s.name for s in skills if s.name in hiding and not s.disable_model_invocation)
    made_fit = functools.partial(
        CatalogFit,
        limit=limit,
        hidden=tuple(sorted(hidden)),
        max_length=bound,
        unknown_pinned=tuple(sorted(pinning - known)),
        unknown_hidden=tuple(sorted(hiding - known)),
        catalogued=tuple(catalogued),
        hiding=hiding,
    )
    if not first and not visible:
        return made_fit(text=None, used=0)
    head = [
        "<system-reminder>",
        "Skills are available in this session. A skill is a packaged set of instructions "
        "for one kind of task. The catalog below gives each skill's name and a short summary.",
        "",
        "<available_skills>",
        *(line.render(None) for line in first),
    ]
    tail = [
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
    frame = sum(len(line) + 1 for line in (*head, *tail)) - 1
    made: dict[int, _Line] = {}

    def lines_of(group: Iterable[SkillSummary]) -> Iterator[_Line]:
        # Made on first use: listing 100 of 10,000 skills never normalizes the others.
        for skill in group:
            if (line := made.get(id(skill))) is None:
                line = made[id(skill)] = _Line(skill, bound)
            yield line

    def omission(count: int) -> list[str]:
        if not count:
            return []
        skills = "skill is" if count == 1 else "skills are"
        return [
            f"({count} more {skills} not listed here for lack of room. To find one, call the "
            f"`{tool_name}` tool with `query` set to a few words describing the task.)"
        ]

    def omission_cost(count: int) -> int:
        return sum(len(line) + 1 for line in omission(count))

    def fits(group: Iterable[SkillSummary], cap: int | None, room: int) -> bool:
        total = frame
        for line in lines_of(group):
            total += len(line.render(cap)) + 1
            if total > room:
                return False
        return True

    def outcome(
        cap: int | None, listed: Sequence[SkillSummary], left_out: Sequence[SkillSummary] = ()
    ) -> CatalogFit:
        lines = list(lines_of(listed))
        entries = [line.render(cap) for line in lines]
        text = "\n".join([*head, *entries, *omission(len(left_out)), *tail])
        shortened = sum(line.is_cut(cap) for line in lines)
        truncated = sum(line.over_max_length and not line.is_cut(cap) for line in lines)
        return made_fit(
            text=text,
            used=len(text),
            shortened=shortened,
            omitted=tuple(sorted(map(_name, left_out))),
            listed=tuple(line.name for line in (*first, *lines)),
            description_cap=cap if shortened or left_out else None,
            truncated=truncated + sum(line.over_max_length for line in first),
        )

    if limit is None or fits(visible, None, limit):
        return outcome(None, sorted(visible, key=_name))
    floor = min(BUDGET_DESCRIPTION_FLOOR, bound)
    narrowest = floor if floor < bound else None  # None when the bound is already the floor
    by_rank = sorted(visible, key=lambda skill: (getattr(skill, "rank", 0), skill.name))
    if narrowest is not None and fits(by_rank, narrowest, limit):
        # Step 1: lengths only grow with the cap; bisect for the widest that fits.
        caps = range(narrowest, bound)
        widest = bisect.bisect_left(caps, True, key=lambda cap: not fits(by_rank, cap, limit))
        return outcome(caps[widest - 1], sorted(visible, key=_name))
    # Step 2: list by rank while there is room for the skill and the closing line.
    room, kept = limit - frame, 0
    for line in lines_of(by_rank):
        room -= len(line.render(narrowest)) + 1
        if room < omission_cost(len(by_rank) - kept - 1):
            break
        kept += 1
    shortest = frame + omission_cost(len(by_rank))
    if kept == 0 and limit < shortest and fits(by_rank, narrowest, shortest):
        # No catalog meets the budget: keep the shortest, which may list them all at the floor.
        return outcome(narrowest, sorted(visible, key=_name))
    return outcome(narrowest, by_rank[:kept], by_rank[kept:])


@dataclass(frozen=True, slots=True)
class CatalogChanges:
    """How the skills a catalog would list now differ from a frozen catalog's (names sorted)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many skills differ."""
        return len(self.added) + len(self.removed) + len(self.changed)


def catalog_changes(fit: CatalogFit, now: SkillSnapshot) -> CatalogChanges:
    """What a catalog of ``now`` would list unlike ``fit`` (an incomplete ``now`` removes none)."""
    if fit.catalogued is None:
        return CatalogChanges()
    then = {skill.name: skill for skill in fit.catalogued}
    current = {skill.name: skill for skill in listable(now.skills, fit.hiding)}

    def shown(skill: SkillSummary) -> str:
        return shorten_description(skill.description, fit.max_length)

    kept = then.keys() & current.keys()
    return CatalogChanges(
        added=tuple(sorted(current.keys() - then.keys())),
        removed=tuple(sorted(then.keys() - current.keys())) if now.complete else (),
        changed=tuple(sorted(n for n in kept if shown(then[n]) != shown(current[n]))),
    )


class SkillCatalogContributor:
    """A session-prefix contributor: the catalog of ``context.skills`` (else of ``registry``'s
    for the session) as one user message, none without ``tool_name`` among its tools."""

    def __init__(self, registry: SkillRegistry | None, **settings: Unpack[CatalogSettings]) -> None:
        fit_catalog((), **settings)  # refuses a bad setting now, not at the first session
        self._registry = registry
        self._settings = settings
        self._last: tuple[SkillSnapshot, CatalogFit] | None = None

    async def __call__(self, context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        fit = await self.fit(context)
        later = await next()
        if fit.text is None:
            return later
        # Prepending after awaiting the rest keeps contributions in registration order.
        return (PrefixMessage(role="user", text=fit.text), *later)

    async def fit(self, context: PrefixContext) -> CatalogFit:
        """The catalog for ``context``'s session and what its budget did."""
        snapshot = context.skills
        if self._settings.get("tool_name", SKILL_TOOL_NAME) not in context.tool_names:
            snapshot = None
        elif snapshot is None and self._registry is not None:
            snapshot = await self._registry.snapshot(context.lookup_options)
        if snapshot is None:
            return CatalogFit(text=None, limit=self._settings.get("budget"), used=0)
        # The same snapshot while the registry's catalog is cached: one fit, one warning.
        if self._last is not None and self._last[0] is snapshot:
            return self._last[1]
        fit = fit_catalog(snapshot.skills, **self._settings)
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
            )
        for setting, names in (("pin", fit.unknown_pinned), ("hide", fit.unknown_hidden)):
            if names:
                _log.warning("skill_name_unknown", setting=setting, names=list(names))
        self._last = (snapshot, fit)
        return fit
