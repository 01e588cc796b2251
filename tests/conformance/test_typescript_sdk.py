"""The agent driven by the official TypeScript SDK client (``ts_client.mjs``) under node."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.acp_peer import SDK_WITHDRAWS_CANCELLED_REQUESTS
from tests.agent_client import write_skill

from . import npm
from .fake_model import FakeModel
from .harness import AgentSpec
from .npm import SdkUnavailable, node
from .wire import AGENT, CLIENT, FrameLog, Schema, Side

pytestmark = [pytest.mark.anyio, pytest.mark.interop]

CLIENT_SCRIPT = Path(__file__).with_name("ts_client.mjs")
RUN_SECONDS = 60.0


async def run_ts_client(
    scenario: str,
    agent: AgentSpec,
    command: list[str],
    npm_prefix: Path,
    schema: Schema,
    options: Sequence[str] = (),
) -> tuple[int, list[dict[str, Any]], FrameLog]:
    """Run one scenario (``options`` go before the agent command); return node's exit code,
    its records and the frames it saw."""
    try:
        executable = node()
    except SdkUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    argv = [executable, str(CLIENT_SCRIPT), scenario, "--sdk", str(npm_prefix)]
    argv += ["--cwd", str(agent.cwd), *options, "--", *command]
    with agent.stderr_path.open("ab") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=stderr, env=dict(agent.env)
        )
    try:
        async with asyncio.timeout(RUN_SECONDS):
            stdout, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    records = [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]
    log = FrameLog(schema)
    for record in records:
        if record["type"] == "frame":
            sender: Side = record["sender"]
            try:
                log.add(sender, json.loads(record["line"]))
            except ValueError:
                log.add(sender, record["line"])
    assert proc.returncode is not None
    return proc.returncode, records, log


def _failures(records: list[dict[str, Any]], agent: AgentSpec) -> str:
    failed = [f"{r['step']}: {r['reason']}" for r in records if r["type"] == "fail"]
    return "\n".join(failed) + "\n--- agent stderr ---\n" + agent.stderr_tail()


def _steps(records: list[dict[str, Any]]) -> list[str]:
    return [r["step"] for r in records if r["type"] == "step"]


async def test_core_scenario(agent: AgentSpec, npm_prefix: Path, schema: Schema) -> None:
    """initialize, session/new, a prompt, a racing cancel, session/load; every frame valid."""
    code, records, log = await run_ts_client("core", agent, agent.command(), npm_prefix, schema)
    assert code == 0, _failures(records, agent)
    assert _steps(records)[:4] == ["initialize", "session/new", "prompt", "cancel"]
    assert {"type": "exit", "code": 0, "signal": None} in records
    log.assert_valid()
    assert len(log.sent_by("agent")) >= 4


@pytest.mark.demo_agent
async def test_skills_scenario(
    agent: AgentSpec, npm_prefix: Path, schema: Schema, fake_model: FakeModel
) -> None:
    """Skill load, slash command, cancel mid-request and session/load, via the TypeScript SDK."""
    command = agent.with_fake_model(fake_model)
    code, records, log = await run_ts_client("skills", agent, command, npm_prefix, schema)
    assert code == 0, _failures(records, agent)
    assert _steps(records) == [
        "initialize",
        "session/new",
        "commands",
        "skill load",
        "resource",
        "slash command",
        "cancel",
        "_skills/list",
        "session/load",
        "after load",
    ]
    assert fake_model.slow_hung_up.is_set(), "cancelling must close the model request"
    log.assert_valid()
    methods = {m.get("method") for m in log.sent_by("agent")}
    assert {"session/update", "fs/read_text_file"} <= methods


QUESTION_OPTIONS = [
    {"optionId": "allow_once", "name": "Trust for this session", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Trust this project", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Not now", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Never for this project", "kind": "reject_always"},
]
# What `_skills/list` says of the project's skill after each answer, and whether it was stored.
AFTER_ANSWER = {
    "allow_once": "session",
    "allow_always": "trusted",
    "reject_once": "pending",
    "reject_always": "refused",
    "cancelled": "pending",
}
STORED = {"allow_always": "trusted", "reject_always": "refused"}


def _asking_agent(agent: AgentSpec, tmp_path: Path) -> tuple[AgentSpec, Path, Path]:
    """``agent`` under ``ACP_SKILLS_TRUST=ask`` with its own trust file, its project a git
    checkout holding one skill; the spec, the trust file and the skill's SKILL.md."""
    (agent.cwd / ".git").mkdir()
    skill = write_skill(agent.cwd / ".agents" / "skills", "review", "Review the change.")
    trust_file = tmp_path / "config" / "trust.json"
    env = {**agent.env, "ACP_SKILLS_TRUST": "ask", "ACP_SKILLS_TRUST_FILE": str(trust_file)}
    return dataclasses.replace(agent, env=env), trust_file, skill


