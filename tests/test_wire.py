"""What goes on the wire (`acp_skills.acp.wire`): update builders, commands, prompt text, cwd."""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import ResourceContentBlock, TextContentBlock
from hypothesis import given
from hypothesis import strategies as st

from acp_skills import SkillDefinition, SkillLookupOptions, SkillRegistry, ToolResult
from acp_skills.acp.commands import invocable
from acp_skills.acp.wire import (
    available_commands,
    check_cwd,
    find_invocations_with_arguments,
    prompt_text,
    tool_call_finished,
    tool_call_started,
)
from tests.providers import candidate
from tests.strategies import descriptions, forbidden_in

pytestmark = pytest.mark.sdk

# -- pure builders ---------------------------------------------------------------------------


def test_skill_tool_call_start_is_an_in_progress_read_titled_with_the_skill() -> None:
    """The start update: kind read, title ``Load skill NAME``, rawInput = the arguments."""
    update = tool_call_started("call-7", "skill", {"name": "deploy", "path": "a.md"}, "skill")
    assert update.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-7",
        "title": "Load skill deploy",
        "kind": "read",
        "status": "in_progress",
        "rawInput": {"name": "deploy", "path": "a.md"},
    }


@pytest.mark.parametrize(
    ("arguments", "title", "raw_input"),
    [
        ({"name": ""}, "Load skill", {"name": ""}),
        ({"path": "x"}, "Load skill", {"path": "x"}),
        ({"name": 3}, "Load skill", {"name": 3}),
        ("not json", "Load skill", {"arguments": "not json"}),
    ],
    ids=["empty-name", "no-name", "non-string-name", "not-an-object"],
)
def test_skill_tool_call_start_without_a_usable_name(
    arguments: object, title: str, raw_input: dict[str, Any]
) -> None:
    """Without a usable name the title is plain ``Load skill``; rawInput is always an object."""
    update = tool_call_started("c", "skill", arguments, "skill")
    assert (update.title, update.raw_input) == (title, raw_input)


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (ToolResult(text="<skill_content ...>", is_error=False), "completed"),
        (ToolResult(text='Error: skill "x" is unknown', is_error=True), "failed"),
    ],
    ids=["completed", "failed"],
)
def test_tool_call_finished_carries_status_and_text(result: ToolResult, status: str) -> None:
    """The closing update: same id, completed or failed, the result text as its content."""
    update = tool_call_finished("call-7", result)
    assert update.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-7",
        "status": status,
        "content": [{"type": "content", "content": {"type": "text", "text": result.text}}],
    }


def test_available_commands_only_user_invocable_literal_descriptions_and_hints() -> None:
    """User-invocable only; whitespace collapsed, not XML-escaped, hint from argument_hint."""
    skills = [
        candidate("alpha", provider="p", description="  a < b &\n\t c  ", argument_hint="[x]"),
        candidate("beta", provider="p", description="Beta.", user_invocable=False),
        candidate("gamma", provider="p", description="Gamma.", argument_hint=""),
        candidate("delta", provider="p", description="Delta.", disable_model_invocation=True),
    ]
    commands = [
        command.model_dump(mode="json", by_alias=True, exclude_none=True)
        for command in available_commands(invocable(skills))
    ]
    assert commands == [
        {"name": "alpha", "description": "a < b & c", "input": {"hint": "[x]"}},
        {"name": "gamma", "description": "Gamma."},
        {"name": "delta", "description": "Delta."},
    ]


def test_available_commands_truncates_long_descriptions_to_200_characters() -> None:
    """A description over 200 characters keeps 197 of them and ends with ``...``."""
    long = "word " * 100
    [command] = available_commands([candidate("long", provider="p", description=long)])
    assert command.description == long.strip()[:197] + "..."
    assert len(command.description) == 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/deploy", ["deploy"]),
        ("/deploy now please", ["deploy"]),
        ("please /deploy now", ["deploy"]),
        ("run it\n/deploy", ["deploy"]),
        ("/compare then /deploy", ["compare", "deploy"]),
        ("/deploy /deploy and /deploy again", ["deploy"]),
        ("/deploy-app", ["deploy-app"]),
        ("/a/b", []),
        ("/deploy/b", []),
        ("5/8", []),
        ("foo/bar", []),
        ("x/deploy", []),
        ("/deploy.", []),
        ("/Deploy", []),
        ("/unknown", []),
        ("/", []),
        ("no slash at all", []),
    ],
    ids=[
        "alone",
        "at-start",
        "mid-sentence",
        "after-newline",
        "several-in-order",
        "repeats-once",
        "hyphenated",
        "path-a-b",
        "path-name-b",
        "fraction",
        "foo-bar",
        "glued-to-word",
        "trailing-punctuation",
        "uppercase",
        "unknown-name",
        "bare-slash",
        "no-slash",
    ],
)
def test_find_invocations(text: str, expected: list[str]) -> None:
    """``/name`` counts at the start or after whitespace, before whitespace or the end."""
    # `internal` is left out of the names, as AcpSkills does for user-invocable: false skills.
    found = find_invocations_with_arguments(text, ["compare", "deploy", "deploy-app"])
    assert [name for name, _ in found] == expected


