"""Session records: entries, the JSON Lines store and the in-memory store (contract §8)."""

from __future__ import annotations

import copy
import json
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from acp_skills import PrefixMessage
from acp_skills.record import (
    HeaderEntry,
    HistoryEntry,
    InMemorySessionStore,
    JsonlSessionStore,
    RecordEntry,
    SessionRecord,
    SessionStore,
)

pytestmark = pytest.mark.anyio


def header(reason: Any = "initial", **fields: Any) -> HeaderEntry:
    values: dict[str, Any] = {
        "config": {"model": "m1", "temperature": 0.5},
        "system": "You are helpful.",
        "tools": ({"name": "skill", "parameters": {"type": "object"}},),
        "message_prefix": (PrefixMessage(role="user", text="<catalog/>"),),
    }
    values.update(fields)
    return HeaderEntry(reason=reason, **values)


def said(text: str, role: str = "user") -> HistoryEntry:
    return HistoryEntry(message={"role": role, "content": text})


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    """Each store implementation, so both are held to the same behaviour."""
    if request.param == "jsonl":
        return JsonlSessionStore(tmp_path / "sessions")
    return InMemorySessionStore()


@pytest.fixture
def jsonl(tmp_path: Path) -> JsonlSessionStore:
    return JsonlSessionStore(tmp_path / "sessions")


def skipped_lines(logs: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    return [
        (entry["line"], entry["reason"])
        for entry in logs
        if entry["event"] == "session_record_line_skipped"
    ]


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


def test_recorded_json_is_read_only_yet_serializable() -> None:
    """A recorded object refuses mutation but still works with json, copy and pickle."""
    entry = said("hi")
    message: Any = entry.message
    with pytest.raises(TypeError, match="read-only"):
        message["content"] = "changed"
    with pytest.raises(TypeError, match="read-only"):
        message.update(content="changed")
    with pytest.raises(TypeError, match="read-only"):
        message |= {"content": "changed"}
    assert isinstance(message, dict)
    assert json.loads(json.dumps(message)) == {"role": "user", "content": "hi"}
    assert copy.deepcopy(message) == message
    assert pickle.loads(pickle.dumps(message)) == message
    assert entry.message == {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda calls: calls.append({}),
        lambda calls: calls.extend([{}]),
        lambda calls: calls.__setitem__(0, {}),
        lambda calls: calls.pop(),
        lambda calls: calls.sort(),
        lambda calls: calls.__iadd__([{}]),
        lambda calls: calls[0].clear(),
    ],
    ids=["append", "extend", "setitem", "pop", "sort", "iadd", "nested-clear"],
)
def test_recorded_arrays_are_read_only_and_equal_their_source(mutate: Callable[[Any], Any]) -> None:
    """Arrays stay lists (equal to what was recorded) but refuse every mutation."""
    source: dict[str, Any] = {"role": "assistant", "tool_calls": [{"id": "c1"}]}
    entry = HistoryEntry(message=source)
    assert entry.message == source
    with pytest.raises(TypeError, match="read-only"):
        mutate(entry.message["tool_calls"])
    assert entry.message == source


def test_plain_message_is_a_fresh_mutable_copy() -> None:
    """``plain_message()`` gives plain dicts and lists the caller may change."""
    entry = HistoryEntry(message={"role": "assistant", "tool_calls": [{"id": "c1"}]})
    plain = entry.plain_message()
    plain["tool_calls"].append({"id": "c2"})
    assert plain["tool_calls"] == [{"id": "c1"}, {"id": "c2"}]
    assert entry.plain_message() == {"role": "assistant", "tool_calls": [{"id": "c1"}]}


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"stop": {"a", "b"}}, TypeError),
        ({1: "x"}, TypeError),
        ({"temperature": float("nan")}, ValueError),
        ({"temperature": float("inf")}, ValueError),
        ({"client": object()}, TypeError),
    ],
    ids=["set", "non-string-key", "nan", "infinity", "object"],
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
    record = await store.open("s1")
    appended: list[RecordEntry] = [header(), said("hi"), said("hello", "assistant")]
    for entry in appended:
        await record.append(entry)
    assert await record.entries() == appended


async def test_an_empty_record_has_no_entries(store: SessionStore) -> None:
    """Opening a record does not create anything."""
    record = await store.open("fresh")
    assert await record.entries() == []
    assert not await store.exists("fresh")


