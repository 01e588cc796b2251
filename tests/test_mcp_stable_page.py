"""What the MCP Skills extension's stable page asks of a host, against FastMCP 4.2.3 (contract
§14a, last point): a skill is loaded given only the uri of its ``SKILL.md`` (listed, or
confirmed with ``skills/get``), by the ``skill`` tool and by ``acp-skills show``; each answer is
kept for its ``ttlMs`` and shared only as its ``cacheScope`` allows; a skill of 512 files and
16 MiB is accepted."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry, SkillTool
from acp_skills.cli.main import main as cli_main
from acp_skills.mcp import McpServer, McpSkillProvider
from acp_skills.trust import TrustStore
from tests.acp_peer import ScriptedModelAgent, connected
from tests.mcp_http import SERVER, write_served_skill
from tests.mcp_memory import InProcess, session_with

pytestmark = pytest.mark.anyio

DEPLOY = "skill://deploy/SKILL.md"
MIB = 1024 * 1024


def team(root: Path, *options: str, label: str = "team") -> McpServer:
    """The FastMCP skills server of ``root`` (served in the test's process by `InProcess`)."""
    return McpServer(label=label, command=sys.executable, args=(SERVER, str(root), *options))


def served_skills(tmp_path: Path, *names: str) -> tuple[Path, Path]:
    """A folder of skills for the server, and the file it records each method in."""
    root = tmp_path / "served"
    for name in names:
        write_served_skill(root, name, f"Skill {name} from the server.", f"Body of {name}.")
    return root, tmp_path / "methods.txt"


def asked(record: Path, method: str) -> int:
    """How many requests of ``method`` the server received."""
    lines = record.read_text(encoding="utf-8").splitlines() if record.exists() else []
    return lines.count(method)


@asynccontextmanager
async def tool_for(
    servers: Sequence[McpServer], transport: InProcess | None = None, *local: Path
) -> AsyncIterator[tuple[SkillTool, SkillRegistry, McpSkillProvider]]:
    """The `skill` tool over a registry of ``local`` skill folders, then the MCP servers."""
    registry = SkillRegistry()
    if local:
        registry.register_provider(LocalSkillProvider(custom_skill_dirs=local, watch=False))
    mcp = McpSkillProvider(timeout=30, transport=transport or InProcess())
    registry.register_provider(mcp)
    try:
        yield SkillTool(registry), registry, mcp
    finally:
        await mcp.aclose()


async def load(tool: SkillTool, servers: Sequence[McpServer], **arguments: str) -> tuple[bool, str]:
    result = await tool.call(arguments, cwd="/", servers=tuple(servers))
    return result.is_error, result.text


async def names(registry: SkillRegistry, servers: Sequence[McpServer]) -> list[str]:
    return [skill.name for skill in await registry.list(SkillLookupOptions(servers=tuple(servers)))]


# -- skills/get: a skill named by its uri -------------------------------------------------------


async def test_a_skill_its_server_does_not_list_is_loaded_by_its_uri(tmp_path: Path) -> None:
    """A partial listing is no proof: `skills/get` confirms the uri, the skill loads, and from
    then on it counts among the server's skills."""
    root, record = served_skills(tmp_path, "deploy", "fmt")
    server = team(root, "--unlisted", DEPLOY, "--record", str(record))
    async with tool_for([server]) as (tool, registry, _):
        assert await names(registry, [server]) == ["fmt"]
        failed, text = await load(tool, [server], name=DEPLOY)
        assert not failed
        assert "Body of deploy." in text
        assert 'Served by the MCP server "team".' in text
        assert asked(record, "skills/get") == 1
        failed, text = await load(tool, [server], name=DEPLOY, path="notes.md")
        assert (failed, text) == (False, "notes of deploy\n")
        assert await names(registry, [server]) == ["deploy", "fmt"]


async def test_two_lookups_at_once_forget_a_confirmed_skill_its_server_no_longer_serves(
    tmp_path: Path,
) -> None:
    """Both lookups ask `skills/get` again, both hear the skill is gone: each lists what the
    server serves, and neither fails on the uri the other forgot first."""
    root, record = served_skills(tmp_path, "deploy", "fmt")
    server = team(root, "--unlisted", DEPLOY, "--ttl-ms", "0", "--reload", "--record", str(record))
    async with tool_for([server]) as (tool, _, mcp):
        assert not (await load(tool, [server], name=DEPLOY))[0]
        shutil.rmtree(root / "deploy")
        options = SkillLookupOptions(servers=(server,))
        found: list[list[str]] = []

        async def look() -> None:
            found.append(sorted(c.name for c in await mcp.list(options)))

        async with anyio.create_task_group() as group:
            group.start_soon(look)
            group.start_soon(look)
        assert found == [["fmt"], ["fmt"]]


async def test_a_listed_skill_named_by_its_uri_needs_no_skills_get_even_when_shadowed(
    tmp_path: Path,
) -> None:
    """The listing already holds the entry; naming the uri names the server's skill, even where a
    local skill of that name wins the catalog."""
    root, record = served_skills(tmp_path, "deploy")
    local = tmp_path / "local"
    write_served_skill(local, "deploy", "The local deploy.", "Body of the local deploy.")
    server = team(root, "--record", str(record))
    async with tool_for([server], None, local) as (tool, _, _):
        assert "Body of the local deploy." in (await load(tool, [server], name="deploy"))[1]
        failed, text = await load(tool, [server], name=DEPLOY)
        assert not failed
        assert "Body of deploy." in text
    assert asked(record, "skills/get") == 0


@pytest.mark.parametrize(
    ("name", "servers", "expected"),
    [
        (
            "skill://nope/SKILL.md",
            1,
            'Error: skill "skill://nope/SKILL.md" is not served by any server of this session',
        ),
        (
            "skill://deploy/SKILL.md",
            0,
            'Error: skill "skill://deploy/SKILL.md" is not served by any server of this session',
        ),
        (
            "skill://deploy",
            1,
            'Error: "skill://deploy" is not the uri of a skill: a skill is named by the uri of its '
            'SKILL.md, such as "skill://deploy-app/SKILL.md"',
        ),
    ],
    ids=["no-server-serves-it", "no-servers", "not-a-skill-md"],
)
async def test_a_uri_the_session_cannot_load_is_a_readable_error(
    tmp_path: Path, name: str, servers: int, expected: str
) -> None:
    """An unknown uri, a session without servers, a uri naming no SKILL.md: an `Error:` result."""
    root, record = served_skills(tmp_path, "deploy")
    named = [team(root, "--record", str(record))][:servers]
    async with tool_for(named) as (tool, _, _):
        assert await load(tool, named, name=name) == (True, expected)
    if name == "skill://deploy":
        assert asked(record, "skills/get") == 0  # refused before any request


@pytest.mark.sdk
async def test_a_skill_confirmed_by_its_uri_waits_for_trust_until_a_session_asks_about_it(
    tmp_path: Path,
) -> None:
    """Through the agent: no question named it, so the model's call is told it waits; the next
    session's question names it, and once admitted the same call loads it."""
    root, _ = served_skills(tmp_path, "deploy", "fmt")
    server = team(root, "--unlisted", DEPLOY)
    mcp = McpSkillProvider(servers=[server], timeout=30, transport=InProcess())
    registry = SkillRegistry()
    registry.register_provider(mcp)
    function = {"name": "skill", "arguments": json.dumps({"name": DEPLOY})}
    call = {"id": "c1", "type": "function", "function": function}
    store = TrustStore(tmp_path / "trust.json")
    try:
        async with connected(
            registry,
            agent_type=ScriptedModelAgent,
            trust="ask",
            trust_store=store,
            answer="allow_once",
        ) as peer:
            agent: Any = peer.agent
            for expected, named in (
                (f'Error: skill "{DEPLOY}" from MCP server "team" is waiting for trust', ["fmt"]),
                ("Body of deploy.", ["deploy", "fmt"]),
            ):
                agent.replies = [{"content": "", "tool_calls": [call]}, {"content": "done"}]
                session_id = await peer.new_session(tmp_path)
                assert (await peer.prompt(session_id, "deploy it")).stop_reason == "end_turn"
                result = agent.requests[-1][-1]
                assert result["role"] == "tool"
                assert expected in result["content"]
                (question,) = [
                    update["content"][0]["content"]["text"]
                    for update in peer.wire.updates(session_id, "tool_call")
                    if update["toolCallId"].startswith("trust-")
                ]
                assert [line.split(":")[0] for line in question.splitlines()] == [
                    f"- {name}" for name in named
                ]
    finally:
        await mcp.aclose()


async def skill_call_by_uri(peer: Any, cwd: Path) -> str:
    """What a new session's model is told when it calls the ``skill`` tool with `DEPLOY`."""
    function = {"name": "skill", "arguments": json.dumps({"name": DEPLOY})}
    call = {"id": "c1", "type": "function", "function": function}
    peer.agent.replies = [{"content": "", "tool_calls": [call]}, {"content": "done"}]
    session_id = await peer.new_session(cwd)
    assert (await peer.prompt(session_id, "deploy it")).stop_reason == "end_turn"
    return str(peer.agent.requests[-1][-1]["content"])


async def test_a_skill_named_by_its_uri_of_a_trusted_server_that_lists_nothing_loads(
    tmp_path: Path,
) -> None:
    """An ``--mcp-server`` server trusted with a skill it does not list, and no project
    skills: after a restart, the trust file is still read and the call loads the skill."""
    root, _ = served_skills(tmp_path, "deploy")
    server = team(root, "--unlisted", DEPLOY)
    store = TrustStore(tmp_path / "trust.json")
    async with session_with(server, store, "allow_always") as peer:
        assert "is waiting for trust" in await skill_call_by_uri(peer, tmp_path)
        assert "Body of deploy." in await skill_call_by_uri(peer, tmp_path)  # trusted for good
    async with session_with(server, store, "reject_once") as peer:
        assert "Body of deploy." in await skill_call_by_uri(peer, tmp_path)


# -- ttlMs and cacheScope ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ttl_ms", "listings"),
    [(600_000, 1), (0, 2)],
    ids=["kept-for-its-ttl", "stale-at-once"],
)
async def test_a_listing_is_kept_for_its_ttl_and_no_longer(
    tmp_path: Path, ttl_ms: int, listings: int
) -> None:
    """Two lookups ask for one listing while it is fresh, and for two once it is stale."""
    root, record = served_skills(tmp_path, "deploy")
    server = team(root, "--ttl-ms", str(ttl_ms), "--record", str(record))
    async with tool_for([server]) as (_, registry, _):
        assert await names(registry, [server]) == ["deploy"]
        assert await names(registry, [server]) == ["deploy"]
    assert asked(record, "skills/list") == listings


