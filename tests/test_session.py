"""PrefixedSession: a session instance's frozen prefix, request headers and history (§8)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from acp_skills import (
    JsonlSessionStore,
    PrefixedSession,
    PrefixMessage,
    SessionPrefix,
    SkillCatalogContributor,
    SkillDefinition,
    SkillRegistry,
)
from acp_skills.model import PrefixContext, PrefixNext
from acp_skills.record import (
    HistoryEntry,
    InMemorySessionStore,
    RecordEntry,
    SessionStore,
)
from tests.events import cancelled_when
from tests.prefixes import (
    CONFIG,
    SYSTEM,
    TOOLS,
    Prepend,
    Scripted,
    headers_in,
    open_session,
    record_default_request,
    record_request,
    user,
)

pytestmark = pytest.mark.anyio


# -- freezing per session instance -----------------------------------------------------------


async def test_three_requests_over_two_turns_compose_once_and_record_one_header(
    context: PrefixContext, store: SessionStore
) -> None:
    """The prefix is composed on the first turn and reused; an unchanged header is not repeated."""
    contributor = Prepend("catalog")
    prefix = SessionPrefix()
    prefix.add(contributor)
    session = await open_session(prefix, context, store)

    # Turn 1: a tool call makes two model requests.
    await session.prefix()
    await session.advance([{"role": "user", "content": "deploy it"}])
    first = await record_default_request(session)
    await session.advance([{"role": "assistant", "content": "calling skill"}])
    assert await record_default_request(session) is None
    # Turn 2.
    await session.prefix()
    await session.advance([{"role": "user", "content": "thanks"}])
    assert await record_default_request(session) is None

    assert contributor.calls == 1
    assert first is not None
    assert first.reason == "initial"
    assert first.message_prefix == (user("catalog"),)
    assert await headers_in(store) == [first]
    assert session.last_header == first


async def test_prefix_returns_the_same_frozen_tuple_every_time(context: PrefixContext) -> None:
    """Later requests reuse the composition verbatim, the very same object."""
    prefix = SessionPrefix()
    prefix.add(Prepend("catalog"))
    session = await open_session(prefix, context, InMemorySessionStore())
    assert not session.composed
    assert session.messages == ()
    composed = await session.prefix()
    assert session.composed
    assert await session.prefix() is composed
    assert session.messages is composed


async def test_a_failing_contributor_fails_the_turn_and_nothing_is_frozen(
    context: PrefixContext, store: SessionStore
) -> None:
    """The error reaches the caller, nothing is kept or recorded, and the next turn composes."""
    contributor = Scripted(fail=True)
    prefix = SessionPrefix()
    prefix.add(contributor)
    session = await open_session(prefix, context, store)

    with pytest.raises(RuntimeError, match="contributor failed"):
        await session.prefix()
    with pytest.raises(RuntimeError, match="contributor failed"):
        await record_default_request(session)
    assert not session.composed
    assert session.last_header is None
    assert await headers_in(store) == []

    contributor.fail = False
    assert await session.prefix() == (user("scripted"),)
    header = await record_default_request(session)
    assert header is not None
    assert header.reason == "initial"
    # Two failed compositions, one that succeeded; the request reused the frozen prefix.
    assert contributor.calls == 3


async def test_cancelling_during_composition_keeps_nothing(
    context: PrefixContext, store: SessionStore
) -> None:
    """A turn cancelled while composing leaves the instance uncomposed; the next turn composes."""
    contributor = Scripted(hold=True)
    prefix = SessionPrefix()
    prefix.add(contributor)
    session = await open_session(prefix, context, store)

    with anyio.fail_after(5):
        assert await cancelled_when(contributor.entered, lambda: record_default_request(session))
        assert contributor.calls == 1
        assert not session.composed
        assert session.last_header is None

        contributor.hold = False
        assert await session.prefix() == (user("scripted"),)
    assert contributor.calls == 2
    assert await headers_in(store) == []


async def test_a_running_session_keeps_its_prefix_when_contributors_change(
    context: PrefixContext,
) -> None:
    """Contributors added or removed later reach new sessions only."""
    prefix = SessionPrefix()
    remove = prefix.add(Prepend("old"))
    store = InMemorySessionStore()
    running = await open_session(prefix, context, store)
    await running.prefix()

    remove()
    prefix.add(Prepend("new"))
    assert await running.prefix() == (user("old"),)
    assert await record_default_request(running) is not None
    assert await record_default_request(running) is None

    other = PrefixContext(session_id="s2", cwd=context.cwd, tool_names=context.tool_names)
    fresh = await open_session(prefix, other, store)
    assert await fresh.prefix() == (user("new"),)


async def test_mutating_contributed_objects_after_composition_changes_nothing(
    context: PrefixContext, store: SessionStore
) -> None:
    """The frozen prefix and the recorded header are copies, not views of the caller's data."""
    returned: list[PrefixMessage] = []

    async def keeper(context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        returned.append(user("catalog"))
        return returned

    prefix = SessionPrefix()
    prefix.add(keeper)
    session = await open_session(prefix, context, store)
    config: dict[str, Any] = {"model": {"name": "m1"}, "stop": ["END"]}
    tools: list[dict[str, Any]] = [{"name": "skill", "parameters": {"required": ["name"]}}]
    recorded = await record_request(session, config=config, system=SYSTEM, tools=tools)
    assert recorded is not None

    returned.append(user("sneaked in"))
    config["model"]["name"] = "m2"
    config["stop"].append("STOP")
    tools[0]["parameters"]["required"].append("path")
    tools.append({"name": "extra"})

    assert session.messages == (user("catalog"),)
    assert session.last_header == recorded
    assert recorded.to_json()["config"] == {"model": {"name": "m1"}, "stop": ["END"]}
    assert recorded.to_json()["tools"] == [{"name": "skill", "parameters": {"required": ["name"]}}]
    assert await headers_in(store) == [recorded]
    # The mutated values are a genuinely different request, recorded as a change.
    changed = await record_request(session, config=config, system=SYSTEM, tools=tools)
    assert changed is not None
    assert changed.reason == "change"
    assert changed.message_prefix == (user("catalog"),)


async def test_a_reopened_session_composes_afresh_and_records_resume(
    context: PrefixContext, store: SessionStore
) -> None:
    """session/load is a new instance: it composes again and its first header says ``resume``."""
    contributor = Prepend("catalog v1")
    prefix = SessionPrefix()
    prefix.add(contributor)
    first = await open_session(prefix, context, store)
    await first.advance([{"role": "user", "content": "hello"}])
    initial = await record_default_request(first)
    await first.advance([{"role": "assistant", "content": "hi"}])

    contributor.text = "catalog v2"
    second = await open_session(prefix, context, store)
    assert not second.composed
    assert second.last_header == initial
    assert second.history == (
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
    )
    # Even an identical header is recorded once per instance, so the record shows the resume.
    contributor.text = "catalog v1"
    resumed = await record_default_request(second)
    assert contributor.calls == 2
    assert resumed is not None
    assert resumed.reason == "resume"
    assert await record_default_request(second) is None
    assert [header.reason for header in await headers_in(store)] == [
        "initial",
        "resume",
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"system": "You are terse."},
        {"tools": [*TOOLS, {"name": "search", "parameters": {"type": "object"}}]},
        {"tools": []},
        {"config": {**CONFIG, "temperature": 0.9}},
    ],
    ids=["system", "tool-added", "tools-removed", "config"],
)
async def test_a_changed_request_records_reason_change(
    context: PrefixContext, store: SessionStore, change: dict[str, Any]
) -> None:
    """A different system prompt, tool list or config appends one ``change`` header."""
    session = await open_session(SessionPrefix(), context, store)
    await record_default_request(session)
    request: dict[str, Any] = {"config": CONFIG, "system": SYSTEM, "tools": TOOLS, **change}
    changed = await record_request(session, **request)
    assert changed is not None
    assert changed.reason == "change"
    assert await record_request(session, **request) is None
    # Going back is a change too.
    assert await record_default_request(session) is not None
    reasons = [header.reason for header in await headers_in(store)]
    assert reasons == ["initial", "change", "change"]