@pytest.mark.demo_agent
@pytest.mark.parametrize("answer", list(AFTER_ANSWER))
async def test_trust_scenario(
    agent: AgentSpec, npm_prefix: Path, schema: Schema, tmp_path: Path, answer: str
) -> None:
    """The SDK delivers the trust question (tool_call, then requestPermission) and its answer
    decides what the session offers; a stored answer is not asked for again."""
    agent, trust_file, skill = _asking_agent(agent, tmp_path)
    command = agent.command()
    code, records, log = await run_ts_client(
        "trust", agent, command, npm_prefix, schema, ["--answer", answer]
    )
    assert code == 0, _failures(records, agent)
    steps = ["initialize", "session/new", "first session", "session/new", "second session"]
    assert _steps(records) == steps
    details = {r["step"]: r["detail"] for r in records if r["type"] == "step"}
    first, second = details["first session"], details["second session"]

    # Before the answer the skill waits: listed as pending, no slash command.
    assert first["before"]["skills"]["review"] == "pending"
    assert "review" not in first["before"]["commands"]

    question, tool_call = first["question"], first["toolCall"]
    assert question is not None, "requestPermission was never called through the SDK"
    assert tool_call["kind"] == "read"
    assert tool_call["title"] == f"Trust 1 skill from {agent.cwd.name}?"
    [content] = tool_call["content"]
    assert content["content"]["text"] == f"- review: Review the change. ({skill})"
    assert question["toolCall"]["toolCallId"] == tool_call["toolCallId"]
    assert question["options"] == QUESTION_OPTIONS
    admitted = answer.startswith("allow")
    assert first["finalStatus"] == ("completed" if admitted else "failed")

    # After it: the skill's trust, and the commands re-sent with (or still without) it.
    assert first["after"]["skills"]["review"] == AFTER_ANSWER[answer]
    assert ("review" in (first["after"]["commands"] or ())) is admitted

    # A second session asks again only while nothing is stored.
    stored = json.loads(trust_file.read_text()) if trust_file.exists() else {"projects": []}
    if answer in STORED:
        path = str(agent.cwd.resolve())
        assert stored["projects"] == [{"path": path, "decision": STORED[answer]}]
        assert second["question"] is None
        assert second["before"]["skills"]["review"] == STORED[answer]
        assert ("review" in second["before"]["commands"]) is admitted
    else:
        assert stored["projects"] == []
        assert second["question"]["options"] == QUESTION_OPTIONS
        assert second["before"]["skills"]["review"] == "pending"
    assert {"type": "exit", "code": 0, "signal": None} in records
    log.assert_valid()
    asked = [m for m in log.sent_by(AGENT) if m.get("method") == "session/request_permission"]
    assert len(asked) == (1 if answer in STORED else 2)


@pytest.mark.demo_agent
async def test_cancel_scenario(
    agent: AgentSpec, npm_prefix: Path, schema: Schema, tmp_path: Path
) -> None:
    """A turn cancelled while the client holds the trust question open ends ``cancelled`` and
    counts as "Not now" (the card fails, nothing is stored, the session does not ask again). An
    agent on the Python SDK's 1.x line withdraws the question with ``$/cancel_request``, which
    the TypeScript SDK hands the handler as an abort and answers with -32800."""
    agent, trust_file, _ = _asking_agent(agent, tmp_path)
    code, records, log = await run_ts_client("cancel", agent, agent.command(), npm_prefix, schema)
    assert code == 0, _failures(records, agent)
    steps = ["initialize", "session/new", "question", "cancel", "after cancel"]
    assert _steps(records) == steps
    details = {r["step"]: r["detail"] for r in records if r["type"] == "step"}
    after = details["after cancel"]
    assert after["skills"]["review"] == "pending"
    assert not trust_file.exists()
    [asked] = [
        m["id"] for m in log.sent_by(AGENT) if m.get("method") == "session/request_permission"
    ]
    withdrawn = [
        m["params"]["requestId"]
        for m in log.sent_by(AGENT)
        if m.get("method") == "$/cancel_request"
    ]
    answers = [m for m in log.sent_by(CLIENT) if "method" not in m and m.get("id") == asked]
    if SDK_WITHDRAWS_CANCELLED_REQUESTS:
        assert withdrawn == [asked]
        assert after["withdrawn"] == [details["question"]["toolCallId"]]
        assert [answer["error"]["code"] for answer in answers] == [-32800]
    else:
        assert withdrawn == after["withdrawn"] == answers == []
    log.assert_valid()


