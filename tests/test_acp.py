"""The ACP glue (contract §9): `AcpSkills` over a real in-memory ACP connection, and its builders.

The connection is the SDK's own: an `AgentSideConnection` and a `ClientSideConnection` over the
two ends of a `socket.socketpair()`, so every message crosses the SDK's real JSON framing. An
observer on the client records every frame in wire order.
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
import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.connection import StreamEvent
from acp.core import AgentSideConnection, ClientSideConnection
from acp.helpers import resource_link_block, text_block
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    ReadTextFileResponse,
)

from acp_skills import (
    LocalSkillProvider,
    PrefixMessage,
    SkillDefinition,
    SkillLookupOptions,
    SkillRegistry,
    render_catalog,
    render_skill_content,
)
from acp_skills.acp import AcpSkills, PromptTurn
from acp_skills.acp.skills import EXTENSION_METHODS
from acp_skills.acp.turn import InvokedSkill
from acp_skills.acp.wire import (
    AcpClient,
    available_commands,
    check_cwd,
    find_invocations,
    is_absolute_cwd,
    prompt_text,
    skill_tool_call_start,
    tool_call_finished,
)
from acp_skills.acp.commands import SKILLS_COMMAND_DESCRIPTION
from acp_skills.tool import ToolResult
from tests.providers import candidate

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
            agent_capabilities=AgentCapabilities(load_session=False, field_meta=meta),
            agent_info=Implementation(name="skills-test-agent", version="0"),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"session-{next(self._ids)}"
        await self.skills.open_session(session_id, cwd)
        return NewSessionResponse(session_id=session_id)

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


class RecordingClient:
    """A client whose ``fs/read_text_file`` answers with marker text, so its use is visible."""

    def __init__(self) -> None:
        self.reads: list[str] = []

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

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        with anyio.fail_after(5):
            return await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])

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
    **options: Any,
) -> AsyncIterator[Peer]:
    """An initialized agent/client pair over a socketpair; everything is closed on exit.

    ``options`` go to `AcpSkills` (``catalog_budget=...``, ``max_live_sessions=...``).
    """
    agent_socket, client_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    client_reader, client_writer = await asyncio.open_connection(sock=client_socket)
    skills = AcpSkills(registry, **options)
    agent = agent_type(skills)
    client = RecordingClient()
    wire = Wire()
    agent_conn = AgentSideConnection(
        cast(Any, agent), agent_writer, agent_reader, observers=[skills.observe]
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


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    return write_fixture_skills(tmp_path)


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


@pytest.fixture
def registry(tmp_path: Path, skills_dir: Path) -> SkillRegistry:
    return fixture_registry(tmp_path, skills_dir)


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


@pytest.fixture
def guide(skills_dir: Path) -> str:
    """The deploy skill's guide, as the absolute real path the client is asked to read."""
    return os.path.realpath(skills_dir / "deploy" / "references" / "guide.md")


@pytest.fixture
def project(tmp_path: Path) -> Path:
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


# -- pure builders ---------------------------------------------------------------------------


def test_skill_tool_call_start_is_an_in_progress_read_titled_with_the_skill() -> None:
    """The start update: kind read, title ``Load skill NAME``, rawInput = the arguments."""
    update = skill_tool_call_start("call-7", {"name": "deploy", "path": "a.md"})
    assert update.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-7",
        "title": "Load skill deploy",
        "kind": "read",
        "status": "in_progress",
        "rawInput": {"name": "deploy", "path": "a.md"},
    }


@pytest.mark.parametrize(
    ("arguments", "title", "raw_input"),
    [
        ({"name": ""}, "Load skill", {"name": ""}),
        ({"path": "x"}, "Load skill", {"path": "x"}),
        ({"name": 3}, "Load skill", {"name": 3}),
        ("not json", "Load skill", {"arguments": "not json"}),
    ],
    ids=["empty-name", "no-name", "non-string-name", "not-an-object"],
)
def test_skill_tool_call_start_without_a_usable_name(
    arguments: object, title: str, raw_input: dict[str, Any]
) -> None:
    """Without a usable name the title is plain ``Load skill``; rawInput is always an object."""
    update = skill_tool_call_start("c", arguments)
    assert (update.title, update.raw_input) == (title, raw_input)


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (ToolResult(text="<skill_content ...>", is_error=False), "completed"),
        (ToolResult(text='Error: skill "x" is unknown', is_error=True), "failed"),
    ],
    ids=["completed", "failed"],
)
def test_tool_call_finished_carries_status_and_text(result: ToolResult, status: str) -> None:
    """The closing update: same id, completed or failed, the result text as its content."""
    update = tool_call_finished("call-7", result)
    assert update.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-7",
        "status": status,
        "content": [{"type": "content", "content": {"type": "text", "text": result.text}}],
    }