async def test_a_request_whose_config_is_not_json_is_refused(context: PrefixContext) -> None:
    """A header must be recordable; a bad value fails before anything is written."""
    store = InMemorySessionStore()
    session = await open_session(SessionPrefix(), context, store)
    with pytest.raises(TypeError, match="config"):
        await record_request(session, config={"client": object()}, system=SYSTEM, tools=TOOLS)
    with pytest.raises(TypeError, match="tools"):
        await record_request(session, config=CONFIG, system=SYSTEM, tools={"name": "skill"})
    assert not await store.exists("s1")


# -- history ---------------------------------------------------------------------------------


async def test_the_stored_history_never_contains_the_prefix(
    context: PrefixContext, tmp_path: Path
) -> None:
    """The prefix is recorded only in the header; history lines hold only the conversation."""
    store = JsonlSessionStore(tmp_path / "sessions")
    prefix = SessionPrefix()
    prefix.add(Prepend("THE-CATALOG"))
    session = await open_session(prefix, context, store)
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": "use the deploy skill"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "skill", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "body"},
    ]
    await session.advance([conversation[0]])
    await record_default_request(session)
    for message in conversation[1:]:
        await session.advance([message])

    assert session.history == tuple(conversation)
    entries = await store.entries("s1")
    assert [e.message for e in entries if isinstance(e, HistoryEntry)] == conversation
    lines = [json.loads(line) for line in store.path_for("s1").read_text().splitlines()]
    assert [line["type"] for line in lines] == ["history", "header", "history", "history"]
    for line in lines:
        assert ("THE-CATALOG" in json.dumps(line)) == (line["type"] == "header")


