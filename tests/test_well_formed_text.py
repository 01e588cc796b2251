"""Text is well-formed before it is stored or sent (contract §11), through the real surfaces.

A lone surrogate is valid JSON (``"\\ud800"``) but not Unicode text: it cannot be encoded for
a model's HTTP API, and a strict JSON reader rejects a frame holding one. Here the demo agent
runs in this process (`tests.acp_peer.demo_peer`, whose client checks every line the agent
writes: strict UTF-8, JSON-RPC, no lone surrogate), with a real OpenAI-compatible server on
127.0.0.1 as its model. Lone surrogates come in through a prompt, a client's
``fs/read_text_file`` answer, a model's streamed text and tool-call arguments, and a record
written before this rule existed; each becomes U+FFFD, and no turn fails, before or after a
restart. And random descriptions in skill files (controls, bidi overrides, any character)
reach the catalog, the slash commands and ``_skills/list`` without a forbidden character
(contract §6), spoken to in raw lines (`tests.raw_agent.RawStdioAgent.in_process`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.acp_peer import DemoPeer, RecordingClient, demo_peer
from tests.demo_in_process import agent_environment
from tests.fake_openai import (
    FakeOpenAI,
    ReceivedRequest,
    Reply,
    Stream,
    chunk,
    openai_agent_args,
    text_reply,
    tool_call_reply,
)
from tests.raw_agent import RawStdioAgent, initialize_params, lone_surrogates_in
from tests.sandbox import Sandbox
from tests.strategies import (
    SPECIAL_CHARACTERS,
    expected_catalog_description,
    forbidden_in,
    is_forbidden,
)

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

GUIDE = "# Guide\n\nThe local copy of the guide.\n"


def well_formed(text: str) -> str:
    """What a strict reader may receive of ``text`` (§11), restated code point by code point: a
    high surrogate followed by a low one is the one character they encode, and every other
    surrogate is U+FFFD."""
    out: list[str] = []
    index = 0
    while index < len(text):
        point = ord(text[index])
        low = ord(text[index + 1]) if index + 1 < len(text) else 0
        if 0xD800 <= point <= 0xDBFF and 0xDC00 <= low <= 0xDFFF:
            out.append(chr(0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00)))
            index += 2
            continue
        out.append("\ufffd" if 0xD800 <= point <= 0xDFFF else text[index])
        index += 1
    return "".join(out)


def write_notes_skill(sandbox: Sandbox) -> Path:
    """A ``notes`` bundle with a ``guide.md`` resource; return the guide's path."""
    skill = sandbox.write_skill("notes", "Take meeting notes.", "# Notes\n\n1. Listen.\n")
    guide = skill.parent / "guide.md"
    guide.write_text(GUIDE, encoding="utf-8")
    return guide


@asynccontextmanager
async def started(
    sandbox: Sandbox, server: FakeOpenAI, read_text: Callable[[str], str]
) -> AsyncIterator[DemoPeer]:
    """The demo agent on the fake model, initialized by a client that reads files."""
    args = openai_agent_args(server.base_url)
    client = RecordingClient(read_text=read_text)
    async with demo_peer(sandbox, *args, env={"TEST_KEY": "secret"}, client=client) as agent:
        yield agent


def updates(agent: DemoPeer, session_id: str, kind: str, since: int = 0) -> list[Any]:
    """The session's updates of one kind, from position ``since`` of the client's on."""
    return [u for u in agent.client.session_updates(session_id, since) if u.session_update == kind]


def tool_call(index: int, call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": "skill", "arguments": arguments},
    }


def reading_reply() -> Stream:
    """Text with a lone surrogate, then three ``skill`` calls.

    ``read-guide`` reads the guide through the client; ``raw-name`` carries a lone surrogate in
    its arguments text itself; ``escaped-path`` carries one as a JSON escape, which only
    appears once the arguments are decoded.
    """
    calls = [
        tool_call(0, "read-guide", json.dumps({"name": "notes", "path": "guide.md"})),
        tool_call(1, "raw-name", '{"name": "notes\ud800"}'),
        tool_call(2, "escaped-path", '{"name": "notes", "path": "x\\udfff.md"}'),
    ]
    return Stream(
        [
            chunk({"role": "assistant", "content": "Reading \ud800 now."}),
            chunk({"tool_calls": calls}),
            chunk({}, "tool_calls"),
        ]
    )


def respond(request: ReceivedRequest, index: int) -> Reply:
    last = request.messages[-1]
    if last["role"] == "user" and "read the guide" in str(last["content"]):
        return reading_reply()
    return text_reply("Done \udbff.")


