"""Skill search (contract §12): the analyzer, BM25F ranking, and relevance on a fixed corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_skills import SkillSummary
from acp_skills.search import MAX_MATCHES, SkillIndex, terms

CORPUS_FILE = Path(__file__).parent / "fixtures" / "search_corpus.json"

# What the index scores on the corpus (see docs/architecture.md): 64 of 74 queries used while
# building the analyzer, 31 of 40 held-out queries written before it was tuned. The floors sit
# a little below, so a change that makes search worse fails here.
PRECISION_FLOOR = 0.80
HELD_OUT_PRECISION_FLOOR = 0.70


def summary(name: str, description: str, when: str | None = None, **fields: Any) -> SkillSummary:
    return SkillSummary(name=name, description=description, when_to_use=when, **fields)


# -- the analyzer ----------------------------------------------------------------------------

TERM_CASES: list[tuple[str, str, list[str]]] = [
    ("lower-cased-words", "Deploy THE App", ["deploy", "app"]),
    ("hyphens-split-names", "deploy-app", ["deploy", "app"]),
    ("function-words-dropped", "how do I use it with the", []),
    ("negations-dropped", "don't can't won't", []),
    ("possessive", "the user's files", ["user", "fil"]),
    ("digits-kept", "k8s and s3 on ec2", ["k8s", "s3", "ec2"]),
    ("unicode-words", "Café déjà-vu", ["café", "déjà", "vu"]),
]


@pytest.mark.parametrize(
    ("text", "expected"), [case[1:] for case in TERM_CASES], ids=[case[0] for case in TERM_CASES]
)
def test_terms(text: str, expected: list[str]) -> None:
    """Words, lower-cased, without function words or contractions, lightly stemmed."""
    assert terms(text) == expected


STEM_GROUPS = [
    ["deploy", "deploys", "deployed", "deploying", "deployment", "deployments"],
    ["migrate", "migrates", "migrating", "migration", "migrations"],
    ["test", "tests", "tested", "testing"],
    ["run", "running"],
    ["query", "queries", "queried"],
    ["center", "centering", "centered"],
    ["optimize", "optimizing", "optimization", "optimized"],
    ["image", "images"],
    ["compress", "compresses", "compression"],
]


@pytest.mark.parametrize("group", STEM_GROUPS, ids=[group[0] for group in STEM_GROUPS])
def test_forms_of_a_word_meet(group: list[str]) -> None:
    """Inflections and common derivations of one word become one term."""
    assert len({terms(word)[0] for word in group}) == 1


@pytest.mark.parametrize("word", ["class", "status", "analysis", "string"])
def test_words_that_only_look_inflected_keep_their_ending(word: str) -> None:
    """A final "ss", "us" or "is" is not a plural; "string" is not "str" + "ing"."""
    assert terms(word) == [word]


# -- ranking ---------------------------------------------------------------------------------

SMALL = [
    summary("deploy-app", "Ship the service to production.", "When releasing."),
    summary("review-code", "Review a diff for bugs.", "When a pull request needs review."),
    summary("write-tests", "Write unit tests for a module.", "When code lacks tests."),
    summary("hidden-from-model", "Deploy secrets.", disable_model_invocation=True),
]


def test_best_match_comes_first() -> None:
    """The skill sharing the rarest and most words with the query ranks first."""
    index = SkillIndex(SMALL)
    assert [m.name for m in index.search("please review my pull request")] == ["review-code"]


def test_name_counts_more_than_description() -> None:
    """A word in the name outweighs the same word in another skill's description."""
    index = SkillIndex(
        [
            summary("cleanup-logs", "Delete old files from the disk."),
            summary("disk-usage", "Report which directories are biggest."),
        ]
    )
    assert index.search("disk")[0].name == "disk-usage"


def test_when_to_use_is_searched() -> None:
    """Words only in when_to_use still find the skill."""
    index = SkillIndex(SMALL)
    assert [m.name for m in index.search("releasing")] == ["deploy-app"]


def test_no_shared_word_is_no_match() -> None:
    """A query sharing no term with any skill returns nothing."""
    assert SkillIndex(SMALL).search("quantum entanglement") == ()
    assert SkillIndex(SMALL).search("the and of") == ()


def test_at_most_eight_matches_and_ties_by_name() -> None:
    """Equal scores keep name order, and a query returns at most MAX_MATCHES (8)."""
    skills = [summary(f"tool-{i:02d}", "Formats documents.") for i in range(20)]
    matches = SkillIndex(skills).search("format documents")
    assert MAX_MATCHES == 8
    assert [m.name for m in matches] == [f"tool-{i:02d}" for i in range(8)]


def test_searching_is_deterministic() -> None:
    """The same index and query give the same matches and scores every time."""
    corpus = load_corpus()
    first = SkillIndex(corpus_skills(corpus))
    second = SkillIndex(reversed(corpus_skills(corpus)))
    for query in corpus["queries"][:10]:
        assert first.search(query["query"]) == second.search(query["query"])


def test_adjacent_words_written_as_one_are_found() -> None:
    """ "log in" finds a skill about "login"; two stop words never join ("i am" is no "iam")."""
    index = SkillIndex(
        [
            summary("auth-login", "Implements login with passwords."),
            summary("iam-roles", "Writes IAM roles."),
        ]
    )
    assert [m.name for m in index.search("let users log in")] == ["auth-login"]
    assert index.search("i am lost") == ()


# -- relevance on a fixed corpus -------------------------------------------------------------


def load_corpus() -> dict[str, Any]:
    corpus: dict[str, Any] = json.loads(CORPUS_FILE.read_text(encoding="utf-8"))
    return corpus


def corpus_skills(corpus: dict[str, Any]) -> list[SkillSummary]:
    return [
        summary(skill["name"], skill["description"], skill["whenToUse"])
        for skill in corpus["skills"]
    ]


def precision_at_one(index: SkillIndex, queries: list[dict[str, str]]) -> float:
    hits = sum(
        1
        for query in queries
        if [m.name for m in index.search(query["query"], 1)] == [query["expected"]]
    )
    return hits / len(queries)


def test_corpus_is_large_and_varied_enough() -> None:
    """At least 200 skills with unique names, 50 queries, every expected skill present."""
    corpus = load_corpus()
    names = [skill["name"] for skill in corpus["skills"]]
    assert len(names) >= 200
    assert len(set(names)) == len(names)
    queries = corpus["queries"] + corpus["heldout_queries"]
    assert len(queries) >= 50
    assert {query["expected"] for query in queries} <= set(names)


def test_precision_at_one_on_the_corpus() -> None:
    """The expected skill is the first match for most queries written in a person's words."""
    corpus = load_corpus()
    index = SkillIndex(corpus_skills(corpus))
    assert precision_at_one(index, corpus["queries"]) >= PRECISION_FLOOR
    assert precision_at_one(index, corpus["heldout_queries"]) >= HELD_OUT_PRECISION_FLOOR
