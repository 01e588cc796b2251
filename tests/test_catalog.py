"""The skill catalog (acp_skills/catalog.py): description normalization, rendering, the budget
fit and the contributor (contract §6 and §12)."""

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
    DirectoryResource,
    PrefixMessage,
    SkillCandidate,
    SkillContractError,
    SkillDefinition,
    SkillRegistry,
    SkillSnapshot,
    SkillSummary,
    normalize_description,
    render_catalog,
)
from acp_skills.catalog import (
    CatalogChanges,
    CatalogFit,
    SkillCatalogContributor,
    catalog_changes,
    fit_catalog,
)
from acp_skills.model import PrefixContext
from tests.hypothesis_profiles import examples
from tests.providers import ListProvider, assert_matches_golden, candidate

# -- normalize_description -------------------------------------------------------------------

NORMALIZE_CASES: list[tuple[str, str, int, str]] = [
    ("plain", "Deploy the app", 500, "Deploy the app"),
    ("newlines-and-tabs", "  Line one\n\tline two\r\n\n", 500, "Line one line two"),
    ("no-break-spaces", "a\u00a0\u00a0b\u202fc", 500, "a b c"),
    ("byte-order-marks", "\ufeffStart\ufeff\ufeffmiddle\ufeff", 500, "Start middle"),
    ("unicode-spaces", "a\u2003b\u3000c\u2028d\u0085e\x0bf", 500, "a b c d e f"),
    (
        "zero-width-characters-kept",
        "a\u200bb \U0001f469\u200d\U0001f4bb",
        500,
        "a\u200bb \U0001f469\u200d\U0001f4bb",
    ),
    ("escaping", "a < b && c > d", 500, "a &lt; b &amp;&amp; c &gt; d"),
    ("quotes-not-escaped", "say \"hi\" and 'bye'", 500, "say \"hi\" and 'bye'"),
    ("exactly-at-bound", "abcdefghij", 10, "abcdefghij"),
    ("one-past-bound", "abcdefghijk", 10, "abcdefg..."),
    ("bound-counts-after-collapse", "abc \n\n\t   def", 7, "abc def"),
    ("truncation-keeps-a-trailing-space", "abcdef ghijk", 10, "abcdef ..."),
    ("entity-never-cut", "aaaaaa&bbbb", 10, "aaaaaa&amp;..."),
    ("escaped-text-may-exceed-bound", "<<<<<<<<<<", 10, "&lt;" * 10),
    ("emoji-at-bound", "\U0001f600" * 10, 10, "\U0001f600" * 10),
    ("emoji-past-bound", "\U0001f600" * 11, 10, "\U0001f600" * 7 + "..."),
    ("bound-3-fits", "abc", 3, "abc"),
    ("bound-3-truncated", "abcd", 3, "..."),
    ("bound-3-escaped", "<&>", 3, "&lt;&amp;&gt;"),
    ("whitespace-only", " \n\t\ufeff ", 500, ""),
]


@pytest.mark.parametrize(
    ("text", "max_length", "expected"),
    [case[1:] for case in NORMALIZE_CASES],
    ids=[case[0] for case in NORMALIZE_CASES],
)
def test_normalize_description(text: str, max_length: int, expected: str) -> None:
    """Whitespace collapses, long text is cut with "...", then & < > are escaped."""
    assert normalize_description(text, max_length) == expected


def test_default_bound_is_500_code_points() -> None:
    """Without max_length, 500 code points are kept whole and 501 are cut to 497 + "..."."""
    assert normalize_description("x" * 500) == "x" * 500
    assert normalize_description("x" * 501) == "x" * 497 + "..."


@pytest.mark.parametrize(
    "max_length",
    [2, 0, -1, True, False, 3.0, "5", None],
    ids=["two", "zero", "negative", "true", "false", "float", "string", "none"],
)
def test_invalid_max_length_is_rejected(max_length: object) -> None:
    """max_length must be an integer >= 3 (bools are not integers here)."""
    message = rf"^max_length must be an integer >= 3, got {max_length!r}$"
    with pytest.raises(ValueError, match=message):
        normalize_description("x", max_length)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        render_catalog([], max_length)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        SkillCatalogContributor(SkillRegistry(), max_length=max_length)  # type: ignore[arg-type]


