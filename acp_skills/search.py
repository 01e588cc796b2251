"""Finding skills by what they are for (contract §12): a BM25F index over name, description and
``when_to_use``."""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .model import SkillSummary

MAX_MATCHES = 8
MAX_QUERY_LENGTH = 1000  # code points: a task is described in a few words, not a document

# Name, description, when_to_use (which often repeats the description in other words).
_WEIGHTS = (2.0, 1.0, 0.8)
_B = (0.4, 0.75, 0.75)  # length normalization
_K1 = 1.2  # term-frequency saturation
_WORD = re.compile(r"[^\W_]+")
# Two query words are tried as one ("log in" -> "login") only when that makes a real word.
_MIN_COMPOUND = 5

# Kept small: "test", "file" or "review" are content words here; "don't" splits to function words.
_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each either etc
    even ever every few for from further get gets getting give given go goes going got had has
    have having he help her here hers him his how however i if in into is it its itself just let
    lets like may me might more most much must my need needs no nor not now of off on once one
    only or other our ours out over own per please same she should so some something such than
    that the their theirs them then there these they this those through to too under until up
    upon us use used uses using very via want wants was way we were what when whenever where
    whether which while who whom whose why will with within without would yet you your yours
    s t d m ll re ve don doesn didn isn aren wasn weren won wouldn shouldn couldn haven hasn hadn
    """.split()  # noqa: SIM905
)

# Longest first, with what replaces them: only so that the forms of one word meet.
_SUFFIX_TABLE = (
    "izations:ize ization:ize ational:ate ations:ate ation:ate ions: ion: ements: ement: "
    "ments: ment: ness: ities: ity: izing:ize ized:ize izes:ize ings: ing: ies:y ied:y "
    "ers: er: ed: ly: es:e s:"
)
_SUFFIXES = tuple(tuple(pair.split(":")) for pair in _SUFFIX_TABLE.split())
_MIN_STEM = 3
_VOWELS = frozenset("aeiouy")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    if len(word) <= _MIN_STEM or not word.isalpha() or not word.isascii():
        return word
    # Two rounds for stacked suffixes: "centering" -> "center" -> "cent", as "center" does.
    for _ in range(2):
        if word.endswith(("ss", "us", "is")):  # "class", "status", "analysis": not plurals
            break
        for suffix, replacement in _SUFFIXES:
            if word.endswith(suffix):
                stem = word[: -len(suffix)] + replacement
                if len(stem) >= _MIN_STEM and _VOWELS.intersection(stem):
                    word = stem
                    break
        else:
            break
    # "running" -> "runn" -> "run". A final e comes and goes ("migrate", "migrating").
    if len(word) > _MIN_STEM and word[-1] == word[-2] and word[-1] not in "lsz" + "aeiou":
        word = word[:-1]
    if len(word) > _MIN_STEM and word.endswith("e"):
        word = word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The searchable terms of ``text``: words, lower-cased, without function words, stemmed."""
    return [_stem(word) for word in _WORD.findall(text.lower()) if word not in _STOPWORDS]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillMatch:
    """One search result: a skill and how well it matched (higher is better)."""

    name: str
    description: str
    score: float


class SkillIndex:
    """An immutable BM25F index of the skills a query may find (`catalog.listable`)."""

    def __init__(self, skills: Iterable[SkillSummary]) -> None:
        # Positions follow the names' code-point order, so equal scores rank by name.
        self._skills = sorted(skills, key=lambda skill: skill.name)
        fields = [
            (terms(skill.name), terms(skill.description), terms(skill.when_to_use or ""))
            for skill in self._skills
        ]
        total = max(len(fields), 1)
        averages = [max(sum(len(words[f]) for words in fields) / total, 1.0) for f in range(3)]
        # term -> position -> its frequency, weighted and length-normalized per field
        frequencies: dict[str, dict[int, float]] = {}
        for position, per_field in enumerate(fields):
            for words, weight, b, average in zip(per_field, _WEIGHTS, _B, averages, strict=True):
                norm = weight / (1.0 - b + b * len(words) / average)
                for term, count in Counter(words).items():
                    found = frequencies.setdefault(term, {})
                    found[position] = found.get(position, 0.0) + count * norm
        # Everything independent of the query: each skill's whole contribution for each term.
        self._postings: dict[str, dict[int, float]] = {}
        for term, found in frequencies.items():
            idf = math.log(1.0 + (len(fields) - len(found) + 0.5) / (len(found) + 0.5))
            self._postings[term] = {p: idf * (_K1 + 1.0) * v / (_K1 + v) for p, v in found.items()}

    def search(self, query: str, limit: int = MAX_MATCHES) -> tuple[SkillMatch, ...]:
        """At most ``limit`` skills sharing a term with ``query``, best first, ties by name."""
        # Adjacent query words the indexed text writes as one: "log in" finds "login".
        compounds = (
            _stem(first + second)
            for first, second in itertools.pairwise(_WORD.findall(query.lower()))
            if len(first) > 1 and len(second) > 1 and len(first + second) >= _MIN_COMPOUND
        )
        scores: dict[int, float] = {}
        for term in sorted({*terms(query), *compounds}):
            for position, score in self._postings.get(term, {}).items():
                scores[position] = scores.get(position, 0.0) + score
        # `nlargest` keeps the input order among equal keys: sorted positions mean name order.
        best = heapq.nlargest(limit, sorted(scores), key=scores.__getitem__)
        found = ((self._skills[p], scores[p]) for p in best)
        return tuple(SkillMatch(name=s.name, description=s.description, score=v) for s, v in found)