@pytest.mark.parametrize(("ttl_ms", "gets"), [(600_000, 1), (0, 2)], ids=["kept", "stale"])
async def test_a_skills_get_entry_is_kept_for_its_ttl(
    tmp_path: Path, ttl_ms: int, gets: int
) -> None:
    """Two loads of a skill its server does not list ask `skills/get` once while its entry is
    fresh; a stale entry is asked for again."""
    root, record = served_skills(tmp_path, "deploy")
    server = team(root, "--unlisted", DEPLOY, "--ttl-ms", str(ttl_ms), "--record", str(record))
    async with tool_for([server]) as (tool, _, _):
        for _ in range(2):
            assert not (await load(tool, [server], name=DEPLOY))[0]
    assert asked(record, "skills/get") == gets


URL = "https://skills.example.com/mcp"
FIRST_PAGE_PRIVATE = ("--first-page-scope", "private")


@pytest.mark.parametrize(
    ("options", "over", "listings"),
    [
        (("--cache-scope", "public"), "http", 1),
        (("--cache-scope", "private"), "http", 2),
        (("--cache-scope", "public"), "stdio", 2),
        (("--cache-scope", "public", "--page-size", "1", *FIRST_PAGE_PRIVATE), "http", 4),
    ],
    ids=["public-shared-by-its-url", "private-never-shared", "stdio-never", "one-page-private"],
)
async def test_cache_scope_decides_which_configurations_share_a_listing(
    tmp_path: Path, options: tuple[str, ...], over: str, listings: int
) -> None:
    """Two configurations of one server that differ in their authorization (headers of an HTTP
    url; the label and env of a stdio command): a public listing of a url serves both, a
    private one (or one with a private page) only the one that asked, a stdio one never both."""
    root, record = served_skills(tmp_path, "deploy", "fmt")
    served = team(root, "--ttl-ms", "600000", "--record", str(record), *options)
    if over == "http":
        pair = [
            McpServer(label=label, url=URL, headers=(("Authorization", f"Bearer {label}"),))
            for label in ("alice", "bob")
        ]
    else:
        pair = [
            McpServer(label=label, command=served.command, args=served.args, env=(("U", label),))
            for label in ("alice", "bob")
        ]
    async with tool_for(pair, InProcess(urls={URL: served})) as (_, registry, _):
        for server in pair:
            assert await names(registry, [server]) == ["deploy", "fmt"]
    assert asked(record, "skills/list") == listings