async def test_lone_surrogates_never_fail_a_turn_before_or_after_a_restart(tmp_path: Path) -> None:
    """Prompt, client file text, model text and tool arguments: replaced, stored, reloaded."""
    sandbox = Sandbox.create(tmp_path)
    guide = write_notes_skill(sandbox)
    reads: list[str] = []

    def read_text(path: str) -> str:
        reads.append(path)
        return "Guide \udc80 from the editor."

    with FakeOpenAI(respond) as server:
        async with started(sandbox, server, read_text) as agent:
            session_id = await agent.open_session()
            assert await agent.ask(session_id, "read the guide \ud800 please") == "end_turn"
            assert agent.client.agent_text(session_id) == "Reading \ufffd now.Done \ufffd."
            ends = {u.tool_call_id: u for u in updates(agent, session_id, "tool_call_update")}
            assert ends["read-guide"].status == "completed"
            assert ends["read-guide"].content[0].content.text == "Guide \ufffd from the editor."
            assert ends["raw-name"].status == "failed"
            assert '"notes\ufffd"' in ends["raw-name"].content[0].content.text
            assert ends["escaped-path"].status == "failed"
            assert '"x\ufffd.md"' in ends["escaped-path"].content[0].content.text
            starts = [u.raw_input for u in updates(agent, session_id, "tool_call")]
            assert {"name": "notes", "path": "x\ufffd.md"} in starts
            assert await agent.ask(session_id, "and again \udfff") == "end_turn"
        assert reads == [str(guide)]
        for entry in sandbox.read_record(session_id):
            assert lone_surrogates_in(entry) == []

        # A record written before text was made well-formed holds the escape itself.
        with sandbox.record_path(session_id).open("ab") as record:
            record.write(
                b'{"v":1,"type":"history","message":{"role":"user","content":"old \\ud800"}}\n'
                b'{"v":1,"type":"history","message":{"role":"assistant","content":"noted"}}\n'
            )

        async with started(sandbox, server, read_text) as agent:
            with anyio.fail_after(30):
                await agent.conn.load_session(
                    cwd=str(sandbox.project), session_id=session_id, mcp_servers=[]
                )
            shown = [u.content.text for u in updates(agent, session_id, "user_message_chunk")]
            assert shown == ["read the guide \ufffd please", "and again \ufffd", "old \ufffd"]
            assert await agent.ask(session_id, "after the restart") == "end_turn"

    assert server.errors == []
    for request in server.requests:
        assert lone_surrogates_in(request.body) == []
    first, second, *_, last = server.requests
    assert first.messages[-1] == {"role": "user", "content": "read the guide \ufffd please"}
    assert second.messages[-4]["content"] == "Reading \ufffd now."
    assert second.messages[-3]["content"] == "Guide \ufffd from the editor."
    assert {"role": "user", "content": "old \ufffd"} in last.messages


# -- property: any text, any turn ------------------------------------------------------------

_ODD_CHARACTERS = st.one_of(
    st.integers(0xD800, 0xDFFF).map(chr),  # surrogates, alone or in accidental pairs
    st.integers(0x00, 0x1F).map(chr),  # C0 controls, NUL included
    st.integers(0x7F, 0x9F).map(chr),  # DEL and C1 controls
    st.sampled_from("\u202a\u202e\u2066\u2069\u2028\u2029\ufeff\ufffe"),
)
ANY_TEXT = st.text(alphabet=st.one_of(st.characters(), _ODD_CHARACTERS), max_size=40)


@dataclass
class FuzzRig:
    """One agent and session serving every example, and what the client answers next."""

    agent: DemoPeer
    server: FakeOpenAI
    session_id: str
    file_text: str = ""


def echo_tool_result(request: ReceivedRequest, index: int) -> Reply:
    """Read the guide on each prompt, then answer by quoting what the read returned."""
    last = request.messages[-1]
    if last["role"] == "tool":
        return text_reply(f"Read: {last['content']}")
    return tool_call_reply(f"read-{index}", "skill", ['{"name": "notes", ', '"path": "guide.md"}'])


