"""The `skill` tool's ``path`` for a skill an MCP server serves (contract §7, §14): a path the
manifest does not list is refused, a directory of the manifest is answered with its names (at
most fifty), in the very words a skill on disk gets."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from acp_skills import LocalSkillProvider, SkillRegistry, SkillTool
from acp_skills.cli.main import main as cli_main
from acp_skills.mcp import McpServer, McpSkillProvider
from tests.mcp_scripted import SCRIPTED_SERVER, scripted_server, served, skill_text, write_script

pytestmark = pytest.mark.anyio

# A bound on each wait, far above what the code under test takes: a test that hangs fails.
BOUND = 30
FIELDS = {"name": "forms", "description": "Fill in forms."}
SKILL = skill_text("name: forms\ndescription: Fill in forms.", "Read forms.md first.")
FILES = {
    "forms.md": "# Forms\n",
    "scripts/fill.py": "print('fill')\n",
    "scripts/check.sh": "echo check\n",
    "scripts/lib/util.py": "pass\n",
    "references/guide.md": "A guide.\n",
}
MANIFEST = "no such file in the skill's manifest"


def forms_server(tmp_path: Path, files: dict[str, str] = FILES) -> McpServer:
    """A stdio server listing the skill `forms` with ``files`` in its manifest."""
    script = write_script(tmp_path / "forms.json", [served("forms", SKILL, FIELDS, files=files)])
    return scripted_server(script)


@contextlib.asynccontextmanager
async def mcp_tool(server: McpServer) -> AsyncIterator[SkillTool]:
    """The `skill` tool over a registry holding ``server``'s skills."""
    provider = McpSkillProvider(servers=[server], timeout=BOUND)
    registry = SkillRegistry()
    registry.register_provider(provider)
    try:
        yield SkillTool(registry)
    finally:
        with anyio.fail_after(BOUND):
            await provider.aclose()


async def read_path(tool: SkillTool, path: str, cwd: Path) -> str:
    with anyio.fail_after(BOUND):
        result = await tool.call({"name": "forms", "path": path}, cwd=str(cwd))
    assert result.is_error, result.text
    return result.text


def refused(path: str, reason: str) -> str:
    return f'Error: cannot read "{path}" from skill "forms": {reason}'


SCRIPTS = 'it is a directory, not a file; it holds: "check.sh", "fill.py", "lib/"'
REFUSALS: list[tuple[str, str, str]] = [
    ("case-of-a-name", "FORMS.md", MANIFEST),
    ("case-of-a-folder", "Scripts/fill.py", MANIFEST),
    ("case-deeper", "scripts/LIB/util.py", MANIFEST),
    ("directory", "scripts", SCRIPTS),
    ("directory-with-a-slash", "scripts/", SCRIPTS),
    (
        "the-skill-itself",
        ".",
        'it is a directory, not a file; it holds: "SKILL.md", "forms.md", "references/", '
        '"scripts/"',
    ),
    ("missing", "nothing.md", MANIFEST),
    ("through-a-file", "forms.md/x", MANIFEST),
]


@pytest.mark.parametrize(
    ("path", "reason"), [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS]
)
async def test_a_path_the_manifest_does_not_list_is_answered_with_what_it_does(
    tmp_path: Path, path: str, reason: str
) -> None:
    """`FORMS.md` is not listed; `scripts` lists the names the manifest holds there."""
    async with mcp_tool(forms_server(tmp_path)) as tool:
        assert await read_path(tool, path, tmp_path) == refused(path, reason)


async def test_a_served_skill_and_the_same_skill_on_disk_are_refused_in_the_same_words(
    tmp_path: Path,
) -> None:
    """One renderer: the words differ only where the files are listed (manifest, directory)."""
    bundle = tmp_path / "skills" / "forms"
    for name, text in {"SKILL.md": SKILL, **FILES}.items():
        (bundle / name).parent.mkdir(parents=True, exist_ok=True)
        (bundle / name).write_text(text, encoding="utf-8")
    local = SkillRegistry()
    home = tmp_path / "home"
    local.register_provider(LocalSkillProvider(home, home, [bundle.parent], watch=False))
    differ_in_case = ["FORMS.md", "Scripts/fill.py", "scripts/LIB/util.py"]
    paths = [*differ_in_case, "scripts", ".", "nothing.md", "scripts/nothing.md"]
    on_disk = [await read_path(SkillTool(local), path, tmp_path) for path in paths]
    async with mcp_tool(forms_server(tmp_path)) as tool:
        over_mcp = [await read_path(tool, path, tmp_path) for path in paths]
    assert over_mcp == [
        text.replace("in the skill's directory", "in the skill's manifest") for text in on_disk
    ]


async def test_a_directory_of_the_manifest_lists_at_most_fifty_names(tmp_path: Path) -> None:
    """The listing is bounded as on disk: fifty names, then "(and more)"."""
    many = {f"many/file-{number:02}.md": "x\n" for number in range(60)}
    async with mcp_tool(forms_server(tmp_path, many)) as tool:
        listed = await read_path(tool, "many", tmp_path)
    names = ", ".join(f'"file-{number:02}.md"' for number in range(50))
    assert listed == refused("many", f"it is a directory, not a file; it holds: {names} (and more)")


def test_show_path_of_a_served_skill_refuses_a_path_its_manifest_does_not_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`acp-skills show forms --path FORMS.md --mcp-server ...`, as a person runs it."""
    script = write_script(tmp_path / "forms.json", [served("forms", SKILL, FIELDS, files=FILES)])
    option = f"team={shlex.join([sys.executable, SCRIPTED_SERVER, str(script)])}"
    argv = ["show", "forms", "--path", "FORMS.md", "--trust", "all", "--cwd", str(tmp_path)]
    status = cli_main([*argv, "--mcp-server", option])
    out = capsys.readouterr().out
    assert status == 1
    assert out == refused("FORMS.md", MANIFEST) + "\n"
