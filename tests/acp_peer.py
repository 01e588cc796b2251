"""The ACP test rig: an agent and a client in this process, over a real ACP connection.

The link is a `socket.socketpair()`; each side is the SDK's own connection, so every message
crosses real JSON framing. Two kinds of agent are served:

* `connected`: any `AcpSkills`-based agent (`SkillsAgent`, `ScriptedModelAgent`, or a test's
  own), mounted as an agent author mounts it on their own connection (`AcpSkills.attach` and
  `AcpSkills.observe`).
* `demo_agent_peer` (and `demo_peer`, the same over a `Sandbox`): the REAL demo agent, built
  from its command line and environment by ``demo_agent.__main__`` (`parse_args`,
  `build_provider`, `build_agent`) and served by `AcpSkills.serve` over its `GuardedTransport`,
  as ``main()`` serves it on stdio (`tests.demo_in_process`, which the raw-lines rigs share);
  its logging is configured as ``main()`` configures it, its MCP servers may run in this
  process (``mcp_transport``); only stdio and the signal handlers are left out, which the
  robustness tier tests with a process.

The client (`RecordingClient`) answers ``session/request_permission`` with any outcome
(`ANSWERS`), answers ``fs/read_text_file`` with marker text or from disk, and records every
update. Its transport (`WireTransport`) records every frame in wire order (`Wire`); when the
pair closes, each line the agent wrote must be a well-formed frame (strict UTF-8, JSON-RPC, no
lone surrogate) and every frame of both sides must match the ACP schema (`acp_schema`), as
the conformance suite checks them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import itertools
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, cast

import anyio
import structlog
from acp import PROTOCOL_VERSION, RequestError
from acp import meta as acp_meta
from acp import schema as acp_schema_models
from acp.core import AgentSideConnection, ClientSideConnection
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
)
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from acp_skills import (
    LocalSkillProvider,
    SkillLookupOptions,
    SkillRegistry,
    ToolResult,
    render_skill_content,
)
from acp_skills.acp import AcpSkills, PromptTurn
from demo_agent.logs import configure_logging
from demo_agent.start_files import open_log_file
from tests.cli_runner import environment
from tests.conformance.wire import AGENT, CLIENT, PROTOCOL, FrameLog, Schema
from tests.demo_in_process import (
    agent_environment,
    build_demo_agent,
    demo_args,
    logging_as_it_was,
    serve_demo,
)
from tests.events import WAIT_SECONDS as WAIT_SECONDS  # re-exported: the rig's safety net
from tests.events import Changes
from tests.raw_agent import frame_problems
from tests.sandbox import Sandbox
from tests.updates import SessionUpdates

SYSTEM = "You are the test agent."
CONFIG: dict[str, Any] = {"model": "scripted"}
CLIENT_MARKER = "READ BY THE CLIENT:"
GUIDE_ON_DISK = "# Guide\nRead me from disk.\n"
METHODS = ["_skills/list", "_skills/prefix", "_skills/reload"]
DEPLOY_RAW_DESCRIPTION = "Deploy the app\n   to\tproduction."
# The library's built-in `/skills`, advertised after the skills' own commands.
SKILLS_BUILTIN = {
    "name": "skills",
    "description": "Show the skills available here and any problems with them",
}
# Every user-invocable skill of the fixture set, as the editor receives it (sorted by name),
# then the built-in.
COMMANDS = [
    {"name": "compare", "description": "Compare a < b & c"},
    {"name": "deploy", "description": "Deploy the app to production.", "input": {"hint": "[env]"}},
    {"name": "secret", "description": "Only a person may run this."},
    SKILLS_BUILTIN,
]
# The SDK's 1.x line withdraws a request of the agent's whose task is cancelled (a trust question
# cancelled with its turn) with `$/cancel_request`; on 0.12.x it stays pending at the client.
SDK_WITHDRAWS_CANCELLED_REQUESTS = "cancel_request" in getattr(acp_meta, "PROTOCOL_METHODS", {})


# -- the ACP schema ----------------------------------------------------------------------------

# Each method the rig's agents and client use: its request (or notification) model, its
# response model, and the side that handles it. The SDK's models are generated from the ACP
# schema; a method not listed here is reported as not ACP, so a new one must be added.
_METHODS: dict[str, tuple[type[BaseModel], type[BaseModel] | None, str]] = {
    "initialize": (
        acp_schema_models.InitializeRequest,
        acp_schema_models.InitializeResponse,
        AGENT,
    ),
    "session/new": (
        acp_schema_models.NewSessionRequest,
        acp_schema_models.NewSessionResponse,
        AGENT,
    ),
    "session/load": (
        acp_schema_models.LoadSessionRequest,
        acp_schema_models.LoadSessionResponse,
        AGENT,
    ),
    "session/resume": (
        acp_schema_models.ResumeSessionRequest,
        acp_schema_models.ResumeSessionResponse,
        AGENT,
    ),
    "session/close": (
        acp_schema_models.CloseSessionRequest,
        acp_schema_models.CloseSessionResponse,
        AGENT,
    ),
    "session/list": (
        acp_schema_models.ListSessionsRequest,
        acp_schema_models.ListSessionsResponse,
        AGENT,
    ),
    "session/prompt": (
        acp_schema_models.PromptRequest,
        acp_schema_models.PromptResponse,
        AGENT,
    ),
    "session/cancel": (acp_schema_models.CancelNotification, None, AGENT),
    # Either side withdraws a request of its own with it (the SDK's 1.x line sends it when a
    # request's task is cancelled: a trust question cancelled with its turn).
    "$/cancel_request": (acp_schema_models.CancelRequestNotification, None, PROTOCOL),
    "session/update": (acp_schema_models.SessionNotification, None, CLIENT),
    "session/request_permission": (
        acp_schema_models.RequestPermissionRequest,
        acp_schema_models.RequestPermissionResponse,
        CLIENT,
    ),
    "fs/read_text_file": (
        acp_schema_models.ReadTextFileRequest,
        acp_schema_models.ReadTextFileResponse,
        CLIENT,
    ),
    "fs/write_text_file": (
        acp_schema_models.WriteTextFileRequest,
        acp_schema_models.WriteTextFileResponse,
        CLIENT,
    ),
}


@functools.cache
def acp_schema() -> Schema:
    """The ACP schema as the SDK's models spell it (JSON Schema 2020-12), in the form the
    conformance suite's `FrameLog` reads: ``$defs`` marked with ``x-method`` and ``x-side``."""
    models: list[type[BaseModel]] = [acp_schema_models.Error]
    for request, response, _ in _METHODS.values():
        models += [request] if response is None else [request, response]
    _, document = models_json_schema(
        [(model, "validation") for model in models], ref_template="#/$defs/{model}"
    )
    definitions = document["$defs"]
    for method, (request, response, side) in _METHODS.items():
        definitions[request.__name__] |= {"x-method": method, "x-side": side}
        if response is not None:
            definitions[response.__name__] |= {"x-method": method, "x-side": side}
    definitions["RequestId"] = {
        "anyOf": [{"type": "null"}, {"type": "integer"}, {"type": "string"}]
    }
    return Schema(document)


