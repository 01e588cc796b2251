"""What a server cannot do to the agent (contract §14a): hold a lookup or a read past the
deadline, put more than the caps into memory or the model's context, fail without saying why,
or leave processes behind. Against the scripted server: as a real stdio process (and its HTTP
twin on 127.0.0.1) where the transport is the point (processes ended, stderr, the 16 MiB
caps), else in this process over memory streams (tests/mcp_memory.py)."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from acp_skills import SkillLookupOptions, SkillRegistry, SkillTool
from acp_skills.mcp import McpServer, McpSkillProvider
from tests.events import process_ends, process_gone
from tests.mcp_memory import InProcess
from tests.mcp_scripted import (
    scripted_http_server,
    scripted_server,
    served,
    skill_text,
    write_script,
)

pytestmark = pytest.mark.anyio

DEPLOY_FIELDS = {"name": "deploy", "description": "Deploy it."}
DEPLOY = skill_text("name: deploy\ndescription: Deploy it.", "Run make deploy.")
MIB = 1024 * 1024
# A bound on each wait, far above what the code under test takes: a test that hangs fails.
BOUND = 8


@contextlib.asynccontextmanager
async def lookups(**options: Any) -> AsyncIterator[tuple[SkillRegistry, McpSkillProvider]]:
    provider = McpSkillProvider(**options)
    registry = SkillRegistry()
    registry.register_provider(provider)
    try:
        yield registry, provider
    finally:
        with anyio.fail_after(BOUND):
            await provider.aclose()


@pytest.mark.parametrize("method", ["server/discover", "skills/list"])
async def test_a_server_that_never_answers_is_let_go_within_the_deadline(
    tmp_path: Path, method: str
) -> None:
    """Connecting or listing, a silent server costs a lookup the deadline, not the SDK's own
    timeouts and shutdown waits, and its process is ended before the lookup returns."""
    pid = tmp_path / "server.pid"
    server = scripted_server(
        write_script(
            tmp_path / "s.json",
            [served("deploy", DEPLOY, DEPLOY_FIELDS)],
            silent=[method],
            pid=str(pid),
        )
    )
    async with lookups(timeout=0.5) as (registry, provider):
        with anyio.fail_after(BOUND):
            snapshot = await registry.snapshot(SkillLookupOptions(servers=(server,)))
        assert snapshot.skills == ()
        assert provider.servers[server].failure == "no answer within 0.5 s"
        assert process_gone(int(pid.read_text()))


async def test_a_server_that_pages_on_and_on_is_let_go_at_the_listings_deadline(
    tmp_path: Path,
) -> None:
    """A listing has no page count of its own: one whose pages never end costs the lookup the
    listing's deadline, then the server is skipped with the reason."""
    script = [served("deploy", DEPLOY, DEPLOY_FIELDS)]
    server = scripted_server(write_script(tmp_path / "s.json", script, pages=10**9))
    options = SkillLookupOptions(servers=(server,))
    async with lookups(timeout=0.5, transport=InProcess()) as (registry, provider):
        with anyio.fail_after(BOUND):
            snapshot = await registry.snapshot(options)
            problems = await registry.diagnose(options)
    assert snapshot.skills == ()
    assert provider.servers[server].failure == "no answer within 0.5 s"
    assert [p.code for p in problems] == ["mcp-server-unavailable"]


async def test_a_read_that_never_answers_is_refused_after_the_deadline(tmp_path: Path) -> None:
    """`resources/read` has the deadline too: the load is refused, the turn goes on."""
    script = [served("deploy", DEPLOY, DEPLOY_FIELDS)]
    server = scripted_server(write_script(tmp_path / "s.json", script, silent=["resources/read"]))
    async with lookups(servers=[server], timeout=0.5, transport=InProcess()) as (registry, _):
        with anyio.fail_after(BOUND):
            refused = await SkillTool(registry).call({"name": "deploy"}, cwd=str(tmp_path))
    assert (refused.is_error, refused.text) == (
        True,
        'Error: cannot read skill "deploy" from MCP server "team": no answer within 0.5 s',
    )


