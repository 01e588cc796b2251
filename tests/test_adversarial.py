"""Named hostile inputs, each kept here so a later change cannot quietly bring it back.

Every case is written the way the failure was met: raw lines to the real demo agent (served in
this process through the transport it serves stdio with), or its entry point ``main(argv)``.
Frames nested deep have their own module: ``tests/conformance/test_adversarial_nesting.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.agent_client import Sandbox
from tests.demo_in_process import agent_environment, run_agent
from tests.raw_agent import RawStdioAgent, initialize_params

PASTE_CHARS = 1_500_000
# How long the filled text of a `/name` invocation may grow (docs/architecture.md, §11).
EXPANDED_CHARS = 262_144


def start_demo_agent(sandbox: Sandbox, *extra: str) -> RawStdioAgent:
    """The demo agent on its offline model, initialized."""
    agent = RawStdioAgent.in_process(sandbox.args(*extra), env=agent_environment(sandbox.env()))
    agent.call("initialize", initialize_params(reads_files=False))
    return agent


def new_session(agent: RawStdioAgent, sandbox: Sandbox) -> str:
    params = {"cwd": str(sandbox.project), "mcpServers": []}
    return str(agent.call("session/new", params)["sessionId"])


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def test_arguments_paste_of_one_and_a_half_megabytes(tmp_path: Path) -> None:
    """A 1.5 MB paste after ``/name`` into a body with many placeholders: bounded, and
    another session is served meanwhile (splitting it was quadratic, on the event loop)."""
    sandbox = Sandbox.create(tmp_path)
    body = "# Echo\n\n" + " ".join(["$ARGUMENTS $0 $ARGUMENTS[1]"] * 2_000) + "\n"
    sandbox.write_skill("echo", "Repeat the arguments.", body)
    paste = " ".join(['\'a quoted word\' plain "double \\" quoted"'] * 40_000)[:PASTE_CHARS]
    with start_demo_agent(sandbox, "--compat", "claude") as agent:
        pasted, other = new_session(agent, sandbox), new_session(agent, sandbox)
        since = len(agent.frames)
        typed = prompt_params(pasted, f"/echo {paste}")
        paste_id = agent.start_request("session/prompt", typed)
        served = agent.call("session/prompt", prompt_params(other, "hello"))
        assert served["stopReason"] == "end_turn"
        answer = agent.response_to(paste_id)
        assert answer["result"]["stopReason"] == "end_turn"
        ends = [
            update
            for update in agent.updates(pasted, since)
            if update["sessionUpdate"] == "tool_call_update"
        ]
        assert len(ends) == 1
        assert ends[0]["status"] == "completed"
        text = ends[0]["content"][0]["content"]["text"]
        assert "$ARGUMENTS" in text  # the placeholders past the cap stay as written
        largest = max(len(json.dumps(frame)) for frame in agent.frames[since:])
        assert largest < EXPANDED_CHARS + 2 * len(body) + 4096


def test_lone_surrogate_session_id_and_cwd_in_error_frames(tmp_path: Path) -> None:
    """``"sessionId": "\\ud800"`` and a cwd holding one: every frame, errors included, is
    well-formed Unicode (`RawStdioAgent` checks each line it reads)."""
    sandbox = Sandbox.create(tmp_path)
    cwd = str(sandbox.project)
    hostile: list[tuple[str, dict[str, Any]]] = [
        ("session/prompt", {"sessionId": "\ud800", "prompt": [{"type": "text", "text": "hi"}]}),
        ("session/load", {"sessionId": "\ud800", "cwd": cwd, "mcpServers": []}),
        ("session/new", {"cwd": "relative\ud800", "mcpServers": []}),
        ("_skills/list", {"sessionId": "\udbff"}),
    ]
    with start_demo_agent(sandbox) as agent:
        for method, params in hostile:
            answer = agent.request(method, params)
            assert "error" in answer, method
            assert "\ufffd" in json.dumps(answer["error"], ensure_ascii=False), method
        assert agent.problems == []
        assert new_session(agent, sandbox)  # still serving


@pytest.mark.parametrize("flag", ["--api-key-file", "--log-file"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_fifo_or_device_as_a_start_up_file(tmp_path: Path, flag: str, kind: str) -> None:
    """A FIFO hung start-up and ``/dev/zero`` exhausted memory: refused, status 2, one line."""
    sandbox = Sandbox.create(tmp_path)
    if kind == "fifo":
        target = tmp_path / "named-pipe"
        os.mkfifo(target)
    else:
        target = Path("/dev/zero")
    model = ["--model", "openai", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NO_KEY"]
    result = run_agent(
        *sandbox.args(*model, flag, str(target)), env=agent_environment(sandbox.env())
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "not a regular file" in lines[0]
    assert str(target) in lines[0]
