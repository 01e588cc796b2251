"""The skill catalog: description normalization, rendering and the contributor (contract §6)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from acp_skills import (
    DirectoryResource,
    PrefixMessage,
    SkillCandidate,
    SkillContractError,
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
from acp_skills.report import describe_catalog_changes
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
    renamed = render_catalog([summary("x", "d")], tool_name="load_skill")
    assert default is not None
    assert renamed is not None
    assert "`skill` tool" in default
    assert "`load_skill` tool" in renamed
    assert "`skill` tool" not in renamed


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


def context(*tools: str, cwd: str = "/project") -> PrefixContext:
    return PrefixContext(session_id="s1", cwd=cwd, tool_names=frozenset(tools))


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


def test_describe_catalog_changes_names_each_kind_and_bounds_the_names() -> None:
    """One line: the count, then each kind with at most five names."""
    added = tuple(f"skill-{index}" for index in range(7))
    assert describe_catalog_changes(CatalogChanges()) is None
    assert describe_catalog_changes(CatalogChanges(added=added, changed=("deploy",))) == (
        "This session's catalog predates 8 changes to the skills above: 7 added (`skill-0`, "
        "`skill-1`, `skill-2`, `skill-3`, `skill-4`, ...); 1 with a new description "
        "(`deploy`). The model here keeps the catalog the session began with; a new session "
        "has them."
    )
