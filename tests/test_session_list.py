"""What ``session/list`` shows, as the stores keep it (contract §15): each session's summary
beside its record, pages of 50 newest first, ``cwd`` by real path, a record that cannot be
read skipped with a warning naming it. Both stores, real files in temporary directories."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from acp_skills import JsonlSessionStore
from acp_skills.record import (
    HistoryEntry,
    InMemorySessionStore,
    InvalidCursor,
    SessionDescription,
    SessionPage,
    SessionStore,
    session_title,
)

pytestmark = pytest.mark.anyio

StoreMaker = Callable[[Path], SessionStore]
STORES: dict[str, StoreMaker] = {
    "jsonl": lambda directory: JsonlSessionStore(directory / "sessions"),
    "memory": lambda directory: InMemorySessionStore(),
}


@pytest.fixture(params=list(STORES), ids=list(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    return STORES[request.param](tmp_path)


async def record(store: SessionStore, session_id: str, cwd: Path, title: str = "hello") -> None:
    """A session as the session layer leaves it: one entry in its record, then its summary."""
    await store.append(session_id, HistoryEntry(message={"role": "user", "content": title}))
    await store.describe_session(
        SessionDescription(session_id=session_id, cwd=str(cwd), title=session_title(title))
    )


async def every_page(store: SessionStore, cwd: str | None = None) -> list[SessionPage]:
    pages = [await store.list_sessions(cwd=cwd)]
    while pages[-1].next_cursor is not None:
        pages.append(await store.list_sessions(cwd=cwd, cursor=pages[-1].next_cursor))
    return pages


def ids(page: SessionPage) -> list[str]:
    return [summary.session_id for summary in page.sessions]


async def test_sessions_are_listed_newest_first_in_pages_of_fifty(
    store: SessionStore, tmp_path: Path
) -> None:
    """120 sessions come back as pages of 50, 50 and 20, newest first, each once."""
    for number in range(120):
        await record(store, f"s{number:03}", tmp_path)
        if isinstance(store, JsonlSessionStore):  # a clear order, whatever the clock's grain
            stamp = 1_700_000_000 + number
            os.utime(store.path_for(f"s{number:03}"), (stamp, stamp))
    pages = await every_page(store)
    assert [len(page.sessions) for page in pages] == [50, 50, 20]
    listed = [session_id for page in pages for session_id in ids(page)]
    assert listed == [f"s{number:03}" for number in reversed(range(120))]
    times = [summary.updated_at for page in pages for summary in page.sessions]
    assert times == sorted(times, reverse=True)


async def test_a_summary_shows_the_cwd_the_title_and_when_the_record_last_changed(
    store: SessionStore, tmp_path: Path
) -> None:
    """Each entry carries the session's cwd, its title, and an ISO 8601 time in UTC."""
    await record(store, "only", tmp_path, title="Deploy the app")
    [summary] = (await store.list_sessions()).sessions
    assert (summary.session_id, summary.cwd) == ("only", str(tmp_path))
    assert summary.title == "Deploy the app"
    assert summary.updated_at.endswith("Z")
    parsed = datetime.fromisoformat(summary.updated_at.replace("Z", "+00:00"))
    assert abs(parsed.timestamp() - datetime.now().timestamp()) < 3600


def test_a_title_is_the_prompt_on_one_line_of_at_most_eighty_characters() -> None:
    """Line breaks and runs of spaces become one space; a longer prompt is cut to 80."""
    assert session_title("Fix the\n\n  build   please") == "Fix the build please"
    long = session_title("word " * 40)
    assert long is not None
    assert len(long) <= 80
    assert "\n" not in long
    assert session_title(" \n\t ") is None


async def test_cwd_keeps_the_sessions_of_that_directory_by_real_path(
    store: SessionStore, tmp_path: Path
) -> None:
    """A link to a project lists that project's sessions, and no other project's."""
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    (tmp_path / "link").symlink_to(alpha)
    await record(store, "in-alpha", alpha)
    await record(store, "in-beta", beta)
    assert ids(await store.list_sessions(cwd=str(tmp_path / "link"))) == ["in-alpha"]
    assert ids(await store.list_sessions(cwd=str(beta))) == ["in-beta"]
    assert ids(await store.list_sessions(cwd=str(tmp_path / "nowhere"))) == []