def test_available_commands_only_user_invocable_literal_descriptions_and_hints() -> None:
    """User-invocable only; whitespace collapsed, not XML-escaped, hint from argument_hint."""
    skills = [
        candidate("alpha", provider="p", description="  a < b &\n\t c  ", argument_hint="[x]"),
        candidate("beta", provider="p", description="Beta.", user_invocable=False),
        candidate("gamma", provider="p", description="Gamma.", argument_hint=""),
        candidate("delta", provider="p", description="Delta.", disable_model_invocation=True),
    ]
    commands = [
        command.model_dump(mode="json", by_alias=True, exclude_none=True)
        for command in available_commands(skills)
    ]
    assert commands == [
        {"name": "alpha", "description": "a < b & c", "input": {"hint": "[x]"}},
        {"name": "gamma", "description": "Gamma."},
        {"name": "delta", "description": "Delta."},
    ]


def test_available_commands_truncates_long_descriptions_to_200_characters() -> None:
    """A description over 200 characters keeps 197 of them and ends with ``...``."""
    long = "word " * 100
    [command] = available_commands([candidate("long", provider="p", description=long)])
    assert command.description == long.strip()[:197] + "..."
    assert len(command.description) == 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/deploy", ["deploy"]),
        ("/deploy now please", ["deploy"]),
        ("please /deploy now", ["deploy"]),
        ("run it\n/deploy", ["deploy"]),
        ("/compare then /deploy", ["compare", "deploy"]),
        ("/deploy /deploy and /deploy again", ["deploy"]),
        ("/deploy-app", ["deploy-app"]),
        ("/a/b", []),
        ("/deploy/b", []),
        ("5/8", []),
        ("foo/bar", []),
        ("x/deploy", []),
        ("/deploy.", []),
        ("/Deploy", []),
        ("/unknown", []),
        ("/", []),
        ("no slash at all", []),
    ],
    ids=[
        "alone",
        "at-start",
        "mid-sentence",
        "after-newline",
        "several-in-order",
        "repeats-once",
        "hyphenated",
        "path-a-b",
        "path-name-b",
        "fraction",
        "foo-bar",
        "glued-to-word",
        "trailing-punctuation",
        "uppercase",
        "unknown-name",
        "bare-slash",
        "no-slash",
    ],
)
def test_find_invocations(text: str, expected: list[str]) -> None:
    """``/name`` counts at the start or after whitespace, before whitespace or the end."""
    # `internal` is left out of the names, as AcpSkills does for user-invocable: false skills.
    assert find_invocations(text, ["compare", "deploy", "deploy-app"]) == expected


def test_prompt_text_joins_text_blocks_and_skips_the_rest() -> None:
    """Text blocks (models or raw dicts) are joined with newlines; other blocks are skipped."""
    prompt: list[object] = [
        text_block("first"),
        resource_link_block("notes", "file:///notes.md"),
        {"type": "text", "text": "second"},
        {"type": "image", "data": "..."},
    ]
    assert prompt_text(prompt) == "first\nsecond"


def test_capability_meta_names_version_and_methods() -> None:
    """The capability entry is ``{"acp-skills": {"version", "methods"}}``."""
    assert AcpSkills.capability_meta() == {"acp-skills": {"version": "1", "methods": METHODS}}
    assert list(EXTENSION_METHODS) == METHODS