async def test_a_skills_get_that_never_answers_is_told_as_a_skipped_server(
    tmp_path: Path,
) -> None:
    """A uri the listing lacks, asked with `skills/get` past the deadline: the model's error
    says the server could not be asked, and the failure is a problem and a warning like any
    skipped request's, not an unknown skill."""
    script = [served("deploy", DEPLOY, DEPLOY_FIELDS)]
    server = scripted_server(write_script(tmp_path / "s.json", script, silent=["skills/get"]))
    options = SkillLookupOptions(cwd=str(tmp_path))
    async with lookups(servers=[server], timeout=0.5, transport=InProcess()) as (registry, _):
        with capture_logs() as logs, anyio.fail_after(BOUND):
            uri = {"name": "skill://other/SKILL.md"}
            refused = await SkillTool(registry).call(uri, cwd=str(tmp_path))
        with anyio.fail_after(BOUND):
            problems = await registry.diagnose(options)
    assert (refused.is_error, refused.text) == (
        True,
        'Error: skill "skill://other/SKILL.md" is not served by any server of this session that '
        'could be asked; MCP server "team" could not be asked: no answer within 0.5 s',
    )
    assert [(p.code, p.message) for p in problems] == [
        ("mcp-server-unavailable", "MCP server 'team' skipped: no answer within 0.5 s")
    ]
    assert [(log["event"], log["server"]) for log in logs] == [("mcp_server_skipped", "team")]


async def test_a_server_without_skills_get_serves_on_when_a_uri_it_lacks_is_named(
    tmp_path: Path,
) -> None:
    """A server that declares the extension but knows no `skills/get` (method not found): a uri
    its listing lacks is one it does not serve, and its listed skills stay, no problem told."""
    script = [served("deploy", DEPLOY, DEPLOY_FIELDS)]
    server = scripted_server(write_script(tmp_path / "s.json", script))
    options = SkillLookupOptions(cwd=str(tmp_path))
    async with lookups(servers=[server], timeout=BOUND, transport=InProcess()) as (registry, _):
        with anyio.fail_after(BOUND):
            uri = {"name": "skill://other/SKILL.md"}
            refused = await SkillTool(registry).call(uri, cwd=str(tmp_path))
            snapshot = await registry.snapshot(options)
            problems = await registry.diagnose(options)
    assert (refused.is_error, refused.text) == (
        True,
        'Error: skill "skill://other/SKILL.md" is not served by any server of this session',
    )
    assert [skill.name for skill in snapshot.skills] == ["deploy"]
    assert problems == ()


@pytest.mark.parametrize("listed_size", ["honest", "lying"])
async def test_a_skill_file_over_the_cap_is_refused_naming_it(
    tmp_path: Path, listed_size: str
) -> None:
    """A SKILL.md over max_resource_bytes never reaches the model: refused by its listed size,
    or by the size read when the listing understated it."""
    big = skill_text("name: deploy\ndescription: Deploy it.", "x" * (2 * MIB))
    entry, files = served("deploy", big, DEPLOY_FIELDS)
    if listed_size == "lying":
        entry["resources"][0]["size"] = 100
    server = scripted_server(write_script(tmp_path / "s.json", [(entry, files)]))
    async with lookups(servers=[server], timeout=30, transport=InProcess()) as (registry, _):
        refused = await SkillTool(registry).call({"name": "deploy"}, cwd=str(tmp_path))
    # The listed size when it is over; else the size read.
    assert (refused.is_error, refused.text) == (
        True,
        f'Error: skill "deploy" is {len(big)} bytes, over the {MIB}-byte limit',
    )


async def test_a_dynamic_skill_file_over_the_cap_is_refused_naming_it(tmp_path: Path) -> None:
    """A file of a skill without a manifest is capped by the size read."""
    entry, files = served(
        "deploy", DEPLOY, DEPLOY_FIELDS, dynamic=True, files={"big.md": "y" * 5000}
    )
    server = scripted_server(write_script(tmp_path / "s.json", [(entry, files)]))
    async with lookups(servers=[server], timeout=30, transport=InProcess()) as (registry, _):
        tool = SkillTool(registry, max_resource_bytes=1000)
        refused = await tool.call({"name": "deploy", "path": "big.md"}, cwd=str(tmp_path))
    assert (refused.is_error, refused.text) == (
        True,
        'Error: cannot read "big.md" from skill "deploy": the file is 5000 bytes, over the '
        "1000-byte limit",
    )


