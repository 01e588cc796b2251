"""Named hostile inputs, each kept here so a later change cannot quietly bring it back.

Every case is written the way the failure was met, through the real demo agent over stdio or
the real console script. Frames nested deep have their own module:
``tests/conformance/test_adversarial_nesting.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_skills.arguments import MAX_ARGUMENTS_CHARS, MAX_EXPANDED_CHARS
from tests.agent_client import AGENT_COMMAND, Sandbox
from tests.raw_agent import RawStdioAgent, agent_environment, initialize_params

PASTE_CHARS = 1_500_000


def start_demo_agent(sandbox: Sandbox, stderr: Any, *extra: str) -> RawStdioAgent:
    """The demo agent on its offline model, initialized."""
    agent = RawStdioAgent(
        [*AGENT_COMMAND, *sandbox.args(*extra)],
        env=agent_environment(sandbox.env()),
        stderr=stderr,
    )
    agent.call("initialize", initialize_params(reads_files=False))
    return agent


def new_session(agent: RawStdioAgent, sandbox: Sandbox) -> str:
    params = {"cwd": str(sandbox.project), "mcpServers": []}
    return str(agent.call("session/new", params)["sessionId"])


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def test_arguments_paste_of_one_and_a_half_megabytes(tmp_path: Path) -> None:
    """A 1.5 MB paste after ``/name`` into a body with many placeholders: bounded, noted, and
    another session is served meanwhile (splitting it was quadratic, on the event loop)."""
    sandbox = Sandbox.create(tmp_path)
    body = "# Echo\n\n" + " ".join(["$ARGUMENTS $0 $ARGUMENTS[1]"] * 2_000) + "\n"
    sandbox.write_skill("echo", "Repeat the arguments.", body)
    paste = " ".join(['\'a quoted word\' plain "double \\" quoted"'] * 40_000)[:PASTE_CHARS]
    with (
        (tmp_path / "agent.stderr").open("wb") as stderr,
        start_demo_agent(sandbox, stderr, "--compat", "claude") as agent,
    ):
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
        assert f"cut to their first {MAX_ARGUMENTS_CHARS} of" in text
        assert "left unfilled" in text
        assert "$ARGUMENTS" in text  # the placeholders past the cap stay as written
        largest = max(len(json.dumps(frame)) for frame in agent.frames[since:])
        assert largest < MAX_EXPANDED_CHARS + 2 * len(body) + 4096
