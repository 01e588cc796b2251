"""One wording of problems and MCP servers for every surface (`acp_skills.diagnostics`): the
editor's ``/skills`` and the terminal's ``doctor``, ``validate`` and ``list`` differ only in
markup."""

from __future__ import annotations

import pytest

from acp_skills.catalog import CatalogChanges, CatalogFit
from acp_skills.cli.output import Style
from acp_skills.diagnostics import (
    Diagnostic,
    Markdown,
    by_severity,
    describe_catalog_changes,
    describe_catalog_fit,
    diagnostic_json,
    diagnostic_line,
    server_json,
    server_line,
    tally,
)
from acp_skills.mcp import McpServer
from acp_skills.mcp.provider import ServerState

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


def test_json_is_exactly_the_documented_shape() -> None:
    """``_skills/list`` and ``--json`` give one record: code, severity, path, line, message —
    and nothing else (the skill name stays out). Each edge cleans it as it leaves:
    tests/test_cli.py's ``test_json_output_holds_no_control_or_bidi_override``."""
    record = Diagnostic(
        code="yaml-invalid", severity="error", path="/p", line=3, message="m", skill="x"
    )
    assert diagnostic_json(record) == {
        "code": "yaml-invalid",
        "severity": "error",
        "path": "/p",
        "line": 3,
        "message": "m",
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
    state = ServerState(server=server, **({"supports_skills": True} | fares))  # type: ignore[arg-type]
    assert server_line(state, Markdown()) == f"`team`: {said}"
    assert server_json(state)["identity"] == "team=srv --x"


# -- describe_catalog_fit ----------------------------------------------------------------------

DESCRIBE_CASES: list[tuple[str, CatalogFit, str]] = [
    (
        "empty",
        CatalogFit(text=None, limit=8000, used=0),
        "Catalog: empty (0 characters), no skill to list.",
    ),
    (
        "unlimited",
        CatalogFit(text="x" * 1234, limit=None, used=1234, listed=("a", "b")),
        "Catalog: 1,234 characters (no budget); 2 skills listed, every description in full.",
    ),
    (
        "cut-at-max-length",
        CatalogFit(
            text="x", limit=8000, used=2690, listed=("a", "b"), truncated=1, max_length=1024
        ),
        "Catalog: 2,690 of 8,000 characters; 2 skills listed, 1 description cut at 1,024 "
        "characters (the longest a catalog description may be).",
    ),
    (
        "shortened-and-hidden",
        CatalogFit(
            text="x",
            limit=8000,
            used=7964,
            shortened=1,
            listed=("a",),
            hidden=("h",),
            description_cap=112,
        ),
        "Catalog: 7,964 of 8,000 characters; 1 skill listed, 1 description shortened to at "
        "most 112 characters, 1 hidden.",
    ),
    (
        "omitted",
        CatalogFit(
            text="x",
            limit=8000,
            used=7990,
            shortened=37,
            omitted=("a", "b", "c", "d", "e", "f"),
            listed=("g",) * 112,
            description_cap=60,
        ),
        "Catalog: 7,990 of 8,000 characters; 112 skills listed, 37 descriptions shortened to at "
        "most 60 characters.\n6 skills are not listed (the skill tool's query finds them): "
        "a, b, c, d, e, ...",
    ),
    (
        "over",
        CatalogFit(text="x", limit=100, used=400, omitted=("z",), listed=("p",)),
        "Catalog: 400 of 100 characters; 1 skill listed. Over budget: the catalog's own text "
        "and the pinned skills take more room.\n1 skill is not listed (the skill tool's query "
        "finds them): z",
    ),
    (
        "over-with-nothing-pinned",
        CatalogFit(text="x", limit=100, used=400, omitted=("z",)),
        "Catalog: 400 of 100 characters; 0 skills listed. Over budget: the catalog's own text "
        "takes more room.\n1 skill is not listed (the skill tool's query finds them): z",
    ),
]


@pytest.mark.parametrize(
    ("fit", "expected"),
    [case[1:] for case in DESCRIBE_CASES],
    ids=[case[0] for case in DESCRIBE_CASES],
)
def test_describe_catalog_fit(fit: CatalogFit, expected: str) -> None:
    """One or two lines a person can read: size, budget, cuts, and what is not listed."""
    assert describe_catalog_fit(fit) == expected


def test_describe_catalog_changes_names_each_kind_and_bounds_the_names() -> None:
    """One line: the count, then each kind with at most five names."""
    added = tuple(f"skill-{index}" for index in range(7))
    assert describe_catalog_changes(CatalogChanges()) is None
    assert describe_catalog_changes(CatalogChanges(added=added, changed=("deploy",))) == (
        "This session's catalog predates 8 changes to the skills above: 7 added (`skill-0`, "
        "`skill-1`, `skill-2`, `skill-3`, `skill-4`, ...); 1 with a new description "
        "(`deploy`). The model here keeps the catalog the session began with; a new session "
        "has them."
    )


def test_a_server_s_reason_and_label_cannot_become_markup_in_the_editor() -> None:
    """An image link in a server's failure is shown as text, not fetched; a backtick in its
    label does not end the label's code span."""
    server = McpServer(label="te`am", command="srv")
    failure = "exited: ![x](https://example.invalid/p.png) <img src=x>"
    state = ServerState(server=server, failure=failure)
    assert server_line(state, Markdown()) == (
        "``te`am``: skipped: exited: !\\[x\\](https://example.invalid/p.png) \\<img src=x\\>"
    )
    assert server_line(state, Style(False)) == f"te`am: skipped: {failure}"
