"""A session is never bricked by its storage (contract §11): the demo agent end to end.

The record on disk may be corrupt, or not a file at all; the state directory may be unusable
at start-up or stop accepting writes mid-session. The real agent runs in this process
(`tests.acp_peer.demo_peer`, or its ``main()`` for start-up) with a real state directory; a
restart is a new agent on the same directory. Where a check needs file permissions to mean
something, the agent runs without root (`as_nobody`), since root ignores them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from acp import RequestError

from acp_skills import JsonlSessionStore
from tests.acp_peer import DemoPeer, acp_schema, demo_peer
from tests.demo_in_process import agent_environment, run_agent
from tests.records import make_directory, make_fifo
from tests.sandbox import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

NOT_SAVED = "this conversation could not be saved"
needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX FIFOs and owners")


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A private home, state dir, skills dir and project for one test."""
    return Sandbox.create(tmp_path)


async def load(agent: DemoPeer, sandbox: Sandbox, session_id: str) -> None:
    with anyio.fail_after(30):
        await agent.conn.load_session(
            cwd=str(sandbox.project), session_id=session_id, mcp_servers=[]
        )


async def users_said(sandbox: Sandbox, session_id: str) -> list[str]:
    """The user messages in the session's record, oldest first, as the store reads them."""
    store = JsonlSessionStore(sandbox.state_dir / "sessions")
    messages = [getattr(entry, "message", None) for entry in await store.entries(session_id)]
    return [str(m["content"]) for m in messages if m is not None and m["role"] == "user"]


def log_lines(log: str, event: str) -> list[str]:
    """The agent's log lines (its stderr) that carry ``event``."""
    return [line for line in log.splitlines() if event in line]


# -- a record that cannot be decoded ---------------------------------------------------------

# Each is one line in the middle of a record; every one of them used to fail session/load.
UNDECODABLE_LINES = {
    "array-nested-100k-deep": b"[" * 100_000,
    "object-nested-100k-deep": b'{"a":' * 100_000,
    "history-nested-past-the-limit": (
        b'{"v":1,"type":"history","message":' + b'{"a":' * 150 + b"1" + b"}" * 151
    ),
    "message-of-the-wrong-type": b'{"v":1,"type":"history","message":["not","an","object"]}',
    "header-of-the-wrong-types": (
        b'{"v":1,"type":"header","reason":"initial","config":[],"system":7,"tools":{},'
        b'"messagePrefix":null}'
    ),
    "unhashable-reason": b'{"v":1,"type":"header","reason":[1]}',
    "infinite-number": b'{"v":1,"type":"history","message":{"n":1e999}}',
    "huge-version": b'{"v":' + b"9" * 5000 + b',"type":"history","message":{}}',
    "invalid-utf-8": b'{"v":1,"type":"history","message":{"content":"\xc3\x28"}}',
    "garbage": b"\x00\x01 binary \xff\xfe garbage",
}


async def test_undecodable_record_lines_are_skipped_and_the_session_keeps_working(
    sandbox: Sandbox,
) -> None:
    """Each bad line is skipped with a warning naming file and line; the next append is whole."""
    async with demo_peer(sandbox) as agent:
        session_id = await agent.open_session()
        assert await agent.ask(session_id, "hello") == "end_turn"
    path = sandbox.record_path(session_id)
    good = path.read_bytes().splitlines()
    torn = b'{"v":1,"type":"history","message":{"role":"us'
    path.write_bytes(b"\n".join([good[0], *UNDECODABLE_LINES.values(), *good[1:], torn]))
    bad_line_numbers = list(range(2, 2 + len(UNDECODABLE_LINES)))
    torn_line_number = len(good) + len(UNDECODABLE_LINES) + 1

    async with demo_peer(sandbox) as agent:
        await load(agent, sandbox, session_id)
        client = agent.client
        await client.wait_until(lambda: "user_message_chunk" in client.kinds(session_id))
        assert await agent.ask(session_id, "still there?") == "end_turn"

    skipped = log_lines(agent.log, "session_record_line_skipped")
    assert len(skipped) == len(UNDECODABLE_LINES) + 1
    for line_number, line in zip([*bad_line_numbers, torn_line_number], skipped, strict=True):
        assert f"line={line_number} " in line
        assert str(path) in line
    assert "Traceback" not in agent.log
    # The torn fragment kept its own line: the entries appended after it are whole lines.
    lines = path.read_bytes().splitlines()
    assert lines[torn_line_number - 1] == torn
    assert users_said_after(lines[torn_line_number:]) == ["still there?"]

    async with demo_peer(sandbox) as agent:
        await load(agent, sandbox, session_id)
        assert await agent.ask(session_id, "and now?") == "end_turn"
    assert await users_said(sandbox, session_id) == ["hello", "still there?", "and now?"]


