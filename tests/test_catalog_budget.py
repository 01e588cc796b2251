"""The catalog budget (contract §12): shorten, then omit by rank; pinned and hidden skills."""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from acp_skills import (
    PrefixMessage,
    SkillCandidate,
    SkillDefinition,
    SkillRegistry,
    SkillSnapshot,
    SkillSummary,
    render_catalog,
)
from acp_skills.catalog import CatalogFit, SkillCatalogContributor, fit_catalog
from acp_skills.model import PrefixContext
from acp_skills.report import describe_catalog_fit
from tests.hypothesis_profiles import examples
from tests.providers import ListProvider, assert_matches_golden, candidate

SKILLS = [
    candidate(
        "deploy-app",
        provider="p",
        rank=100,
        description="Deploys the application to staging or production with the team's release "
        "checklist, health checks and an automatic rollback when the new version fails its "
        "smoke tests.",
    ),
    candidate(
        "review-code",
        provider="p",
        rank=100,
        description="Reviews a diff for correctness, readability, error handling & missing "
        "tests; reports findings ordered by severity, with <file:line> references.",
    ),
    candidate(
        "write-tests", provider="p", rank=200, description="Writes unit tests for the module."
    ),
    candidate(
        "fix-flaky-tests",
        provider="p",
        rank=200,
        description="Diagnoses tests that pass and fail intermittently: ordering dependence, "
        "shared state, timing, randomness and network calls, then proposes a fix for each cause.",
    ),
    candidate(
        "format-sql",
        provider="p",
        rank=300,
        description="Formats SQL queries consistently: keywords in capitals, one clause per "
        "line, aligned joins.",
    ),
    candidate(
        "summarize-logs",
        provider="p",
        rank=300,
        description="Summarizes application logs around an incident: the first error, spikes "
        "of warnings, slow requests and the services involved, in a short timeline.",
    ),
    candidate(
        "translate-docs",
        provider="p",
        rank=400,
        description="Translates documentation between languages while keeping Markdown "
        "formatting, code blocks and product terminology unchanged.",
    ),
    candidate(
        "plan-release",
        provider="p",
        rank=400,
        description="Plans a release: version number, changelog, the order of deploys and who "
        "signs off.",
    ),
    candidate(
        "person-only",
        provider="p",
        rank=100,
        description="Only a person runs this.",
        disable_model_invocation=True,
    ),
]


def text_of(fit: CatalogFit) -> str:
    """The catalog text of a fit that has one."""
    assert fit.text is not None
    return fit.text


FULL = text_of(fit_catalog(SKILLS))


def entries(text: str | None) -> list[str]:
    """The skill lines of a catalog, in order."""
    assert text is not None
    return [line for line in text.splitlines() if line.startswith("- `")]


def listed_names(text: str | None) -> list[str]:
    return [line[3:].split("`", 1)[0] for line in entries(text)]


# -- the steps, as golden catalogs -----------------------------------------------------------


def test_catalog_that_fits_is_unchanged_golden() -> None:
    """A budget of exactly the catalog's length changes nothing: §6's bytes, all in full."""
    fit = fit_catalog(SKILLS, budget=len(FULL))
    assert fit.text == FULL
    assert (fit.limit, fit.used, fit.shortened, fit.omitted, fit.description_cap) == (
        len(FULL),
        len(FULL),
        0,
        (),
        None,
    )
    assert_matches_golden("catalog_budget_fits.txt", fit.text)


def test_catalog_without_a_budget_is_the_plain_catalog() -> None:
    """No budget (the default) renders exactly what render_catalog always rendered."""
    fit = fit_catalog(SKILLS)
    assert fit.text == FULL
    assert (fit.limit, fit.used, fit.shortened, fit.omitted) == (None, len(FULL), 0, ())


def test_catalog_over_budget_shortens_every_description_golden() -> None:
    """Step 1: one uniform cap, at word boundaries with "...", everything still listed."""
    fit = fit_catalog(SKILLS, budget=1400)
    assert fit.used <= 1400
    assert fit.omitted == ()
    assert fit.description_cap is not None
    assert 60 <= fit.description_cap < 500
    assert listed_names(fit.text) == sorted(skill.name for skill in SKILLS[:-1])
    cut_lines = [line for line in entries(fit.text) if line.endswith("...")]
    assert len(cut_lines) == fit.shortened == 6
    for line in cut_lines:
        kept = html.unescape(line.split("`: ", 1)[1].removesuffix("..."))
        original = next(s.description for s in SKILLS if f"`{s.name}`" in line)
        # A word boundary: whole words of the original, perhaps without a trailing comma.
        assert original.startswith(kept)
        assert original[len(kept)] in " ,;:"
    assert_matches_golden("catalog_budget_shortened.txt", text_of(fit))