def path_limit() -> int:
    """The platform's longest path in bytes, its terminating NUL included (as the code sees it)."""
    try:
        limit = os.pathconf("/", "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):
        limit = -1
    return limit if limit > 0 else 4096


LONGEST_CWD = "/" + "é" * ((path_limit() - 2) // 2) + "a" * ((path_limit() - 2) % 2)


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/abs/dir", True),
        ("relative/dir", False),
        ("", False),
        ("/a\0b", False),
        (None, False),
        (LONGEST_CWD, True),
        (LONGEST_CWD + "a", False),
    ],
    ids=["absolute", "relative", "empty", "nul", "not-a-string", "at-path-limit", "over-it"],
)
def test_is_absolute_cwd(cwd: object, expected: bool) -> None:
    """Only an absolute path without NUL, within the path limit, is a working directory."""
    assert is_absolute_cwd(cwd) is expected


def test_check_cwd_refuses_an_overlong_cwd_without_echoing_it() -> None:
    """Over the limit (counted in UTF-8 bytes, NUL included) the error gives only the lengths."""
    assert len(LONGEST_CWD.encode()) == path_limit() - 1
    assert check_cwd(LONGEST_CWD) == LONGEST_CWD
    with pytest.raises(RequestError) as caught:
        check_cwd(LONGEST_CWD + "\ud800")  # a lone surrogate from JSON is measured too
    assert (caught.value.code, caught.value.data) == (
        -32602,
        {
            "reason": "cwd is longer than the platform's path limit",
            "length": path_limit() + 2,
            "limit": path_limit() - 1,
        },
    )


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("skills/list", True),
        ("_skills/prefix", True),
        ("skills/reload", True),
        ("skills/bogus", False),
        ("other/list", False),
    ],
    ids=["list", "underscored-prefix", "reload", "bogus", "other"],
)
def test_handles_names_only_our_methods(method: str, expected: bool) -> None:
    """`handles` accepts the method name with or without its leading underscore."""
    assert AcpSkills(SkillRegistry()).handles(method) is expected


@pytest.mark.anyio
async def test_ext_method_rejects_an_unknown_skills_method() -> None:
    """The facade itself answers ``_skills/bogus`` with method-not-found."""
    with pytest.raises(RequestError) as caught:
        await AcpSkills(SkillRegistry()).ext_method("skills/bogus", {})
    assert (caught.value.code, caught.value.data) == (-32601, {"method": "_skills/bogus"})


# -- capabilities ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_initialize_advertises_the_extension_in_agent_capabilities_meta(
    registry: SkillRegistry,
) -> None:
    """The initialize response carries ``agentCapabilities._meta["acp-skills"]``."""
    async with connected(registry) as peer:
        result = peer.wire.response_to("initialize")["result"]
    assert result["agentCapabilities"]["_meta"] == {
        "acp-skills": {"version": "1", "methods": METHODS}
    }
    capabilities = peer.initialized.agent_capabilities
    assert capabilities is not None
    assert capabilities.field_meta == AcpSkills.capability_meta()


# -- the skill tool as ACP tool calls --------------------------------------------------------


@pytest.mark.anyio
async def test_skill_call_is_reported_as_tool_call_then_completed_update(
    registry: SkillRegistry, project: Path
) -> None:
    """A ``skill`` call: tool_call (read, in progress), then tool_call_update completed."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [{"name": "deploy"}]
        await peer.prompt(session_id, "ship it")
        [start] = peer.wire.updates(session_id, "tool_call")
        [end] = peer.wire.updates(session_id, "tool_call_update")
    expected_text = await rendered(registry, "deploy", project)
    assert start == {
        "sessionUpdate": "tool_call",
        "toolCallId": start["toolCallId"],
        "title": "Load skill deploy",
        "kind": "read",
        "status": "in_progress",
        "rawInput": {"name": "deploy"},
    }
    assert end == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": start["toolCallId"],
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": expected_text}}],
    }
    assert peer.agent.results == [ToolResult(text=expected_text, is_error=False)]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"name": "nope"}, 'Error: skill "nope" is unknown or no longer available'),
        ({"name": "secret"}, 'Error: skill "secret" is not available for model invocation'),
        (
            {"name": "deploy", "force": True},
            'Error: unexpected argument "force" for skill "deploy"; the skill tool accepts '
            'only "name" and "path"',
        ),
    ],
    ids=["unknown", "model-invocation-disabled", "extra-argument"],
)
@pytest.mark.anyio
async def test_failed_skill_call_reports_failed_with_the_error_text(
    registry: SkillRegistry, project: Path, arguments: dict[str, Any], error: str
) -> None:
    """A refused call still opens with tool_call, then closes failed with the error text."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [arguments]
        await peer.prompt(session_id, "go")
        [start] = peer.wire.updates(session_id, "tool_call")
        [end] = peer.wire.updates(session_id, "tool_call_update")
    assert (start["status"], start["rawInput"]) == ("in_progress", arguments)
    assert end["toolCallId"] == start["toolCallId"]
    assert end["status"] == "failed"
    assert text_content(end) == error