def test_prompt_text_joins_text_blocks_and_skips_the_rest() -> None:
    """Text blocks (models or raw dicts) are joined with newlines; other blocks are skipped."""
    prompt: list[object] = [
        TextContentBlock(type="text", text="first"),
        ResourceContentBlock(type="resource_link", name="notes", uri="file:///notes.md"),
        {"type": "text", "text": "second"},
        {"type": "image", "data": "..."},
    ]
    assert prompt_text(prompt) == "first\nsecond"


def path_limit() -> int:
    """The platform's longest path in bytes, its terminating NUL included (as the code sees it)."""
    try:
        limit = os.pathconf("/", "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):
        limit = -1
    return limit if limit > 0 else 4096


LONGEST_CWD = "/" + "é" * ((path_limit() - 2) // 2) + "a" * ((path_limit() - 2) % 2)


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/abs/dir", True),
        ("relative/dir", False),
        ("", False),
        ("/a\0b", False),
        (None, False),
        (LONGEST_CWD, True),
        (LONGEST_CWD + "a", False),
    ],
    ids=["absolute", "relative", "empty", "nul", "not-a-string", "at-path-limit", "over-it"],
)
def test_only_an_absolute_cwd_passes_the_check(cwd: object, expected: bool) -> None:
    """Only an absolute path without NUL, within the path limit, is a working directory."""
    if expected:
        assert check_cwd(cwd) == cwd
    else:
        with pytest.raises(RequestError):
            check_cwd(cwd)


def test_check_cwd_refuses_an_overlong_cwd_without_echoing_it() -> None:
    """Over the limit (counted in UTF-8 bytes, NUL included) the error gives only the lengths."""
    assert len(LONGEST_CWD.encode()) == path_limit() - 1
    assert check_cwd(LONGEST_CWD) == LONGEST_CWD
    with pytest.raises(RequestError) as caught:
        check_cwd(LONGEST_CWD + "\ud800")  # a lone surrogate from JSON is measured too
    assert (caught.value.code, caught.value.data) == (
        -32602,
        {
            "reason": "cwd is longer than the platform's path limit",
            "length": path_limit() + 2,
            "limit": path_limit() - 1,
        },
    )


def test_available_commands_leave_out_names_no_slash_can_invoke() -> None:
    """A hand-built summary whose name breaks the grammar is no command: not advertised."""
    skills = [
        candidate("ok", provider="p"),
        candidate("ok", provider="p", name="Bad\u202eName"),
        candidate("ok", provider="p", name="two words"),
    ]
    assert [command.name for command in available_commands(invocable(skills))] == ["ok"]
    assert [skill.name for skill in invocable(skills)] == ["ok"]


def test_tool_call_titles_show_no_control_characters() -> None:
    """The model's name goes into a title an editor shows: its controls are removed."""
    update = tool_call_started("c", "skill", {"name": "de\u202eploy\x1b"}, "skill")
    assert update.title == "Load skill deploy"
    assert update.raw_input == {"name": "de\u202eploy\x1b"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/deploy prod eu-west", [("deploy", "prod eu-west")]),
        ("/deploy", [("deploy", "")]),
        ("please /deploy prod\nthen tell me", [("deploy", "prod")]),
        ("/deploy prod /review main", [("deploy", "prod"), ("review", "main")]),
        ("/deploy to /tmp/x and /unknown", [("deploy", "to /tmp/x and /unknown")]),
        ("/deploy a\n/deploy b", [("deploy", "a")]),
        ("see docs/deploy", []),
    ],
    ids=["args", "none", "end-of-line", "next-invocation", "unknown-stays", "first-wins", "path"],
)
def test_invocation_arguments_end_at_the_line_or_the_next_invocation(
    text: str, expected: list[tuple[str, str]]
) -> None:
    """Arguments run from /name to the end of its line or the next known /name."""
    assert find_invocations_with_arguments(text, ["deploy", "review"]) == expected


# -- commands from any description -------------------------------------------------------------


@given(st.lists(descriptions, min_size=1, max_size=5))
def test_runtime_skills_give_clean_commands(texts: list[str]) -> None:
    """Runtime skills (where lone surrogates can enter) give commands, one line each, free of
    forbidden characters, that encode as JSON and UTF-8."""

    async def commands_of() -> list[Any]:
        registry = SkillRegistry()
        for index, text in enumerate(texts):
            # "d " keeps every description non-empty, as registration requires.
            registry.register(
                SkillDefinition(name=f"skill-{index}", description=f"d {text}", content="body")
            )
        return list(available_commands((await registry.snapshot(SkillLookupOptions())).skills))

    commands = anyio.run(commands_of)
    assert [command.name for command in commands] == [f"skill-{i}" for i in range(len(texts))]
    for command in commands:
        assert forbidden_in(command.description) == []
        assert "\n" not in command.description
    dumped = [command.model_dump(mode="json") for command in commands]
    json.dumps(dumped, ensure_ascii=False).encode("utf-8")