# An agent that asks a malformed trust question (an option of no known kind) and then ends the
# turn whatever the client answers: the SDK must refuse the request before the handler runs.
MALFORMED_AGENT = """
import json, sys

def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\\n")
    sys.stdout.flush()

def update(session_id, body):
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})

sessions, prompts = 0, {}
for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"id": request_id, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        sessions += 1
        send({"id": request_id, "result": {"sessionId": f"s{sessions}"}})
        commands = {"sessionUpdate": "available_commands_update", "availableCommands": []}
        update(f"s{sessions}", commands)
    elif method == "_skills/list":
        send({"id": request_id, "result": {"skills": []}})
    elif method == "session/prompt":
        session_id = message["params"]["sessionId"]
        call = f"trust-{session_id}"
        prompts[call] = (session_id, request_id)
        update(session_id, {"sessionUpdate": "tool_call", "toolCallId": call, "title": "Trust?"})
        option = {"optionId": "allow_once", "name": "Trust", "kind": "maybe"}
        params = {"sessionId": session_id, "toolCall": {"toolCallId": call}, "options": [option]}
        send({"id": call, "method": "session/request_permission", "params": params})
    elif method is None and request_id in prompts:
        session_id, prompt_id = prompts.pop(request_id)
        update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": request_id})
        send({"id": prompt_id, "result": {"stopReason": "end_turn"}})
"""


async def test_a_malformed_question_never_reaches_the_handler(
    agent: AgentSpec, npm_prefix: Path, schema: Schema, tmp_path: Path
) -> None:
    """The trust scenario's handler is called through the SDK's schema check: a question the
    schema rejects is answered with an error by the SDK and the scenario sees no question."""
    script = tmp_path / "malformed_agent.py"
    script.write_text(MALFORMED_AGENT, encoding="utf-8")
    command = [sys.executable, str(script)]
    code, records, log = await run_ts_client(
        "trust", agent, command, npm_prefix, schema, ["--answer", "allow_once"]
    )
    assert code == 0, _failures(records, agent)
    details = {r["step"]: r["detail"] for r in records if r["type"] == "step"}
    assert details["first session"]["question"] is None
    assert details["second session"]["question"] is None
    answers = [m for m in log.sent_by(CLIENT) if str(m.get("id", "")).startswith("trust-")]
    assert [m["error"]["code"] for m in answers] == [-32602, -32602]
    # The official schema agrees: those two requests, and nothing else, are invalid.
    problems = log.problems()
    assert len(problems) == 2, problems
    assert all("session/request_permission: options/0/kind" in p for p in problems), problems


def test_missing_node_fails_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without node on PATH the TypeScript checks fail and say why; they never skip."""
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SdkUnavailable, match="`node` is not on PATH"):
        node()


def test_missing_npm_fails_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without npm (and no install yet) the set-up fails and says what it needed npm for."""
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("ACP_CONFORMANCE_NPM_DIR", raising=False)
    monkeypatch.setattr(npm, "DEFAULT_PREFIX", tmp_path / "npm-conformance")
    with pytest.raises(SdkUnavailable, match=r"`npm` is not on PATH.*@agentclientprotocol/sdk@"):
        npm.ensure_sdk()


def test_npm_dir_override_must_hold_the_sdk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``ACP_CONFORMANCE_NPM_DIR`` without the package in it is an error, not a skip."""
    monkeypatch.setenv("ACP_CONFORMANCE_NPM_DIR", str(tmp_path))
    with pytest.raises(SdkUnavailable, match="ACP_CONFORMANCE_NPM_DIR"):
        npm.ensure_sdk()
