"""The trust question (`acp_skills.trust_question`, contract §13): what it shows of each skill
that waits, and the answers it offers. The card a session shows and the command line's
question: tests/test_consent.py, tests/test_demo_agent_trust.py, tests/test_cli_trust.py."""

from __future__ import annotations

from dataclasses import dataclass

from acp_skills import SkillCandidate
from acp_skills.trust import ProjectSource, ServerSource
from acp_skills.trust_question import Withheld, question_options, question_text, question_title


def candidate(name: str, source: str) -> SkillCandidate:
    return SkillCandidate(name=name, description="d", source=source, rank=600, provider="mcp")


def test_a_skill_changed_on_a_trusted_server_is_marked() -> None:
    """A skill that waits again because it changed on the server says so on its line."""
    items = frozenset({("skill://fmt/SKILL.md", "sha256:2"), ("skill://fmt/notes.md", "sha256:3")})
    source = ServerSource(
        label="tools", endpoint="tools=run tools", items=items, uri="skill://fmt/SKILL.md"
    )
    pending = Withheld(candidate("fmt", "mcp:tools"), "pending", source, "changed")
    assert question_text([pending]) == (
        "- fmt: d (MCP server tools, skill://fmt/SKILL.md)"
        " — changed on the server since you trusted it"
    )


@dataclass(frozen=True)
class DynamicLocator:
    """What an MCP skill served with ``"resources": "dynamic"`` tells the card."""

    dynamic: bool = True


def test_an_mcp_uri_or_label_cannot_forge_a_line_and_a_dynamic_skill_is_marked_unverified() -> None:
    """A uri or server label with line breaks stays on its skill's line; a skill whose files
    the server does not list says they are unverified."""
    source = ServerSource(
        label="team\r\nx",
        endpoint="team=serve",
        items=frozenset({("skill://fmt/SKILL.md", "sha256:1")}),
        uri="skill://fmt/SKILL.md\n- deploy: Trusted (project)",
    )
    skill = SkillCandidate(
        name="fmt",
        description="Format\u0085code.",
        source="mcp:team",
        rank=600,
        provider="mcp",
        locator=DynamicLocator(),
    )
    pending = [Withheld(skill, "pending", source)]
    assert question_text(pending) == (
        "- fmt: Format code. (MCP server team x, skill://fmt/SKILL.md - deploy: Trusted (project))"
        " — its files are not listed, so they are unverified"
    )
    assert question_title(pending) == "Trust 1 skill from team x?"


def test_the_lasting_answers_name_what_they_are_about() -> None:
    """ "Trust this project" for a project, "Trust this server" for one server, and both named
    when one question covers both."""
    project = Withheld(candidate("a", "project-agents"), "pending", ProjectSource("/p"))
    server = Withheld(candidate("b", "mcp:t"), "pending", ServerSource("t", "t=x"))
    other = Withheld(candidate("c", "mcp:u"), "pending", ServerSource("u", "u=y"))
    assert question_options([project]) == [
        ("allow_once", "Trust for this session"),
        ("allow_always", "Trust this project"),
        ("reject_once", "Not now"),
        ("reject_always", "Never for this project"),
    ]
    assert dict(question_options([server]))["allow_always"] == "Trust this server"
    assert dict(question_options([server]))["reject_always"] == "Never for this server"
    assert dict(question_options([project, server, other]))["allow_always"] == (
        "Trust this project and these 2 servers"
    )
