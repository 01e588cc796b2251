"""McpSkillProvider against FastMCP 4.2.3's SkillsDirectoryProvider (contract §14): in this
process over memory streams (tests/mcp_memory.py), and end to end once as a real subprocess
over stdio and once over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from acp.schema import TextContentBlock

from acp_skills import (
    LocalSkillProvider,
    SkillLookupOptions,
    SkillRegistry,
    SkillTool,
    render_skill_content,
)
from acp_skills.mcp import McpServer, McpSkillProvider, parse_server_option
from acp_skills.mcp import provider as mcp_provider
from acp_skills.mcp.listing import ListedSkill, read_entry
from acp_skills.mcp.provider import McpLocator
from tests.acp_peer import ScriptedModelAgent, connected
from tests.events import named_pipe, read_pipe
from tests.mcp_http import SERVER, http_skills_server, write_served_skill
from tests.mcp_memory import InProcess
from tests.mcp_scripted import SCRIPTED_SERVER, served, skill_text, write_script

pytestmark = pytest.mark.anyio


def write_skill(root: Path, name: str, body: str = "Do the thing.") -> Path:
    # `allowed-tools` is there to be ignored (contract §14).
    return write_served_skill(root, name, f"Skill {name}.", body, extra="allowed-tools: Bash\n")


def stdio_server(root: Path, *extra: str, label: str = "team") -> McpServer:
    return McpServer(label=label, command=sys.executable, args=(SERVER, str(root), *extra))


@pytest.fixture
async def registry() -> AsyncIterator[tuple[SkillRegistry, McpSkillProvider]]:
    """A registry with the MCP provider alone, its servers served in this process."""
    provider = McpSkillProvider(timeout=30, transport=InProcess())
    found = SkillRegistry()
    found.register_provider(provider)
    try:
        yield found, provider
    finally:
        await provider.aclose()


Kit = tuple[SkillRegistry, McpSkillProvider]


@pytest.mark.sdk
async def test_lists_and_loads_over_stdio_with_verification(tmp_path: Path) -> None:
    """End to end: the server as a child process over stdio, through the default transport."""
    provider = McpSkillProvider(timeout=30)
    skills = SkillRegistry()
    skills.register_provider(provider)
    write_skill(tmp_path / "root", "deploy-app", "Run make deploy.")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root"),))
    try:
        with anyio.fail_after(60):
            snapshot = await skills.snapshot(options)
            loaded = await skills.get("deploy-app", options)
            text = await SkillTool(skills).call({"name": "deploy-app"}, cwd=str(tmp_path))
    finally:
        await provider.aclose()
    assert [skill.name for skill in snapshot.skills] == ["deploy-app"]
    assert snapshot.skills[0].rank == 600
    assert loaded is not None
    assert loaded.content == "Run make deploy."
    # The tool builds its own options without servers: the skill is not in that scope.
    assert text.is_error
    state = next(iter(provider.servers.values()))
    assert (state.connected, state.skills, state.failure) == (True, 1, None)


STARTS_BEFORE_THE_SDK = """\
import asyncio, sys, threading
from acp_skills import SkillLookupOptions
from acp_skills.mcp import McpServer, McpSkillProvider
seen = []
def note(event, args):
    if event == "subprocess.Popen" and sys.argv[1] in args[1]:
        seen.append(("spawn", threading.current_thread() is threading.main_thread()))
    elif event == "import" and args[0] == "mcp":
        seen.append(("import mcp", threading.current_thread() is threading.main_thread()))
async def main():
    provider = McpSkillProvider(timeout=30)
    server = McpServer(label="team", command=sys.executable, args=tuple(sys.argv[1:]))
    try:
        found = await provider.list(SkillLookupOptions(servers=(server,)))
    finally:
        await provider.aclose()
    print([candidate.name for candidate in found])
