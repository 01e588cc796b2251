"""The JSON Lines session store: one file per session, and a record that survives its disk."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from acp_skills import PrefixMessage
from acp_skills.jsonl_store import JsonlSessionStore
from acp_skills.record import HistoryEntry
from tests.records import header, make_directory, make_fifo, said
from tests.tmpfs import small_tmpfs

pytestmark = pytest.mark.anyio


@pytest.fixture
def jsonl(tmp_path: Path) -> JsonlSessionStore:
    return JsonlSessionStore(tmp_path / "sessions")


def skipped_lines(logs: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    return [
        (entry["line"], entry["reason"])
        for entry in logs
        if entry["event"] == "session_record_line_skipped"
    ]


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
        await jsonl.append(session_id, said(session_id))
    assert sorted(path.name for path in jsonl.directory.iterdir()) == ["a.jsonl", "b.jsonl"]


async def test_jsonl_each_append_is_one_flushed_line(jsonl: JsonlSessionStore) -> None:
    """Right after an append, another handle reads exactly one more complete line."""
    path = jsonl.path_for("s1")
    await jsonl.append("s1", header())
    assert read_through_another_handle(path).count(b"\n") == 1
    await jsonl.append("s1", said("hi"))
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
    await jsonl.append("s1", said("日本語 🎉"))
    written = jsonl.path_for("s1").read_bytes()
    assert written.isascii()
    assert b"\\u65e5\\u672c\\u8a9e \\ud83c\\udf89" in written


async def test_jsonl_creates_its_directory_on_the_first_append(tmp_path: Path) -> None:
    """Constructing or opening touches nothing; the first append creates the directories."""
    store = JsonlSessionStore(tmp_path / "deep" / "er")
    assert await store.entries("s1") == []
    assert not (tmp_path / "deep").exists()
    await store.append("s1", said("hi"))
    assert store.path_for("s1").is_file()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
async def test_jsonl_files_are_private_to_their_owner(jsonl: JsonlSessionStore) -> None:
    """Conversations may hold secrets: new files are readable by their owner only."""
    await jsonl.append("s1", said("secret"))
    assert jsonl.path_for("s1").stat().st_mode & 0o077 == 0


async def test_jsonl_skips_a_torn_last_line_with_a_warning(jsonl: JsonlSessionStore) -> None:
    """A crash mid-write leaves a fragment; reading skips it, warns, and keeps the rest."""
    await jsonl.append("s1", said("kept"))
    path = jsonl.path_for("s1")
    tear(path, b'{"v":1,"type":"history","message":{"role":"us')
    with capture_logs() as logs:
        entries = await jsonl.entries("s1")
    assert entries == [said("kept")]
    [skipped] = logs
    assert (skipped["event"], skipped["path"], skipped["line"]) == (
        "session_record_line_skipped",
        str(path),
        2,
    )
    assert skipped["reason"].startswith("corrupt line: ")


async def test_jsonl_append_after_a_torn_line_starts_a_new_line(jsonl: JsonlSessionStore) -> None:
    """The next entry is not glued to the fragment: it gets a line of its own."""
    await jsonl.append("s1", said("before"))
    path = jsonl.path_for("s1")
    tear(path, b'{"v":1,"type":"hist')
    await jsonl.append("s1", said("after"))
    assert lines_of(path)[1:] == [
        b'{"v":1,"type":"hist',
        b'{"v":1,"type":"history","message":{"role":"user","content":"after"}}',
        b"",
    ]
    with capture_logs() as logs:
        assert await jsonl.entries("s1") == [said("before"), said("after")]
    # The fragment is now an ordinary corrupt line in the middle.
    assert [line for line, _ in skipped_lines(logs)] == [2]


async def test_jsonl_keeps_a_complete_last_line_that_lost_its_newline(
    jsonl: JsonlSessionStore,
) -> None:
    """A last entry missing only its newline is whole, so it is kept; the next append follows."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"v":1,"type":"history","message":{"role":"user","content":"a"}}')
    with capture_logs() as logs:
        assert await jsonl.entries("s1") == [said("a")]
    assert logs == []
    await jsonl.append("s1", said("b"))
    assert await jsonl.entries("s1") == [said("a"), said("b")]


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
        entries = await jsonl.entries("s1")
    assert entries == [said("ok"), said("ok")]
    skipped = skipped_lines(logs)
    assert [line for line, _ in skipped] == list(range(2, 2 + len(bad)))
    assert all(reason.startswith("corrupt line: ") for _, reason in skipped)
    assert {entry["path"] for entry in logs} == {str(path)}


