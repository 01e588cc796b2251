"""The ACP test rig: `AcpSkills` over a real in-memory ACP connection, and skill fixtures.

The connection is the SDK's own: an `AgentSideConnection` and a `ClientSideConnection` over the
two ends of a `socket.socketpair()`, so every message crosses the SDK's real JSON framing. An
observer on the client records every frame in wire order; the agent's connection carries
`AcpSkills.observe`, so a session's commands follow its ``session/new`` response.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
from acp import PROTOCOL_VERSION, RequestError
from acp.connection import StreamEvent
from acp.core import AgentSideConnection, ClientSideConnection
from acp.helpers import text_block
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
)

from acp_skills import (
    LocalSkillProvider,
    SkillLookupOptions,
    SkillRegistry,
    render_skill_content,
)
from acp_skills.acp import AcpSkills, PromptTurn
from acp_skills.acp.commands import SKILLS_COMMAND_DESCRIPTION
from acp_skills.acp.wire import (
    AcpClient,
)
from acp_skills.tool import ToolResult

SYSTEM = "You are the test agent."
CONFIG: dict[str, Any] = {"model": "scripted"}
CLIENT_MARKER = "READ BY THE CLIENT:"
GUIDE_ON_DISK = "# Guide\nRead me from disk.\n"
METHODS = ["_skills/list", "_skills/prefix", "_skills/reload"]
DEPLOY_RAW_DESCRIPTION = "Deploy the app\n   to\tproduction."
# The library's built-in `/skills`, advertised after the skills' own commands.
SKILLS_BUILTIN = {"name": "skills", "description": SKILLS_COMMAND_DESCRIPTION}
# Every user-invocable skill of the fixture set, as the editor receives it (sorted by name),
# then the built-in.
COMMANDS = [
    {"name": "compare", "description": "Compare a < b & c"},
    {"name": "deploy", "description": "Deploy the app to production.", "input": {"hint": "[env]"}},
    {"name": "secret", "description": "Only a person may run this."},
    SKILLS_BUILTIN,
]


# -- the test agent and client ---------------------------------------------------------------


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

    def on_connect(self, conn: AcpClient) -> None:
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
        await self.skills.open_session(session_id, cwd)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        await self.skills.load_session(session_id, cwd)
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


class RecordingClient:
    """A client whose ``fs/read_text_file`` answers with marker text, so its use is visible,
    and which answers each trust question as told: the next of ``answers``, else ``answer``
    (one of `ANSWERS`). ``questions`` holds every question's parameters, in order."""

    def __init__(self, answer: str = "error") -> None:
        self.reads: list[str] = []
        self.answer = answer
        self.answers: list[str] = []
        self.questions: list[dict[str, Any]] = []
        self.asked = anyio.Event()  # set at the first question (``hold`` tests wait on it)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Updates are asserted on the recorded wire frames instead."""

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content=f"{CLIENT_MARKER} {path}")

    async def request_permission(self, **kwargs: Any) -> RequestPermissionResponse:
        self.questions.append(kwargs)
        self.asked.set()
        return await permission_answer(self.answers.pop(0) if self.answers else self.answer)


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


class Wire:
    """Every frame the client sent or received, in order, with a way to wait for more."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []
        self._changed = asyncio.Event()

    def observe(self, event: StreamEvent) -> None:
        self.frames.append((event.direction.value, event.message))
        self._changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(5):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

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

    def response_to(self, method: str) -> dict[str, Any]:
        """The response frame to the client's last request of ``method``."""
        request_id = next(
            message["id"]
            for direction, message in reversed(self.frames)
            if direction == "outgoing" and message.get("method") == method
        )
        return next(
            message
            for message in self.incoming()
            if message.get("id") == request_id and "method" not in message
        )


@dataclass
class Peer:
    """The client's side of a connected pair, plus the agent for inspection."""

    conn: ClientSideConnection
    agent: SkillsAgent
    client: RecordingClient
    wire: Wire
    initialized: InitializeResponse
    skills: AcpSkills = field(init=False)

    def __post_init__(self) -> None:
        self.skills = self.agent.skills

    async def new_session(self, cwd: Path) -> str:
        """Open a session and wait for the commands update that follows its response."""
        response = await self.conn.new_session(cwd=str(cwd), mcp_servers=[])
        session_id = response.session_id
        await self.wire.wait_for(lambda: len(self.wire.commands(session_id)) == 1)
        return session_id

    async def load_session(self, session_id: str, cwd: Path) -> None:
        """Reopen a session with ``session/load`` and wait for its commands update."""
        sent = len(self.wire.commands(session_id))
        with anyio.fail_after(5):
            await self.conn.load_session(cwd=str(cwd), session_id=session_id, mcp_servers=[])
        await self.wire.wait_for(lambda: len(self.wire.commands(session_id)) > sent)

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        with anyio.fail_after(5):
            return await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])

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
        with anyio.fail_after(5):
            return await self.conn.ext_method(method, params)


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
    """An initialized agent/client pair over a socketpair; everything is closed on exit.

    ``options`` go to `AcpSkills` (``catalog_budget=...``, ``max_live_sessions=...``); without
    ``observe`` the agent's connection is built without `AcpSkills.observe`; ``answer`` is how
    the client answers trust questions (`RecordingClient`).
    """
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    # As the agent would read it: the suites that do not test trust set `all` (conftest).
    options.setdefault("trust", os.environ.get("ACP_SKILLS_TRUST") or "ask")
    skills = AcpSkills(registry, **options)
    agent = agent_type(skills)
    client = RecordingClient(answer)
    wire = Wire()
    agent_conn = AgentSideConnection(
        cast(Any, agent), agent_writer, agent_reader, observers=[skills.observe] if observe else []
    )
    client_conn = ClientSideConnection(
        cast(Any, client), client_writer, client_reader, observers=[wire.observe]
    )
    try:
        await skills.__aenter__()
        with anyio.fail_after(5):
            initialized = await client_conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=reads_files, write_text_file=False)
                ),
                client_info=Implementation(name="skills-test-client", version="0"),
            )
        yield Peer(conn=client_conn, agent=agent, client=client, wire=wire, initialized=initialized)
    finally:
        await skills.__aexit__(None, None, None)
        await client_conn.close()
        await agent_conn.close()
        for writer in (client_writer, agent_writer):
            writer.close()
            with suppress(ConnectionError):
                await writer.wait_closed()


# -- skill files -----------------------------------------------------------------------------


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