@pytest.mark.anyio
async def test_resource_is_read_through_the_client_when_it_advertised_read_text_file(
    registry: SkillRegistry, guide: str, project: Path
) -> None:
    """With ``fs.readTextFile``, a ``path`` read goes through ``fs/read_text_file``."""
    async with connected(registry, reads_files=True) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [{"name": "deploy", "path": "references/guide.md"}]
        await peer.prompt(session_id, "read the guide")
        [end] = peer.wire.updates(session_id, "tool_call_update")
        requests = [m for m in peer.wire.incoming() if m.get("method") == "fs/read_text_file"]
    assert peer.client.reads == [guide]
    assert [request["params"] for request in requests] == [{"sessionId": session_id, "path": guide}]
    assert (end["status"], text_content(end)) == ("completed", f"{CLIENT_MARKER} {guide}")


@pytest.mark.anyio
async def test_resource_is_read_from_disk_when_the_client_cannot_read_files(
    registry: SkillRegistry, project: Path
) -> None:
    """Without ``fs.readTextFile``, the file's text comes from the local disk."""
    async with connected(registry, reads_files=False) as peer:
        session_id = await peer.new_session(project)
        peer.agent.tool_calls = [{"name": "deploy", "path": "references/guide.md"}]
        await peer.prompt(session_id, "read the guide")
        [end] = peer.wire.updates(session_id, "tool_call_update")
        requests = [m for m in peer.wire.incoming() if m.get("method") == "fs/read_text_file"]
    assert (peer.client.reads, requests) == ([], [])
    assert (end["status"], text_content(end)) == ("completed", GUIDE_ON_DISK)


# -- slash commands --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_commands_update_follows_the_session_new_response(
    registry: SkillRegistry, project: Path
) -> None:
    """``available_commands_update`` goes out after the ``session/new`` response, not before."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        incoming = peer.wire.incoming()
    response_at = next(
        index
        for index, message in enumerate(incoming)
        if message.get("result", {}).get("sessionId") == session_id
    )
    update_at = next(
        index
        for index, message in enumerate(incoming)
        if message.get("method") == "session/update"
        and message["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )
    assert response_at < update_at
    assert peer.wire.commands(session_id) == [COMMANDS]


@pytest.mark.anyio
async def test_commands_are_user_invocable_skills_with_literal_descriptions_and_hints(
    registry: SkillRegistry, project: Path
) -> None:
    """Advertised: user-invocable skills only, descriptions not escaped, hint only when set."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
    [commands] = peer.wire.commands(session_id)
    assert commands == COMMANDS
    assert "internal" not in [command["name"] for command in commands]


