"""The demo agent's command line: flags and environment variables are checked up front.

The checks run through the entry point's `main(argv)` in this process (`run_agent`,
`tests/demo_in_process.py`): each ends it with a status before it serves. One test starts a
process, for what only a process shows: regular files as its stdin and stdout (an empty pipe:
``tests/test_terminal_hint.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo_agent import __version__
from tests.cli_runner import Result
from tests.demo_in_process import run_agent as run_main


def run_agent(*args: str, **env: str) -> Result:
    """``acp-skills-demo ARGS`` in this process, with ``env`` over this process's environment."""
    return run_main(*args, env={**os.environ, **env})


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--max-steps", "0"), {}, "--max-steps: must be at least 1: '0'"),
        (("--model", "gpt"), {}, "argument --model: invalid choice: 'gpt'"),
        (("--catalog-budget", "x"), {}, "argument --catalog-budget: not a whole number: 'x'"),
        (
            ("--mcp-session-servers", "maybe"),
            {},
            "argument --mcp-session-servers: invalid choice: 'maybe'",
        ),
    ],
    ids=["steps-flag", "model-flag", "budget-flag", "session-servers-flag"],
)
def test_bad_flags_are_usage_errors(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    """A bad flag exits with status 2, argparse's usage and what is wrong, no traceback."""
    result = run_agent(*args, **env)
    assert result.returncode == 2
    assert message in result.stderr
    assert "usage: acp-skills-demo" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ACP_SKILLS_MAX_STEPS": "abc"}, "ACP_SKILLS_MAX_STEPS: not a whole number: 'abc'"),
        ({"ACP_SKILLS_MAX_TOKENS": "0"}, "ACP_SKILLS_MAX_TOKENS: must be at least 1: '0'"),
        ({"ACP_SKILLS_TIMEOUT": "-1"}, "ACP_SKILLS_TIMEOUT: must be more than 0: '-1'"),
        (
            {"ACP_SKILLS_LOG_LEVEL": "verbose"},
            "ACP_SKILLS_LOG_LEVEL must be one of debug, info, warning, error, not 'verbose'",
        ),
        (
            {"ACP_SKILLS_LOG_FORMAT": "xml"},
            "ACP_SKILLS_LOG_FORMAT must be one of console, json, not 'xml'",
        ),
        ({"ACP_SKILLS_MODEL": "gpt"}, "ACP_SKILLS_MODEL must be offline or openai, not 'gpt'"),
        (
            {"ACP_SKILLS_WATCH": "maybe"},
            "ACP_SKILLS_WATCH must be 1 or 0 (true/false, yes/no, on/off), not 'maybe'",
        ),
        (
            {"ACP_SKILLS_MCP_SESSION_SERVERS": "maybe"},
            "ACP_SKILLS_MCP_SESSION_SERVERS must be 1 or 0 (true/false, yes/no, on/off), "
            "not 'maybe'",
        ),
        (
            {"ACP_SKILLS_CATALOG_BUDGET": "lots"},
            "ACP_SKILLS_CATALOG_BUDGET: not a whole number: 'lots'",
        ),
        (
            {"ACP_SKILLS_PIN": "Bad Name"},
            "ACP_SKILLS_PIN: not a skill name: 'Bad' (lowercase letters and digits in "
            "hyphen-separated words)",
        ),
        (
            {"ACP_SKILLS_COMPAT": "codex"},
            "ACP_SKILLS_COMPAT: must be one of claude, not 'codex'",
        ),
    ],
    ids=[
        "steps",
        "tokens",
        "timeout",
        "level",
        "format",
        "model",
        "watch",
        "session-servers",
        "budget",
        "pin",
        "compat",
    ],
)
def test_a_bad_variable_is_one_line_naming_it(env: dict[str, str], message: str) -> None:
    """A bad ``ACP_SKILLS_*`` value: status 2 and one line naming the variable, no usage block
    and no flag the person never passed."""
    result = run_agent(**env)
    assert result.returncode == 2
    assert result.stderr == f"acp-skills-demo: {message}\n"
    assert result.stdout == ""


def test_version_and_help() -> None:
    """--version prints the version; --help documents the environment variables."""
    assert run_agent("--version").stdout.strip() == __version__
    help_text = run_agent("--help").stdout
    for variable in ("ACP_SKILLS_MODEL", "ACP_SKILLS_STATE_DIR", "DEEPSEEK_API_KEY"):
        assert variable in help_text
    assert "--no-watch" in help_text
    assert "ACP_SKILLS_WATCH=0" in help_text


def test_help_says_where_records_go_without_xdg_state_home() -> None:
    """--help names the state directory the agent uses when XDG_STATE_HOME is unset, as it
    usually is, not only the variable."""
    help_text = run_agent("--help", COLUMNS="500").stdout
    assert "else ~/.local/state/acp-skills-demo)" in help_text


def test_help_says_the_mcp_timeout_bounds_every_request() -> None:
    """--help says what docs/mcp.md says of --mcp-timeout: it bounds each request to a server
    (connecting, listing, every read), not the listing alone."""
    help_text = run_agent("--help", COLUMNS="500").stdout
    assert "seconds each request to an MCP server may take (default 10)" in help_text


def test_agent_serves_files_as_well_as_pipes(tmp_path: Path) -> None:
    """stdin and stdout may be regular files (asyncio cannot watch those by itself)."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    frames_in, frames_out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    frames_in.write_text(json.dumps(request) + "\n")
    with frames_in.open("rb") as stdin, frames_out.open("wb") as stdout:
        code = subprocess.call(
            [sys.executable, "-m", "demo_agent", "--state-dir", str(tmp_path / "state")],
            stdin=stdin,
            stdout=stdout,
            timeout=60,
        )
    assert code == 0
    (line,) = frames_out.read_text().splitlines()
    answer = json.loads(line)
    assert answer["id"] == 1
    assert answer["result"]["agentInfo"]["name"] == "acp-skills-demo"