def test_catalog_far_over_budget_omits_by_rank_golden() -> None:
    """Step 2: at the 60-character floor, skills by rank then name, and a closing count."""
    fit = fit_catalog(SKILLS, budget=1000)
    assert fit.used <= 1000
    assert fit.description_cap == 60
    assert list(fit.listed) == ["deploy-app", "review-code", "fix-flaky-tests"]
    assert fit.omitted == (
        "format-sql",
        "plan-release",
        "summarize-logs",
        "translate-docs",
        "write-tests",
    )
    assert (
        "(5 more skills are not listed here for lack of room. To find one, call the `skill` "
        "tool with `query` set to a few words describing the task.)\n</available_skills>"
    ) in text_of(fit)
    assert_matches_golden("catalog_budget_omitted.txt", text_of(fit))


def test_pinned_skills_come_first_in_full_golden() -> None:
    """Pinned skills lead the list by name with whole descriptions; the rest share the rest."""
    fit = fit_catalog(SKILLS, budget=1200, pinned=["translate-docs", "summarize-logs"])
    assert fit.used <= 1200
    assert list(fit.listed[:2]) == ["summarize-logs", "translate-docs"]
    for skill in SKILLS:
        if skill.name in ("summarize-logs", "translate-docs"):
            assert f"- `{skill.name}`: {skill.description}" in text_of(fit)
    assert fit.omitted
    assert_matches_golden("catalog_budget_pinned.txt", text_of(fit))


def test_hidden_skills_are_never_listed_golden() -> None:
    """Hidden skills are neither listed nor counted as omitted; the others fit in their room."""
    fit = fit_catalog(SKILLS, budget=1400, hidden=["deploy-app", "review-code"])
    assert fit.hidden == ("deploy-app", "review-code")
    assert "deploy-app" not in text_of(fit)
    assert "review-code" not in text_of(fit)
    assert fit.omitted == ()
    assert_matches_golden("catalog_budget_hidden.txt", text_of(fit))


def test_hiding_wins_over_pinning() -> None:
    """A skill both pinned and hidden is hidden: the person's choice to hide is kept."""
    fit = fit_catalog(SKILLS, pinned=["deploy-app"], hidden=["deploy-app"])
    assert "deploy-app" not in fit.listed
    assert fit.hidden == ("deploy-app",)


def test_descriptions_cut_at_max_length_are_counted() -> None:
    """A description over ``max_length`` is cut there and counted in ``truncated``, pinned or
    not; once the budget shortens it further it counts as shortened instead."""
    long = "Checks every field of the form twice before it is sent off. " * 5
    skills = [
        candidate("long-one", provider="p", description=long),
        candidate("long-two", provider="p", description=long),
        candidate("short-one", provider="p", description="Short."),
    ]
    fit = fit_catalog(skills, 100, pinned=["long-two"])
    assert (fit.truncated, fit.shortened, fit.max_length) == (2, 0, 100)
    assert "every description in full" not in describe_catalog_fit(fit)
    assert fit_catalog(skills, 1024).truncated == 0
    squeezed = fit_catalog(skills, 100, budget=len(render_catalog(skills, 100) or "") - 20)
    assert (squeezed.truncated, squeezed.shortened) == (0, 2)


def test_pinning_without_a_budget_only_reorders() -> None:
    """Without a budget, a pinned skill moves to the front and nothing else changes."""
    fit = fit_catalog(SKILLS, pinned=["write-tests", "not-installed"])
    assert listed_names(fit.text) == [
        "write-tests",
        *sorted(s.name for s in SKILLS[:-1] if s.name != "write-tests"),
    ]
    assert sorted(entries(fit.text)) == sorted(entries(FULL))


def test_everything_hidden_renders_nothing() -> None:
    """Hiding every visible skill leaves no catalog at all, like having no skills."""
    names = [skill.name for skill in SKILLS]
    fit = fit_catalog(SKILLS, budget=100, hidden=names)
    assert (fit.text, fit.used, fit.listed) == (None, 0, ())
    assert fit_catalog(SKILLS, hidden=names).text is None


