"""One wording of problems and MCP servers for every surface (`acp_skills.report`): the editor's
``/skills`` and the terminal's ``doctor``, ``validate`` and ``list`` differ only in markup."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from acp_skills.cli.output import Style
from acp_skills.diagnostics import Diagnostic
from acp_skills.mcp import McpServer
from acp_skills.model import rank_text
from acp_skills.report import (
    Markdown,
    by_severity,
    diagnostic_json,
    diagnostic_line,
    server_json,
    server_line,
    tally,
)

BROKEN = Diagnostic(
    code="yaml-invalid", severity="error", path="/p/x/SKILL.md", line=4, message="invalid YAML"
)
NOTE = Diagnostic(code="unknown-key", severity="info", path="/p/y.md", message="unknown key")
SKIPPED = Diagnostic(
    code="mcp-server-unavailable", severity="warning", path=None, message="MCP server 'a' skipped"
)


@pytest.mark.parametrize(
    ("diagnostic", "line"),
    [
        (BROKEN, "/p/x/SKILL.md:4: error yaml-invalid: invalid YAML"),
        (NOTE, "/p/y.md: note unknown-key: unknown key"),
        (SKIPPED, "warning mcp-server-unavailable: MCP server 'a' skipped"),
    ],
    ids=["with-line", "note", "no-path"],
)
def test_a_problem_reads_the_same_in_the_editor_and_at_a_terminal(
    diagnostic: Diagnostic, line: str
) -> None:
    """The terminal's plain line is the editor's without its code spans."""
    assert diagnostic_line(diagnostic, Style(False)) == line
    assert diagnostic_line(diagnostic, Markdown()).replace("`", "") == line


def test_a_coloured_terminal_sets_off_the_place_the_severity_and_the_code() -> None:
    """Bold place, bold red error, dim code; the message as it is."""
    assert diagnostic_line(BROKEN, Style(True)) == (
        "\x1b[1m/p/x/SKILL.md:4\x1b[0m: \x1b[1;31merror\x1b[0m \x1b[2myaml-invalid\x1b[0m: "
        "invalid YAML"
    )


def test_a_message_cannot_forge_a_line() -> None:
    """A line feed or an escape quoted from disk is spelt out (in Markdown, with its
    backslash escaped, so the editor shows it as spelt)."""
    forged = Diagnostic(
        code="yaml-invalid", severity="error", path="/p/a\nb", message="x\n- error \x1b[2J"
    )
    assert diagnostic_line(forged, Markdown()) == (
        "`/p/a\\x0ab`: error `yaml-invalid`: x\\\\x0a- error \\\\x1b\\[2J"
    )


def test_tally_counts_each_severity_most_severe_first() -> None:
    """Notes are ``note``s; a severity with none is left out; nothing is ``no problems``."""
    assert tally([NOTE, BROKEN, NOTE, SKIPPED]) == "1 error, 1 warning, 2 notes"
    assert tally([]) == "no problems"
    assert by_severity([NOTE, SKIPPED, BROKEN]) == [BROKEN, SKIPPED, NOTE]


def test_json_keeps_the_stable_shape_without_unsafe_characters() -> None:
    """``_skills/list`` and ``--json`` give one record shape; controls are dropped."""
    odd = Diagnostic(code="yaml-invalid", severity="error", path="/p", message="a\x1bb")
    assert diagnostic_json(odd) == {
        "code": "yaml-invalid",
        "severity": "error",
        "path": "/p",
        "line": None,
        "message": "ab",
    }


@pytest.mark.parametrize(
    ("fares", "said"),
    [
        ({"connected": True, "skills": 1}, "connected, 1 skill"),
        ({"connected": True, "skills": 2}, "connected, 2 skills"),
        (
            {"connected": True, "supports_skills": False},
            "connected, serves no skills (no skills extension)",
        ),
        (
            {"failure": "the server exited with status 3"},
            "skipped: the server exited with status 3",
        ),
        ({}, "not connected yet"),
    ],
    ids=["one", "two", "no-extension", "skipped", "not-yet"],
)
def test_a_server_line_says_how_it_fares(fares: dict[str, object], said: str) -> None:
    """One wording of a server's state for ``/skills`` and ``doctor``."""
    server = McpServer(label="team", command="srv", args=("--x",))
    state = SimpleNamespace(
        server=server,
        **({"connected": False, "skills": 0, "failure": None, "supports_skills": True} | fares),
    )
    assert server_line(state, Markdown()) == f"`team`: {said}"
    assert server_json(state)["identity"] == "team=srv --x"


def test_a_server_s_reason_and_label_cannot_become_markup_in_the_editor() -> None:
    """An image link in a server's failure is shown as text, not fetched; a backtick in its
    label does not end the label's code span."""
    server = McpServer(label="te`am", command="srv")
    failure = "exited: ![x](https://example.invalid/p.png) <img src=x>"
    state = SimpleNamespace(server=server, connected=False, skills=0, failure=failure)
    assert server_line(state, Markdown()) == (
        "``te`am``: skipped: exited: !\\[x\\](https://example.invalid/p.png) \\<img src=x\\>"
    )
    assert server_line(state, Style(False)) == f"te`am: skipped: {failure}"


def test_a_rank_is_written_as_a_person_writes_it() -> None:
    """``300`` for 300 and 300.0, ``250.5`` as it is."""
    assert [rank_text(r) for r in (300, 300.0, 250.5)] == ["300", "300", "250.5"]
