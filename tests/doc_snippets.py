"""docs/integration.md's Python blocks (and blocks of other pages that build on them), run as
written, and a client linked to what serves them.

`load_snippet` runs "The whole integration" block and the blocks after the headings it is
given as one module; `linked` serves an agent on one end of a socket pair and hands the test
the SDK's client on the other, every frame recorded on a `Wire` and checked against the ACP
schema when the link closes, as `tests/acp_peer.py`'s rig checks its own.
"""

from __future__ import annotations

import asyncio
import re
import socket
import types
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import Any, cast

import anyio
from acp import PROTOCOL_VERSION
from acp.core import ClientSideConnection
from acp.schema import PromptResponse, TextContentBlock

from acp_skills.acp import GuardedTransport
from tests.acp_peer import RecordingClient, Wire, WireTransport

DOC = Path(__file__).resolve().parent.parent / "docs" / "integration.md"
HEADING = "## The whole integration"


def integration_snippet(heading: str = HEADING, page: Path = DOC) -> str:
    """The first ```python block after ``heading`` ("The whole integration" by default) of
    ``page`` (docs/integration.md by default)."""
    text = page.read_text(encoding="utf-8")
    _, found, after = text.partition(f"\n{heading}\n")
    assert found, f"{page} has no {heading!r} heading"
    match = re.search(r"^```python\n(.*?)^```$", after, re.DOTALL | re.MULTILINE)
    assert match is not None, f"no python block after {heading!r}"
    return match.group(1)


def load_snippet(*more: str) -> types.ModuleType:
    """The whole integration's block, then the blocks after the headings ``more``, run as one
    module (a later block builds on the earlier ones)."""
    module = types.ModuleType("integration_snippet")
    module.__file__ = str(DOC)
    for heading in (HEADING, *more):
        exec(compile(integration_snippet(heading), str(DOC), "exec"), module.__dict__)
    return module


# A line touches the library when it names it, reaches `skills` as an attribute or a value, or
# works on the turn `skills.turn` opened.
_USES_LIBRARY = re.compile(r"acp_skills|AcpSkills|\.skills\b|\bskills\.|\bturn\b")
_MARKED = re.compile(r"# skills\b")


def library_lines(block: str) -> list[str]:
    """The lines of ``block`` that touch `acp_skills`."""
    return [line for line in block.splitlines() if _USES_LIBRARY.search(line)]


def marked_lines(block: str) -> list[str]:
    """The lines of ``block`` whose comment marks them ``# skills``."""
    return [line for line in block.splitlines() if _MARKED.search(line)]


async def wait_for_update(wire: Wire, session_id: str, kind: str) -> None:
    """Return once the agent has sent a ``session/update`` of ``kind`` for the session."""
    await wire.wait_for(lambda: bool(wire.updates(session_id, kind)))


@asynccontextmanager
async def linked(
    serve_on: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]],
) -> AsyncIterator[tuple[ClientSideConnection, Wire]]:
    """``serve_on(reader, writer)`` on one end of a socketpair, a client on the other; every
    frame is checked against the ACP schema once both ends are closed."""
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    # The doc's agents advertise no file reads they depend on: an empty file answers any read.
    client = RecordingClient(read_text=lambda path: "")
    wire = Wire(client.changes)
    client_conn = ClientSideConnection(
        cast(Any, client), cast(Any, WireTransport(client_reader, client_writer, wire))
    )
    try:
        # Leaving the task group waits for the agent, which returns at the end of its input.
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(serve_on, agent_reader, agent_writer)
                try:
                    yield client_conn, wire
                finally:
                    await client_conn.close()
                    client_writer.close()
                    with suppress(ConnectionError):
                        await client_writer.wait_closed()
    finally:
        agent_writer.close()  # the agent's end, if what served it left it open
        with suppress(ConnectionError):
            await agent_writer.wait_closed()
    wire.assert_valid()


def serve(agent: Any) -> AbstractAsyncContextManager[tuple[ClientSideConnection, Wire]]:
    """``agent.skills.serve(agent, ...)`` on one end of a socketpair, a client on the other."""

    async def serve_on(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await agent.skills.serve(agent, GuardedTransport(reader, writer))

    return linked(serve_on)


async def first_prompt(agent: Any, cwd: Path, text: str) -> tuple[PromptResponse, Wire, str]:
    """``agent`` served: `initialize`, a `session/new` at ``cwd``, one prompt of ``text``; the
    prompt's response, the wire and the session's id."""
    async with serve(agent) as (conn, wire):
        with anyio.fail_after(30):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
            block = TextContentBlock(type="text", text=text)
            response = await conn.prompt(session_id=session.session_id, prompt=[block])
    return response, wire, session.session_id