def test_the_cap_is_the_widest_that_fits() -> None:
    """One character less of budget gives a narrower cut; the budget itself keeps this one."""
    skills = [SkillSummary(name="a", description=" ".join(f"word{i:02d}" for i in range(40)))]
    full = fit_catalog(skills)
    frame = full.used - len(skills[0].description)
    cut_to_70 = " ".join(f"word{i:02d}" for i in range(9)) + "..."  # 62 + 3 characters
    fit = fit_catalog(skills, budget=frame + len(cut_to_70))
    assert entries(fit.text) == [f"- `a`: {cut_to_70}"]
    narrower = fit_catalog(skills, budget=frame + len(cut_to_70) - 1)
    assert entries(narrower.text) == [
        "- `a`: " + " ".join(f"word{i:02d}" for i in range(8)) + "..."
    ]


def test_a_description_without_spaces_is_cut_inside_its_word() -> None:
    """A first word longer than the cap is cut where the cap falls."""
    skills = [SkillSummary(name="a", description="x" * 300)]
    fit = fit_catalog(skills, budget=fit_catalog(skills).used - 200)
    assert fit.description_cap is not None
    assert entries(fit.text) == ["- `a`: " + "x" * (fit.description_cap - 3) + "..."]


def test_dangling_punctuation_goes_before_the_ellipsis() -> None:
    """A cut right after "beta," leaves no comma before the "..."."""
    description = "alpha beta, " + "x" * 100
    skills = [SkillSummary(name="a", description=description)]
    fit = fit_catalog(skills, budget=fit_catalog(skills).used - len(description) + 50)
    assert entries(fit.text) == ["- `a`: alpha beta..."]


def test_descriptions_shorter_than_the_bound_never_go_below_60() -> None:
    """With max_length at or under 60 the budget cannot shorten: it omits instead."""
    skills = [SkillSummary(name=f"s{i}", description="y " * 40) for i in range(30)]
    fit = fit_catalog(skills, 40, budget=1500)
    assert fit.shortened == 0
    assert fit.omitted
    assert all(line.endswith("y y...") for line in entries(fit.text))


def test_summaries_without_rank_omit_by_name() -> None:
    """A plain SkillSummary has no rank: omission then follows the names."""
    skills = [SkillSummary(name=f"s{i:02d}", description="z" * 80) for i in range(40)]
    fit = fit_catalog(skills, budget=1500)
    assert list(fit.listed) == [f"s{i:02d}" for i in range(len(fit.listed))]


def test_one_omitted_skill_is_singular() -> None:
    """The closing line counts "1 more skill is"."""
    # Long names, so that one entry costs more than the closing line saves.
    skills = [SkillSummary(name=f"s{i}-{'n' * 120}", description="w" * 50) for i in range(2)]
    fit = fit_catalog(skills, budget=fit_catalog(skills, budget=1).used + 200)
    assert fit.listed == (skills[0].name,)
    assert fit.omitted == (skills[1].name,)
    assert "(1 more skill is not listed here" in text_of(fit)


def test_pinned_skills_that_cannot_fit_are_listed_anyway() -> None:
    """When even the pinned skills exceed the budget, they stay and the fit says it is over."""
    fit = fit_catalog(SKILLS, budget=300, pinned=["deploy-app"])
    assert fit.listed == ("deploy-app",)
    assert not fit.within_budget
    assert fit.used > 300


def test_a_budget_no_catalog_meets_keeps_the_shortest_catalog() -> None:
    """With a few short entries, listing them all is shorter than the closing line would be."""
    skills = [SkillSummary(name=f"s{i}", description="Short.") for i in range(3)]
    plain = text_of(fit_catalog(skills))
    fit = fit_catalog(skills, budget=100)
    assert fit.text == plain
    assert (fit.omitted, fit.shortened, fit.within_budget) == ((), 0, False)


@pytest.mark.parametrize(
    "budget",
    [0, -5, True, 2.5, "100"],
    ids=["zero", "negative", "bool", "float", "string"],
)
def test_invalid_budget_is_rejected(budget: object) -> None:
    """A budget is None or a positive integer."""
    with pytest.raises(ValueError, match=r"^budget must be a positive integer or None, got "):
        fit_catalog(SKILLS, budget=budget)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^budget must be a positive integer or None, got "):
        SkillCatalogContributor(SkillRegistry(), budget=budget)  # type: ignore[arg-type]


# -- properties ------------------------------------------------------------------------------

_NAMES = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True)
_TEXT = st.text(
    alphabet=st.sampled_from([*"abcdefghij klmn  op,;:&<>\t\n", "\U0001f600", "\u00e9"]),
    min_size=1,
    max_size=400,
)