GOOD_LINE = b'{"v":1,"type":"history","message":{"role":"user","content":"ok"}}'

# Lines that once failed the whole read (an exception other than the ones it caught), or that
# must never: each is skipped like any corrupt line.
UNDECODABLE = {
    "array-nested-100k-deep": b"[" * 100_000,
    "object-nested-100k-deep": b'{"a":' * 100_000,
    "valid-json-nested-past-the-limit": (
        b'{"v":1,"type":"history","message":' + b'{"a":' * 150 + b"1" + b"}" * 151
    ),
    "header-config-of-the-wrong-type": (
        b'{"v":1,"type":"header","reason":"initial","config":"x","system":"","tools":[],'
        b'"messagePrefix":[]}'
    ),
    "header-system-of-the-wrong-type": (
        b'{"v":1,"type":"header","reason":"initial","config":{},"system":["x"],"tools":[],'
        b'"messagePrefix":[]}'
    ),
    "header-tool-of-the-wrong-type": (
        b'{"v":1,"type":"header","reason":"initial","config":{},"system":"","tools":[3],'
        b'"messagePrefix":[]}'
    ),
    "unhashable-reason": b'{"v":1,"type":"header","reason":{"a":1}}',
    "infinite-number": b'{"v":1,"type":"history","message":{"n":-1e999}}',
    "integer-too-long-to-read": b'{"v":1,"type":"history","message":{"n":' + b"7" * 5000 + b"}}",
    "nul-bytes": b"\x00" * 16,
    "json-null": b"null",
    "json-string": b'"v"',
    "truncated-utf-8": b'{"v":1,"type":"history","message":{"content":"\xe6\x97"}}',
}


@pytest.mark.parametrize("bad", list(UNDECODABLE.values()), ids=list(UNDECODABLE))
async def test_jsonl_skips_an_undecodable_line_of_any_kind(
    jsonl: JsonlSessionStore, bad: bytes
) -> None:
    """The line is skipped with a warning naming the file and line; the rest is read."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join([GOOD_LINE, bad, GOOD_LINE, b""]))
    with capture_logs() as logs:
        entries = await jsonl.entries("s1")
    assert entries == [said("ok"), said("ok")]
    [(line, reason)] = skipped_lines(logs)
    assert line == 2
    assert reason.startswith("corrupt line: ")
    assert len(reason) <= 300
    assert logs[0]["path"] == str(path)


@pytest.mark.parametrize("bad", list(UNDECODABLE.values()), ids=list(UNDECODABLE))
async def test_jsonl_appends_after_an_undecodable_torn_line_on_a_line_of_their_own(
    jsonl: JsonlSessionStore, bad: bytes
) -> None:
    """A bad last line without its newline is skipped, and never glued to the next entry."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(GOOD_LINE + b"\n" + bad)
    with capture_logs() as logs:
        assert await jsonl.entries("s1") == [said("ok")]
    assert [line for line, _ in skipped_lines(logs)] == [2]
    await jsonl.append("s1", said("next"))
    with capture_logs() as logs:
        assert await jsonl.entries("s1") == [said("ok"), said("next")]
    assert [line for line, _ in skipped_lines(logs)] == [2]
    assert lines_of(path)[1:] == [
        bad,
        b'{"v":1,"type":"history","message":{"role":"user","content":"next"}}',
        b"",
    ]


