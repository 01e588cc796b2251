"""The values and the name grammar (model.py, contract §2)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_skills import is_skill_name
from acp_skills.model import DirectoryResource, SkillSummary, rank_text, summary_of
from tests import providers
from tests.hypothesis_profiles import examples
from tests.strategies import SKILL_NAMES


def reference_is_skill_name(value: str) -> bool:
    """The name grammar restated without regular expressions: hyphen-separated ASCII words."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789")
    words = value.split("-")
    return all(word != "" and set(word) <= allowed for word in words)


@given(SKILL_NAMES)
def test_is_skill_name_accepts_every_name_of_the_grammar(name: str) -> None:
    """Strings generated from the grammar are names."""
    assert is_skill_name(name)
    assert reference_is_skill_name(name)


@settings(max_examples=examples(500))
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(list("ab09-_A\n é")))))
def test_is_skill_name_agrees_with_a_reference_definition(value: str) -> None:
    """The regex-based check matches a word-splitting restatement of the grammar."""
    assert is_skill_name(value) == reference_is_skill_name(value)


@pytest.mark.parametrize(
    "value",
    [None, 1, b"demo", ["demo"]],
    ids=["none", "int", "bytes", "list"],
)
def test_is_skill_name_rejects_non_strings(value: object) -> None:
    """Only strings can be names."""
    assert not is_skill_name(value)


def test_summary_of_keeps_every_summary_field_and_nothing_more() -> None:
    """A candidate's summary carries each `SkillSummary` field, whatever fields are added later."""
    candidate = providers.candidate(
        "pdf-tools",
        provider="local",
        rank=300,
        when_to_use="When a PDF form is mentioned.",
        disable_model_invocation=True,
        user_invocable=False,
        source="custom",
        resource_base=DirectoryResource(path="/skills/pdf-tools"),
        argument_hint="FILE",
    )
    summary = summary_of(candidate)
    assert type(summary) is SkillSummary
    for item in dataclasses.fields(SkillSummary):
        assert getattr(summary, item.name) == getattr(candidate, item.name), item.name
    # Every field is given a non-default value above, so a forgotten one would show.
    defaults = SkillSummary(name="x", description="y")
    for item in dataclasses.fields(SkillSummary):
        if item.name not in ("name", "description"):
            assert getattr(summary, item.name) != getattr(defaults, item.name), item.name


def test_a_rank_is_written_as_a_person_writes_it() -> None:
    """``300`` for 300 and 300.0, ``250.5`` as it is."""
    assert [rank_text(r) for r in (300, 300.0, 250.5)] == ["300", "300", "250.5"]