@st.composite
def skill_sets(draw: st.DrawFn) -> list[SkillCandidate]:
    names = draw(st.lists(_NAMES, min_size=0, max_size=25, unique=True))
    return [
        candidate(
            name,
            provider="p",
            rank=draw(st.sampled_from([100, 200, 250, 300, 400.5])),
            description=draw(_TEXT),
            disable_model_invocation=draw(st.sampled_from([False, False, False, True])),
        )
        for name in names
    ]


@given(
    skills=skill_sets(),
    budget=st.integers(min_value=1, max_value=12_000),
    max_length=st.sampled_from([3, 20, 60, 61, 200, 500]),
    data=st.data(),
)
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_budget_is_never_exceeded_when_it_can_be_met(
    skills: list[SkillCandidate], budget: int, max_length: int, data: st.DataObject
) -> None:
    """Whenever the smallest catalog (pinned skills and the closing line) fits, the catalog does."""
    names = [skill.name for skill in skills]
    pinned = data.draw(st.lists(st.sampled_from(names), max_size=3) if names else st.just([]))
    hidden = data.draw(st.lists(st.sampled_from(names), max_size=3) if names else st.just([]))
    fit = fit_catalog(skills, max_length, budget=budget, pinned=pinned, hidden=hidden)
    # With a budget of 1 nothing but the pinned skills fits: the smallest catalog there is.
    smallest = fit_catalog(skills, max_length, budget=1, pinned=pinned, hidden=hidden)
    if smallest.used <= budget:
        assert fit.used <= budget
        assert fit.within_budget
    assert fit.used == (len(fit.text) if fit.text is not None else 0)
    visible = {s.name for s in skills if not s.disable_model_invocation}
    assert set(fit.listed) | set(fit.omitted) | set(fit.hidden) == visible
    assert not set(fit.listed) & set(fit.omitted)
    assert fit.listed == tuple(listed_names(fit.text)) if fit.text else fit.listed == ()
    if fit.description_cap is not None:
        assert fit.description_cap >= min(60, max_length)
    # Omission follows the resolution order: nothing omitted outranks anything listed.
    ranks = {s.name: (s.rank, s.name) for s in skills}
    unpinned = [name for name in fit.listed if name not in set(pinned)]
    if fit.omitted and unpinned:
        assert max(ranks[n] for n in unpinned) < min(ranks[n] for n in fit.omitted)


@given(skills=skill_sets(), budget=st.integers(min_value=1, max_value=8_000), seed=st.integers())
@settings(max_examples=examples(150), deadline=None)
def test_same_skills_and_budget_give_the_same_bytes(
    skills: list[SkillCandidate], budget: int, seed: int
) -> None:
    """Deterministic: the order skills arrive in does not change a byte."""
    shuffled = list(skills)
    random.Random(seed).shuffle(shuffled)
    assert fit_catalog(skills, budget=budget) == fit_catalog(shuffled, budget=budget)


@given(skills=skill_sets())
@settings(max_examples=examples(100), deadline=None)
def test_a_budget_the_catalog_fits_changes_nothing(skills: list[SkillCandidate]) -> None:
    """Any budget at or above the plain catalog's length gives the plain catalog."""
    plain = render_catalog(skills)
    length = len(plain) if plain is not None else 1
    assert fit_catalog(skills, budget=length).text == plain


# -- describe_catalog_fit ----------------------------------------------------------------------

DESCRIBE_CASES: list[tuple[str, CatalogFit, str]] = [
    (
        "empty",
        CatalogFit(text=None, limit=8000, used=0),
        "Catalog: empty, no skill to list.",
    ),
    (
        "unlimited",
        CatalogFit(text="x" * 1234, limit=None, used=1234, listed=("a", "b")),
        "Catalog: 1,234 characters (no budget); 2 skills listed, every description in full.",
    ),
    (
        "cut-at-max-length",
        CatalogFit(
            text="x", limit=8000, used=2690, listed=("a", "b"), truncated=1, max_length=1024
        ),
        "Catalog: 2,690 of 8,000 characters; 2 skills listed, 1 description cut at 1,024 "
        "characters (the longest a catalog description may be).",
    ),
    (
        "shortened-and-hidden",
        CatalogFit(
            text="x",
            limit=8000,
            used=7964,
            shortened=1,
            listed=("a",),
            hidden=("h",),
            description_cap=112,
        ),
        "Catalog: 7,964 of 8,000 characters; 1 skill listed, 1 description shortened to at "
        "most 112 characters, 1 hidden.",
    ),
    (
        "omitted",
        CatalogFit(
            text="x",
            limit=8000,
            used=7990,
            shortened=37,
            omitted=("a", "b", "c", "d", "e", "f"),
            listed=("g",) * 112,
            description_cap=60,
        ),
        "Catalog: 7,990 of 8,000 characters; 112 skills listed, 37 descriptions shortened to at "
        "most 60 characters.\n6 skills are not listed (the skill tool's query finds them): "
        "a, b, c, d, e, ...",
    ),
    (
        "over",
        CatalogFit(text="x", limit=100, used=400, omitted=("z",), listed=("p",)),
        "Catalog: 400 of 100 characters; 1 skill listed. Over budget: the catalog's own text "
        "and the pinned skills take more room.\n1 skill is not listed (the skill tool's query "
        "finds them): z",
    ),
]