# -- render_catalog --------------------------------------------------------------------------


def summary(name: str, description: str, **fields: object) -> SkillSummary:
    return SkillSummary(name=name, description=description, **fields)  # type: ignore[arg-type]


def test_no_skills_render_nothing() -> None:
    """An empty catalog is None, not an empty reminder."""
    assert render_catalog([]) is None


def test_only_disabled_skills_render_nothing() -> None:
    """Skills hidden from the model are never listed, even when passed in."""
    assert render_catalog([summary("x", "d", disable_model_invocation=True)]) is None


def test_catalog_golden() -> None:
    """Escaping, whitespace of every kind and code-point counting, as the model sees them."""
    skills = [
        summary("release-notes", "Write release notes from <merged> PRs & tags > v1"),
        summary(
            "deploy",
            '\ufeffDeploy the service.\nUse when the user says\t"ship it".\r\n\u00a0Needs CI.',
        ),
        summary("hidden", "Never listed", disable_model_invocation=True),
        summary("emoji", "Pick an emoji \U0001f680 for the \U0001f469\u200d\U0001f4bb changelog"),
        summary("a-first", "Sorted by code point: digits, then letters"),
        summary("0-zero", "Comes first"),
    ]
    catalog = render_catalog(skills)
    assert catalog is not None
    assert catalog.startswith("<system-reminder>\n")
    assert catalog.endswith("\n</system-reminder>")
    assert_matches_golden("catalog.txt", catalog)


def test_catalog_truncation_golden() -> None:
    """At bound 20: 20 code points stay whole, 21 are cut, an emoji counts once."""
    skills = [
        summary("at-bound", "a" * 20),
        summary("past-bound", "b" * 21),
        summary("emoji-at-bound", "\U0001f600" * 20),
        summary("emoji-past-bound", "\U0001f600" * 21),
        summary("entities-at-bound", "c" * 16 + "&<>" + "d"),
        summary("entity-at-cut", "c" * 16 + "&<>&d"),
        summary("spaces-collapse-first", "e" * 10 + " \n\t\u00a0\ufeff " + "f" * 9),
    ]
    catalog = render_catalog(skills, 20)
    assert catalog is not None
    assert_matches_golden("catalog_bound_20.txt", catalog)


def test_catalog_smallest_bound_golden() -> None:
    """At bound 3, three code points fit and anything longer is only "..."."""
    skills = [
        summary("fits", "abc"),
        summary("cut", "abcd"),
        summary("escaped", "<&>"),
        summary("emoji-cut", "\U0001f600\U0001f601\U0001f602\U0001f603"),
        summary("emoji-fits", "\U0001f600\U0001f601\U0001f602"),
    ]
    catalog = render_catalog(skills, 3)
    assert catalog is not None
    assert_matches_golden("catalog_bound_3.txt", catalog)


def test_catalog_lines_are_sorted_by_code_point() -> None:
    """Entries follow plain code-point order of the names, whatever the input order."""
    catalog = render_catalog([summary(n, "d") for n in ("b", "ab", "a-b", "a", "0")])
    assert catalog is not None
    entries = [line for line in catalog.splitlines() if line.startswith("- `")]
    assert entries == ["- `0`: d", "- `a`: d", "- `a-b`: d", "- `ab`: d", "- `b`: d"]


def test_hand_built_names_are_escaped() -> None:
    """A name that bypassed the registry's grammar check cannot inject markup."""
    catalog = render_catalog([summary("</available_skills>&", "d")])
    assert catalog is not None
    assert "- `&lt;/available_skills&gt;&amp;`: d" in catalog