async def test_request_messages_are_prefix_then_history(context: PrefixContext) -> None:
    """A request's messages are the frozen prefix as role/content, then the history."""
    prefix = SessionPrefix()
    prefix.add(Prepend("catalog"))
    session = await open_session(prefix, context, InMemorySessionStore())
    request = {"config": CONFIG, "system": SYSTEM, "tools": TOOLS}
    messages = await session.advance([{"role": "user", "content": "hi"}], request)
    assert messages == [
        {"role": "user", "content": "catalog"},
        {"role": "user", "content": "hi"},
    ]
    messages[1]["content"] = "changed"
    messages.append({"role": "user", "content": "extra"})
    assert session.history == ({"role": "user", "content": "hi"},)


async def test_the_history_cannot_be_edited_through_what_it_gives(
    context: PrefixContext,
) -> None:
    """Recorded messages cannot be edited through ``history``: it gives copies."""
    session = await open_session(SessionPrefix(), context, InMemorySessionStore())
    source: dict[str, Any] = {"role": "user", "content": "hi"}
    await session.advance([source])
    source["content"] = "changed"
    message: Any = session.history[0]
    message["content"] = "edited"
    assert session.history == ({"role": "user", "content": "hi"},)


async def test_a_failed_history_append_leaves_the_history_unchanged(
    context: PrefixContext,
) -> None:
    """A message the record refuses does not appear in ``history``."""
    session = await open_session(SessionPrefix(), context, InMemorySessionStore())
    with pytest.raises(ValueError, match="history message"):
        await session.advance([{"score": float("nan")}])
    assert session.history == ()


# -- a record that stops taking writes --------------------------------------------------------


@contextmanager
def record_replaced_by_a_directory(path: Path) -> Iterator[None]:
    """While inside, the record file is set aside and a directory stands in its place."""
    aside = path.with_name("aside")
    path.rename(aside)
    path.mkdir()
    try:
        yield
    finally:
        path.rmdir()
        aside.rename(path)


def said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_a_record_that_fails_to_write_keeps_the_conversation_and_catches_up(
    context: PrefixContext, tmp_path: Path
) -> None:
    """Entries the record refused stay in the session and are written first, in order, later."""
    store = JsonlSessionStore(tmp_path / "sessions")
    session = await open_session(SessionPrefix(), context, store)
    await session.advance([said("one")])
    assert session.save_error is None
    with capture_logs() as logs, record_replaced_by_a_directory(store.path_for("s1")):
        await session.advance([said("two")])
        failed = session.save_error
        header = await record_default_request(session)
        await session.advance([said("three")])
        assert session.save_error is not None
    assert isinstance(failed, OSError)
    assert failed.strerror == "Is a directory"
    assert session.history == (said("one"), said("two"), said("three"))
    assert session.last_header == header
    assert [entry["event"] for entry in logs] == ["session_record_write_failed"]
    assert logs[0]["unsaved"] == 1

    with capture_logs() as logs:
        await session.advance([said("four")])
    assert session.save_error is None
    assert [entry["event"] for entry in logs] == ["session_record_caught_up"]
    entries = await store.entries("s1")
    assert [getattr(entry, "message", entry) for entry in entries] == [
        said("one"),
        said("two"),
        header,
        said("three"),
        said("four"),
    ]


