"""Session records: entries and the store protocol, held by both stores (contract §8).

The JSON Lines store's own behaviour (files, torn and corrupt lines) is in test_jsonl_store.py.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import anyio
import pytest

from acp_skills import PrefixMessage
from acp_skills.record import (
    MAX_JSON_DEPTH,
    HeaderEntry,
    HistoryEntry,
    RecordEntry,
    SessionStore,
)
from tests.records import header, said

pytestmark = pytest.mark.anyio


# -- entries ---------------------------------------------------------------------------------


def test_header_copies_its_values_deeply() -> None:
    """Changing the caller's config or tools after building a header changes nothing."""
    config: dict[str, Any] = {"model": {"name": "m1"}, "stop": ["a"]}
    tools: list[dict[str, Any]] = [{"name": "skill", "parameters": {"required": ["name"]}}]
    entry = HeaderEntry(
        reason="initial", config=config, system="s", tools=tuple(tools), message_prefix=()
    )
    config["model"]["name"] = "m2"
    config["stop"].append("b")
    tools[0]["parameters"]["required"].append("path")
    assert entry.to_json()["config"] == {"model": {"name": "m1"}, "stop": ["a"]}
    assert entry.to_json()["tools"] == [{"name": "skill", "parameters": {"required": ["name"]}}]


def test_recorded_json_is_plain_json() -> None:
    """A recorded object is a plain dict: json, copy and pickle work on it."""
    entry = said("hi")
    message: Any = entry.message
    assert type(message) is dict
    assert json.loads(json.dumps(message)) == {"role": "user", "content": "hi"}
    assert copy.deepcopy(message) == message
    assert pickle.loads(pickle.dumps(message)) == message
    assert entry.message == {"role": "user", "content": "hi"}


def test_recorded_arrays_stay_lists_equal_to_their_source() -> None:
    """A tuple is recorded as a list, as JSON has it; the message equals its source."""
    source: dict[str, Any] = {"role": "assistant", "tool_calls": ({"id": "c1"},)}
    entry = HistoryEntry(message=source)
    assert entry.message == {"role": "assistant", "tool_calls": [{"id": "c1"}]}


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"stop": {"a", "b"}}, TypeError),
        ({"temperature": float("nan")}, ValueError),
        ({"temperature": float("inf")}, ValueError),
        ({"client": object()}, TypeError),
    ],
    ids=["set", "nan", "infinity", "object"],
)
def test_header_rejects_values_json_cannot_carry(config: Any, error: type[Exception]) -> None:
    """Only JSON goes into a record, so a value JSON cannot carry is refused up front."""
    with pytest.raises(error, match="config"):
        header(config=config)


def test_header_rejects_an_unknown_reason() -> None:
    """The reason is one of initial, resume, change."""
    with pytest.raises(ValueError, match="reason"):
        header(reason="again")


def test_history_entry_needs_a_json_object() -> None:
    """A history message is a JSON object, not a bare string."""
    with pytest.raises(TypeError, match="history message"):
        HistoryEntry(message="hello")  # type: ignore[arg-type]


def test_entries_make_their_text_well_formed() -> None:
    """Lone surrogates in strings, keys, the system prompt and the prefix become U+FFFD."""
    entry = HistoryEntry(message={"role": "user", "content": "a\ud800", "k\udfff": ["\udc80"]})
    assert entry.message == {"role": "user", "content": "a\ufffd", "k\ufffd": ["\ufffd"]}
    recorded = header(
        config={"stop": ["\ud800"]},
        system="s\udbff",
        tools=({"description": "t\udc00"},),
        message_prefix=(PrefixMessage(role="user", text="catalog \ud800"),),
    )
    assert recorded.to_json() == {
        "reason": "initial",
        "config": {"stop": ["\ufffd"]},
        "system": "s\ufffd",
        "tools": [{"description": "t\ufffd"}],
        "messagePrefix": [{"role": "user", "text": "catalog \ufffd"}],
    }
    json.dumps(recorded.to_json(), ensure_ascii=False).encode("utf-8")


def nested(depth: int) -> dict[str, Any]:
    """A JSON object ``depth`` levels deep (itself included)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_entries_refuse_nesting_deeper_than_the_limit() -> None:
    """Up to MAX_JSON_DEPTH levels are kept; one more is a ValueError naming the value."""
    assert HistoryEntry(message=nested(MAX_JSON_DEPTH)).message == nested(MAX_JSON_DEPTH)
    with pytest.raises(ValueError, match=r"^history message is nested more than 100 levels"):
        HistoryEntry(message=nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(ValueError, match=r"^header tools is nested more than 100 levels"):
        header(tools=({"parameters": [nested(MAX_JSON_DEPTH - 1)]},))


def test_same_request_ignores_reason_and_key_order_but_not_json_types() -> None:
    """Headers compare by their JSON: key order is irrelevant, ``1`` and ``true`` differ."""
    first = header(config={"a": 1, "b": 2})
    assert first.same_request_as(header(reason="change", config={"b": 2, "a": 1}))
    assert not first.same_request_as(header(config={"a": True, "b": 2}))
    assert not first.same_request_as(header(config={"a": 1.0, "b": 2}))
    assert not first.same_request_as(header(config={"a": 1, "b": 2}, system="other"))


# -- both stores -----------------------------------------------------------------------------


async def test_entries_come_back_in_append_order(store: SessionStore) -> None:
    """What was appended is read back, equal and in order."""
    appended: list[RecordEntry] = [header(), said("hi"), said("hello", "assistant")]
    for entry in appended:
        await store.append("s1", entry)
    assert await store.entries("s1") == appended


async def test_an_empty_record_has_no_entries(store: SessionStore) -> None:
    """A session nothing was appended to has no record."""
    assert await store.entries("fresh") == []
    assert not await store.exists("fresh")


async def test_a_session_exists_once_something_was_appended(store: SessionStore) -> None:
    """``exists`` turns true with the first append."""
    await store.append("s1", said("hi"))
    assert await store.exists("s1")
    assert not await store.exists("s2")


async def test_sessions_are_recorded_separately(store: SessionStore) -> None:
    """Each session id has its own record."""
    await store.append("a", said("for a"))
    await store.append("b", said("for b"))
    assert await store.entries("a") == [said("for a")]
    assert await store.entries("b") == [said("for b")]


async def test_unicode_round_trips(store: SessionStore) -> None:
    """Non-ASCII text, emoji and lone surrogates come back unchanged."""
    entry = HistoryEntry(message={"role": "user", "content": "héllo 日本語 🎉 \ud800 \u2028"})
    await store.append("s1", entry)
    await store.append("s1", header(system="Système ✓"))
    assert await store.entries("s1") == [entry, header(system="Système ✓")]


async def test_concurrent_appends_are_all_kept_whole(store: SessionStore) -> None:
    """Fifty appends racing each other all land, each one intact."""
    async with anyio.create_task_group() as group:
        for index in range(50):
            group.start_soon(store.append, "s1", said(f"message {index}"))
    contents = [
        entry.message["content"]
        for entry in await store.entries("s1")
        if isinstance(entry, HistoryEntry)
    ]
    assert sorted(map(str, contents)) == sorted(f"message {index}" for index in range(50))


async def test_both_stores_are_session_stores(store: SessionStore) -> None:
    """Both stores are what the seam promises."""
    assert isinstance(store, SessionStore)