def test_catalog_holds_names_and_descriptions_only() -> None:
    """when_to_use, source, provider, paths and bodies never reach the catalog."""
    skill = candidate(
        "deploy",
        provider="secret-provider",
        description="Deploy the app",
        when_to_use="SECRET-WHEN-TO-USE",
        source="secret-source",
        path="/secret/path/SKILL.md",
        resource_base=DirectoryResource(path="/secret/base"),
        argument_hint="SECRET-HINT",
    )
    catalog = render_catalog([skill])
    assert catalog is not None
    for leaked in ("SECRET", "secret", "/secret"):
        assert leaked not in catalog
    assert "- `deploy`: Deploy the app" in catalog


def test_catalog_guidance_names_the_tool() -> None:
    """The guidance tells the model which tool loads a skill."""
    default = render_catalog([summary("x", "d")])
    renamed = fit_catalog([summary("x", "d")], tool_name="load_skill").text
    assert default is not None
    assert renamed is not None
    assert "`skill` tool" in default
    assert "`load_skill` tool" in renamed
    assert "`skill` tool" not in renamed


# -- the budget (contract §12): shorten, then omit by rank; pinned and hidden skills -------

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
    fit = fit_catalog(skills, max_length=100, pinned=["long-two"])
    assert (fit.truncated, fit.shortened, fit.max_length) == (2, 0, 100)
    assert fit_catalog(skills, max_length=1024).truncated == 0
    squeezed = fit_catalog(
        skills, max_length=100, budget=len(render_catalog(skills, 100) or "") - 20
    )
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
    fit = fit_catalog(skills, max_length=40, budget=1500)
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


def test_an_unknown_setting_is_refused() -> None:
    """A misspelled setting is a ``TypeError``, never silently ignored: ``hidden_skills`` (the
    `AcpSkills` spelling) given to the contributor must not leave the skill listed."""
    with pytest.raises(TypeError, match=r"^unexpected catalog setting 'hidden_skills'"):
        SkillCatalogContributor(SkillRegistry(), hidden_skills=["deploy"])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^unexpected catalog setting 'budgte'"):
        fit_catalog(SKILLS, budgte=100)  # type: ignore[call-arg]


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
    fit = fit_catalog(skills, max_length=max_length, budget=budget, pinned=pinned, hidden=hidden)
    # With a budget of 1 nothing but the pinned skills fits: the smallest catalog there is.
    smallest = fit_catalog(skills, max_length=max_length, budget=1, pinned=pinned, hidden=hidden)
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


# -- SkillCatalogContributor -----------------------------------------------------------------

LATER = (PrefixMessage(role="user", text="from a later contributor"),)


class Next:
    """A recording stand-in for the rest of the waterfall."""

    def __init__(self, result: Sequence[PrefixMessage] = LATER) -> None:
        self.result = result
        self.calls = 0

    async def __call__(self) -> Sequence[PrefixMessage]:
        self.calls += 1
        return self.result


def context(*tools: str, cwd: str = "/project", session_id: str = "s1") -> PrefixContext:
    return PrefixContext(session_id=session_id, cwd=cwd, tool_names=frozenset(tools))


def registry_with(provider: ListProvider) -> SkillRegistry:
    registry = SkillRegistry()
    registry.register_provider(provider)
    return registry


@pytest.mark.anyio
async def test_contributor_prepends_the_catalog_before_later_messages() -> None:
    """One user-role catalog message comes first, then next()'s messages, unchanged."""
    provider = ListProvider("p", [candidate("b", provider="p"), candidate("a", provider="p")])
    registry = registry_with(provider)
    next_ = Next()
    messages = await SkillCatalogContributor(registry)(context("skill"), next_)
    assert next_.calls == 1
    expected = render_catalog(await registry.list())
    assert expected is not None
    assert list(messages) == [PrefixMessage(role="user", text=expected), *LATER]