async def test_jsonl_reads_lone_surrogates_back_as_replacement_characters(
    jsonl: JsonlSessionStore,
) -> None:
    """A record that holds ``\\ud800`` escapes (valid JSON) reads back as well-formed text."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b'{"v":1,"type":"header","reason":"initial","config":{"k\\udfff":"v\\ud800"},'
        b'"system":"s\\ud800","tools":[],"messagePrefix":[{"role":"user","text":"t\\udc80"}]}\n'
        b'{"v":1,"type":"history","message":{"role":"user","content":"a\\ud800b"}}\n'
    )
    header_entry, history_entry = await jsonl.entries("s1")
    assert header_entry == header(
        config={"k\ufffd": "v\ufffd"},
        system="s\ufffd",
        tools=(),
        message_prefix=(PrefixMessage(role="user", text="t\ufffd"),),
    )
    assert history_entry == said("a\ufffdb")


needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX FIFOs")


@needs_posix
@pytest.mark.parametrize(
    ("make", "appending_says"),
    [(make_fifo, "Not a regular file"), (make_directory, "Is a directory")],
    ids=["fifo", "directory"],
)
async def test_jsonl_refuses_a_record_that_is_not_a_file_without_blocking(
    jsonl: JsonlSessionStore, make: Callable[[Path], None], appending_says: str
) -> None:
    """Reading and appending raise an OSError naming the path; nothing waits on a FIFO."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    make(path)
    with anyio.fail_after(10):
        assert await jsonl.exists("s1")
        with pytest.raises(OSError, match="Not a regular file") as reading:
            await jsonl.entries("s1")
        with pytest.raises(OSError, match=appending_says) as appending:  # ours or the system's
            await jsonl.append("s1", said("hi"))
    for refused in (reading.value, appending.value):
        assert refused.filename == str(path)


async def test_jsonl_ignores_unknown_keys(jsonl: JsonlSessionStore) -> None:
    """Later writers may add keys without a new format version."""
    path = jsonl.path_for("s1")
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b'{"v":1,"type":"history","message":{"role":"user","content":"a"},"turn":"t1"}\n'
    )
    assert await jsonl.entries("s1") == [said("a")]


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
        await store.append(session_id, said(session_id))
    assert len(list((tmp_path / "sessions").iterdir())) == len(ODD_SESSION_IDS)
    for session_id in ODD_SESSION_IDS:
        assert await store.entries(session_id) == [said(session_id)]
        assert await store.exists(session_id)


async def test_jsonl_file_io_runs_in_worker_threads(
    jsonl: JsonlSessionStore, threads_started: Callable[[], int]
) -> None:
    """Appending, reading and checking existence each go through a worker thread."""
    await jsonl.append("s1", said("hi"))
    await jsonl.entries("s1")
    await jsonl.exists("s1")
    assert threads_started() == 3


PAGE = 4096


def entry_of_line_length(length: int) -> HistoryEntry:
    """A history entry whose stored line (newline included) is ``length`` bytes."""
    document = {"v": 1, "type": "history", "message": {"role": "user", "content": ""}}
    base = len(json.dumps(document, separators=(",", ":"))) + 1
    return HistoryEntry(message={"role": "user", "content": "x" * (length - base)})


async def test_a_write_cut_short_before_its_newline_is_stored_once_after_the_retry(
    tmp_path: Path,
) -> None:
    """ENOSPC after the object but before its newline: the file keeps nothing of the entry,
    and the retry stores it once."""
    with small_tmpfs(tmp_path / "disk", "16k") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * 3 * PAGE)  # one page left: the object fits, its newline not
        store = JsonlSessionStore(disk)
        entry = entry_of_line_length(PAGE + 1)
        with pytest.raises(OSError, match="No space left"):
            await store.append("s", entry)
        assert store.path_for("s").stat().st_size == 0
        filler.unlink()
        await store.append("s", entry)
        await store.append("s", said("after"))
        lines = store.path_for("s").read_bytes().split(b"\n")
        assert lines[-1] == b""
        assert len(lines) == 3
        assert await store.entries("s") == [entry, said("after")]
