"""The offline model: a deterministic, rule-based stand-in for a language model.

It is not an LLM and does not pretend to be one. It reads the same request a hosted model
would get (system prompt, tools, the session prefix with the skill catalog, the history) and
applies these rules:

1. If the last message is a ``skill`` tool result, answer from the loaded instructions; if it
   is the answer to a search, load the best match by name.
2. If the user's message names a catalog skill, or its words clearly match exactly one skill's
   description, call the ``skill`` tool with that name, exactly like a real model's tool call.
3. Otherwise, when the catalog left skills out (the tool then accepts ``query``), search them
   with the user's words.
4. Otherwise, say which skills are available (and, when the agent says some wait for the
   person's trust, how many and how to admit them).

A skill the user invoked as ``/name`` arrives already loaded inside the user's message; the
model answers from it directly.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import ModelReply, ModelRequest, OnText, ToolCall

__all__ = ["OfflineModel", "choose_skill", "parse_catalog"]

_CATALOG_LINE = re.compile(r"^- `([a-z0-9-]+)`: (.*)$")
_WORD = re.compile(r"[a-z0-9]+")
_SKILL_CONTENT = re.compile(r'<skill_content name="([^"]*)">')
_INSTRUCTIONS = re.compile(r"<skill_instructions>\n(.*?)\n?</skill_instructions>", re.DOTALL)
_STEP = re.compile(r"^\s*(?:\d+\.|[-*])\s+(.*)$")
# The first result line of a search answer (`name: description`, after one header line).
_SEARCH_ANSWER = "Skills matching the query"
_FIRST_MATCH = re.compile(r"^([a-z0-9]+(?:-[a-z0-9]+)*): ", re.MULTILINE)
_NO_MATCH = "No skill matches the query"

# Words too common to say anything about which skill a request is for.
_STOPWORDS = frozenset(
    """a about after all also an and any are as at be before being by can could do
    does for from get give has have help how i if in into is it its just let like make me my
    need of on one or our please so some that the their them then there these this to up us use
    used want was we what when which while who will with would you your""".split()  # noqa: SIM905
)
# A description match needs at least this many shared words, and twice the runner-up's.
_MIN_SHARED_WORDS = 2
_MAX_STEPS_SHOWN = 6


def _stem(word: str) -> str:
    # Crude on purpose: enough for "reviews"/"review" and "merging"/"merge" to meet.
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _content_words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 2}


def parse_catalog(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The skills of the catalog in the request's prefix: name -> description."""
    return dict(_index_of(messages).skills)


def choose_skill(prompt: str, catalog: Mapping[str, str]) -> str | None:
    """The one skill a prompt asks for, by name or by a clear description match, if any."""
    return _CatalogIndex(catalog).choose(prompt)


class _CatalogIndex:
    """A catalog, and what matching prompts against it needs, derived once per catalog.

    A session's prefix is frozen, so every turn sends the same catalog: deriving a pattern and
    a word set per skill on every turn made a later turn with a thousand skills cost some
    fifty milliseconds (more patterns than Python's own regex cache holds).
    """

    __slots__ = ("_patterns", "_words", "skills")

    def __init__(self, skills: Mapping[str, str]) -> None:
        self.skills: Mapping[str, str] = skills
        # Built when first needed: most prompts name no skill, or name one.
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._words: list[tuple[str, set[str]]] | None = None

    def _mentions(self, name: str, lowered: str) -> bool:
        # The pattern can only match where the name occurs as it is: look for that first.
        if name not in lowered:
            return False
        pattern = self._patterns.get(name)
        if pattern is None:
            pattern = re.compile(rf"(?<![a-z0-9-]){re.escape(name)}(?![a-z0-9-])")
            self._patterns[name] = pattern
        return pattern.search(lowered) is not None

    def choose(self, prompt: str) -> str | None:
        lowered = prompt.lower()
        # Only the exact name counts as naming a skill ("code review" is two description words).
        named = [name for name in self.skills if self._mentions(name, lowered)]
        if len(named) == 1:
            return named[0]
        if len(named) > 1:
            # Several named: the longest name is the most specific mention.
            return max(named, key=len)
        if self._words is None:
            self._words = [
                (name, _content_words(f"{name} {text}")) for name, text in self.skills.items()
            ]
        asked = _content_words(prompt)
        scores = sorted(((len(asked & words), name) for name, words in self._words), reverse=True)
        if not scores or scores[0][0] < _MIN_SHARED_WORDS:
            return None
        # Clearly better: at least twice the shared words of the runner-up.
        if len(scores) > 1 and scores[0][0] < 2 * scores[1][0]:
            return None
        return scores[0][1]


def _index_of(messages: Sequence[Mapping[str, Any]]) -> _CatalogIndex:
    """The index of the catalog in the request's prefix, shared by requests with the same one."""
    texts = tuple(
        content
        for message in messages
        if message.get("role") == "user"
        and isinstance(content := message.get("content"), str)
        and "<available_skills>" in content
    )
    return _index_of_texts(texts)


# A few catalogs at once: one per live session prefix in a demo, which rarely has more.
@functools.lru_cache(maxsize=8)
def _index_of_texts(texts: tuple[str, ...]) -> _CatalogIndex:
    skills: dict[str, str] = {}
    for content in texts:
        for line in content.splitlines():
            match = _CATALOG_LINE.match(line)
            if match:
                skills[match.group(1)] = html.unescape(match.group(2))
    return _CatalogIndex(skills)