@pytest.mark.anyio
async def test_contributor_looks_skills_up_for_the_session_cwd() -> None:
    """The registry is asked for the session's cwd."""
    provider = ListProvider("p", [candidate("a", provider="p")])
    await SkillCatalogContributor(registry_with(provider))(context("skill", cwd="/w/x"), Next())
    assert [options.cwd for options in provider.seen_options] == ["/w/x"]


@pytest.mark.anyio
async def test_contributor_adds_nothing_without_the_skill_tool() -> None:
    """A session that cannot call the skill tool gets no catalog and triggers no discovery."""
    provider = ListProvider("p", [candidate("a", provider="p")])
    next_ = Next()
    messages = await SkillCatalogContributor(registry_with(provider))(context("read"), next_)
    assert messages is LATER
    assert next_.calls == 1
    assert provider.list_calls == 0


@pytest.mark.anyio
async def test_contributor_adds_nothing_without_visible_skills() -> None:
    """Only skills hidden from the model means no catalog message."""
    provider = ListProvider("p", [candidate("a", provider="p", disable_model_invocation=True)])
    next_ = Next()
    messages = await SkillCatalogContributor(registry_with(provider))(context("skill"), next_)
    assert messages is LATER
    assert next_.calls == 1


@pytest.mark.anyio
async def test_contributor_never_lists_disabled_skills() -> None:
    """A skill disabled for the model is absent from the contributed catalog."""
    provider = ListProvider(
        "p",
        [
            candidate("shown", provider="p"),
            candidate("hidden", provider="p", disable_model_invocation=True),
        ],
    )
    messages = await SkillCatalogContributor(registry_with(provider))(context("skill"), Next(()))
    assert len(messages) == 1
    assert "`shown`" in messages[0].text
    assert "hidden" not in messages[0].text


@pytest.mark.anyio
async def test_contributor_applies_its_bound_and_tool_name() -> None:
    """max_length and tool_name shape the contributed text; the gate follows tool_name."""
    provider = ListProvider("p", [candidate("a", provider="p", description="x" * 30)])
    contributor = SkillCatalogContributor(
        registry_with(provider), max_length=10, tool_name="load_skill"
    )
    assert await contributor(context("skill"), Next(())) == ()
    messages = await contributor(context("load_skill"), Next(()))
    assert "- `a`: xxxxxxx..." in messages[0].text
    assert "`load_skill` tool" in messages[0].text


@pytest.mark.anyio
async def test_contributor_lets_provider_contract_errors_propagate() -> None:
    """A provider breaking its contract fails composition instead of hiding skills silently."""
    provider = ListProvider("p", [candidate("a", provider="other")])
    with pytest.raises(SkillContractError):
        await SkillCatalogContributor(registry_with(provider))(context("skill"), Next())


# -- the contributor under a budget ----------------------------------------------------------


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
        [first] = await contributor(context("skill", session_id="s1"), Next(()))
        [second] = await contributor(context("skill", session_id="s2"), Next(()))
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
    fits = [await contributor.fit(context("skill", session_id=s)) for s in ("s1", "s2")]
    assert fits[0] is fits[1]
    assert fits[0] == expected


@pytest.mark.anyio
async def test_contributor_is_silent_when_the_catalog_fits() -> None:
    """No warning when the budget changed nothing."""
    contributor = SkillCatalogContributor(budget_registry(), budget=len(FULL))
    with capture_logs() as logs:
        [message] = await contributor(context("skill"), Next(()))
    assert message.text == FULL
    assert not [entry for entry in logs if entry["event"] == "skill_catalog_over_budget"]


@pytest.mark.anyio
async def test_contributor_renders_again_after_the_registry_changes() -> None:
    """A new revision is a new catalog: a skill added later is in the next session's catalog."""
    registry = budget_registry()
    contributor = SkillCatalogContributor(registry, budget=100_000)
    [before] = await contributor(context("skill", session_id="s1"), Next(()))
    registry.register(SkillDefinition(name="zz-new", description="New.", content=""))
    [after] = await contributor(context("skill", session_id="s2"), Next(()))
    assert "zz-new" not in before.text
    assert "- `zz-new`: New." in after.text