# -- the wire ----------------------------------------------------------------------------------


class Frame(NamedTuple):
    """One JSON-RPC frame as it crossed the wire: ``incoming`` (agent -> client) or
    ``outgoing``."""

    direction: str
    message: dict[str, Any]


class Wire:
    """Every frame the client sent or received, in order, with a way to wait for more."""

    def __init__(self, changes: Changes | None = None) -> None:
        self.frames: list[Frame] = []
        # What was wrong with each line the agent wrote that was not a well-formed frame.
        self.malformed: list[str] = []
        # Every line the agent wrote, byte for byte (its end of line left out).
        self.written: list[bytes] = []
        self.changes = changes if changes is not None else Changes()

    def add(self, direction: str, message: dict[str, Any]) -> None:
        self.frames.append(Frame(direction, message))
        self.changes.notify()

    async def wait_for(self, predicate: Callable[[], bool], within: float = WAIT_SECONDS) -> None:
        await self.changes.until(predicate, within)

    def incoming(self) -> list[dict[str, Any]]:
        return [message for direction, message in self.frames if direction == "incoming"]

    def updates(self, session_id: str, kind: str) -> list[dict[str, Any]]:
        """The ``session/update`` payloads of one kind the agent sent for a session."""
        return [
            message["params"]["update"]
            for message in self.incoming()
            if message.get("method") == "session/update"
            and message["params"]["sessionId"] == session_id
            and message["params"]["update"]["sessionUpdate"] == kind
        ]

    def commands(self, session_id: str) -> list[list[dict[str, Any]]]:
        """Every ``available_commands_update`` for a session: the advertised command lists."""
        return [
            update["availableCommands"]
            for update in self.updates(session_id, "available_commands_update")
        ]

    def frame_indexes(self, predicate: Callable[[Frame], bool]) -> list[int]:
        """The positions of every frame matching ``predicate``."""
        return [index for index, frame in enumerate(self.frames) if predicate(frame)]

    def response_index(self, method: str, occurrence: int = -1) -> int:
        """The position of the agent's response to our ``occurrence``-th ``method`` request."""
        requests = [
            message["id"]
            for direction, message in self.frames
            if direction == "outgoing" and message.get("method") == method and "id" in message
        ]
        request_id = requests[occurrence]
        [index] = self.frame_indexes(
            lambda frame: (
                frame.direction == "incoming"
                and frame.message.get("id") == request_id
                and "method" not in frame.message
            )
        )
        return index

    def request_ids(self, method: str) -> list[Any]:
        """The ids of the agent's ``method`` requests, in order."""
        return [m["id"] for m in self.incoming() if m.get("method") == method and "id" in m]

    def withdrawn(self) -> list[Any]:
        """The ids of the requests the agent withdrew with ``$/cancel_request``, in order."""
        return [
            m["params"]["requestId"]
            for m in self.incoming()
            if m.get("method") == "$/cancel_request" and "id" not in m
        ]

    def answer_to(self, request_id: Any) -> dict[str, Any] | None:
        """The client's response to the agent's request ``request_id``, if it sent one."""
        answers = [
            message
            for direction, message in self.frames
            if direction == "outgoing"
            and "method" not in message
            and message.get("id") == request_id
        ]
        return answers[0] if answers else None

    def response_to(self, method: str) -> dict[str, Any]:
        """The response frame to the client's last request of ``method``."""
        return self.frames[self.response_index(method)].message

    def problems(self) -> list[str]:
        """Every malformed line the agent wrote, and every frame that breaks the ACP schema."""
        log = FrameLog(acp_schema())
        for direction, message in self.frames:
            log.add(AGENT if direction == "incoming" else CLIENT, message)
        return [*self.malformed, *log.problems()]

    def assert_valid(self) -> None:
        problems = self.problems()
        assert not problems, "frames that are not well-formed ACP:\n" + "\n".join(problems[:20])


