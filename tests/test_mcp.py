"""McpSkillProvider against FastMCP 4.2.3's SkillsDirectoryProvider, a real subprocess over
stdio and over streamable HTTP on 127.0.0.1 (contract §14)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from acp_skills import (
    LocalSkillProvider,
    SkillLookupOptions,
    SkillRegistry,
    SkillTool,
    render_skill_content,
)
from acp_skills.content import Refusal
from acp_skills.mcp import McpServer, McpSkillProvider, parse_server_option
from acp_skills.mcp.listing import ListedSkill, read_entry
from acp_skills.mcp.provider import McpLocator
from tests.mcp_http import SERVER, http_skills_server, write_served_skill

pytestmark = pytest.mark.anyio


def write_skill(root: Path, name: str, body: str = "Do the thing.") -> Path:
    # `allowed-tools` is there to be ignored (contract §14).
    return write_served_skill(root, name, f"Skill {name}.", body, extra="allowed-tools: Bash\n")


def stdio_server(root: Path, *extra: str, label: str = "team") -> McpServer:
    return McpServer(label=label, command=sys.executable, args=(SERVER, str(root), *extra))


@pytest.fixture
async def registry() -> AsyncIterator[tuple[SkillRegistry, McpSkillProvider]]:
    provider = McpSkillProvider(timeout=30)
    found = SkillRegistry()
    found.register_provider(provider)
    try:
        yield found, provider
    finally:
        await provider.aclose()


Kit = tuple[SkillRegistry, McpSkillProvider]


async def test_lists_and_loads_over_stdio_with_verification(tmp_path: Path, registry: Kit) -> None:
    skills, provider = registry
    write_skill(tmp_path / "root", "deploy-app", "Run make deploy.")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root"),))
    snapshot = await skills.snapshot(options)
    assert [skill.name for skill in snapshot.skills] == ["deploy-app"]
    assert snapshot.skills[0].rank == 600
    loaded = await skills.get("deploy-app", options)
    assert loaded is not None
    assert loaded.content == "Run make deploy."
    text = await SkillTool(skills).call({"name": "deploy-app"}, cwd=str(tmp_path))
    # The tool builds its own options without servers: the skill is not in that scope.
    assert text.is_error
    state = next(iter(provider.servers.values()))
    assert (state.connected, state.skills, state.failure) == (True, 1, None)


async def test_a_file_changed_after_listing_is_refused(tmp_path: Path, registry: Kit) -> None:
    skills, _ = registry
    folder = write_skill(tmp_path / "root", "deploy-app")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root", "--reload"),))
    snapshot = await skills.snapshot(options)
    (folder / "SKILL.md").write_text(
        "---\nname: deploy-app\ndescription: Skill deploy-app.\n---\nSomething else.\n",
        encoding="utf-8",
    )
    with pytest.raises(Exception, match='skill "deploy-app" changed on its server'):
        await skills.load(snapshot.skills[0], options)


async def test_a_local_skill_wins_a_clash_and_the_clash_is_reported(tmp_path: Path) -> None:
    write_skill(tmp_path / "root", "deploy-app")
    local_root = tmp_path / "local"
    write_skill(local_root, "deploy-app", "Local body.")
    provider = McpSkillProvider(timeout=30)
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


async def test_a_server_that_exits_is_skipped_with_its_reason(tmp_path: Path) -> None:
    provider = McpSkillProvider(timeout=30)
    skills = SkillRegistry()
    skills.register_provider(provider)
    broken = McpServer(label="broken", command=sys.executable, args=("-c", "pass"))
    try:
        snapshot = await skills.snapshot(SkillLookupOptions(servers=(broken,)))
        assert snapshot.skills == ()
        state = provider.servers[broken]
        assert state.failure
        assert not state.connected
    finally:
        await provider.aclose()


async def test_a_server_that_hangs_is_skipped_after_the_deadline(tmp_path: Path) -> None:
    provider = McpSkillProvider(timeout=0.5)
    skills = SkillRegistry()
    skills.register_provider(provider)
    hung = McpServer(
        label="hung", command=sys.executable, args=("-c", "import time; time.sleep(60)")
    )
    try:
        await skills.snapshot(SkillLookupOptions(servers=(hung,)))
        assert "no answer within" in (provider.servers[hung].failure or "")
    finally:
        await provider.aclose()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """A FastMCP skills server over streamable HTTP on 127.0.0.1 (a free port)."""
    write_skill(tmp_path / "http-root", "served-skill")
    with http_skills_server(tmp_path / "http-root") as url:
        yield url


async def test_lists_and_loads_over_streamable_http(http_server: str, registry: Kit) -> None:
    skills, _ = registry
    options = SkillLookupOptions(servers=(parse_server_option(f"web={http_server}"),))
    with anyio.fail_after(60):
        assert [s.name for s in await skills.list(options)] == ["served-skill"]
        loaded = await skills.get("served-skill", options)
    assert loaded is not None
    assert loaded.content == "Do the thing."


def test_server_options_parse() -> None:
    assert parse_server_option("team=uvx my-server --x 'a b'") == McpServer(
        label="team", command="uvx", args=("my-server", "--x", "a b")
    )
    assert parse_server_option("hub=https://h/mcp").url == "https://h/mcp"
    with pytest.raises(ValueError, match="LABEL=COMMAND"):
        parse_server_option("nolabel")


async def test_path_reads_are_limited_to_the_manifest_and_verified(
    tmp_path: Path, registry: Kit
) -> None:
    skills, provider = registry
    folder = write_skill(tmp_path / "root", "deploy-app")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root", "--reload"),))
    found = (await skills.snapshot(options)).skills[0]
    assert await provider.read_path(found, "notes.md", limit=1000) == "notes of deploy-app\n"
    with pytest.raises(Refusal, match="no such file in the skill's manifest"):
        await provider.read_path(found, "missing.md", limit=1000)
    with pytest.raises(Refusal, match="not a relative path"):
        await provider.read_path(found, "../other/SKILL.md", limit=1000)
    with pytest.raises(Refusal, match="over the 5-byte limit"):
        await provider.read_path(found, "notes.md", limit=5)
    (folder / "notes.md").write_text("tampered\n", encoding="utf-8")
    with pytest.raises(Refusal, match="changed on its server since it was listed"):
        await provider.read_path(found, "notes.md", limit=1000)


async def test_the_skill_text_names_its_server_and_base_uri(tmp_path: Path, registry: Kit) -> None:
    skills, _ = registry
    write_skill(tmp_path / "root", "deploy-app")
    options = SkillLookupOptions(servers=(stdio_server(tmp_path / "root"),))
    loaded = await skills.get("deploy-app", options)
    assert loaded is not None
    text = render_skill_content(loaded)
    assert 'Served by the MCP server "team".' in text
    assert "Base URL: skill://deploy-app/" in text


def test_the_cli_lists_and_shows_skills_of_an_mcp_server(tmp_path: Path) -> None:
    write_skill(tmp_path / "root", "deploy-app", "Run make deploy.")
    server = f"team={sys.executable} {SERVER} {tmp_path / 'root'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "acp_skills", *args, "--cwd", str(tmp_path)]
        return subprocess.run(
            [*command, "--mcp-server", server],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    shown = cli("show", "deploy-app")
    assert "Run make deploy." in shown.stdout, shown.stderr
    doctor = cli("doctor", "--json")
    payload = json.loads(doctor.stdout)
    assert payload["mcpServers"][0]["label"] == "team"
    assert payload["mcpServers"][0]["skills"] == 1


def test_no_server_process_outlives_the_agent(tmp_path: Path) -> None:
    """Even a server that ignores SIGTERM is gone once the agent has exited."""
    write_skill(tmp_path / "root", "deploy-app")
    pid_file = tmp_path / "server.pid"
    server = (
        f"team={sys.executable} {SERVER} {tmp_path / 'root'} --pid-file {pid_file} --ignore-eof"
    )
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "_skills/list", "params": {"cwd": str(tmp_path)}},
    ]
    agent = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo_agent",
            "--state-dir",
            str(tmp_path / "state"),
            *("--mcp-server", server),
        ],
        input="".join(json.dumps(frame) + "\n" for frame in frames),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    answers = [json.loads(line) for line in agent.stdout.splitlines()]
    listed = next(answer for answer in answers if answer.get("id") == 2)
    assert [skill["source"] for skill in listed["result"]["skills"]] == ["mcp:team"]
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


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
    assert _locator("deploy", "Deploy it.", files=False).dynamic
    assert not _locator("deploy", "Deploy it.").dynamic


def test_no_two_servers_share_an_identity() -> None:
    """A label may hold "=": it is quoted, so label and command never read as another pair."""
    one = McpServer(label="a=b", command="c").identity
    other = McpServer(label="a", command="b=c").identity
    assert one != other
    assert McpServer(label="team", command="uvx", args=("team-skills",)).identity == (
        "team=uvx team-skills"
    )