@pytest.mark.parametrize(
    ("fit", "expected"),
    [case[1:] for case in DESCRIBE_CASES],
    ids=[case[0] for case in DESCRIBE_CASES],
)
def test_describe_catalog_fit(fit: CatalogFit, expected: str) -> None:
    """One or two lines a person can read: size, budget, cuts, and what is not listed."""
    assert describe_catalog_fit(fit) == expected


# -- the contributor -------------------------------------------------------------------------


class Next:
    async def __call__(self) -> Sequence[PrefixMessage]:
        return ()


def context(session_id: str = "s1", *tools: str) -> PrefixContext:
    return PrefixContext(
        session_id=session_id, cwd="/project", tool_names=frozenset(tools or ("skill",))
    )


def budget_registry() -> SkillRegistry:
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", list(SKILLS)))
    return registry


@pytest.mark.anyio
async def test_contributor_logs_one_warning_with_the_counts() -> None:
    """Shortening or omitting is told once per outcome, with limit, used and counts."""
    registry = budget_registry()
    contributor = SkillCatalogContributor(registry, budget=1000)
    with capture_logs() as logs:
        [first] = await contributor(context("s1"), Next())
        [second] = await contributor(context("s2"), Next())
    assert first == second
    warnings = [entry for entry in logs if entry["event"] == "skill_catalog_over_budget"]
    assert len(warnings) == 1
    [warning] = warnings
    expected = fit_catalog(SKILLS, budget=1000)
    assert warning["log_level"] == "warning"
    assert {key: warning[key] for key in ("limit", "used", "shortened", "omitted", "listed")} == {
        "limit": 1000,
        "used": expected.used,
        "shortened": expected.shortened,
        "omitted": len(expected.omitted),
        "listed": len(expected.listed),
    }
    # Every session can have its outcome as a value; sessions of one catalog share one.
    fits = [await contributor.fit(context(session_id)) for session_id in ("s1", "s2")]
    assert fits[0] is fits[1]
    assert fits[0] == expected


@pytest.mark.anyio
async def test_contributor_is_silent_when_the_catalog_fits() -> None:
    """No warning when the budget changed nothing."""
    contributor = SkillCatalogContributor(budget_registry(), budget=len(FULL))
    with capture_logs() as logs:
        [message] = await contributor(context(), Next())
    assert message.text == FULL
    assert not [entry for entry in logs if entry["event"] == "skill_catalog_over_budget"]


@pytest.mark.anyio
async def test_contributor_renders_again_after_the_registry_changes() -> None:
    """A new revision is a new catalog: a skill added later is in the next session's catalog."""
    registry = budget_registry()
    contributor = SkillCatalogContributor(registry, budget=100_000)
    [before] = await contributor(context("s1"), Next())
    registry.register(SkillDefinition(name="zz-new", description="New.", content=""))
    [after] = await contributor(context("s2"), Next())
    assert "zz-new" not in before.text
    assert "- `zz-new`: New." in after.text


@pytest.mark.anyio
async def test_contributor_tells_an_empty_outcome_without_the_tool() -> None:
    """A session without the skill tool gets no catalog, and its outcome is empty."""
    contributor = SkillCatalogContributor(budget_registry(), budget=500)
    assert await contributor(context("s1", "read"), Next()) == ()
    assert await contributor.fit(context("s1", "read")) == CatalogFit(text=None, limit=500, used=0)


@pytest.mark.anyio
async def test_contributor_lists_the_skills_its_context_carries() -> None:
    """A context carrying the session's skills (a turn's trust view) is listed as it is,
    without asking the registry; with no registry, a context without skills gets no catalog."""
    offered = SkillSnapshot(skills=(SKILLS[2],), complete=True)
    contributor = SkillCatalogContributor(budget_registry())
    [message] = await contributor(replace(context(), skills=offered), Next())
    assert message.text == render_catalog([SKILLS[2]])
    assert await SkillCatalogContributor(None)(context(), Next()) == ()