@contextlib.contextmanager
def serving(transport: str, script: Path) -> Iterator[McpServer]:
    if transport == "stdio":
        yield scripted_server(script)
        return
    if transport == "http-unsized":
        script.write_text(json.dumps({**json.loads(script.read_text()), "unsized": True}))
    with scripted_http_server(script) as url:
        yield McpServer(label="team", url=url)


@pytest.mark.parametrize("transport", ["stdio", "http", "http-unsized"])
async def test_a_listing_over_16_mib_ends_the_servers_use(tmp_path: Path, transport: str) -> None:
    """A never-trusted server cannot push a huge listing into memory: past 16 MiB its answer
    is dropped as it arrives, the server is skipped with a diagnostic and not asked again."""
    record = tmp_path / "methods.txt"
    script = write_script(
        tmp_path / "s.json",
        [served("deploy", DEPLOY, DEPLOY_FIELDS)],
        padding={"skills/list": 17 * MIB},
        record=str(record),
    )
    with serving(transport, script) as server:
        options = SkillLookupOptions(servers=(server,))
        async with lookups(timeout=30) as (registry, provider):
            assert (await registry.snapshot(options)).skills == ()
            assert (await registry.snapshot(options)).skills == ()
            (problem,) = await registry.diagnose(options)
    assert problem.code == "mcp-server-unavailable"
    assert problem.severity == "warning"
    assert problem.message == "MCP server 'team' skipped: it sent a response over 16 MiB"
    assert provider.servers[server].failed_at == math.inf  # not asked again, even in a minute
    if transport == "stdio":
        assert record.read_text().split().count("skills/list") == 1


async def test_a_listing_whose_pages_together_pass_16_mib_ends_the_servers_use(
    tmp_path: Path,
) -> None:
    """Two pages of 9 MiB each, every one under the cap: the listing is over 16 MiB all the
    same, and the server is skipped with a diagnostic and never asked again."""
    record = tmp_path / "methods.txt"
    entry, contents = served("deploy", DEPLOY, DEPLOY_FIELDS)
    script = write_script(
        tmp_path / "s.json",
        [({**entry, "padding": "x" * (9 * MIB)}, contents)],
        pages=2,
        record=str(record),
    )
    server = scripted_server(script)
    options = SkillLookupOptions(servers=(server,))
    async with lookups(timeout=30, transport=InProcess()) as (registry, provider):
        assert (await registry.snapshot(options)).skills == ()
        assert (await registry.snapshot(options)).skills == ()
        (problem,) = await registry.diagnose(options)
    assert problem.message == "MCP server 'team' skipped: it sent a response over 16 MiB"
    assert provider.servers[server].failed_at == math.inf
    assert record.read_text().split().count("skills/list") == 2  # the two pages, once


async def test_a_read_over_16_mib_ends_the_servers_use(tmp_path: Path) -> None:
    """A read answer past 16 MiB is dropped as it arrives; the server is not used again."""
    script = write_script(
        tmp_path / "s.json",
        [served("deploy", DEPLOY, DEPLOY_FIELDS)],
        padding={"resources/read": 17 * MIB},
    )
    server = scripted_server(script)
    async with lookups(servers=[server], timeout=30) as (registry, provider):
        refused = await SkillTool(registry).call({"name": "deploy"}, cwd=str(tmp_path))
        assert (await registry.snapshot()).skills == ()
        (problem,) = await registry.diagnose()
    assert (refused.is_error, refused.text) == (
        True,
        'Error: cannot read skill "deploy" from MCP server "team": it sent a response over 16 MiB',
    )
    assert problem.code == "mcp-server-unavailable"
    assert provider.servers[server].failed_at == math.inf


async def test_a_compressed_answer_skips_the_server_for_a_while_not_for_good(
    tmp_path: Path,
) -> None:
    """Unlike an answer over 16 MiB, one compressed though none was asked for skips the server
    with its reason as any failure does: it is asked again after a while."""
    script = write_script(
        tmp_path / "s.json", [served("deploy", DEPLOY, DEPLOY_FIELDS)], gzip=["skills/list"]
    )
    with scripted_http_server(script) as url:
        server = McpServer(label="team", url=url)
        async with lookups(servers=[server], timeout=30) as (registry, provider):
            assert (await registry.snapshot()).skills == ()
            state = provider.servers[server]
    assert state.failure == "it sent a gzip-compressed response though asked not to"
    assert state.failed_at is not None
    assert state.failed_at < math.inf