async def test_a_listing_is_kept_no_longer_than_its_shortest_lived_page(tmp_path: Path) -> None:
    """A last page stale at once makes the whole listing stale, however long the first page
    may be kept: the next lookup lists again."""
    root, record = served_skills(tmp_path, "deploy", "fmt")
    options = ("--ttl-ms", "0", "--page-size", "1", "--first-page-ttl-ms", "600000")
    server = team(root, "--record", str(record), *options)
    async with tool_for([server]) as (_, registry, _):
        for _ in range(2):
            assert await names(registry, [server]) == ["deploy", "fmt"]
    assert asked(record, "skills/list") == 4


# -- the per-skill limits ----------------------------------------------------------------------


async def test_a_skill_of_512_files_and_16_mib_is_listed_and_loaded(tmp_path: Path) -> None:
    """The limits every host accepts, exactly: FastMCP serves it, and it is listed, loaded and
    read; only a file over the per-read cap is refused, naming the cap."""
    root, _ = served_skills(tmp_path, "bulky")
    folder = root / "bulky"
    for index in range(509):  # with SKILL.md, notes.md and big.bin: 512 files
        (folder / f"part-{index:03}.md").write_text("x\n", encoding="utf-8")
    used = sum(path.stat().st_size for path in folder.iterdir())
    (folder / "big.md").write_bytes(b"y" * (16 * MIB - used))
    assert sum(path.stat().st_size for path in folder.iterdir()) == 16 * MIB
    assert len(list(folder.iterdir())) == 512
    server = team(root)
    async with tool_for([server]) as (tool, registry, mcp):
        assert await names(registry, [server]) == ["bulky"]
        assert await mcp.diagnose(SkillLookupOptions(servers=(server,))) == ()
        failed, text = await load(tool, [server], name="bulky")
        assert not failed
        assert "Body of bulky." in text
        assert await load(tool, [server], name="bulky", path="part-508.md") == (False, "x\n")
        failed, text = await load(tool, [server], name="bulky", path="big.md")
        assert failed
        big = (folder / "big.md").stat().st_size
        assert text == (
            f'Error: cannot read "big.md" from skill "bulky": the file is {big} bytes, over the '
            "1048576-byte limit"
        )


# -- the command line, against a real FastMCP process -------------------------------------------


async def test_acp_skills_show_loads_a_skill_by_its_uri_from_a_real_stdio_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end over stdio, the FastMCP server as a process of its own: `show URI` confirms a
    skill its server does not list and prints what the tool would give the model."""
    root, record = served_skills(tmp_path, "deploy")
    command = [sys.executable, SERVER, str(root), "--unlisted", DEPLOY, "--record", str(record)]
    argv = ["show", DEPLOY, "--cwd", str(tmp_path), "--mcp-server", "team=" + shlex.join(command)]
    status = await anyio.to_thread.run_sync(cli_main, argv)
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Body of deploy." in out
    assert asked(record, "skills/get") > 0
