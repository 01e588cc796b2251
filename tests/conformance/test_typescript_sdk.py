"""The agent driven by the official TypeScript SDK client (``ts_client.mjs``) under node."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from . import npm
from .fake_model import FakeModel
from .harness import AgentSpec
from .npm import SdkUnavailable, node
from .wire import FrameLog, Schema, Side

pytestmark = pytest.mark.anyio

CLIENT_SCRIPT = Path(__file__).with_name("ts_client.mjs")
RUN_SECONDS = 60.0


async def run_ts_client(
    scenario: str, agent: AgentSpec, command: list[str], npm_prefix: Path, schema: Schema
) -> tuple[int, list[dict[str, Any]], FrameLog]:
    """Run one scenario; return node's exit code, its records and the frames it saw."""
    try:
        executable = node()
    except SdkUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    argv = [executable, str(CLIENT_SCRIPT), scenario, "--sdk", str(npm_prefix)]
    argv += ["--cwd", str(agent.cwd), "--", *command]
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
