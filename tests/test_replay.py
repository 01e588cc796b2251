"""``session/load`` replay (`acp_skills.acp.replay`): the stored conversation, as updates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from acp_skills import SkillRegistry
from acp_skills.acp import AcpSkills

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]


class Updates:
    """A client that keeps every ``session/update`` it is sent, as wire JSON."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.sent.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        raise AssertionError("replay reads no files")


async def replayed(tmp_path: Path, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    skills = AcpSkills(SkillRegistry())
    session = await skills.open_session("s1", str(tmp_path))
    for message in history:
        await session.advance([message])
    client = Updates()
    skills.attach(client)
    await skills.load_session("s1", str(tmp_path))
    return client.sent


def summary(update: dict[str, Any]) -> tuple[Any, ...]:
    kind = update["sessionUpdate"]
    if kind in ("user_message_chunk", "agent_message_chunk"):
        return (kind, update["content"]["text"])
    if kind == "tool_call":
        return (kind, update["toolCallId"], update["title"], update.get("rawInput"))
    return (kind, update["toolCallId"], update["status"], update["content"][0]["content"]["text"])


async def test_a_conversation_replays_as_the_person_saw_it(tmp_path: Path) -> None:
    """What was typed, the ``/name`` calls, the replies, each tool call and its result."""
    content = "/deploy now\n\nDEPLOY TEXT"
    start = content.index("DEPLOY TEXT")
    skill_args = json.dumps({"name": "deploy"})
    history: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": content,
            "_display": "/deploy now",
            "_invoked": [
                {"id": "slash-1", "name": "deploy", "is_error": False}
                | {"start": start, "end": len(content)}
            ],
        },
        {
            "role": "assistant",
            "content": "Loading.",
            "tool_calls": [
                {"id": "c1", "type": "function"}
                | {"function": {"name": "skill", "arguments": skill_args}},
                {"id": "c2", "type": "function"}
                | {"function": {"name": "grep", "arguments": '{"q": 1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "SKILL", "_is_error": False},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no", "_is_error": True},
        {"role": "assistant", "content": "Done."},
    ]
    assert [summary(update) for update in await replayed(tmp_path, history)] == [
        ("user_message_chunk", "/deploy now"),
        ("tool_call", "slash-1", "Load skill deploy", {"name": "deploy"}),
        ("tool_call_update", "slash-1", "completed", "DEPLOY TEXT"),
        ("agent_message_chunk", "Loading."),
        ("tool_call", "c1", "Load skill deploy", {"name": "deploy"}),
        ("tool_call", "c2", "grep", {"q": 1}),
        ("tool_call_update", "c1", "completed", "SKILL"),
        ("tool_call_update", "c2", "failed", "Error: no"),
        ("agent_message_chunk", "Done."),
    ]


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "x", "name": "deploy", "start": 0, "end": 999},
        {"id": "x", "name": "deploy", "start": 3, "end": 1},
        {"id": "x", "name": "deploy", "start": True, "end": 2},
        {"id": 7, "name": "deploy", "start": 0, "end": 2},
        "not an entry",
    ],
    ids=["past-the-end", "backwards", "bool-offset", "numeric-id", "not-an-object"],
)
async def test_an_invoked_entry_that_does_not_fit_is_left_out(
    tmp_path: Path, entry: object
) -> None:
    """A record is a file a person can edit: what does not fit the content is not replayed."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "hello", "_invoked": [entry]}]
    assert [summary(update) for update in await replayed(tmp_path, history)] == [
        ("user_message_chunk", "hello"),
    ]


async def test_recorded_arguments_past_the_bounds_are_replayed_as_a_note(tmp_path: Path) -> None:
    """300-deep arguments (recorded before the bound) replay as a note, and so does the rest."""
    deep = '{"name": ' + "[" * 300 + "]" * 300 + "}"
    call = {"id": "c1", "type": "function", "function": {"name": "skill", "arguments": deep}}
    history: list[dict[str, Any]] = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: no", "_is_error": True},
        {"role": "assistant", "content": "after"},
    ]
    with capture_logs() as logs:
        updates = [summary(update) for update in await replayed(tmp_path, history)]
    # The note a live turn records for such a call, as `session/load` replays it.
    note = {"omitted": "the arguments are nested more than 64 levels deep; the call was not run"}
    assert updates == [
        ("tool_call", "c1", "Load skill", note),
        ("tool_call_update", "c1", "failed", "Error: no"),
        ("agent_message_chunk", "after"),
    ]
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == [
        "session_replay_arguments_omitted"
    ]
