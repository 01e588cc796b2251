"""The demo agent's logs: one renderer (console or JSON), on stderr or in a file.

A real agent subprocess does a real session; its logs are read back as a person or a log
shipper would read them. A process, because the logging the agent sets up belongs to its
process: the standard library's root logger, Python's warnings, and structlog's configuration,
whose loggers keep it once used (the agent caches them), so a test process could not set it
up and put it back. The refusal of an unusable log file comes before any of that, and runs
through the entry point's `main(argv)` in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.agent_client import Sandbox, text_prompt
from tests.demo_in_process import run_agent

pytestmark = pytest.mark.anyio

TEST_SECONDS = 30


async def one_turn(sandbox: Sandbox, *args: str, stderr: Any = None) -> None:
    """Open a session, have the offline model load ``alpha-notes``, then close stdin."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes into action items.")
    with anyio.fail_after(TEST_SECONDS):
        async with sandbox.spawn(*args, stderr=stderr) as agent:
            session = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
            response = await agent.conn.prompt(
                session_id=session.session_id, prompt=text_prompt("please use alpha-notes")
            )
            assert response.stop_reason == "end_turn"
        assert agent.proc.returncode == 0


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line parsed as JSON (a line that does not parse fails the test)."""
    entries = [json.loads(line) for line in text.splitlines()]
    assert entries, "no log lines at all"
    assert all(isinstance(entry, dict) for entry in entries)
    return entries


async def test_json_logs_parse_line_by_line(tmp_path: Path) -> None:
    """--log-format json: every stderr line is one JSON object, the SDK's records included."""
    sandbox = Sandbox.create(tmp_path / "sandbox")
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        await one_turn(sandbox, "--log-format", "json", "--log-level", "debug", stderr=stderr)
    entries = json_lines(stderr_path.read_text(encoding="utf-8"))
    for entry in entries:
        assert {"event", "level", "timestamp", "logger"} <= entry.keys()
    # Records from the standard library's `logging` (asyncio's here) share the format.
    assert any(entry["logger"].startswith("asyncio") for entry in entries)
    discovered = [entry for entry in entries if entry["event"] == "skills_discovered"]
    assert discovered
    assert str(sandbox.skills_dir) in discovered[0]["roots"]
    assert "alpha-notes" in discovered[0]["skills"]
    assert discovered[0]["level"] == "debug"
    (loaded,) = [entry for entry in entries if entry["event"] == "skill_loaded"]
    assert loaded["skill"] == "alpha-notes"
    assert loaded["found"] is True
    assert isinstance(loaded["duration_ms"], float | int)


async def test_log_file_takes_the_logs_and_stderr_stays_quiet(tmp_path: Path) -> None:
    """--log-file appends the (console) logs to a file; nothing is logged on stderr."""
    sandbox = Sandbox.create(tmp_path / "sandbox")
    log_file = tmp_path / "logs" / "agent.log"
    log_file.parent.mkdir()
    log_file.write_text("an earlier line\n", encoding="utf-8")
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        await one_turn(sandbox, "--log-file", str(log_file), "--log-level", "debug", stderr=stderr)
    assert stderr_path.read_text(encoding="utf-8") == ""
    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "an earlier line"
    assert any("skills_discovered" in line and "alpha-notes" in line for line in lines[1:])
    assert any("[debug    ] Using selector" in line for line in lines[1:])


def test_an_sdk_error_with_its_traceback_is_one_json_record(tmp_path: Path) -> None:
    """The SDK's own logged exception is structured fields of one JSON line, not raw lines."""
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        # The SDK fails to validate this notification and logs the error with its traceback.
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 5}},
    ]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo_agent",
            "--state-dir",
            str(tmp_path / "state"),
            "--log-format",
            "json",
        ],
        env={**os.environ, "HOME": str(tmp_path)},
        input="".join(json.dumps(frame) + "\n" for frame in frames),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    entries = json_lines(result.stderr)
    (failure,) = [entry for entry in entries if "exception" in entry]
    assert failure["level"] == "error"
    assert failure["event"].startswith("Unhandled error while handling notification")
    assert failure["exception"][0]["exc_type"] == "ValidationError"
    assert failure["exception"][0]["frames"]


def test_unusable_log_file_is_a_usage_error(tmp_path: Path) -> None:
    """A log file that cannot be opened stops the agent with one line and status 2."""
    result = run_agent(
        "--state-dir",
        str(tmp_path / "state"),
        "--log-file",
        str(tmp_path / "missing" / "agent.log"),
    )
    assert result.returncode == 2
    assert result.stderr.startswith("acp-skills-demo: cannot open the log file ")
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""
