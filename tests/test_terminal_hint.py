"""A person who starts the agent at a terminal is told what it is, and it still serves.

Processes, because the hint is decided by what file descriptor 0 of the agent's own process is
(a real pseudo-terminal here, a pipe for an editor), and the agent serves on its own stdin and
stdout.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

WAIT_SECONDS = 30.0


def lines_of(stream: IO[bytes]) -> queue.Queue[bytes]:
    """The stream's lines, read by a thread, so the test can wait with a deadline."""
    found: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, b""):
            found.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return found


@pytest.fixture
def agent_on_a_terminal(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The agent with a pseudo-terminal as stdin (pipes for stdout and stderr), and the
    terminal's controlling side to type into."""
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "demo_agent", "--state-dir", str(tmp_path / "state")],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    os.close(terminal)
    try:
        yield process, controller
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=WAIT_SECONDS)
        os.close(controller)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_terminal_hint_then_the_agent_still_serves(
    agent_on_a_terminal: tuple[subprocess.Popen[bytes], int],
) -> None:
    """One stderr line says it speaks ACP over stdio and how to use it; typed JSON-RPC works."""
    process, controller = agent_on_a_terminal
    assert process.stdout is not None
    assert process.stderr is not None
    errors, answers = lines_of(process.stderr), lines_of(process.stdout)
    hint = errors.get(timeout=WAIT_SECONDS).decode()
    assert hint.startswith("acp-skills-demo speaks the Agent Client Protocol (JSON-RPC)")
    assert "stdin and stdout" in hint
    assert "Zed" in hint
    assert "acp-skills list" in hint
    assert hint.count("\n") == 1

    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    os.write(controller, json.dumps(request).encode() + b"\n")
    answer = json.loads(answers.get(timeout=WAIT_SECONDS))
    assert answer["id"] == 1
    assert answer["result"]["agentInfo"]["name"] == "acp-skills-demo"

    os.write(controller, b"\x04")  # Ctrl-D: end of input, as a person would end it
    assert process.wait(timeout=WAIT_SECONDS) == 0
    assert errors.empty()


def test_no_hint_when_stdin_is_not_a_terminal(tmp_path: Path) -> None:
    """An editor's pipe gets no hint: stderr stays empty at the default log level; with nothing
    to read the agent stops with status 0 and writes nothing on stdout either."""
    result = subprocess.run(
        [sys.executable, "-m", "demo_agent", "--state-dir", str(tmp_path / "state")],
        input=b"",
        capture_output=True,
        env={**os.environ, "HOME": str(tmp_path)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stderr == b""
    assert result.stdout == b""
