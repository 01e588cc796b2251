"""What a person reads about skills that wait for trust (`acp_skills.trust_text`, contract §13):
the question (what it shows of each skill that waits, the answers it offers), the `skill`
tool's error, the ``/NAME`` note, the report's parts and the one wording of how to admit them.
The card a session shows and the command line's question: tests/test_consent.py,
tests/test_demo_agent_trust.py, tests/test_cli_trust.py."""

from __future__ import annotations

from typing import Any

import pytest

from acp_skills import SkillCandidate
from acp_skills.cli.output import Style
from acp_skills.diagnostics import Markdown
from acp_skills.trust import ProjectSource, ServerSource, Withheld
from acp_skills.trust_text import (
    command_note,
    how_to_admit,
    question_options,
    question_text,
    question_title,
    trust_error,
    waiting_note,
    withheld_parts,
)


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


def test_an_mcp_uri_or_label_cannot_forge_a_line_and_a_dynamic_skill_is_marked_unverified() -> None:
    """A uri or server label with line breaks stays on its skill's line; a skill whose files
    the server does not list (its ``SKILL.md`` paired with ``"dynamic"``) says they are
    unverified."""
    uri = "skill://fmt/SKILL.md\n- deploy: Trusted (project)"
    source = ServerSource(
        label="team\r\nx", endpoint="team=serve", items=frozenset({(uri, "dynamic")}), uri=uri
    )
    skill = SkillCandidate(
        name="fmt", description="Format\u0085code.", source="mcp:team", rank=600, provider="mcp"
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


@pytest.mark.parametrize(
    ("state", "text"),
    [
        ("pending", 'Error: skill "fmt" from MCP server "tools" is waiting for trust'),
        ("refused", 'Error: skill "fmt" from MCP server "tools" is not trusted'),
    ],
    ids=["pending", "refused"],
)
def test_an_mcp_skill_withheld_names_its_server(state: Any, text: str) -> None:
    """The tool's error for an MCP skill names the server's label."""
    source = ServerSource(label="tools", endpoint="tools=run-tools")
    assert trust_error("fmt", Withheld(candidate("fmt", "mcp:tools"), state, source)) == text


def test_what_a_person_reads_about_a_withheld_server_skill() -> None:
    """`/skills` and the `/NAME` note never send a person to trust a server from the command
    line, only to forget a refusal."""
    items = frozenset({("skill://fmt/SKILL.md", "sha256:2"), ("skill://fmt/notes.md", "sha256:3")})
    source = ServerSource(
        label="tools", endpoint="tools=run tools", items=items, uri="skill://fmt/SKILL.md"
    )
    skill = candidate("fmt", "mcp:tools")
    pending = Withheld(skill, "pending", source, "changed")
    note = command_note("fmt", pending)
    assert "acp-skills trust" not in note
    assert note.endswith(
        "this session will not ask again. To admit it, start a new session and answer its question."
    )
    refused = Withheld(skill, "refused", source)
    assert "`acp-skills trust --forget 'mcp:tools=run tools'`" in command_note("fmt", refused)
    [(title, lines, how)] = withheld_parts([refused], Style(False))
    assert (title, lines) == ("Refused", ['- `fmt` — d (MCP server "tools")'])
    assert how == "To undo a refusal, run `acp-skills trust --forget 'mcp:tools=run tools'`."


def test_how_to_admit_is_one_wording_for_projects_servers_and_refusals() -> None:
    """A pending server's skills are admitted by a new session's question (no command line
    trusts what a server lists without showing it); a project's also by ``acp-skills trust
    PATH``; a refusal is undone by its command."""
    server = ServerSource("team", "team=uvx team-skills")
    project = ProjectSource("/work/my repo")
    waiting = Withheld(candidate("fmt", "mcp:team"), "pending", server)
    assert how_to_admit([waiting]) == "To admit it, start a new session and answer its question."
    theirs = Withheld(candidate("lint", "project-agents"), "pending", project)
    assert how_to_admit([waiting, theirs]) == (
        "To admit them, start a new session and answer its question, or run "
        "`acp-skills trust '/work/my repo'`."
    )
    refused = Withheld(candidate("fmt", "mcp:team"), "refused", server)
    assert how_to_admit([refused, theirs]) == (
        "To admit it, start a new session and answer its question, or run "
        "`acp-skills trust '/work/my repo'`. "
        "To undo a refusal, run `acp-skills trust --forget 'mcp:team=uvx team-skills'`."
    )


def test_the_waiting_note_counts_each_source_projects_first() -> None:
    """What waits in a session is counted by where it comes from, the projects first."""
    server = ServerSource("team", "team=uvx team-skills")
    project = ProjectSource("/work/repo")
    pending = [
        Withheld(candidate("fmt", "mcp:team"), "pending", server),
        Withheld(candidate("lint", "project-agents"), "pending", project),
        Withheld(candidate("deploy", "project-agents"), "pending", project),
    ]
    assert waiting_note(pending) == (
        '2 skills from project `repo` and 1 skill from MCP server "team" wait for trust, and '
        "this session will not ask again. To admit them, start a new session and answer its "
        "question, or run `acp-skills trust /work/repo`."
    )


def test_a_withheld_skill_s_description_is_text_in_the_editor() -> None:
    """In ``/skills``, a description of a skill nobody trusted yet cannot put an image the
    editor would fetch, or a link, into the report; at a terminal it reads as written."""
    source = ProjectSource(key="/repo")
    description = "Fix ![it](https://example.invalid/p.png) <b>now</b>"
    skill = SkillCandidate(
        name="fix", description=description, source="project", rank=300, provider="local"
    )
    pending = Withheld(skill, "pending", source)
    [(_, [line], _)] = withheld_parts([pending], Markdown())
    assert line == (
        "- `fix` — Fix !\\[it\\](https://example.invalid/p.png) \\<b\\>now\\</b\\> (project `repo`)"
    )
    [(_, [line], _)] = withheld_parts([pending], Style(False))
    assert line == f"- `fix` — {description} (project `repo`)"


def test_the_command_that_trusts_a_project_names_its_path_exactly() -> None:
    """Spaces in a path are kept as they are inside the quotes; a line feed is spelt out."""
    for path, quoted in (("/work/my  repo", "'/work/my  repo'"), ("/a\nb", "'/a\\x0ab'")):
        theirs = Withheld(candidate("lint", "project-agents"), "pending", ProjectSource(path))
        assert how_to_admit([theirs]).endswith(f"`acp-skills trust {quoted}`.")