async def test_a_server_that_exits_is_skipped_and_its_reason_ends_with_its_stderr(
    tmp_path: Path,
) -> None:
    """Skipped, not connected, and not "Connection closed": the exit status and the last lines
    of its stderr, as written (each report cleans them where it shows them)."""
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/srv/serve.py", line 12, in <module>\n'
        "\x1b[31mValueError: description is 1068 characters, over 1024\x1b[0m\n"
    )
    server = scripted_server(write_script(tmp_path / "s.json", stderr=stderr, exit=1))
    async with lookups(timeout=30) as (registry, provider):
        snapshot = await registry.snapshot(SkillLookupOptions(servers=(server,)))
    assert snapshot.skills == ()
    assert provider.servers[server].connected is False
    assert provider.servers[server].failure == (
        "the server exited with status 1; its stderr ends: Traceback (most recent call last): | "
        'File "/srv/serve.py", line 12, in <module> | '
        "\x1b[31mValueError: description is 1068 characters, over 1024\x1b[0m"
    )


async def test_a_server_that_exits_on_a_read_is_refused_in_clean_words(tmp_path: Path) -> None:
    """The reason keeps the server's stderr as written; the `skill` tool's error, which the
    model reads and the editor's tool call shows, has its controls and bidi overrides removed."""
    script = write_script(
        tmp_path / "s.json",
        [served("deploy", DEPLOY, DEPLOY_FIELDS)],
        stderr="boom \x1b[31mred\x1b[0m \u202eevil <b>\n",
        exit=1,
        exit_on="resources/read",
    )
    async with lookups(servers=[scripted_server(script)], timeout=30) as (registry, _):
        with anyio.fail_after(BOUND):
            refused = await SkillTool(registry).call({"name": "deploy"}, cwd=str(tmp_path))
    assert refused.is_error
    assert refused.text == (
        'Error: cannot read skill "deploy" from MCP server "team": the server exited with '
        "status 1; its stderr ends: boom [31mred[0m evil <b>"
    )


async def test_only_the_last_2_kib_of_stderr_are_kept(tmp_path: Path) -> None:
    """A chatty server's reason holds its last whole lines, at most 2 KiB of them."""
    stderr = "".join(f"line {number}\n" for number in range(2000))
    server = scripted_server(write_script(tmp_path / "s.json", stderr=stderr, exit=3))
    async with lookups(timeout=30) as (registry, provider):
        await registry.snapshot(SkillLookupOptions(servers=(server,)))
    failure = provider.servers[server].failure or ""
    said, _, tail = failure.partition("; its stderr ends: ")
    assert said == "the server exited with status 3"
    assert tail.endswith("line 1998 | line 1999")
    assert len(tail.encode()) <= 2048
    assert tail.startswith("line ")  # a cut line is left out


async def test_the_helpers_of_a_server_that_exits_at_once_end_with_it(tmp_path: Path) -> None:
    """The whole process group ends, though the server itself had already gone."""
    helper = tmp_path / "helper.pid"
    server = scripted_server(write_script(tmp_path / "s.json", helper=str(helper), exit=0))
    async with lookups(timeout=30) as (registry, provider):
        with anyio.fail_after(BOUND):
            await registry.snapshot(SkillLookupOptions(servers=(server,)))
            assert (provider.servers[server].failure or "").startswith(
                "the server exited with status 0"
            )
            await process_ends(int(helper.read_text()))


@pytest.mark.parametrize("end", ["released", "agent-exit"])
async def test_the_helpers_of_a_server_end_with_its_last_session(tmp_path: Path, end: str) -> None:
    """A server that leaves when its input closes still has its helpers ended: when its last
    session releases it, and when the agent exits."""
    helper = tmp_path / "helper.pid"
    script = write_script(
        tmp_path / "s.json", [served("deploy", DEPLOY, DEPLOY_FIELDS)], helper=str(helper)
    )
    server = scripted_server(script)
    async with lookups(timeout=30) as (registry, provider):
        with anyio.fail_after(BOUND):
            options = SkillLookupOptions(servers=(server,))
            assert [s.name for s in (await registry.snapshot(options)).skills] == ["deploy"]
            if end == "released":
                await provider.release(server)
            else:
                await provider.aclose()
            await process_ends(int(helper.read_text()))