async def test_a_session_exists_once_something_was_appended(store: SessionStore) -> None:
    """``exists`` turns true with the first append."""
    record = await store.open("s1")
    await record.append(said("hi"))
    assert await store.exists("s1")
    assert not await store.exists("s2")


async def test_sessions_are_recorded_separately(store: SessionStore) -> None:
    """Each session id has its own record."""
    first, second = await store.open("a"), await store.open("b")
    await first.append(said("for a"))
    await second.append(said("for b"))
    assert await first.entries() == [said("for a")]
    assert await second.entries() == [said("for b")]


async def test_reopening_a_session_sees_what_was_appended(store: SessionStore) -> None:
    """A record opened again (a session/load) reads the same entries."""
    await (await store.open("s1")).append(header())
    reopened = await store.open("s1")
    assert await reopened.entries() == [header()]


async def test_unicode_round_trips(store: SessionStore) -> None:
    """Non-ASCII text, emoji and lone surrogates come back unchanged."""
    record = await store.open("s1")
    entry = HistoryEntry(message={"role": "user", "content": "héllo 日本語 🎉 \ud800 \u2028"})
    await record.append(entry)
    await record.append(header(system="Système ✓"))
    assert await record.entries() == [entry, header(system="Système ✓")]


async def test_concurrent_appends_are_all_kept_whole(store: SessionStore) -> None:
    """Fifty appends racing each other all land, each one intact."""
    record = await store.open("s1")
    async with anyio.create_task_group() as group:
        for index in range(50):
            group.start_soon(record.append, said(f"message {index}"))
    contents = [
        entry.message["content"]
        for entry in await record.entries()
        if isinstance(entry, HistoryEntry)
    ]
    assert sorted(map(str, contents)) == sorted(f"message {index}" for index in range(50))


async def test_append_refuses_anything_but_an_entry(store: SessionStore) -> None:
    """Only HeaderEntry and HistoryEntry go into a record."""
    record = await store.open("s1")
    with pytest.raises(TypeError, match="HeaderEntry or HistoryEntry"):
        await record.append({"role": "user"})  # type: ignore[arg-type]
    assert await record.entries() == []


async def test_stores_satisfy_the_protocols(store: SessionStore) -> None:
    """Both stores and their records are what the seam promises."""
    assert isinstance(store, SessionStore)
    assert isinstance(await store.open("s1"), SessionRecord)


async def test_session_id_must_be_a_string(store: SessionStore) -> None:
    """A non-string session id is a programming error."""
    with pytest.raises(TypeError, match="session id"):
        await store.open(42)  # type: ignore[arg-type]


# -- JSON Lines ------------------------------------------------------------------------------


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def read_through_another_handle(path: Path) -> bytes:
    with open(path, "rb") as reader:
        return reader.read()


def tear(path: Path, fragment: bytes) -> None:
    """Leave what a crash in the middle of a write leaves: part of a line, no newline."""
    with open(path, "ab") as file:
        file.write(fragment)


async def test_jsonl_writes_one_file_per_session(jsonl: JsonlSessionStore) -> None:
    """Each session has its own ``<id>.jsonl`` file in the store's directory."""
    for session_id in ("a", "b"):
        await (await jsonl.open(session_id)).append(said(session_id))
    assert sorted(path.name for path in jsonl.directory.iterdir()) == ["a.jsonl", "b.jsonl"]


async def test_jsonl_each_append_is_one_flushed_line(jsonl: JsonlSessionStore) -> None:
    """Right after an append, another handle reads exactly one more complete line."""
    record = await jsonl.open("s1")
    path = jsonl.path_for("s1")
    await record.append(header())
    assert read_through_another_handle(path).count(b"\n") == 1
    await record.append(said("hi"))
    data = read_through_another_handle(path)
    assert data.endswith(b"\n")
    first, second = (json.loads(line) for line in data.splitlines())
    assert first == {
        "v": 1,
        "type": "header",
        "reason": "initial",
        "config": {"model": "m1", "temperature": 0.5},
        "system": "You are helpful.",
        "tools": [{"name": "skill", "parameters": {"type": "object"}}],
        "messagePrefix": [{"role": "user", "text": "<catalog/>"}],
    }
    assert second == {"v": 1, "type": "history", "message": {"role": "user", "content": "hi"}}