@pytest.mark.anyio
async def test_commands_are_sent_again_at_the_first_prompt_turn_only(
    registry: SkillRegistry, project: Path
) -> None:
    """The first prompt turn re-sends the commands (editors may drop the first); later don't."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "hello")
        after_first = peer.wire.commands(session_id)
        await peer.prompt(session_id, "hello again")
        after_second = peer.wire.commands(session_id)
    assert after_first == [COMMANDS, COMMANDS]
    assert after_second == after_first


@pytest.mark.anyio
async def test_a_changed_skill_set_sends_a_new_commands_update(
    registry: SkillRegistry, project: Path
) -> None:
    """Registering and then disposing a runtime skill each send the session a fresh update."""
    hotfix = {"name": "hotfix", "description": "Ship a hotfix."}
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        dispose = registry.register(
            SkillDefinition(name="hotfix", description="Ship a hotfix.", content="Do it.")
        )
        await peer.wire.wait_for(lambda: len(peer.wire.commands(session_id)) == 2)
        dispose()
        await peer.wire.wait_for(lambda: len(peer.wire.commands(session_id)) == 3)
    assert peer.wire.commands(session_id) == [
        COMMANDS,
        [COMMANDS[0], COMMANDS[1], hotfix, COMMANDS[2], SKILLS_BUILTIN],
        COMMANDS,
    ]


@pytest.mark.anyio
async def test_a_changed_skill_set_reaches_every_live_session(
    registry: SkillRegistry, project: Path
) -> None:
    """However many sessions are open, each one is told when its commands change."""
    async with connected(registry) as peer:
        sessions = [await peer.new_session(project) for _ in range(40)]

        def every_session_has(count: int) -> bool:
            return all(len(peer.wire.commands(sid)) == count for sid in sessions)

        await peer.wire.wait_for(lambda: every_session_has(1))
        registry.register(
            SkillDefinition(name="hotfix", description="Ship a hotfix.", content="Do it.")
        )
        await peer.wire.wait_for(lambda: every_session_has(2))
    assert all(len(peer.wire.commands(session_id)[1]) == 5 for session_id in sessions)


@pytest.mark.anyio
async def test_an_invalidation_that_changes_nothing_sends_no_update(
    registry: SkillRegistry, project: Path
) -> None:
    """``registry.invalidate()`` with the same skills on disk sends no new commands update."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        registry.invalidate()
        # The refresh and this request share one discovery; the refresh resumes first, so an
        # update it sent would be on the wire before this response.
        await peer.ext("skills/list", {"sessionId": session_id})
        await peer.prompt(session_id, "first turn")  # a forced re-send, as a positive control
    assert peer.wire.commands(session_id) == [COMMANDS, COMMANDS]


# -- /name invocations and the turn ----------------------------------------------------------


@pytest.mark.anyio
async def test_slash_invocation_puts_the_rendered_skill_into_the_turn(
    registry: SkillRegistry, project: Path
) -> None:
    """``/deploy`` and ``/secret`` in a prompt load those skills before the model runs."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "please /deploy staging, then /secret and /deploy")
        starts = peer.wire.updates(session_id, "tool_call")
        ends = peer.wire.updates(session_id, "tool_call_update")
    [turn] = peer.agent.turns
    assert turn.invoked == (
        InvokedSkill(name="deploy", text=await rendered(registry, "deploy", project)),
        # A person may invoke a skill the model may not load.
        InvokedSkill(name="secret", text=await rendered(registry, "secret", project)),
    )
    assert [(s["title"], s["rawInput"]) for s in starts] == [
        ("Load skill deploy", {"name": "deploy"}),
        ("Load skill secret", {"name": "secret"}),
    ]
    assert [e["toolCallId"] for e in ends] == [s["toolCallId"] for s in starts]
    assert [e["status"] for e in ends] == ["completed", "completed"]


@pytest.mark.anyio
async def test_unknown_and_non_invocable_slash_names_stay_text(
    registry: SkillRegistry, project: Path
) -> None:
    """Inside a prompt, ``/nope``, ``/internal`` (user-invocable: false), ``a/deploy`` load
    nothing (a prompt that opens with one is answered by a note: test_builtin_commands.py)."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "see /nope /internal a/deploy /deploy/x 5/8")
        starts = peer.wire.updates(session_id, "tool_call")
    assert peer.agent.turns[0].invoked == ()
    assert starts == []


@pytest.mark.anyio
async def test_slash_tool_call_ids_are_unique_within_the_session(
    registry: SkillRegistry, project: Path
) -> None:
    """Invoking the same skill in two turns reports two distinct tool calls."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "/deploy")
        await peer.prompt(session_id, "/deploy")
        starts = peer.wire.updates(session_id, "tool_call")
    ids = [start["toolCallId"] for start in starts]
    assert len(ids) == 2
    assert len(set(ids)) == 2


@pytest.mark.anyio
async def test_prefix_is_composed_once_per_session(registry: SkillRegistry, project: Path) -> None:
    """Every turn gets the very same frozen prefix tuple: the catalog as one user message."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "one")
        catalog = render_catalog(await registry.list(SkillLookupOptions(cwd=str(project))))
        registry.register(SkillDefinition(name="late", description="Too late.", content="x"))
        await peer.prompt(session_id, "two")
    first, second = peer.agent.turns
    assert catalog is not None
    assert first.prefix == (PrefixMessage(role="user", text=catalog),)
    # The skill registered after the first turn does not reach the running session.
    assert second.prefix is first.prefix