class WireTransport:
    """The client's end of the link, as a message-level transport of the SDK's connection:
    it writes frames as the SDK does and records each frame and each malformed line."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire: Wire):
        self._reader, self._writer, self._wire = reader, writer, wire

    async def send(self, message: dict[str, Any]) -> None:
        self._wire.add("outgoing", message)
        self._writer.write(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
        await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._reader.readline()
            if not line:
                return None
            if not line.strip():
                continue
            self._wire.written.append(line.rstrip(b"\r\n"))
            problems = frame_problems(line.rstrip(b"\r\n"))
            self._wire.malformed += [f"{problem}: {line[:200]!r}" for problem in problems]
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self._wire.add("incoming", message)
                return message

    async def close(self) -> None:
        self._writer.close()
        with suppress(ConnectionError):
            await self._writer.wait_closed()


# -- the client --------------------------------------------------------------------------------

# How the rig's client answers `session/request_permission`: one of the option ids, or these.
ANSWERS = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
    "cancelled",  # the editor's "cancelled" outcome
    "error",  # a JSON-RPC error answer
    "hold",  # never answers; the turn's cancellation ends the wait
)


def read_from_disk(path: str) -> str:
    """How an editor answers ``fs/read_text_file``: the file's text."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise RequestError.resource_not_found(path) from error