async def test_jsonl_files_are_ascii(jsonl: JsonlSessionStore) -> None:
    """Non-ASCII text is escaped, so a torn write can never split a character."""
    record = await jsonl.open("s1")
    await record.append(said("日本語 🎉"))
    jsonl.path_for("s1").read_bytes().decode("ascii")


async def test_jsonl_fsync_mode_writes_the_same_lines(tmp_path: Path) -> None:
    """With ``fsync=True`` the file content is the same."""
    store = JsonlSessionStore(tmp_path, fsync=True)
    record = await store.open("s1")
    await record.append(said("hi"))
    assert await record.entries() == [said("hi")]
    assert lines_of(store.path_for("s1")) == [
        b'{"v":1,"type":"history","message":{"role":"user","content":"hi"}}',
        b"",
    ]


async def test_jsonl_creates_its_directory_on_the_first_append(tmp_path: Path) -> None:
    """Constructing or opening touches nothing; the first append creates the directories."""
    store = JsonlSessionStore(tmp_path / "deep" / "er")
    record = await store.open("s1")
    assert await record.entries() == []
    assert not (tmp_path / "deep").exists()
    await record.append(said("hi"))
    assert store.path_for("s1").is_file()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
async def test_jsonl_files_are_private_to_their_owner(jsonl: JsonlSessionStore) -> None:
    """Conversations may hold secrets: new files are readable by their owner only."""
    await (await jsonl.open("s1")).append(said("secret"))
    assert jsonl.path_for("s1").stat().st_mode & 0o077 == 0


async def test_jsonl_skips_a_torn_last_line_with_a_warning(jsonl: JsonlSessionStore) -> None:
    """A crash mid-write leaves a fragment; reading skips it, warns, and keeps the rest."""
    record = await jsonl.open("s1")
    await record.append(said("kept"))
    path = jsonl.path_for("s1")
    tear(path, b'{"v":1,"type":"history","message":{"role":"us')
    with capture_logs() as logs:
        entries = await record.entries()
    assert entries == [said("kept")]
    assert logs == [
        {
            "event": "session_record_line_skipped",
            "log_level": "warning",
            "path": str(path),
            "line": 2,
            "reason": "torn last line: the writer stopped in the middle of an entry",
        }
    ]


async def test_jsonl_append_after_a_torn_line_starts_a_new_line(jsonl: JsonlSessionStore) -> None:
    """The next entry is not glued to the fragment: it gets a line of its own."""
    record = await jsonl.open("s1")
    await record.append(said("before"))
    path = jsonl.path_for("s1")
    tear(path, b'{"v":1,"type":"hist')
    await record.append(said("after"))
    assert lines_of(path)[1:] == [
        b'{"v":1,"type":"hist',
        b'{"v":1,"type":"history","message":{"role":"user","content":"after"}}',
        b"",
    ]
    with capture_logs() as logs:
        assert await record.entries() == [said("before"), said("after")]
    # The fragment is now an ordinary corrupt line in the middle.
    assert [line for line, _ in skipped_lines(logs)] == [2]


async def test_jsonl_keeps_a_complete_last_line_that_lost_its_newline(
    jsonl: JsonlSessionStore,
) -> None:
    """A last entry missing only its newline is whole, so it is kept; the next append follows."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"v":1,"type":"history","message":{"role":"user","content":"a"}}')
    record = await jsonl.open("s1")
    with capture_logs() as logs:
        assert await record.entries() == [said("a")]
    assert logs == []
    await record.append(said("b"))
    assert await record.entries() == [said("a"), said("b")]


async def test_jsonl_skips_corrupt_middle_lines_with_warnings(jsonl: JsonlSessionStore) -> None:
    """Each bad line in the middle is skipped with its line number; good lines around survive."""
    good = b'{"v":1,"type":"history","message":{"role":"user","content":"ok"}}'
    bad = [
        b"not json at all",
        b"[1, 2, 3]",
        b'{"v":2,"type":"history","message":{}}',
        b'{"v":true,"type":"history","message":{}}',
        b'{"v":1,"type":"mystery"}',
        b'{"v":1,"type":"history","message":"flat"}',
        b'{"v":1,"type":"header","reason":"again","config":{},"system":"","tools":[],'
        b'"messagePrefix":[]}',
        b'{"v":1,"type":"header","reason":"initial","config":{},"system":"","tools":[],'
        b'"messagePrefix":[{"role":"user"}]}',
        b'{"v":1,"type":"history","message":{"x":NaN}}',
        b'{"v":1,"type":"history","message":{"content":"\xff"}}',
    ]
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join([good, *bad, b"", good]) + b"\n")
    with capture_logs() as logs:
        entries = await (await jsonl.open("s1")).entries()
    assert entries == [said("ok"), said("ok")]
    skipped = skipped_lines(logs)
    assert [line for line, _ in skipped] == list(range(2, 2 + len(bad)))
    assert all(reason.startswith("corrupt line: ") for _, reason in skipped)
    assert {entry["path"] for entry in logs} == {str(path)}


async def test_jsonl_ignores_unknown_keys(jsonl: JsonlSessionStore) -> None:
    """Later writers may add keys without a new format version."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b'{"v":1,"type":"history","message":{"role":"user","content":"a"},"turn":"t1"}\n'
    )
    assert await (await jsonl.open("s1")).entries() == [said("a")]