def users_said_after(lines: list[bytes]) -> list[str]:
    """The user messages among raw record lines (each must be a whole entry)."""
    entries = [json.loads(line) for line in lines]
    return [
        entry["message"]["content"]
        for entry in entries
        if entry["type"] == "history" and entry["message"]["role"] == "user"
    ]


# -- a record path that is not a file --------------------------------------------------------


@needs_posix
@pytest.mark.parametrize("make", [make_fifo, make_directory], ids=["fifo", "directory"])
async def test_load_of_a_record_that_is_not_a_file_is_refused_without_blocking(
    sandbox: Sandbox, make: Callable[[Path], None]
) -> None:
    """session/load answers an internal error naming the problem; the agent keeps serving."""
    session_id = "held-elsewhere"
    path = sandbox.record_path(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    make(path)
    async with demo_peer(sandbox) as agent:
        with pytest.raises(RequestError) as refused:
            await load(agent, sandbox, session_id)
        assert refused.value.code == -32603
        reason = cast(Mapping[str, Any], refused.value.data)["reason"]
        assert reason == (f"the session record cannot be read: Not a regular file: {path}")
        other = await agent.open_session()
        assert await agent.ask(other, "hello") == "end_turn"
    assert "Traceback" not in agent.log


# -- an unusable state directory at start-up -------------------------------------------------


def start_agent(sandbox: Sandbox, *args: str) -> tuple[int, str, str]:
    """The agent's ``main()`` with ``args`` in the sandbox's environment: its exit status,
    stdout and stderr (it stops before it serves)."""
    result = run_agent(*args, env=agent_environment(sandbox.env()))
    return result.returncode, result.stdout, result.stderr


def state_is_a_file(state: Path) -> str:
    state.rmdir()
    state.write_text("not a directory")
    return f"cannot write in {state / 'sessions'}: Not a directory"


def sessions_is_a_file(state: Path) -> str:
    (state / "sessions").write_text("not a directory")
    return f"cannot write in {state / 'sessions'}: File exists"


@pytest.mark.parametrize(
    "spoil",
    [state_is_a_file, sessions_is_a_file],
    ids=["state-dir-is-a-file", "sessions-is-a-file"],
)
def test_a_state_dir_that_is_not_a_directory_stops_the_agent_at_start_up(
    sandbox: Sandbox, spoil: Callable[[Path], str]
) -> None:
    """Exit status 2 and one line on stderr saying which path is wrong and why; no traceback."""
    expected = spoil(sandbox.state_dir)
    status, out, err = start_agent(sandbox, *sandbox.args())
    assert status == 2
    assert out == ""
    assert err.splitlines() == [f"acp-skills-demo: unusable state directory: {expected}"]


def test_a_state_dir_that_cannot_be_created_stops_the_agent_at_start_up(sandbox: Sandbox) -> None:
    """A state dir below a file cannot be created: status 2, one line, no traceback."""
    blocker = sandbox.root / "blocker"
    blocker.write_text("a file")
    state = blocker / "state"
    status, _, err = start_agent(sandbox, "--state-dir", str(state))
    assert status == 2
    assert err.splitlines() == [
        f"acp-skills-demo: unusable state directory: cannot write in {state / 'sessions'}: "
        "Not a directory"
    ]


# -- without root, where permissions mean something ------------------------------------------

NOBODY = 65534


@contextmanager
def as_nobody() -> Iterator[None]:
    """This process acts as user nobody for the block when it runs as root (root ignores
    file permissions), and as itself otherwise."""
    if os.geteuid() != 0:
        yield
        return
    # What the rig builds lazily is built now: as nobody, a private checkout's packages cannot
    # be read, so a module first imported inside the block would fail to load.
    acp_schema()
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def unprivileged_sandbox() -> Iterator[Sandbox]:
    """A sandbox user nobody can reach and owns (its own when not root).

    It lives in a fresh directory of the system's temporary directory rather than below
    pytest's, whose root is kept private (0700) by every pytest run, including parallel ones.
    """
    root = Path(tempfile.mkdtemp(prefix="acp-skills-unprivileged-"))
    try:
        root.chmod(0o755)
        if os.geteuid() == 0:
            _skip_unless_others_can_enter(root)
        sandbox = Sandbox.create(root / "sandbox")
        (sandbox.state_dir / "sessions").mkdir()
        if os.geteuid() == 0:
            for directory, _, files in os.walk(root):
                os.chown(directory, NOBODY, NOBODY)
                for name in files:
                    os.chown(os.path.join(directory, name), NOBODY, NOBODY)
        yield sandbox
    finally:
        for directory, _, _ in os.walk(root):
            os.chmod(directory, 0o755)
        shutil.rmtree(root)


def _skip_unless_others_can_enter(directory: Path) -> None:
    # The agent without root must reach its sandbox; a private temporary directory (TMPDIR
    # below a 0700 home, say) would make it fail for a reason that is not the product's.
    for ancestor in directory.parents:
        mode = ancestor.stat().st_mode & 0o777
        if mode & 0o001 == 0:
            pytest.skip(
                f"user nobody cannot enter {ancestor} (mode {mode:o}), where the sandbox is"
            )


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    directory.chmod(0o555)
    try:
        yield
    finally:
        directory.chmod(0o755)


@needs_posix
def test_a_read_only_state_dir_stops_the_agent_at_start_up(unprivileged_sandbox: Sandbox) -> None:
    """A state dir the agent may not write in: status 2, one line, no traceback."""
    sandbox = unprivileged_sandbox
    sessions = sandbox.state_dir / "sessions"
    with as_nobody(), read_only(sessions):
        status, _, err = start_agent(sandbox, *sandbox.args())
    assert status == 2
    assert err.splitlines() == [
        f"acp-skills-demo: unusable state directory: cannot write in {sessions}: Permission denied"
    ]
    assert list(sessions.iterdir()) == []


@needs_posix
async def test_a_state_dir_turned_read_only_mid_session_completes_the_turn_and_tells(
    unprivileged_sandbox: Sandbox,
) -> None:
    """The reply arrives, then a notice that the conversation was not saved; it catches up."""
    sandbox = unprivileged_sandbox
    sessions = sandbox.state_dir / "sessions"
    with as_nobody():
        async with demo_peer(sandbox) as agent:
            client = agent.client
            session_id = await agent.open_session()
            with read_only(sessions):
                assert await agent.ask(session_id, "hello") == "end_turn"
                text = client.agent_text(session_id)
                assert text.startswith("I am the offline demo model")
                assert NOT_SAVED in text
                assert "Permission denied" in text
                assert not sandbox.record_path(session_id).exists()
            since = len(client.updates)
            assert await agent.ask(session_id, "saved now?") == "end_turn"
            assert NOT_SAVED not in client.agent_text(session_id, since)
    assert await users_said(sandbox, session_id) == ["hello", "saved now?"]
    assert len(log_lines(agent.log, "session_record_write_failed")) == 1


# -- a record replaced mid-session -----------------------------------------------------------


async def test_a_record_that_cannot_be_written_mid_session_loses_no_reply(
    sandbox: Sandbox,
) -> None:
    """Every turn completes and tells the person; the record catches up once writable again."""
    async with demo_peer(sandbox) as agent:
        client = agent.client
        session_id = await agent.open_session()
        assert await agent.ask(session_id, "first") == "end_turn"
        path = sandbox.record_path(session_id)
        aside = path.with_name("aside.jsonl")
        path.rename(aside)
        path.mkdir()
        for text in ("second", "third"):
            since = len(client.updates)
            assert await agent.ask(session_id, text) == "end_turn"
            reply = client.agent_text(session_id, since)
            assert reply.startswith("I am the offline demo model")
            assert reply.endswith(
                f"\n\nNote: {NOT_SAVED} (Is a directory: {path}). It goes "
                "on here, and what is missing is saved as soon as writing works again; if "
                "the agent stops first, reopening the session will not show it."
            )
        path.rmdir()
        aside.rename(path)
        since = len(client.updates)
        assert await agent.ask(session_id, "fourth") == "end_turn"
        assert NOT_SAVED not in client.agent_text(session_id, since)
    assert await users_said(sandbox, session_id) == ["first", "second", "third", "fourth"]
    assert len(log_lines(agent.log, "session_record_write_failed")) == 1
    assert "Traceback" not in agent.log
    # The restored record loads like any other.
    async with demo_peer(sandbox) as agent:
        await load(agent, sandbox, session_id)
        assert await agent.ask(session_id, "fifth") == "end_turn"
    assert (await users_said(sandbox, session_id))[-1] == "fifth"