@pytest.mark.anyio
async def test_prompt_for_an_unknown_session_is_invalid_params(registry: SkillRegistry) -> None:
    """A turn for a session never opened is refused with -32602."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.prompt("no-such-session", "hi")
    assert caught.value.code == -32602
    assert caught.value.data == {"sessionId": "no-such-session", "reason": "unknown session"}


# -- extension methods -----------------------------------------------------------------------


def listed(name: str, **overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": name,
        "description": "",
        "source": "custom",
        "provider": "local",
        "userInvocable": True,
        "disableModelInvocation": False,
    }
    entry.update(overrides)
    return entry


LISTED = [
    listed("compare", description="Compare a < b & c"),
    listed("deploy", description=DEPLOY_RAW_DESCRIPTION),
    listed("internal", description="Model-only helper.", userInvocable=False),
    listed("secret", description="Only a person may run this.", disableModelInvocation=True),
]


@pytest.mark.anyio
async def test_skills_list_by_session_and_by_cwd(registry: SkillRegistry, project: Path) -> None:
    """``_skills/list`` answers every resolved skill, sorted, for a session or a cwd."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        by_session = await peer.ext("skills/list", {"sessionId": session_id})
        by_cwd = await peer.ext("skills/list", {"cwd": str(project)})
        frame = peer.wire.response_to("_skills/list")
    assert by_session == {"skills": LISTED, "problems": []}
    assert by_cwd == {"skills": LISTED, "problems": []}
    assert frame["result"] == {"skills": LISTED, "problems": []}


@pytest.mark.parametrize(
    ("params", "data"),
    [
        (
            {"cwd": "relative/dir"},
            {"cwd": "relative/dir", "reason": "cwd must be an absolute path"},
        ),
        ({"sessionId": "nope"}, {"sessionId": "nope", "reason": "unknown session"}),
        ({}, {"reason": "pass sessionId or cwd"}),
    ],
    ids=["relative-cwd", "unknown-session", "neither"],
)
@pytest.mark.anyio
async def test_skills_list_rejects_bad_params(
    registry: SkillRegistry, params: dict[str, Any], data: dict[str, Any]
) -> None:
    """A relative cwd, an unknown session or no selector is a -32602 error."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.ext("skills/list", params)
    assert (caught.value.code, str(caught.value), caught.value.data) == (
        -32602,
        "Invalid params",
        data,
    )


@pytest.mark.anyio
async def test_skills_prefix_before_and_after_the_first_turn(
    registry: SkillRegistry, project: Path
) -> None:
    """``_skills/prefix``: nothing composed before the first turn; catalog and header after."""
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        before = await peer.ext("skills/prefix", {"sessionId": session_id})
        await peer.prompt(session_id, "hello")
        after = await peer.ext("skills/prefix", {"sessionId": session_id})
    catalog = render_catalog(await registry.list(SkillLookupOptions(cwd=str(project))))
    assert catalog is not None
    assert before == {"composed": False, "messages": [], "header": None, "budget": None}
    messages = [{"role": "user", "text": catalog}]
    assert after == {
        "composed": True,
        "messages": messages,
        "header": {
            "reason": "initial",
            "config": CONFIG,
            "system": SYSTEM,
            "tools": [peer.skills.skill_tool_spec],
            "messagePrefix": messages,
        },
        "budget": {"limit": None, "used": len(catalog), "shortened": 0, "omitted": []},
    }


@pytest.mark.anyio
async def test_skills_prefix_for_an_unknown_session_is_invalid_params(
    registry: SkillRegistry,
) -> None:
    """``_skills/prefix`` with an unknown session id is a -32602 error."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.ext("skills/prefix", {"sessionId": "nope"})
    assert (caught.value.code, caught.value.data) == (
        -32602,
        {"sessionId": "nope", "reason": "unknown session"},
    )