class RefusesOnce(InMemorySessionStore):
    """A store whose next append fails with ``error``, then works again."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error: BaseException | None = error
        self.stored: list[RecordEntry] = []

    async def append(self, session_id: str, entry: RecordEntry) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        self.stored.append(entry)
        await super().append(session_id, entry)


async def test_a_record_failure_that_is_not_storage_still_fails_the_append(
    context: PrefixContext,
) -> None:
    """Only OSErrors are kept for later; any other failure propagates and keeps nothing."""
    record = RefusesOnce(RuntimeError("a bug in the store"))
    session = PrefixedSession(SessionPrefix(), context, record)
    with pytest.raises(RuntimeError, match="a bug in the store"):
        await session.advance([said("lost")])
    assert session.history == ()
    assert session.save_error is None
    await session.advance([said("kept")])
    assert [getattr(entry, "message", None) for entry in record.stored] == [said("kept")]


async def test_a_failure_while_catching_up_keeps_the_older_entries_waiting(
    context: PrefixContext,
) -> None:
    """A non-storage failure while writing the backlog drops only the new entry."""
    record = RefusesOnce(OSError(28, "No space left on device"))
    session = PrefixedSession(SessionPrefix(), context, record)
    await session.advance([said("waiting")])
    assert session.save_error is not None
    record.error = RuntimeError("a bug in the store")
    with pytest.raises(RuntimeError, match="a bug in the store"):
        await session.advance([said("refused")])
    assert session.history == (said("waiting"),)
    await session.advance([said("next")])
    assert session.save_error is None
    assert [getattr(entry, "message", None) for entry in record.stored] == [
        said("waiting"),
        said("next"),
    ]


# -- with the real skill catalog -------------------------------------------------------------


async def test_the_catalog_is_frozen_for_a_running_session(context: PrefixContext) -> None:
    """A skill registered later is absent from a running session's catalog, present in a new one."""
    registry = SkillRegistry()
    registry.register(SkillDefinition(name="deploy", description="Ship it", content="steps"))
    prefix = SessionPrefix()
    prefix.add(SkillCatalogContributor(registry))
    store = InMemorySessionStore()
    running = await open_session(prefix, context, store)
    (catalog,) = await running.prefix()
    assert catalog.role == "user"
    assert "`deploy`" in catalog.text

    registry.register(SkillDefinition(name="review", description="Check it", content="steps"))
    assert await running.prefix() == (catalog,)
    assert await record_default_request(running) is not None
    assert await record_default_request(running) is None

    other = PrefixContext(session_id="s2", cwd=context.cwd, tool_names=context.tool_names)
    (fresh,) = await (await open_session(prefix, other, store)).prefix()
    assert "`review`" in fresh.text


async def test_no_catalog_for_a_session_without_the_skill_tool(context: PrefixContext) -> None:
    """A session that cannot call the skill tool gets no catalog in its prefix."""
    registry = SkillRegistry()
    registry.register(SkillDefinition(name="deploy", description="Ship it", content="steps"))
    prefix = SessionPrefix()
    prefix.add(SkillCatalogContributor(registry))
    prefix.add(Prepend("other"))
    toolless = PrefixContext(session_id="s1", cwd=context.cwd, tool_names=frozenset())
    session = await open_session(prefix, toolless, InMemorySessionStore())
    assert await session.prefix() == (user("other"),)


async def test_an_instance_replacing_one_behind_its_record_takes_over_what_waits(
    context: PrefixContext, tmp_path: Path
) -> None:
    """The successor's history holds the unsaved turn, and its next write saves it, once."""
    record = RefusesOnce(OSError(28, "No space left on device"))
    old = PrefixedSession(SessionPrefix(), context, record)
    await old.advance([said("one")])  # refused: waits in memory
    record.error = OSError(28, "No space left on device")  # and still refused at the takeover
    new = await PrefixedSession.open(SessionPrefix(), context, record, replacing=old)
    assert new.history == (said("one"),)
    assert (new.unsaved, isinstance(new.save_error, OSError)) == (1, True)
    await new.advance([said("two")])
    assert (new.unsaved, new.save_error, old.unsaved) == (0, None, 0)  # one shared queue
    assert [getattr(entry, "message", entry) for entry in record.stored] == [
        said("one"),
        said("two"),
    ]


async def test_a_replacing_instance_first_writes_what_waits(
    context: PrefixContext, tmp_path: Path
) -> None:
    """Writing works again by the time of the replacement: the entries are written, not lost."""
    store = JsonlSessionStore(tmp_path / "sessions")
    old = await open_session(SessionPrefix(), context, store)
    await old.advance([said("one")])
    with record_replaced_by_a_directory(store.path_for("s1")):
        await old.advance([said("two")])
    new = await PrefixedSession.open(SessionPrefix(), context, store, replacing=old)
    assert new.history == (said("one"), said("two"))
    assert (new.unsaved, new.save_error) == (0, None)
    entries = await store.entries("s1")
    assert [getattr(entry, "message", entry) for entry in entries] == [said("one"), said("two")]


async def test_flush_writes_what_waits_once_writing_works(
    context: PrefixContext, tmp_path: Path
) -> None:
    """`flush` says why entries still wait, then saves them when it can."""
    store = JsonlSessionStore(tmp_path / "sessions")
    session = await open_session(SessionPrefix(), context, store)
    await session.advance([said("one")])
    with record_replaced_by_a_directory(store.path_for("s1")):
        await session.advance([said("two")])
        assert isinstance(await session.flush(), OSError)
    assert await session.flush() is None
    entries = await store.entries("s1")
    assert [getattr(entry, "message", entry) for entry in entries] == [said("one"), said("two")]
