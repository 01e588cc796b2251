"""Named hostile inputs, each met once through the real agent or the real command line, so
that a later change cannot quietly bring one of them back.

The model endpoint is a real HTTP server on 127.0.0.1 (`tests.fake_openai`); the agent runs in
this process (`tests.acp_peer.demo_peer`), and so does the command line (``main(argv)``),
writing to a real pseudo-terminal.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.acp_peer import demo_peer
from tests.cli_runner import cli_env
from tests.cli_runner import run_on_a_terminal as cli_on_a_terminal
from tests.fake_openai import (
    FakeOpenAI,
    Raw,
    Reply,
    Stream,
    chunk,
    openai_agent_args,
    text_reply,
    tool_call_reply,
)
from tests.sandbox import Sandbox

pytestmark = pytest.mark.anyio

NOTES_BODY = "# Meeting notes\n\n1. Read the notes.\n"
UNREADABLE = "The model endpoint sent a reply the agent could not read"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox.create(tmp_path)


def sse(*events: Any) -> bytes:
    """Server-sent events: each event a JSON value, or raw text sent as it is."""
    lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in [*lines, "[DONE]"])


def call_piece(**piece: Any) -> dict[str, Any]:
    return chunk({"tool_calls": [piece]})


@contextlib.asynccontextmanager
async def agent_on(server: FakeOpenAI, sandbox: Sandbox, *args: str) -> Any:
    """The demo agent on the ``openai`` model at ``server``, with a session open."""
    flags = openai_agent_args(server.base_url, *args)
    async with demo_peer(sandbox, *flags, env={"TEST_KEY": "k"}) as agent:
        yield agent, await agent.open_session()


# -- the model endpoint -------------------------------------------------------------------------

MALFORMED_REPLIES: list[tuple[str, Reply, str]] = [
    ("bad SSE JSON", Raw(sse("{not json")), UNREADABLE),
    (
        "arguments sent as an object",
        Raw(sse(call_piece(index=0, id="c1", function={"name": "skill", "arguments": {}}))),
        "tool-call arguments is a dict",
    ),
    (
        "a chunk without index",
        Raw(sse(call_piece(id="c1", function={"name": "skill", "arguments": "{}"}))),
        "a tool-call piece has no index",
    ),
    ("non-string content", Raw(sse(chunk({"content": {"text": "hi"}}))), "content is a dict"),
    (
        "a non-streamed JSON body",
        Raw(
            json.dumps(
                {"object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}
            ).encode(),
            content_type="application/json",
        ),
        "sent no streamed reply",
    ),
    (
        "a streamed reply past the size cap",
        Raw(sse(*(chunk({"content": "x" * 100_000}) for _ in range(21)))),
        "passed 2,000,000 characters",
    ),
]


@pytest.mark.sdk
async def test_malformed_endpoint_output_is_a_model_error_with_end_turn(
    sandbox: Sandbox,
) -> None:
    """Each malformed reply is shown as a model error and ends the turn; the agent lives on."""
    script: list[Reply] = []
    for _, reply, _ in MALFORMED_REPLIES:
        script += [reply, text_reply("Still here.")]
    with FakeOpenAI(script) as server:
        async with agent_on(server, sandbox) as (agent, sid):
            client = agent.client
            for name, _, expected in MALFORMED_REPLIES:
                mark = len(client.updates)
                assert await agent.ask(sid, name) == "end_turn", name
                assert expected in client.agent_text(sid, since=mark), name
                mark = len(client.updates)
                assert await agent.ask(sid, "again") == "end_turn", name
                assert client.agent_text(sid, since=mark) == "Still here.", name
            assert agent.serving
    assert len(server.requests) == 2 * len(MALFORMED_REPLIES)


@pytest.mark.sdk
async def test_a_one_byte_drip_is_stopped_by_the_overall_timeout(sandbox: Sandbox) -> None:
    """An endpoint sending a byte every 0.2 s never trips a per-read timeout: --timeout holds."""
    drip = Raw(sse(chunk({"content": "Partial"}))[: -len(b"data: [DONE]\n\n")], drip=0.2)
    with FakeOpenAI([drip]) as server:
        async with agent_on(server, sandbox, "--timeout", "1") as (agent, sid):
            assert await agent.ask(sid, "hello") == "end_turn"
            text = agent.client.agent_text(sid)
        assert await anyio.to_thread.run_sync(server.client_closed.wait, 10.0)
    assert text == "Partial\n\nThe model endpoint did not answer within 1 s. Try again later."


def _call_without_id(name: str, arguments: str) -> Stream:
    piece = {"index": 0, "type": "function", "function": {"name": name, "arguments": arguments}}
    return Stream([call_piece(**piece), chunk({}, "tool_calls")])


@pytest.mark.sdk
async def test_tool_call_ids_are_unique_in_a_session_when_repeated_or_missing(
    sandbox: Sandbox,
) -> None:
    """An endpoint numbering calls per response (call_0 twice) or omitting ids still gets
    every result paired with its own call."""
    sandbox.write_skill("alpha-notes", "Summarise meeting notes.", NOTES_BODY)
    arguments = '{"name": "alpha-notes"}'
    script: list[Reply] = [
        tool_call_reply("call_0", "skill", [arguments]),
        tool_call_reply("call_0", "skill", [arguments]),
        _call_without_id("skill", arguments),
        _call_without_id("skill", arguments),
        text_reply("Done."),
    ]
    with FakeOpenAI(script) as server:
        async with agent_on(server, sandbox) as (agent, sid):
            assert await agent.ask(sid, "use the notes skill") == "end_turn"
    messages = server.requests[-1].messages
    call_ids = [
        call["id"] for m in messages if m["role"] == "assistant" for call in m.get("tool_calls", [])
    ]
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(call_ids) == 4
    assert len(set(call_ids)) == 4
    assert all(call_ids)
    assert result_ids == call_ids


# -- terminal and log injection -----------------------------------------------------------------

HOSTILE_DIR = "odd\r\x1b[2Kname\x0b\x0c\nerror:forged-row"
HOSTILE_BODY = "\x1b]0;pwned title\x07\x1b[2J\x1b[Hcleared\r\x9bsneaky\n"
# What our own styling writes; nothing else may start an escape sequence.
OUR_STYLING = re.compile(r"\x1b\[[0-9]{1,2}(?:;[0-9]{1,2})*m")


def hostile_skills(root: Path) -> Path:
    skills = root / "skills"
    for directory, name, body in (("tricky", "tricky", HOSTILE_BODY), (HOSTILE_DIR, "odd", "x")):
        (skills / directory).mkdir(parents=True)
        (skills / directory / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: A skill.\n---\n{body}", encoding="utf-8"
        )
    return skills


def run_on_a_terminal(*args: str) -> str:
    """What ``acp-skills ARGS`` wrote to a pseudo-terminal and to stderr (the terminal's line
    endings undone)."""
    result = cli_on_a_terminal(*args, env=cli_env(TERM="xterm"))
    assert result.returncode in (0, 1)
    return (result.stdout + result.stderr).replace("\r\n", "\n")


@pytest.mark.parametrize("command", ["list", "doctor", "show tricky"])
def test_cli_on_a_terminal_spells_out_controls_from_disk(tmp_path: Path, command: str) -> None:
    """CR, LF, VT, FF, ESC and C1 from directory names and bodies never reach the terminal raw."""
    skills = hostile_skills(tmp_path)
    homes = ["--dsh-home", str(tmp_path / "d"), "--agents-home", str(tmp_path / "a")]
    output = run_on_a_terminal(
        *command.split(), "--cwd", str(tmp_path), *homes, "--skills-dir", str(skills)
    )
    bare = OUR_STYLING.sub("", output)
    assert "\x1b" not in bare
    assert not {"\r", "\x0b", "\x0c", "\x07", "\x9b"} & set(bare)
    assert not any(line.startswith("error:forged") for line in bare.splitlines())
    if command.startswith("show"):
        assert "\\x1b]0;pwned title\\x07\\x1b[2J" in bare
    else:
        assert "odd\\x0d\\x1b[2Kname\\x0b\\x0c\\x0aerror:forged-row" in bare


@pytest.mark.sdk
async def test_agent_console_log_spells_out_controls_from_disk(sandbox: Sandbox) -> None:
    """A directory whose name holds CR, LF and escapes cannot forge or drive log lines."""
    skills = hostile_skills(sandbox.root / "hostile")
    project = sandbox.root / HOSTILE_DIR
    project.mkdir()
    async with demo_peer(sandbox, "--skills-dir", str(skills), "--log-level", "debug") as agent:
        await agent.open_session(project)
    log = agent.log
    assert "odd\\x0d\\x1b[2Kname\\x0b\\x0c\\x0aerror:forged-row" in log
    assert "\x1b" not in log
    assert "\r" not in log
    assert not any(line.startswith("error:forged") for line in log.splitlines())


@pytest.mark.sdk
async def test_skills_report_spells_out_controls_from_disk(sandbox: Sandbox) -> None:
    """`/skills` for a project whose path holds CR, LF and escapes shows them spelt out."""
    project = sandbox.root / HOSTILE_DIR
    project.mkdir()
    async with demo_peer(sandbox) as agent:
        sid = await agent.open_session(project)
        assert await agent.ask(sid, "/skills") == "end_turn"
        text = agent.client.agent_text(sid)
    assert "odd\\x0d\\x1b[2Kname\\x0b\\x0c\\x0aerror:forged-row" in text
    assert not {"\r", "\x1b", "\x0b", "\x0c"} & set(text)
    assert not any(line.startswith("error:forged") for line in text.splitlines())
