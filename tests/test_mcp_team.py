"""MCP as a team lead meets it (contract §13, §14): a server's key is refused or forgotten, never
trusted, from the command line; a stdio server's own chatter stays out of the commands' output
unless it fails; `list` names a served skill by its `skill://` uri; a malformed
`--mcp-server` is a usage error."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from acp_skills.cli.main import main as cli_main
from tests.mcp_scripted import SCRIPTED_SERVER, served, skill_text, write_script

DEPLOY_FIELDS = {"name": "deploy", "description": "Deploy the app."}
DEPLOY = skill_text("name: deploy\ndescription: Deploy the app.", "Run make deploy.")
FMT_FIELDS = {"name": "fmt", "description": "Format the code."}
FMT = skill_text("name: fmt\ndescription: Format the code.", "Run the formatter.")


def team_skills(script: Path, deploy: str = DEPLOY, **behaviour: object) -> Path:
    """A listing of two skills: `deploy` with a file beside it, and `fmt` served "dynamic"."""
    entries = [
        served("deploy", deploy, DEPLOY_FIELDS, files={"checklist.md": "1. Test.\n"}),
        served("fmt", FMT, FMT_FIELDS, dynamic=True),
    ]
    return write_script(script, entries, **behaviour)


def option_of(script: Path) -> str:
    """The `--mcp-server` value that runs the scripted server on ``script``."""
    return "team=" + shlex.join([sys.executable, SCRIPTED_SERVER, str(script)])


@pytest.fixture
def trust_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The trust file the command line reads and writes."""
    path = tmp_path / "config" / "trust.json"
    monkeypatch.setenv("ACP_SKILLS_TRUST_FILE", str(path))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``acp-skills ARGV`` in this process: its status, stdout and stderr."""
    status = cli_main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_refused_server_cannot_be_trusted_by_its_key_alone(
    tmp_path: Path, trust_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`acp-skills trust mcp:KEY` has no listing to trust: it points to a session's question."""
    status, out, _ = run(capsys, "trust", "mcp:team=uvx team-skills")
    assert status == 2
    assert "by answering its question in a session" in out
    assert not trust_file.exists()


# -- a stdio server's stderr, a served skill's uri, a malformed option -------------------------


CHATTER = "FastMCP 4.2.3 banner\nINFO     Starting MCP server 'team' with transport 'stdio'\n"


@pytest.mark.parametrize(
    "command",
    [["list"], ["show", "deploy"], ["catalog"]],
    ids=["list", "show", "catalog"],
)
def test_a_stdio_servers_banner_and_logs_stay_out_of_the_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """What a working server writes to its stderr is not the command's to show."""
    script = team_skills(tmp_path / "team.json", stderr=CHATTER)
    argv = [*command, "--trust", "all", "--cwd", str(tmp_path), "--mcp-server", option_of(script)]
    status = cli_main(argv)
    out, err = capfd.readouterr()
    assert status == 0
    assert "Run make deploy." in out if command[0] == "show" else "deploy" in out
    assert "banner" not in out + err
    assert "Starting MCP server" not in out + err


def test_a_failing_stdio_servers_stderr_is_told_with_its_failure(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """When the server fails, the end of its stderr is the reason, on one warning line."""
    script = team_skills(tmp_path / "team.json", stderr=CHATTER + "ValueError: bad\n", exit=1)
    status = cli_main(["list", "--cwd", str(tmp_path), "--mcp-server", option_of(script)])
    _, err = capfd.readouterr()
    assert status == 0
    assert [line for line in err.splitlines() if "MCP server" in line] == [
        "warning: MCP server 'team' skipped: the server exited with status 1; its stderr ends: "
        "FastMCP 4.2.3 banner | INFO     Starting MCP server 'team' with transport 'stdio' | "
        "ValueError: bad"
    ]


def test_list_names_a_served_skill_by_its_uri(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`(mcp)` said nothing a person could use; the `skill://` uri says where it is."""
    script = team_skills(tmp_path / "team.json")
    argv = ["list", "--trust", "ask", "--cwd", str(tmp_path), "--mcp-server", option_of(script)]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [row[5:] for row in rows] == [
        ["skill://deploy/SKILL.md", "(waiting", "for", "trust)"],
        ["skill://fmt/SKILL.md", "(waiting", "for", "trust)"],
    ]
    status, out, _ = run(capsys, *argv, "--json")
    assert [(s["path"], s["uri"]) for s in json.loads(out)["skills"]] == [
        (None, "skill://deploy/SKILL.md"),
        (None, "skill://fmt/SKILL.md"),
    ]


@pytest.mark.parametrize("command", ["list", "doctor"])
def test_an_mcp_server_without_a_label_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`--mcp-server nolabel` exits 2, as every usage error does, with one line."""
    status, out, err = run(capsys, command, "--mcp-server", "nolabel")
    assert (status, out) == (2, "")
    assert err == ("acp-skills: --mcp-server: expected LABEL=COMMAND or LABEL=URL, got 'nolabel'\n")