def _answer_from_skill(content: str) -> str:
    if content.startswith("Error: "):
        return f"I tried to load a skill, but it failed:\n\n{content}"
    names = _SKILL_CONTENT.findall(content)
    sections = _INSTRUCTIONS.findall(content)
    parts = []
    for name, body in zip(names, sections, strict=False):
        steps = _steps(body)
        lines = [f"I loaded the `{html.unescape(name)}` skill. Its instructions, in short:"]
        lines += [f"{i}. {step}" for i, step in enumerate(steps[:_MAX_STEPS_SHOWN], start=1)]
        if len(steps) > _MAX_STEPS_SHOWN:
            more = len(steps) - _MAX_STEPS_SHOWN
            lines.append(f"(and {more} more {'step' if more == 1 else 'steps'})")
        if not steps:
            lines.append(body.strip()[:400] or "(the skill has no instructions)")
        parts.append("\n".join(lines))
    parts.append(
        "I am the offline demo model, so I stop here; a real model would now carry these "
        "instructions out."
    )
    return "\n\n".join(parts)


def _steps(body: str) -> list[str]:
    """The numbered or bulleted items of a Markdown body, wrapped lines joined."""
    steps: list[str] = []
    in_step = False
    for line in body.splitlines():
        match = _STEP.match(line)
        if match:
            steps.append(match.group(1).strip())
            in_step = True
        elif in_step and line.startswith((" ", "\t")) and line.strip():
            steps[-1] += " " + line.strip()
        else:
            in_step = False
    return steps


def _list_skills(catalog: Mapping[str, str], can_load: bool, trust_note: str | None) -> str:
    if not catalog and trust_note:
        # Skills are there, held back until the person trusts where they come from.
        return (
            "I am the offline demo model (rule-based, not an LLM). No skills are offered to me "
            f"in this session yet. {trust_note}"
        )
    if not catalog:
        # Said to someone who just installed the agent: tell them how to get some.
        return (
            "I am the offline demo model (rule-based, not an LLM). No skills are available "
            "in this session. Add a skill as `.agents/skills/<name>/SKILL.md` in this project "
            "or in your home directory, or start the agent with `--examples` to try the "
            "example skills that come with it (`acp-skills-demo --help` lists every place "
            "skills are looked up)."
        )
    lines = [
        "I am the offline demo model (rule-based, not an LLM). None of the available skills "
        "clearly matches your request. Available skills:",
        *(f"- `{name}`: {text}" for name, text in sorted(catalog.items())),
    ]
    if can_load:
        lines.append("Name one of them, or describe your task in its words, and I will load it.")
    if trust_note:
        lines.append(trust_note)
    return "\n".join(lines)


class OfflineModel:
    """The rule-based model. Deterministic: the same request always gets the same reply."""

    @property
    def config(self) -> Mapping[str, Any]:
        return {"model": "offline", "kind": "rule-based"}

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        messages = request.messages
        last = messages[-1] if messages else {}
        content = last.get("content")
        text_content = content if isinstance(content, str) else ""
        if last.get("role") == "tool":
            if text_content.startswith(_SEARCH_ANSWER):
                found = _FIRST_MATCH.search(text_content)
                if found is not None:
                    return _call_skill(len(messages), {"name": found.group(1)})
            if text_content.startswith(_NO_MATCH):
                searched = (
                    "I searched the skills the catalog does not list, and none matches your "
                    "request.\n\n"
                )
                listed = _list_skills(parse_catalog(messages), True, request.trust_note)
                return await _say(searched + listed, on_text)
            return await _say(_answer_from_skill(text_content), on_text)
        if "<skill_content name=" in text_content:
            return await _say(
                _answer_from_skill(text_content[text_content.index("<skill_") :]), on_text
            )
        index = _index_of(messages)
        catalog = index.skills
        skill_tool = next((tool for tool in request.tools if _tool_name(tool) == "skill"), None)
        can_load = skill_tool is not None
        choice = index.choose(text_content) if can_load else None
        if choice is not None:
            return _call_skill(len(messages), {"name": choice})
        if skill_tool is not None and _accepts_query(skill_tool) and text_content.strip():
            return _call_skill(len(messages), {"query": text_content.strip()[:500]})
        return await _say(_list_skills(catalog, can_load, request.trust_note), on_text)


def _call_skill(position: int, arguments: Mapping[str, str]) -> ModelReply:
    call = ToolCall(
        id=f"offline-call-{position}", name="skill", arguments=json.dumps(dict(arguments))
    )
    return ModelReply(text="", tool_calls=(call,), finish="tool_calls")


def _accepts_query(tool: Mapping[str, Any]) -> bool:
    function = tool.get("function")
    parameters = function.get("parameters") if isinstance(function, Mapping) else None
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    return isinstance(properties, Mapping) and "query" in properties


def _tool_name(tool: Mapping[str, Any]) -> object:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else None


async def _say(text: str, on_text: OnText) -> ModelReply:
    # Streamed line by line, so the editor shows the same incremental updates as with a real
    # model.
    for piece in text.splitlines(keepends=True):
        await on_text(piece)
    return ModelReply(text=text)