async def test_a_session_opened_in_another_directory_moves_there(
    store: SessionStore, tmp_path: Path
) -> None:
    """Described in another cwd, a session is listed there only, as last described (the title
    the session layer gives it: tests/test_session_lifecycle.py)."""
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    await record(store, "s", alpha, title="started in alpha")
    await store.describe_session(
        SessionDescription(session_id="s", cwd=str(beta), title="described in beta")
    )
    assert ids(await store.list_sessions(cwd=str(alpha))) == []
    [summary] = (await store.list_sessions(cwd=str(beta))).sessions
    assert (summary.cwd, summary.title) == (str(beta), "described in beta")
    assert ids(await store.list_sessions()) == ["s"]


async def test_a_session_described_but_never_recorded_is_not_listed(
    store: SessionStore, tmp_path: Path
) -> None:
    """Only sessions with a record are listed."""
    await store.describe_session(SessionDescription(session_id="ghost", cwd=str(tmp_path)))
    assert ids(await store.list_sessions()) == []


async def test_a_cursor_no_listing_handed_out_is_refused(store: SessionStore) -> None:
    """A made-up cursor is an `InvalidCursor`, never an internal error."""
    for cursor in ("", "page-2", "v1.!!!", "v1.WzEsMl0="):
        with pytest.raises(InvalidCursor):
            await store.list_sessions(cursor=cursor)


async def test_an_unreadable_summary_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A summary that is not JSON (or a record that is not a file) is left out, named in a
    warning, and the page is filled from the others."""
    store = JsonlSessionStore(tmp_path / "sessions")
    for name in ("good", "torn", "odd"):
        await record(store, name, tmp_path)
    [torn] = (tmp_path / "sessions" / "index").glob("*/torn.json")
    torn.write_text("{not json", encoding="utf-8")
    odd = store.path_for("odd")
    odd.unlink()
    odd.mkdir()
    with caplog.at_level(logging.WARNING):
        page = await store.list_sessions()
    assert ids(page) == ["good"]
    skipped = [r.getMessage() for r in caplog.records if "session_record_skipped" in r.getMessage()]
    assert any(str(torn) in message for message in skipped)
    assert any(str(odd) in message and "not a regular file" in message for message in skipped)


async def test_a_removed_record_leaves_its_session_out_quietly(tmp_path: Path) -> None:
    """A record deleted by hand leaves its session out of a listing, without a warning."""
    store = JsonlSessionStore(tmp_path / "sessions")
    await record(store, "gone", tmp_path)
    store.path_for("gone").unlink()
    with capture_logs() as logs:
        assert ids(await store.list_sessions()) == []
    assert logs == []


async def test_summaries_outlive_the_store_object(tmp_path: Path) -> None:
    """A new store over the same directory (an agent restarted) lists what the old one kept."""
    await record(JsonlSessionStore(tmp_path / "sessions"), "kept", tmp_path, title="before")
    [summary] = (await JsonlSessionStore(tmp_path / "sessions").list_sessions()).sessions
    assert (summary.session_id, summary.title) == ("kept", "before")


async def test_an_id_that_is_no_plain_file_name_is_listed_as_given(tmp_path: Path) -> None:
    """A session id stored under a hashed file name comes back exactly."""
    store = JsonlSessionStore(tmp_path / "sessions")
    await record(store, "Ünïcode/Id with spaces", tmp_path)
    assert ids(await store.list_sessions()) == ["Ünïcode/Id with spaces"]


async def test_a_cursor_goes_on_from_where_it_points_in_a_restarted_agent_too(
    tmp_path: Path,
) -> None:
    """The page after a cursor is the same whether the store that handed it out goes on from
    what it kept of the listing, or a new store (an agent restarted) lists afresh."""
    store = JsonlSessionStore(tmp_path / "sessions")
    for number in range(75):
        await record(store, f"s{number:02}", tmp_path)
        stamp = 1_700_000_000 + number
        os.utime(store.path_for(f"s{number:02}"), (stamp, stamp))
    first = await store.list_sessions()
    assert first.next_cursor is not None
    restarted = JsonlSessionStore(tmp_path / "sessions")
    fresh = await restarted.list_sessions(cursor=first.next_cursor)
    kept = await store.list_sessions(cursor=first.next_cursor)
    assert ids(kept) == ids(fresh) == [f"s{number:02}" for number in reversed(range(25))]
    assert kept.next_cursor is None
    assert fresh.next_cursor is None


async def test_a_listing_reads_no_record(tmp_path: Path) -> None:
    """A record whose content is no longer readable as entries is still listed from its
    summary: the listing stats records, it never reads them."""
    store = JsonlSessionStore(tmp_path / "sessions")
    await record(store, "garbled", tmp_path, title="Still listed")
    store.path_for("garbled").write_bytes(b"\xff\xfe not json at all \x00" * 1000)
    [summary] = (await store.list_sessions()).sessions
    assert (summary.session_id, summary.title) == ("garbled", "Still listed")
