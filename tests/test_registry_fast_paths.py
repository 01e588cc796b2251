"""The registry's cheap checks and lazily built summaries give what the full checks give."""

from __future__ import annotations

import enum
from dataclasses import dataclass

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
from acp_skills.model import summary_fields
from tests.providers import ListProvider, candidate

pytestmark = pytest.mark.anyio


class _Name(str):
    """A str subclass: not the exact type the cheap check looks for, yet a valid name."""


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
    assert listed == [SkillSummary(**summary_fields(offered))]
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