@pytest.mark.anyio
async def test_skills_reload_keeps_running_prefixes_and_new_sessions_see_new_skills(
    registry: SkillRegistry, skills_dir: Path, project: Path
) -> None:
    """``_skills/reload`` bumps the revision; a running session keeps its frozen prefix."""
    async with connected(registry) as peer:
        running = await peer.new_session(project)
        await peer.prompt(running, "compose now")
        before = await peer.ext("skills/prefix", {"sessionId": running})
        write_skill(skills_dir, "hotfix", "Ship a hotfix.", body="Do it.")
        revision = registry.revision
        reloaded = await peer.ext("skills/reload", {})
        after = await peer.ext("skills/prefix", {"sessionId": running})
        # The running session's slash commands do follow the new state.
        await peer.wire.wait_for(lambda: len(peer.wire.commands(running)) == 3)
        fresh = await peer.new_session(project)
        await peer.prompt(fresh, "compose now")
        fresh_prefix = await peer.ext("skills/prefix", {"sessionId": fresh})
    assert reloaded == {"revision": revision + 1}
    assert after["messages"] == before["messages"]
    assert "`hotfix`" not in before["messages"][0]["text"]
    assert "`hotfix`" in fresh_prefix["messages"][0]["text"]
    assert "hotfix" in [command["name"] for command in peer.wire.commands(running)[-1]]


@pytest.mark.anyio
async def test_unknown_extension_method_is_method_not_found(registry: SkillRegistry) -> None:
    """``_skills/bogus`` gets -32601 naming the method."""
    async with connected(registry) as peer:
        with pytest.raises(RequestError) as caught:
            await peer.ext("skills/bogus", {})
        frame = peer.wire.response_to("_skills/bogus")
    assert frame["error"] == {
        "code": -32601,
        "message": "Method not found",
        "data": {"method": "_skills/bogus"},
    }
    assert caught.value.code == -32601


# -- control characters never reach the editor or the model ----------------------------------

TROJAN_DESCRIPTION = "Run\x1b[2J \u202eexe.evil\u202c now\x00\ud800\nplease\x85\x9b"


@pytest.mark.anyio
async def test_descriptions_reach_the_editor_and_the_model_without_control_characters(
    registry: SkillRegistry, project: Path
) -> None:
    """A runtime skill with controls, bidi overrides and a lone surrogate in its description,
    hint and source: commands, ``_skills/list`` and the catalog arrive clean over the wire."""
    registry.register(
        SkillDefinition(
            name="trojan",
            description=TROJAN_DESCRIPTION,
            source="runtime\u202e",
            argument_hint="[env\u2066]\x07",
            content="body",
        )
    )
    async with connected(registry) as peer:
        session_id = await peer.new_session(project)
        await peer.prompt(session_id, "hello")
        listed = await peer.ext("skills/list", {"sessionId": session_id})
        prefix = await peer.ext("skills/prefix", {"sessionId": session_id})
        commands = peer.wire.commands(session_id)
    assert [c for c in commands[-1] if c["name"] == "trojan"] == [
        {
            "name": "trojan",
            "description": "Run[2J exe.evil now\ufffd please",
            "input": {"hint": "[env]"},
        }
    ]
    [entry] = [skill for skill in listed["skills"] if skill["name"] == "trojan"]
    # The editor gets the whole description, line breaks included, without the controls.
    assert (entry["description"], entry["source"]) == (
        "Run[2J exe.evil now\ufffd\nplease\n",
        "runtime",
    )
    [catalog] = prefix["messages"]
    assert "\n- `trojan`: Run[2J exe.evil now\ufffd please\n" in catalog["text"]


def test_available_commands_leave_out_names_no_slash_can_invoke() -> None:
    """A hand-built summary whose name breaks the grammar is not advertised."""
    skills = [
        candidate("ok", provider="p"),
        candidate("ok", provider="p", name="Bad\u202eName"),
        candidate("ok", provider="p", name="two words"),
    ]
    assert [command.name for command in available_commands(skills)] == ["ok"]


def test_tool_call_titles_show_no_control_characters() -> None:
    """The model's name goes into a title an editor shows: its controls are removed."""
    update = skill_tool_call_start("c", {"name": "de\u202eploy\x1b"})
    assert update.title == "Load skill deploy"
    assert update.raw_input == {"name": "de\u202eploy\x1b"}
