"""The provider seam (registry.py): the one candidate validator and the checked hooks (§3, §4)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields

import pytest

from acp_skills import (
    DirectoryResource,
    OpaqueResource,
    SkillCandidate,
    SkillContractError,
    SkillRegistry,
    SkillSummary,
    UrlResource,
)
from tests.providers import ListProvider, candidate, definition_of, names

pytestmark = pytest.mark.anyio


# -- validation ------------------------------------------------------------------------------

BAD_CANDIDATES: list[tuple[str, dict[str, object], str]] = [
    ("bad-name", {"name": "Not_A_Name"}, "invalid name 'Not_A_Name'"),
    ("name-with-newline", {"name": "a\n"}, "invalid name 'a\\n'"),
    ("empty-description", {"description": " "}, "empty or non-string description"),
    ("non-string-description", {"description": 3}, "empty or non-string description"),
    ("when-to-use", {"when_to_use": 1}, "non-string when_to_use 1"),
    ("disable-flag", {"disable_model_invocation": "no"}, "non-boolean disable_model_invocation"),
    ("user-flag", {"user_invocable": 1}, "non-boolean user_invocable 1"),
    ("source", {"source": None}, "non-string source None"),
    ("provider", {"provider": "other"}, "skill \"ok\" with provider 'other' instead of 'p'"),
    ("rank-bool", {"rank": True}, "invalid rank True"),
    ("rank-nan", {"rank": math.nan}, "invalid rank nan"),
    ("rank-inf", {"rank": math.inf}, "invalid rank inf"),
    ("rank-string", {"rank": "1"}, "invalid rank '1'"),
    ("path", {"path": 7}, "non-string path 7"),
    ("resource-base-type", {"resource_base": "/x"}, "invalid resource_base '/x'"),
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [(o, m) for _, o, m in BAD_CANDIDATES],
    ids=[i for i, _, _ in BAD_CANDIDATES],
)
async def test_malformed_candidate_fails_fast_and_is_not_cached(
    overrides: dict[str, object], message: str
) -> None:
    """Each contract violation raises SkillContractError naming the provider and field."""
    registry = SkillRegistry()
    provider = ListProvider("p", [candidate("ok", **{"provider": "p", **overrides})])  # type: ignore[arg-type]
    registry.register_provider(provider)
    for lookup in (registry.list, registry.snapshot, lambda: registry.get("ok")):
        with pytest.raises(SkillContractError) as caught:
            await lookup()
        assert str(caught.value).startswith('skill provider "p" returned ')
        assert message in str(caught.value)
    assert provider.list_calls == 3
    provider.candidates = [candidate("ok", provider="p")]
    assert names(await registry.list()) == ["ok"]


async def test_non_candidate_value_fails_fast() -> None:
    """A provider returning something that is not a SkillCandidate breaks the contract."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", ["x"]))  # type: ignore[list-item]
    with pytest.raises(SkillContractError, match=r'^skill provider "p" returned a non-candidate'):
        await registry.list()


BAD_DEFINITIONS: list[tuple[str, object, str]] = [
    ("not-a-definition", "text", "a non-definition value 'text'"),
    ("content", {"content": None}, 'skill "ok" with a non-string content None'),
    ("description", {"description": ""}, "empty or non-string description"),
    ("provider", {"provider": "q"}, "provider 'q' instead of 'p'"),
    ("flag", {"disable_model_invocation": None}, "non-boolean disable_model_invocation"),
    ("path", {"path": b"x"}, "non-string path b'x'"),
]


@pytest.mark.parametrize(
    ("override", "message"),
    [(o, m) for _, o, m in BAD_DEFINITIONS],
    ids=[i for i, _, _ in BAD_DEFINITIONS],
)
async def test_malformed_definition_fails_fast(override: object, message: str) -> None:
    """get() validates what the provider's get() returned."""
    registry = SkillRegistry()
    found = candidate("ok", provider="p")
    provider = ListProvider("p", [found])
    provider.definition_override = (
        definition_of(found, **override) if isinstance(override, dict) else override
    )
    registry.register_provider(provider)
    with pytest.raises(SkillContractError) as caught:
        await registry.get("ok")
    assert str(caught.value).startswith('skill provider "p" returned ')
    assert message in str(caught.value)