ODD_SESSION_IDS = [
    "plain-id",
    "Plain-ID",
    "plain-id~0",
    "a/b",
    "a\\b",
    "../../etc/passwd",
    "..",
    ".",
    ".hidden",
    "",
    " ",
    "nul",
    "com1.log",
    "x" * 100,
    "x" * 101,
    "y" * 5000,
    "日本語",
    "tab\there",
    "nul\x00byte",
    "lone\ud800surrogate",
]


def test_jsonl_maps_odd_session_ids_to_safe_distinct_file_names(tmp_path: Path) -> None:
    """Any session id becomes one distinct, short, plain file name inside the directory."""
    store = JsonlSessionStore(tmp_path)
    paths = [store.path_for(session_id) for session_id in ODD_SESSION_IDS]
    assert len({path.name.lower() for path in paths}) == len(ODD_SESSION_IDS)
    for path in paths:
        assert path.parent == tmp_path
        assert path.name.endswith(".jsonl")
        assert not path.name.startswith(".")
        assert len(path.name.encode()) <= 120
        assert all(char.isascii() and char.isprintable() for char in path.name)
        assert not set(path.name) & set('/\\:*?"<>| ')


def test_jsonl_keeps_plain_session_ids_readable(tmp_path: Path) -> None:
    """Lowercase ids made of ``[a-z0-9._-]`` name their file as they are."""
    store = JsonlSessionStore(tmp_path)
    assert store.path_for("sess_01.a-b").name == "sess_01.a-b.jsonl"
    assert store.path_for("Sess/1").name.startswith("sess-1~")


async def test_jsonl_records_odd_session_ids_separately(tmp_path: Path) -> None:
    """Every odd id gets its own file, and each reads back only its own entry."""
    store = JsonlSessionStore(tmp_path / "sessions")
    for session_id in ODD_SESSION_IDS:
        await (await store.open(session_id)).append(said(session_id))
    assert len(list((tmp_path / "sessions").iterdir())) == len(ODD_SESSION_IDS)
    for session_id in ODD_SESSION_IDS:
        assert await (await store.open(session_id)).entries() == [said(session_id)]
        assert await store.exists(session_id)


async def test_jsonl_records_of_one_session_share_appends(jsonl: JsonlSessionStore) -> None:
    """Two records open on one session (old and new instance) write whole lines in order."""
    first, second = await jsonl.open("s1"), await jsonl.open("s1")
    async with anyio.create_task_group() as group:
        for index in range(20):
            record = first if index % 2 else second
            group.start_soon(record.append, said(f"m{index}"))
    assert len(await first.entries()) == 20


@pytest.fixture
def threads_started(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Counts the threads the store starts, to show no file I/O runs on the event loop."""
    started = 0
    original = anyio.to_thread.run_sync

    async def counting(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal started
        started += 1
        return await original(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return lambda: started


async def test_jsonl_file_io_runs_in_worker_threads(
    jsonl: JsonlSessionStore, threads_started: Callable[[], int]
) -> None:
    """Appending, reading and checking existence each go through a worker thread."""
    record = await jsonl.open("s1")
    await record.append(said("hi"))
    await record.entries()
    await jsonl.exists("s1")
    assert threads_started() == 3