class RecordingClient(SessionUpdates):
    """An ACP client that records what the agent sends it.

    It answers ``fs/read_text_file`` with ``read_text(path)`` (marker text naming the path by
    default, so its use is visible), and each trust question as told: the next of ``answers``,
    else ``answer`` (one of `ANSWERS`). ``questions`` holds every question's parameters, in
    order; ``updates`` every ``session/update`` as ``(session id, update)``.
    """

    def __init__(
        self, answer: str = "error", read_text: Callable[[str], str] | None = None
    ) -> None:
        self.reads: list[str] = []
        self.read_text = read_text
        self.answer = answer
        self.answers: list[str] = []
        self.questions: list[dict[str, Any]] = []
        self.asked = anyio.Event()  # set at the first question (``hold`` tests wait on it)
        self.updates: list[tuple[str, Any]] = []
        self.changes = Changes()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changes.notify()

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        if self.read_text is None:
            return ReadTextFileResponse(content=f"{CLIENT_MARKER} {path}")
        text = self.read_text(path)
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)

    async def request_permission(self, **kwargs: Any) -> RequestPermissionResponse:
        self.questions.append(kwargs)
        self.asked.set()
        return await permission_answer(self.answers.pop(0) if self.answers else self.answer)

    # -- what was recorded -------------------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool], within: float = WAIT_SECONDS) -> None:
        """Return once ``predicate()`` holds, re-checking after every update or frame."""
        await self.changes.until(predicate, within)

    def tool_results(self, session_id: str, since: int = 0) -> list[tuple[str, str]]:
        """``(status, text)`` of the session's finished tool calls."""
        return [
            (update.status, update.content[0].content.text)
            for update in self.tool_updates(session_id, since)
            if update.session_update == "tool_call_update"
        ]


async def permission_answer(answer: str) -> RequestPermissionResponse:
    """A client's answer to ``session/request_permission``: ``answer`` is one of `ANSWERS`."""
    if answer not in ANSWERS:
        raise AssertionError(f"no such answer to a trust question: {answer!r}")
    if answer == "error":
        raise RequestError.internal_error({"reason": "the editor failed"})
    if answer == "hold":
        await anyio.sleep_forever()
    if answer == "cancelled":
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))


# -- the test agent ----------------------------------------------------------------------------