sys.addaudithook(note)
asyncio.run(main())
print(seen)
"""


def test_a_stdio_server_starts_while_the_sdk_loads_in_a_worker_thread(tmp_path: Path) -> None:
    """The first connection spawns a stdio server (on the event loop's thread) before the MCP
    SDK is imported, and imports it in a worker thread: the server's start-up hides the import,
    which never holds the event loop (a fresh interpreter's audit events)."""
    write_skill(tmp_path / "root", "deploy-app")
    result = subprocess.run(
        [sys.executable, "-c", STARTS_BEFORE_THE_SDK, SERVER, str(tmp_path / "root")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.splitlines()[-2:] == [
        "['deploy-app']",
        "[('spawn', True), ('import mcp', False)]",
    ]


async def test_a_file_changed_after_listing_is_refused(tmp_path: Path, registry: Kit) -> None:
    """The refusal names the server and the check that failed: the size read, or (the same size)
    the digest."""
    skills, _ = registry
    folder = write_skill(tmp_path / "root", "deploy-app")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root", "--reload"),))
    listed = (folder / "SKILL.md").read_text(encoding="utf-8")
    said = 'skill "deploy-app" changed on its server since it was listed (MCP server "team": '
    uri = "skill://deploy-app/SKILL.md"
    for text, why in [
        (listed + "Something else.\n", rf"{uri} is \d+ bytes, listed as \d+\)"),
        (listed[:-2] + "X\n", rf"{uri} has the digest sha256:[0-9a-f]{{64}}, not the listed one"),
    ]:
        (folder / "SKILL.md").write_text(listed, encoding="utf-8")
        snapshot = await skills.snapshot(options)
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
        with pytest.raises(Exception, match=re.escape(said) + why):
            await skills.load(snapshot.skills[0], options)


async def test_a_local_skill_wins_a_clash_and_the_clash_is_reported(tmp_path: Path) -> None:
    write_skill(tmp_path / "root", "deploy-app")
    local_root = tmp_path / "local"
    write_skill(local_root, "deploy-app", "Local body.")
    provider = McpSkillProvider(timeout=30, transport=InProcess())
    skills = SkillRegistry()
    skills.register_provider(
        LocalSkillProvider(tmp_path / "h1", tmp_path / "h2", custom_skill_dirs=[str(local_root)])
    )
    skills.register_provider(provider)
    try:
        options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root"),))
        snapshot = await skills.snapshot(options)
        assert snapshot.skills[0].provider != "mcp"
        assert [(s.skill.provider, s.winner.provider) for s in snapshot.shadowed] == [
            ("mcp", snapshot.skills[0].provider)
        ]
    finally:
        await provider.aclose()


async def test_sessions_with_different_servers_never_share_a_catalog(
    tmp_path: Path, registry: Kit
) -> None:
    skills, _ = registry
    write_skill(tmp_path / "a", "alpha")
    write_skill(tmp_path / "b", "beta")
    first = SkillLookupOptions(servers=(stdio_server(tmp_path / "a"),))
    second = SkillLookupOptions(servers=(stdio_server(tmp_path / "b"),))
    assert [s.name for s in await skills.list(first)] == ["alpha"]
    assert [s.name for s in await skills.list(second)] == ["beta"]
    assert [s.name for s in await skills.list(SkillLookupOptions())] == []


async def test_listing_fetches_no_file(tmp_path: Path, registry: Kit) -> None:
    skills, _ = registry
    write_skill(tmp_path / "root", "deploy-app")
    record = tmp_path / "methods.txt"
    options = SkillLookupOptions(
        servers=(stdio_server(tmp_path / "root", "--record", str(record)),)
    )
    await skills.snapshot(options)
    assert "resources/read" not in record.read_text().split()
    assert "skills/list" in record.read_text().split()
    await skills.get("deploy-app", options)
    assert record.read_text().split().count("resources/read") == 1


async def test_a_server_without_the_extension_contributes_nothing(
    tmp_path: Path, registry: Kit
) -> None:
    skills, provider = registry
    options = SkillLookupOptions(servers=(stdio_server(tmp_path, "--plain"),))
    snapshot = await skills.snapshot(options)
    assert snapshot.skills == ()
    assert next(iter(provider.servers.values())).failure is None


async def test_a_transport_that_cannot_open_skips_its_server_with_the_reason(
    tmp_path: Path,
) -> None:
    """A transport factory that fails is a server skipped, told, never a failed lookup."""

    def unreachable(server: McpServer) -> Any:
        raise ConnectionRefusedError(f"no way to {server.label}")

    provider = McpSkillProvider(timeout=30, transport=unreachable)
    skills = SkillRegistry()
    skills.register_provider(provider)
    server = stdio_server(tmp_path)
    try:
        snapshot = await skills.snapshot(SkillLookupOptions(servers=(server,)))
    finally:
        await provider.aclose()
    assert snapshot.skills == ()
    assert provider.servers[server].failure == "ConnectionRefusedError: no way to team"


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """A FastMCP skills server over streamable HTTP on 127.0.0.1 (a free port)."""
    write_skill(tmp_path / "http-root", "served-skill")
    with http_skills_server(tmp_path / "http-root") as url:
        yield url


async def test_lists_and_loads_over_streamable_http(http_server: str) -> None:
    """End to end: the server over streamable HTTP, through the default transport."""
    provider = McpSkillProvider(timeout=30)
    skills = SkillRegistry()
    skills.register_provider(provider)
    options = SkillLookupOptions(servers=(parse_server_option(f"web={http_server}"),))
    try:
        with anyio.fail_after(60):
            listed = [s.name for s in await skills.list(options)]
            loaded = await skills.get("served-skill", options)
    finally:
        await provider.aclose()
    assert listed == ["served-skill"]
    assert loaded is not None
    assert loaded.content == "Do the thing."


def test_server_options_parse() -> None:
    assert parse_server_option("team=uvx my-server --x 'a b'") == McpServer(
        label="team", command="uvx", args=("my-server", "--x", "a b")
    )
    assert parse_server_option("hub=https://h/mcp").url == "https://h/mcp"
    with pytest.raises(ValueError, match="LABEL=COMMAND"):
        parse_server_option("nolabel")


async def test_path_reads_are_limited_to_the_manifest_and_verified(tmp_path: Path) -> None:
    """The `skill` tool's ``path`` of an MCP skill is refused, with the reason, when the manifest
    does not list it, when it leaves the skill and when it is over the size limit; the provider
    refuses a file that changed on its server since the skill was listed."""
    folder = write_skill(tmp_path / "root", "deploy-app")
    server = stdio_server(tmp_path / "root", "--reload")
    provider = McpSkillProvider(servers=[server], timeout=30, transport=InProcess())
    skills = SkillRegistry()
    skills.register_provider(provider)

    async def read(path: str, **options: Any) -> str:
        tool = SkillTool(skills, **options)
        return (await tool.call({"name": "deploy-app", "path": path}, cwd=str(tmp_path))).text

    try:
        assert await read("notes.md") == "notes of deploy-app\n"
        assert "no such file in the skill's manifest" in await read("missing.md")
        assert 'contains a ".." segment' in await read("../other/SKILL.md")
        assert "over the 5-byte limit" in await read("notes.md", max_resource_bytes=5)
        [listed] = (await skills.snapshot(SkillLookupOptions(servers=(server,)))).skills
        (folder / "notes.md").write_text("tampered\n", encoding="utf-8")
        with pytest.raises(Exception, match="changed on its server since it was listed"):
            await provider.read_path(listed, "notes.md", limit=1000)
    finally:
        await provider.aclose()


async def test_an_answer_past_its_ttl_is_not_kept(
    tmp_path: Path, registry: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing kept for its ttlMs is dropped once stale, at the next lookup of any server: a
    long-running agent keeps no answer past its ttlMs."""
    skills, provider = registry
    clock = [0.0]
    monkeypatch.setattr(mcp_provider, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    write_skill(tmp_path / "a", "deploy-app")
    write_skill(tmp_path / "b", "fmt")
    kept = stdio_server(tmp_path / "a", "--ttl-ms", "1000", label="kept")
    other = stdio_server(tmp_path / "b", label="other")
    await skills.snapshot(SkillLookupOptions(servers=(kept,)))
    assert [owner for owner, _ in provider._kept] == [kept]
    clock[0] += 1.0
    await skills.snapshot(SkillLookupOptions(servers=(other,)))
    assert provider._kept == {}


async def test_the_skill_text_names_its_server_and_base_uri(tmp_path: Path, registry: Kit) -> None:
    skills, _ = registry
    write_skill(tmp_path / "root", "deploy-app")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root"),))
    loaded = await skills.get("deploy-app", options)
    assert loaded is not None
    text = render_skill_content(loaded)
    assert 'Served by the MCP server "team".' in text
    assert "Base URL: skill://deploy-app/" in text


async def test_the_skill_tool_reads_a_file_of_an_mcp_skill(tmp_path: Path) -> None:
    """``path`` of an MCP skill is read from its server, verified against the manifest; a file
    the manifest does not list is refused."""
    write_skill(tmp_path / "root", "deploy-app")
    provider = McpSkillProvider(
        servers=[stdio_server(tmp_path / "root")], timeout=30, transport=InProcess()
    )
    skills = SkillRegistry()
    skills.register_provider(provider)
    tool = SkillTool(skills)
    try:
        read = await tool.call({"name": "deploy-app", "path": "notes.md"}, cwd=str(tmp_path))
        missing = await tool.call({"name": "deploy-app", "path": "missing.md"}, cwd=str(tmp_path))
    finally:
        await provider.aclose()
    assert (read.text, read.is_error) == ("notes of deploy-app\n", False)
    assert missing.text == (
        'Error: cannot read "missing.md" from skill "deploy-app": no such file in the '
        "skill's manifest"
    )


@pytest.mark.sdk
async def test_cancel_during_a_slow_read_ends_the_turn_and_the_server_stays_usable(
    tmp_path: Path,
) -> None:
    """session/cancel while the server holds a read of the turn: the turn ends cancelled, the
    server is told (MCP's notifications/cancelled), and the next turn and lookup still work."""
    write_skill(tmp_path / "root", "deploy-app")
    marker, record = named_pipe(tmp_path / "reading"), tmp_path / "methods"
    server = stdio_server(tmp_path / "root", "--slow-reads", str(marker), "--record", str(record))
    provider = McpSkillProvider(servers=[server], timeout=30, transport=InProcess())
    skills = SkillRegistry()
    skills.register_provider(provider)
    arguments = json.dumps({"name": "deploy-app", "path": "notes.md"})
    call = {"id": "c1", "type": "function", "function": {"name": "skill", "arguments": arguments}}
    read_notes = {"content": "", "tool_calls": [call]}
    stops: list[str] = []
    reading: list[str] = []
    try:
        async with connected(skills, agent_type=ScriptedModelAgent, mcp=provider) as peer:
            agent = peer.agent
            assert isinstance(agent, ScriptedModelAgent)
            agent.replies = [read_notes, {"content": "here"}]
            session_id = await peer.new_session(tmp_path)

            async def run_prompt() -> None:
                answer = await peer.conn.prompt(
                    session_id=session_id, prompt=[TextContentBlock(type="text", text="go")]
                )
                stops.append(answer.stop_reason)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(run_prompt)
                    reading.append(await read_pipe(marker))  # the read has reached the server
                    await peer.conn.cancel(session_id=session_id)
                after = await peer.prompt(session_id, "again")
                listing = await peer.ext("skills/list", {"sessionId": session_id})
    finally:
        await provider.aclose()
    assert stops == ["cancelled"]
    assert after.stop_reason == "end_turn"
    assert [(s["name"], s["source"]) for s in listing["skills"]] == [("deploy-app", "mcp:team")]
    assert reading == ["skill://deploy-app/notes.md"]
    # The server was told, ahead of the listing that followed.
    methods = record.read_text().splitlines()
    read = len(methods) - 1 - methods[::-1].index("resources/read")
    assert "notifications/cancelled" in methods[read:], methods


def test_the_cli_lists_and_shows_skills_of_an_mcp_server(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """``--mcp-server`` on ``show`` and ``doctor --json``, a real stdio server each time."""
    text = skill_text("name: deploy-app\ndescription: Skill deploy-app.", "Run make deploy.")
    fields = {"name": "deploy-app", "description": "Skill deploy-app."}
    script = write_script(tmp_path / "s.json", [served("deploy-app", text, fields)])
    server = f"team={sys.executable} {SCRIPTED_SERVER} {script}"
    where = ("--cwd", str(tmp_path), "--mcp-server", server)
    status, shown, err = cli("show", "deploy-app", *where)
    assert status == 0, err
    assert "Run make deploy." in shown
    _, doctor, _ = cli("doctor", "--json", *where)
    payload = json.loads(doctor)
    assert payload["mcpServers"][0]["label"] == "team"
    assert payload["mcpServers"][0]["skills"] == 1


@pytest.mark.sdk
def test_doctor_says_how_a_server_fares_in_the_words_of_skills(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """``doctor`` and ``/skills`` share one wording of a server's state (``1 skill``, not
    ``1 skills``); ``--json`` names its identity as ``_skills/list`` does."""
    text = skill_text("name: deploy-app\ndescription: Skill deploy-app.", "Run make deploy.")
    fields = {"name": "deploy-app", "description": "Skill deploy-app."}
    script = write_script(tmp_path / "s.json", [served("deploy-app", text, fields)])
    server = f"team={sys.executable} {SCRIPTED_SERVER} {script}"
    where = ("--cwd", str(tmp_path), "--mcp-server", server)
    _, doctor, _ = cli("doctor", *where)
    assert "\nMCP servers (1)\n  team: connected, 1 skill\n" in doctor
    _, doctor, _ = cli("doctor", "--json", *where)
    [listed] = json.loads(doctor)["mcpServers"]
    assert listed["identity"] == server


def _locator(name: str, description: str, *, files: bool = True) -> McpLocator:
    uri = "skill://deploy/SKILL.md"
    manifest = [{"uri": uri, "digest": "sha256:" + "1" * 64, "size": 10}]
    listed = read_entry(
        {
            "uri": uri,
            "frontmatter": {"name": name, "description": description},
            "resources": manifest if files else "dynamic",
        }
    )
    assert isinstance(listed, ListedSkill)
    return McpLocator(server=McpServer(label="team", command="serve"), skill=listed)


def test_trust_pins_every_listed_file_and_the_listed_frontmatter() -> None:
    """What trust stores for a skill changes when the catalog's text does, though no file
    did: the description, and a new name at a trusted uri, come from the listing."""
    served = _locator("deploy", "Deploy it.").served
    assert ("skill://deploy/SKILL.md", "sha256:" + "1" * 64) in served
    assert _locator("deploy", "Deploy it.").served == served
    assert _locator("deploy", "Deploy it elsewhere.").served != served
    assert _locator("other", "Deploy it.").served != served
    dynamic = _locator("deploy", "Deploy it.", files=False).served
    assert _locator("deploy", "Changed.", files=False).served != dynamic


def test_a_switch_between_a_manifest_and_dynamic_is_a_change_for_trust() -> None:
    """A dynamic skill's pairs are never among those its manifest was trusted with, nor the
    other way round: a trusted server cannot switch a skill to dynamic and a new body."""
    manifest = _locator("deploy", "Deploy it.").served
    dynamic = _locator("deploy", "Deploy it.", files=False).served
    assert not dynamic <= manifest
    assert not manifest <= dynamic
    assert ("skill://deploy/SKILL.md", "dynamic") in dynamic
    assert ("skill://deploy/SKILL.md", "dynamic") not in manifest


def test_no_two_servers_share_an_identity() -> None:
    """A label may hold "=": it is quoted, so label and command never read as another pair."""
    one = McpServer(label="a=b", command="c").identity
    other = McpServer(label="a", command="b=c").identity
    assert one != other
    assert McpServer(label="team", command="uvx", args=("team-skills",)).identity == (
        "team=uvx team-skills"
    )
