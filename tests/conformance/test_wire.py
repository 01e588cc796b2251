"""The frame checker itself: it must accept a valid exchange and catch each kind of violation."""

from __future__ import annotations

from typing import Any

import pytest

from .wire import AGENT, CLIENT, FrameLog, Schema


def _exchange(result: object) -> list[tuple[str, Any]]:
    return [
        ("client", {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {
            "sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}),
        ("agent", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": "yo"}}}}),
        ("agent", {"jsonrpc": "2.0", "id": 1, "result": result}),
    ]  # fmt: skip


def _problems(
    schema: Schema, frames: list[tuple[str, Any]], check_client: bool = True
) -> list[str]:
    log = FrameLog(schema, check_client=check_client)
    for sender, message in frames:
        log.add(CLIENT if sender == "client" else AGENT, message)
    return log.problems()


def test_valid_exchange_passes(schema: Schema) -> None:
    """A prompt, an update and its response are valid."""
    assert _problems(schema, _exchange({"stopReason": "end_turn"})) == []


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        (_exchange({"stopReason": "bogus"}), "result of session/prompt"),
        (_exchange({}), "result of session/prompt"),
        ([*_exchange(None)[:2], ("agent", {"jsonrpc": "2.0", "id": 7, "result": {}})], "id 7"),
        ([("agent", {"jsonrpc": "1.0", "method": "session/update", "params": {}})], "jsonrpc"),
        ([("agent", [1, 2])], "not a JSON object"),
        ([("agent", {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {}})],
         "handled by the agent"),
        ([("agent", {"jsonrpc": "2.0", "id": None, "error": {"code": "x", "message": 1}})],
         "error: message"),
        ([("agent", {"jsonrpc": "2.0", "method": "nope/nope"})], "not an ACP v1"),
        ([("agent", {"jsonrpc": "2.0", "id": {"a": 1}, "error": {"code": -32600, "message": "x"}})],
         "id: "),
    ],
    ids=["bad-stop-reason", "missing-stop-reason", "unknown-id", "bad-envelope", "array",
         "wrong-side", "bad-error", "unknown-notification", "bad-id"],
)  # fmt: skip
def test_violations_are_caught(
    schema: Schema, frames: list[tuple[str, Any]], expected: str
) -> None:
    """Each kind of violation by the agent is reported."""
    problems = _problems(schema, frames)
    assert any(expected in p for p in problems), problems


def test_client_frames_can_be_exempted(schema: Schema) -> None:
    """Deliberately malformed client frames are not reported, the agent's still are."""
    frames: list[tuple[str, Any]] = [
        ("client", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": 1}}),
        ("agent", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}),
    ]
    assert _problems(schema, frames, check_client=False) == []
    assert _problems(schema, frames, check_client=True) != []


def test_either_side_may_withdraw_its_request(schema: Schema) -> None:
    """``$/cancel_request`` is accepted from either side; one without ``requestId`` is not."""
    withdraw = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}
    assert _problems(schema, [("agent", withdraw), ("client", withdraw)]) == []
    broken = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {}}
    assert any("requestId" in p for p in _problems(schema, [("agent", broken)]))