class SkillsAgent:
    """The smallest agent that mounts `AcpSkills` through its turn API.

    Its "model" is a script: every turn it makes one request, then calls the ``skill`` tool once
    per entry of ``tool_calls`` (the decoded arguments), then ends the turn.
    """

    def __init__(self, skills: AcpSkills) -> None:
        self.skills = skills
        self.tool_calls: list[object] = []
        self.turns: list[PromptTurn] = []
        self.results: list[ToolResult] = []
        self._ids = itertools.count(1)

    def on_connect(self, conn: Any) -> None:
        self.skills.attach(conn)

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        meta = self.skills.initialize(client_capabilities)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=True, field_meta=meta),
            agent_info=Implementation(name="skills-test-agent", version="0"),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"session-{next(self._ids)}"
        await self.skills.open_session(session_id, cwd, mcp_servers=mcp_servers)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        await self.skills.load_session(session_id, cwd, mcp_servers=mcp_servers)
        return LoadSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        async with self.skills.turn(session_id, prompt, system=SYSTEM, config=CONFIG) as turn:
            self.turns.append(turn)
            await turn.request_messages()
            for arguments in self.tool_calls:
                call_id = f"call-{next(self._ids)}"
                self.results.append(await turn.call_tool(call_id, "skill", arguments))
        return turn.response

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.skills.cancel(session_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.skills.ext_method(method, params)


class ScriptedModelAgent(SkillsAgent):
    """A test agent whose model answers from a script of assistant messages, one per request.

    ``gate`` (when set) is awaited before each answer, so a test can hold a turn open.
    """

    def __init__(self, skills: AcpSkills) -> None:
        super().__init__(skills)
        self.replies: list[dict[str, Any]] = []
        self.gate: anyio.Event | None = None
        self.waiting = anyio.Event()
        self.requests: list[list[dict[str, Any]]] = []

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        async with self.skills.turn(session_id, prompt, system="test") as turn:
            self.turns.append(turn)
            async for messages in turn.requests():
                self.requests.append(messages)
                if self.gate is not None:
                    self.waiting.set()
                    await self.gate.wait()
                await turn.add_reply(self.replies.pop(0) if self.replies else {"content": "ok"})
        return turn.response


# -- the connected pair ------------------------------------------------------------------------


@dataclass
class Peer:
    """The client's side of a connected pair, plus the agent for inspection."""

    conn: ClientSideConnection
    agent: Any
    client: RecordingClient
    wire: Wire
    initialized: InitializeResponse
    skills: AcpSkills = field(init=False)

    def __post_init__(self) -> None:
        self.skills = self.agent.skills

    async def new_session(self, cwd: Path, *, mcp_servers: list[Any] | None = None) -> str:
        """Open a session and wait for the commands update that follows its response."""
        with anyio.fail_after(WAIT_SECONDS):
            response = await self.conn.new_session(cwd=str(cwd), mcp_servers=mcp_servers or [])
        session_id = response.session_id
        await self.wire.wait_for(lambda: len(self.wire.commands(session_id)) == 1)
        return session_id

    async def load_session(self, session_id: str, cwd: Path) -> None:
        """Reopen a session with ``session/load`` and wait for its commands update."""
        sent = len(self.wire.commands(session_id))
        with anyio.fail_after(WAIT_SECONDS):
            await self.conn.load_session(cwd=str(cwd), session_id=session_id, mcp_servers=[])
        await self.wire.wait_for(lambda: len(self.wire.commands(session_id)) > sent)

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        with anyio.fail_after(WAIT_SECONDS):
            return await self.conn.prompt(
                session_id=session_id, prompt=[TextContentBlock(type="text", text=text)]
            )

    async def ask(self, session_id: str, text: str) -> str:
        """One prompt turn of ``text``; its stop reason."""
        return (await self.prompt(session_id, text)).stop_reason

    def questions(self, session_id: str) -> list[dict[str, Any]]:
        """The ``session/request_permission`` requests the agent sent for a session."""
        return [
            message["params"]
            for message in self.wire.incoming()
            if message.get("method") == "session/request_permission"
            and message["params"]["sessionId"] == session_id
        ]

    def question_text(self, session_id: str) -> list[str]:
        """The text of each trust question's card (its tool call's content), in order."""
        return [
            text_content(update)
            for update in self.wire.updates(session_id, "tool_call")
            if update["toolCallId"].startswith("trust-")
        ]

    async def ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Call ``_<method>`` (the SDK adds the underscore on the wire)."""
        with anyio.fail_after(WAIT_SECONDS):
            return await self.conn.ext_method(method, params)


async def _link() -> tuple[
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
]:
    agent_socket, client_socket = socket.socketpair()
    # The agent's end reads as `open_stdio` does; the client reads a frame of any length.
    agent_end = await asyncio.open_connection(sock=agent_socket, limit=1024 * 1024)
    client_end = await asyncio.open_connection(sock=client_socket, limit=64 * 1024 * 1024)
    return agent_end, client_end


async def _initialize(conn: ClientSideConnection, *, reads_files: bool) -> InitializeResponse:
    with anyio.fail_after(WAIT_SECONDS):
        return await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=reads_files, write_text_file=False)
            ),
            client_info=Implementation(name="skills-test-client", version="0"),
        )


@asynccontextmanager
async def connected(
    registry: SkillRegistry,
    *,
    reads_files: bool = True,
    agent_type: type[SkillsAgent] = SkillsAgent,
    observe: bool = True,
    answer: str = "error",
    **options: Any,
) -> AsyncIterator[Peer]:
    """An initialized agent/client pair; everything is closed on exit, and every frame checked.

    ``options`` go to `AcpSkills` (``catalog_budget=...``, ``trust="all"``); without
    ``observe`` the agent's connection is built without `AcpSkills.observe`; ``answer`` is how
    the client answers trust questions (`RecordingClient`).
    """
    (agent_reader, agent_writer), (client_reader, client_writer) = await _link()
    # As the agent would read it: the suites that do not test trust set `all` (conftest).
    options.setdefault("trust", os.environ.get("ACP_SKILLS_TRUST") or "ask")
    skills = AcpSkills(registry, **options)
    agent = agent_type(skills)
    client = RecordingClient(answer)
    wire = Wire(client.changes)
    agent_conn = AgentSideConnection(
        cast(Any, agent),
        agent_writer,
        agent_reader,
        observers=[skills.observe] if observe else [],
        use_unstable_protocol=True,  # `session/resume` and `session/close` on the 0.12 SDK
    )
    client_conn = ClientSideConnection(
        cast(Any, client), cast(Any, WireTransport(client_reader, client_writer, wire))
    )
    try:
        await skills.__aenter__()
        initialized = await _initialize(client_conn, reads_files=reads_files)
        yield Peer(conn=client_conn, agent=agent, client=client, wire=wire, initialized=initialized)
    finally:
        await skills.__aexit__(None, None, None)
        await client_conn.close()
        await agent_conn.close()
        agent_writer.close()
        with suppress(ConnectionError):
            await agent_writer.wait_closed()
    wire.assert_valid()


# -- the demo agent in this process ------------------------------------------------------------


@contextlib.contextmanager
def agent_logging(log_level: str, log_format: str, log_file: str | None) -> Iterator[io.StringIO]:
    """The agent's logging as ``main()`` configures it, into the yielded buffer (its stderr)
    or into ``log_file``; what the test process had is put back afterwards."""
    buffer = io.StringIO()
    with logging_as_it_was():
        stream = open_log_file(Path(log_file).expanduser()) if log_file else buffer
        try:
            configure_logging(log_level, log_format=log_format, stream=stream)
            # The loggers of this process outlive the agent: none may keep its configuration.
            structlog.configure(cache_logger_on_first_use=False)
            yield buffer
        finally:
            if stream is not buffer:
                stream.close()


class _Notifying(logging.Handler):
    """Calls ``notify`` at each log record, whichever thread logs it."""

    def __init__(self, notify: Callable[[], None]) -> None:
        super().__init__()
        self._notify = notify

    def emit(self, record: logging.LogRecord) -> None:
        self._notify()


@dataclass
class DemoPeer(Peer):
    """A `Peer` of the real demo agent, with what its process would show."""

    sandbox: Sandbox | None = None
    args: argparse.Namespace | None = None
    stderr: io.StringIO = field(default_factory=io.StringIO)
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def log(self) -> str:
        """What the agent logged so far: its stderr, or its ``--log-file``."""
        if self.args is not None and self.args.log_file:
            return Path(self.args.log_file).expanduser().read_text(encoding="utf-8")
        return self.stderr.getvalue()

    async def log_lines_with(self, event: str) -> list[str]:
        """Every line of the log that has ``event``, once there is one (woken by each record
        the agent logs)."""
        while True:
            logged = self.client.changes.next()
            lines = [line for line in self.log.splitlines() if event in line]
            if lines:
                return lines
            with anyio.fail_after(WAIT_SECONDS):
                await logged.wait()

    async def listing(self, session_id: str) -> dict[str, Any]:
        """What ``_skills/list`` answers for the session."""
        return await self.ext("skills/list", {"sessionId": session_id})

    async def listed(self, session_id: str) -> list[str]:
        """The names ``_skills/list`` gives for the session."""
        return [skill["name"] for skill in (await self.listing(session_id))["skills"]]

    async def until_listed(self, session_id: str, names: list[str]) -> None:
        """Wait until ``_skills/list`` for the session gives exactly ``names``, asking again
        after each change of the agent's skills (its registry's own notice)."""
        while True:
            changed = self.client.changes.next()
            if await self.listed(session_id) == names:
                return
            with anyio.fail_after(WAIT_SECONDS):
                await changed.wait()

    @property
    def serving(self) -> bool:
        """The agent still serves the connection (its process would still run)."""
        return not self.done.is_set()

    async def open_session(
        self, cwd: Path | None = None, mcp_servers: list[Any] | None = None
    ) -> str:
        """``session/new`` in ``cwd`` (the sandbox's project by default); the session id, as
        soon as the response arrives."""
        if cwd is None:
            assert self.sandbox is not None, "no sandbox: give the session's cwd"
            cwd = self.sandbox.project
        with anyio.fail_after(WAIT_SECONDS):
            created = await self.conn.new_session(cwd=str(cwd), mcp_servers=mcp_servers or [])
        return created.session_id


def demo_peer(
    sandbox: Sandbox, *args: str, env: Mapping[str, str] | None = None, **options: Any
) -> contextlib.AbstractAsyncContextManager[DemoPeer]:
    """`demo_agent_peer` with ``sandbox``'s arguments before ``args``, and its environment
    with ``env`` over it."""
    return demo_agent_peer(*sandbox.args(*args), env=sandbox.env(env), sandbox=sandbox, **options)


@asynccontextmanager
async def demo_agent_peer(
    *argv: str,
    env: Mapping[str, str],
    cwd: str | Path | None = None,
    sandbox: Sandbox | None = None,
    client: RecordingClient | None = None,
    answer: str = "error",
    reads_files: bool = True,
    mcp_transport: Any = None,
) -> AsyncIterator[DemoPeer]:
    """The demo agent of ``argv``, built and served as its entry point builds and serves it
    (`tests.demo_in_process`), with exactly ``env`` (``PATH`` added) as its environment and
    ``cwd`` as its working directory for as long as it runs, served to an initialized client;
    ended by closing its input, as an editor ends it, and every frame checked.

    The client reads files from disk, as an editor does, and answers trust questions with
    ``answer`` (unless ``client`` is given). With ``mcp_transport`` (``tests/mcp_memory.py``),
    the agent reaches its MCP servers through it.
    """
    client = client if client is not None else RecordingClient(answer, read_from_disk)
    wire = Wire(client.changes)
    with environment(agent_environment(env), cwd):
        options = demo_args(argv)
        with agent_logging(options.log_level, options.log_format, options.log_file) as stderr:
            built = build_demo_agent(options, mcp_transport=mcp_transport)
            # Waits end on what the agent does: each record it logs, each change of its skills.
            notify = client.changes.notifier()
            logging.getLogger().addHandler(_Notifying(notify))
            built.agent.skills.registry.on_change(notify)
            (agent_reader, agent_writer), (client_reader, client_writer) = await _link()
            done = anyio.Event()

            async def serve() -> None:
                try:
                    await serve_demo(built, agent_reader, agent_writer)
                finally:
                    done.set()

            client_conn = ClientSideConnection(
                cast(Any, client), cast(Any, WireTransport(client_reader, client_writer, wire))
            )
            async with anyio.create_task_group() as group:
                group.start_soon(serve)
                try:
                    initialized = await _initialize(client_conn, reads_files=reads_files)
                    yield DemoPeer(
                        conn=client_conn,
                        agent=built.agent,
                        client=client,
                        wire=wire,
                        initialized=initialized,
                        sandbox=sandbox,
                        args=options,
                        stderr=stderr,
                        done=done,
                    )
                finally:
                    # The client leaves: the agent reads the end of its input and stops.
                    await client_conn.close()
                    with anyio.fail_after(WAIT_SECONDS):
                        await done.wait()
    wire.assert_valid()


# -- skill files -------------------------------------------------------------------------------


def write_skill(root: Path, name: str, description: str, *, body: str, extra: str = "") -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {json.dumps(description)}\n{extra}---\n{body}\n",
        encoding="utf-8",
    )
    return directory


def write_fixture_skills(tmp_path: Path) -> Path:
    """deploy (with a guide), compare, internal (model-only) and secret (person-only)."""
    root = tmp_path / "skills"
    deploy = write_skill(
        root,
        "deploy",
        DEPLOY_RAW_DESCRIPTION,
        body="Run `scripts/deploy.sh`.",
        extra='argument-hint: "[env]"\n',
    )
    (deploy / "references").mkdir()
    (deploy / "references" / "guide.md").write_text(GUIDE_ON_DISK, encoding="utf-8")
    write_skill(root, "compare", "Compare a < b & c", body="Compare carefully.")
    write_skill(
        root, "internal", "Model-only helper.", body="Internal.", extra="user-invocable: false\n"
    )
    write_skill(
        root,
        "secret",
        "Only a person may run this.",
        body="Secret steps.",
        extra="disableModelInvocation: true\n",
    )
    return root


def fixture_registry(tmp_path: Path, skills_dir: Path) -> SkillRegistry:
    """A registry with one local provider over ``skills_dir`` (and empty homes).

    Not watched: these tests change skills on disk and reload explicitly (live reload has its
    own tests).
    """
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(
            custom_skill_dirs=[str(skills_dir)],
            dsh_home=str(tmp_path / "dsh"),
            agents_home=str(tmp_path / "agents"),
            watch=False,
        )
    )
    return registry


def make_project(tmp_path: Path) -> Path:
    """An empty project directory: the sessions' ``cwd``."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    return cwd


async def rendered(registry: SkillRegistry, name: str, cwd: Path) -> str:
    definition = await registry.get(name, SkillLookupOptions(cwd=str(cwd)))
    assert definition is not None
    return render_skill_content(definition)


def text_content(update: dict[str, Any]) -> str:
    [item] = update["content"]
    assert item["type"] == "content"
    assert item["content"]["type"] == "text"
    return cast(str, item["content"]["text"])


def skill_call(call_id: str, name: str) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "skill", "arguments": f'{{"name": "{name}"}}'},
            }
        ],
    }