@pytest.fixture
async def fuzz_rig(tmp_path: Path) -> AsyncIterator[FuzzRig]:
    """The agent every example of one test talks to (the examples share it)."""
    sandbox = Sandbox.create(tmp_path)
    write_notes_skill(sandbox)
    holder: list[FuzzRig] = []

    def read_text(path: str) -> str:
        return holder[0].file_text

    with FakeOpenAI(echo_tool_result) as server:
        async with started(sandbox, server, read_text) as agent:
            holder.append(FuzzRig(agent, server, await agent.open_session()))
            yield holder[0]
    assert server.errors == []


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=ANY_TEXT, file_text=ANY_TEXT)
async def test_any_text_in_prompts_and_client_reads_keeps_every_frame_well_formed(
    fuzz_rig: FuzzRig, text: str, file_text: str
) -> None:
    """Random text, lone surrogates and controls included: no JSON-RPC error, no bad frame."""
    agent, session_id = fuzz_rig.agent, fuzz_rig.session_id
    fuzz_rig.file_text = file_text
    since = len(agent.client.updates)
    requests_before = len(fuzz_rig.server.requests)
    # A JSON-RPC error would raise here.
    assert await agent.ask(session_id, text) == "end_turn"
    # Every line the agent wrote was checked as it arrived (strict UTF-8, JSON-RPC, no lone
    # surrogate); the schema, when the agent stops.
    assert agent.wire.malformed == []
    [end] = updates(agent, session_id, "tool_call_update", since)
    result = end.content[0].content.text
    if "\0" in file_text:
        assert end.status == "failed"
    else:
        assert end.status == "completed"
        assert result == well_formed(file_text)
    assert agent.client.agent_text(session_id, since) == f"Read: {result}"
    asked, answered = fuzz_rig.server.requests[requests_before:]
    assert asked.messages[-1]["content"].startswith(well_formed(text))
    assert lone_surrogates_in(asked.body) == lone_surrogates_in(answered.body) == []


# -- descriptions on disk -----------------------------------------------------------------


@pytest.fixture
def raw_agent(tmp_path: Path) -> Iterator[tuple[RawStdioAgent, Sandbox]]:
    """One demo agent (offline model) for a whole test, spoken to in raw lines in this process,
    with its sandbox."""
    sandbox = Sandbox.create(tmp_path)
    with RawStdioAgent.in_process(sandbox.args(), env=agent_environment(sandbox.env())) as agent:
        agent.call("initialize", initialize_params(reads_files=False))
        yield agent, sandbox
    assert agent.problems == []


def yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: any character survives through an escape."""
    escaped = [
        "\\" + c if c in '"\\' else c if " " <= c <= "~" else f"\\U{ord(c):08x}" for c in text
    ]
    return '"' + "".join(escaped) + '"'


def expected_in_list(text: str) -> str:
    """What ``_skills/list`` shows: the description without forbidden characters, NEL as a line
    feed, all other whitespace kept."""
    return "".join(c for c in text.replace("\x85", "\n") if not is_forbidden(c))


# Text a UTF-8 file can hold, special characters often. `st.characters()` draws lone
# surrogates too (rarely), which no UTF-8 file holds: a YAML escape of one is refused, and the
# skill skipped, by design.
disk_descriptions = st.lists(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(SPECIAL_CHARACTERS)),
    max_size=80,
).map("".join)


# The agent is shared by every example on purpose (starting one per example would cost far more
# than the example); each writes its own skills and reloads, and every frame is checked as it is
# read.
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(disk_descriptions, min_size=1, max_size=4))
@example(texts=["Run\x1b[2J \u202eexe.evil\u202c now\x00\x85then\x9b\u2066x\u2069"])
def test_descriptions_on_disk_reach_the_model_and_editor_clean(
    raw_agent: tuple[RawStdioAgent, Sandbox], texts: list[str]
) -> None:
    """Random descriptions in SKILL.md files: every frame the real agent writes is well-formed,
    and the catalog, the slash commands and ``_skills/list`` hold no forbidden character."""
    agent, sandbox = raw_agent
    shutil.rmtree(sandbox.skills_dir)
    descriptions = {f"skill-{i}": f"d {text}" for i, text in enumerate(texts)}
    for name, description in descriptions.items():
        (sandbox.skills_dir / name).mkdir(parents=True)
        (sandbox.skills_dir / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {yaml_quoted(description)}\n---\nBody.\n",
            encoding="utf-8",
        )
    agent.call("_skills/reload", {})
    session_id = agent.call("session/new", {"cwd": str(sandbox.project), "mcpServers": []})[
        "sessionId"
    ]
    prompt = [{"type": "text", "text": "hello"}]
    agent.call("session/prompt", {"sessionId": session_id, "prompt": prompt})
    [catalog] = agent.call("_skills/prefix", {"sessionId": session_id})["messages"]
    listed = agent.call("_skills/list", {"sessionId": session_id})["skills"]
    commands = next(
        frame["params"]["update"]["availableCommands"]
        for frame in reversed(agent.frames)
        if frame.get("method") == "session/update"
        and frame["params"]["sessionId"] == session_id
        and frame["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )

    catalog_lines = catalog["text"].split("\n")
    for name, description in descriptions.items():
        assert f"- `{name}`: {expected_catalog_description(description, 500)}" in catalog_lines
    assert forbidden_in(catalog["text"]) == []
    assert {s["name"]: s["description"] for s in listed} == {
        name: expected_in_list(description) for name, description in descriptions.items()
    }
    # Every skill is a command, then the library's built-in `/skills`.
    assert sorted(c["name"] for c in commands) == sorted([*descriptions, "skills"])
    for command in commands:
        assert forbidden_in(command["description"]) == []
        assert command["description"] == " ".join(command["description"].split())
