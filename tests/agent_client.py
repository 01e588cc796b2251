"""Drive the demo agent as a real subprocess over stdio, with the official ACP SDK client.

For what only a process shows; everything else drives the agent in this process
(`tests.acp_peer.demo_peer`), which is much cheaper (a process spends a second or more in
imports before it answers).

* `RecordingClient`: a plain ACP client (not a subclass of the SDK's ``Client`` protocol) that
  records every ``session/update`` and, as a connection observer, every JSON-RPC frame in wire
  order; `RecordingClient.wait_until` waits for a condition without sleeping.
* `spawn_agent`: starts ``python -m demo_agent`` with explicit arguments and environment and
  yields an `Agent` ``(conn, proc, client)``, initialized unless asked otherwise.
* `Sandbox`: one test's private world (`tests.sandbox.Sandbox`), with `Sandbox.spawn`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeAlias, cast

import anyio
from acp import RequestError
from acp.connection import StreamEvent
from acp.core import ClientSideConnection
from acp.schema import (
    AudioContentBlock,
    ClientCapabilities,
    DeniedOutcome,
    EmbeddedResourceContentBlock,
    FileSystemCapabilities,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ResourceContentBlock,
    TextContentBlock,
)
from acp.stdio import spawn_agent_process

from tests import sandbox
from tests.sandbox import write_skill
from tests.updates import SessionUpdates

__all__ = [
    "AGENT_COMMAND",
    "Agent",
    "Frame",
    "PromptBlock",
    "RecordingClient",
    "Sandbox",
    "initialize_agent",
    "spawn_agent",
    "text_prompt",
    "write_skill",
]

AGENT_COMMAND: tuple[str, ...] = (sys.executable, "-m", "demo_agent")
"""How the agent is launched: this interpreter, so the test's installed packages are used."""

# A safety net only: every wait ends on an event; a loaded machine may take seconds per step.
DEFAULT_WAIT_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Frame:
    """One JSON-RPC frame as it crossed the wire: ``incoming`` (agent -> client) or ``outgoing``."""

    direction: str
    message: dict[str, Any]


class RecordingClient(SessionUpdates):
    """An ACP client that records what the agent sends and answers file reads from disk."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.frames: list[Frame] = []
        self.reads: list[str] = []
        self._changed = asyncio.Event()

    # -- the client side of ACP ------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._notify()

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise RequestError.resource_not_found(path) from error
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    async def request_permission(self, **kwargs: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # -- recording -------------------------------------------------------------------------------

    def observe(self, event: StreamEvent) -> None:
        """A connection observer: record the frame in wire order."""
        self.frames.append(Frame(event.direction.value, event.message))
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(
        self, predicate: Callable[[], bool], within: float = DEFAULT_WAIT_SECONDS
    ) -> None:
        """Return once ``predicate()`` holds, re-checking after every update or frame.

        Raises:
            TimeoutError: it did not hold within ``within`` seconds.
        """
        with anyio.fail_after(within):
            while not predicate():
                await self._changed.wait()

    def frame_index(self, predicate: Callable[[Frame], bool]) -> int:
        """The position of the first frame matching ``predicate``.

        Raises:
            LookupError: no frame matches.
        """
        for index, frame in enumerate(self.frames):
            if predicate(frame):
                return index
        raise LookupError("no matching frame")

    def frame_indexes(self, predicate: Callable[[Frame], bool]) -> list[int]:
        """The positions of every frame matching ``predicate``."""
        return [index for index, frame in enumerate(self.frames) if predicate(frame)]

    def response_index(self, method: str, occurrence: int = -1) -> int:
        """The position of the agent's response to our ``occurrence``-th ``method`` request."""
        requests = [
            frame.message["id"]
            for frame in self.frames
            if frame.direction == "outgoing"
            and frame.message.get("method") == method
            and "id" in frame.message
        ]
        request_id = requests[occurrence]
        return self.frame_index(
            lambda frame: (
                frame.direction == "incoming"
                and frame.message.get("id") == request_id
                and "method" not in frame.message
            )
        )


class Agent(NamedTuple):
    """A running agent: the SDK connection, the child process and the recording client."""

    conn: ClientSideConnection
    proc: asyncio.subprocess.Process
    client: RecordingClient


async def initialize_agent(conn: ClientSideConnection) -> InitializeResponse:
    """``initialize`` as an editor that can read files would send it."""
    return await conn.initialize(
        protocol_version=1,
        client_capabilities=ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=False)
        ),
        client_info=Implementation(name="acp-skills-tests", version="0"),
    )


SHUTDOWN_SECONDS = 30.0


@asynccontextmanager
async def spawn_agent(
    *args: str,
    env: Mapping[str, str] | None = None,
    client: RecordingClient | None = None,
    initialize: bool = True,
    stderr: int | IO[Any] | None = None,
    cwd: str | Path | None = None,
) -> AsyncIterator[Agent]:
    """Start ``python -m demo_agent *args`` and connect the SDK client to its stdio.

    Args:
        args: the agent's command-line arguments.
        env: variables for the child, merged over the SDK's trimmed environment (HOME, PATH,
            ...); nothing else from the test's environment reaches it.
        client: the recording client to use (a new one by default).
        initialize: send ``initialize`` before yielding.
        stderr: where the child's stderr goes; inherited by default. Never a pipe nobody
            reads: a full pipe would block the agent.
        cwd: the child's working directory.

    On exit the SDK closes the agent's stdin and waits for it to exit (then, after
    ``SHUTDOWN_SECONDS``, terminates it).
    """
    client = client if client is not None else RecordingClient()
    command, *prefix = AGENT_COMMAND
    async with spawn_agent_process(
        cast(Any, client),
        command,
        *prefix,
        *args,
        env=dict(env or {}),
        cwd=cwd,
        # The SDK waits this long for the agent to exit on its own once stdin closes, then
        # terminates it: the default 2 s is too short for a loaded machine, and a test that
        # checks a clean exit would see -15. The wait ends when the process does.
        transport_kwargs={"stderr": stderr, "shutdown_timeout": SHUTDOWN_SECONDS},
        observers=[client.observe],
    ) as (conn, proc):
        if initialize:
            await initialize_agent(conn)
        yield Agent(conn, proc, client)


class Sandbox(sandbox.Sandbox):
    """`tests.sandbox.Sandbox`, plus starting the agent in it as a process."""

    __slots__ = ()

    def spawn(
        self,
        *extra_args: str,
        env: Mapping[str, str] | None = None,
        client: RecordingClient | None = None,
        initialize: bool = True,
        stderr: int | IO[Any] | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        """`spawn_agent` with this sandbox's arguments and environment (an async context)."""
        return spawn_agent(
            *self.args(*extra_args),
            env=self.env(env),
            client=client,
            initialize=initialize,
            stderr=stderr,
        )


PromptBlock: TypeAlias = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
"""Any block a ``session/prompt`` may carry."""


def text_prompt(text: str) -> list[PromptBlock]:
    """A prompt of one text block."""
    return [TextContentBlock(type="text", text=text)]