@pytest.mark.anyio
async def test_contributor_tells_an_empty_outcome_without_the_tool() -> None:
    """A session without the skill tool gets no catalog, and its outcome is empty."""
    contributor = SkillCatalogContributor(budget_registry(), budget=500)
    assert await contributor(context("read"), Next(())) == ()
    assert await contributor.fit(context("read")) == CatalogFit(text=None, limit=500, used=0)


@pytest.mark.anyio
async def test_contributor_lists_the_skills_its_context_carries() -> None:
    """A context carrying the session's skills (a turn's trust view) is listed as it is,
    without asking the registry; with no registry, a context without skills gets no catalog."""
    offered = SkillSnapshot(skills=(SKILLS[2],), complete=True)
    contributor = SkillCatalogContributor(budget_registry())
    [message] = await contributor(replace(context("skill"), skills=offered), Next(()))
    assert message.text == render_catalog([SKILLS[2]])
    assert await SkillCatalogContributor(None)(context("skill"), Next(())) == ()


# -- what a frozen catalog predates ------------------------------------------------------------


def listed(name: str, description: str = "", *, hidden_from_model: bool = False) -> SkillCandidate:
    description = description or f"The {name} skill."
    return candidate(
        name,
        provider="local",
        description=description,
        disable_model_invocation=hidden_from_model,
    )


def snapshot_of(skills: list[SkillCandidate], *, complete: bool) -> SkillSnapshot:
    return SkillSnapshot(skills=tuple(skills), complete=complete)


BEFORE: list[SkillCandidate] = [listed("deploy"), listed("lint"), listed("notes")]

CHANGES_CASES: list[tuple[str, list[SkillCandidate], bool, CatalogChanges]] = [
    ("same-skills", BEFORE, True, CatalogChanges()),
    (
        "added-removed-changed",
        [listed("deploy", "Ship it."), listed("notes"), listed("release")],
        True,
        CatalogChanges(added=("release",), removed=("lint",), changed=("deploy",)),
    ),
    (
        "whitespace-is-no-change",
        [listed("deploy", "The   deploy\n skill. "), listed("lint"), listed("notes")],
        True,
        CatalogChanges(),
    ),
    (
        "beyond-max-length-is-no-change",
        [listed("deploy", "The deploy skill. Longer now."), listed("lint"), listed("notes")],
        True,
        CatalogChanges(),
    ),
    (
        "never-listed-is-no-change",
        [*BEFORE, listed("vault", hidden_from_model=True), listed("secret")],
        True,
        CatalogChanges(),
    ),
    (
        "now-hidden-from-the-model-is-removed",
        [listed("deploy", hidden_from_model=True), listed("lint"), listed("notes")],
        True,
        CatalogChanges(removed=("deploy",)),
    ),
    (
        "incomplete-lookup-removes-nothing",
        [listed("deploy", "Ship it."), listed("release")],
        False,
        CatalogChanges(added=("release",), changed=("deploy",)),
    ),
]


@pytest.mark.parametrize(
    ("now", "complete", "expected"),
    [case[1:] for case in CHANGES_CASES],
    ids=[case[0] for case in CHANGES_CASES],
)
def test_catalog_changes_counts_what_a_catalog_made_now_would_list_differently(
    now: list[SkillCandidate], complete: bool, expected: CatalogChanges
) -> None:
    """Added, removed and changed as a catalog shows them; hidden and model-only skills and
    skills an incomplete lookup missed never count."""
    fit = fit_catalog(BEFORE, max_length=12, hidden=["secret"])
    assert catalog_changes(fit, snapshot_of(now, complete=complete)) == expected


def test_a_catalog_never_made_predates_nothing() -> None:
    """Without the skill tool no catalog is composed, so no skill is "added" to it."""
    fit = CatalogFit(text=None, limit=None, used=0)
    assert catalog_changes(fit, snapshot_of(BEFORE, complete=True)).count == 0