# -- the one candidate validator and the one summary builder --------------------------------


class _Name(str):
    """A str subclass: a valid name all the same."""


class _Rank(enum.IntEnum):
    HIGH = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class _TaggedCandidate(SkillCandidate):
    tag: str = "extra"


async def test_every_summary_field_reaches_the_listed_summary() -> None:
    """A listed summary equals one built from every SkillSummary field of the candidate."""
    offered = candidate(
        "full",
        provider="p",
        description="Does everything.",
        when_to_use="When asked.",
        user_invocable=False,
        source="custom",
        resource_base=DirectoryResource(path="/skills/full"),
    )
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", [offered]))
    listed = await registry.list()
    assert listed == [
        SkillSummary(**{f.name: getattr(offered, f.name) for f in fields(SkillSummary)})
    ]
    assert type(listed[0]) is SkillSummary


async def test_hidden_skill_is_in_the_snapshot_but_not_the_list() -> None:
    """disable_model_invocation keeps a skill out of list() while the snapshot holds it."""
    registry = SkillRegistry()
    registry.register_provider(
        ListProvider(
            "p",
            [
                candidate("seen", provider="p"),
                candidate("hidden", provider="p", disable_model_invocation=True),
            ],
        )
    )
    snapshot = await registry.snapshot()
    assert [skill.name for skill in snapshot.skills] == ["hidden", "seen"]
    assert [skill.name for skill in await registry.list()] == ["seen"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"name": _Name("sub-name")},
        {"description": _Name("A description held in a str subclass.")},
        {"rank": 2.5},
        {"rank": _Rank.HIGH},
        {"resource_base": UrlResource(url="https://example.com/skills/x")},
        {"resource_base": OpaqueResource(description="ask the provider")},
        {"when_to_use": _Name("Whenever.")},
        {"path": None},
    ],
    ids=[
        "str-subclass-name",
        "subclass-description",
        "float-rank",
        "int-enum-rank",
        "url-resource",
        "opaque-resource",
        "subclass-when-to-use",
        "no-path",
    ],
)
async def test_unusual_but_valid_candidates_are_accepted(overrides: dict[str, object]) -> None:
    """Values of subclasses and the less common resource kinds pass like plain ones."""
    name = str(overrides.get("name", "odd"))
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", [candidate(name, provider="p", **overrides)]))  # type: ignore[arg-type]
    assert [skill.name for skill in await registry.list()] == [name]


async def test_candidate_subclass_is_accepted() -> None:
    """A provider may offer a subclass of SkillCandidate."""
    offered = _TaggedCandidate(
        name="tagged", description="Tagged.", provider="p", source="test", rank=1
    )
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", [offered]))
    assert (await registry.snapshot()).skills == (offered,)


@pytest.mark.parametrize("blank", ["", "\u2003\u00a0", "\n\t "])
async def test_blank_description_in_any_whitespace_is_refused(blank: str) -> None:
    """A description of nothing but (Unicode) whitespace breaks the contract."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", [candidate("ok", provider="p")]))
    registry.register_provider(
        ListProvider("q", [SkillCandidate(name="ok", description=blank, provider="q", rank=1)])
    )
    with pytest.raises(SkillContractError, match="empty or non-string description"):
        await registry.snapshot()


async def test_first_malformed_candidate_in_provider_order_is_reported() -> None:
    """With several malformed candidates, the error names the first one offered."""
    registry = SkillRegistry()
    registry.register_provider(
        ListProvider(
            "p",
            [
                candidate("fine", provider="p"),
                candidate("first-bad", provider="p", rank=True),
                candidate("second-bad", provider="p", path=3),
            ],
        )
    )
    with pytest.raises(SkillContractError, match=r'skill "first-bad" with an invalid rank True'):
        await registry.snapshot()
