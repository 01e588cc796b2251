"""The suite holds wherever a checkout lives, including below a private (0700) directory.

A process, because the case is one of processes: the copy's own interpreter runs the tests that
start the agent as a second user, who cannot reach anything below the private directory once
it has given up root.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sysconfig
import tempfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The tests that run the agent as a second user (as root, they drop to `nobody`). That user
# cannot reach a checkout, or its virtual environment, below a private directory: everything
# the agent needs must be loaded before it gives up root, and nothing read from there later.
SECOND_USER_TESTS = ("tests/test_demo_agent_records.py", "-k", "read_only")


def _private_checkout(private: Path) -> Path:
    """A copy of the checkout with a virtual environment of its own, both inside ``private``."""
    checkout = private / "checkout"
    for part in ("acp_skills", "demo_agent", "tests"):
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / part, checkout / part, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    environment = checkout / ".venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # What this environment has installed, with the project itself installed from the copy.
    # Each package is linked, not copied (a copy is some 160 MB, whose modules the copy's
    # interpreter then compiles again: seconds): the interpreter reaches a package through the
    # link's own path, inside the private directory, so the second user can no more read it
    # than a copy.
    ours = ("__editable__", "acp_skills", "__pycache__")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(ours):
            Path(site, entry.name).symlink_to(entry)
    Path(site, "acp_skills_checkout.pth").write_text(f"{checkout}\n")
    return checkout


@pytest.mark.skipif(os.name != "posix", reason="file modes and a second user are POSIX")
def test_the_second_user_tests_pass_from_a_checkout_below_a_private_directory() -> None:
    """A checkout and its environment below a 0700 directory pass the tests that drop root."""
    private = Path(tempfile.mkdtemp(prefix="acp-skills-private-"))
    try:
        assert private.stat().st_mode & 0o777 == 0o700
        checkout = _private_checkout(private)
        python = checkout / ".venv" / "bin" / "python"
        result = subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SECOND_USER_TESTS],
            cwd=checkout,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        output = result.stdout[-3000:] + result.stderr[-2000:]
        assert result.returncode == 0, output
        assert "2 passed" in result.stdout, output
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _imports_inside_functions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                where = (str(path.relative_to(ROOT)), node.name)
                if isinstance(inner, ast.Import | ast.ImportFrom) and where not in AT_START_UP:
                    found.append(f"{where[0]}:{inner.lineno} in {node.name}")
    return found


# Imports that run as an agent starts, never later: `acp_skills.AcpSkills` loads the ACP glue
# on first use (``import acp_skills`` alone must not load the ACP SDK), and the OpenAI-compatible
# model imports `openai` when it is built (the offline model must not pay for it). The MCP SDK
# (`acp_skills.mcp.transport`) loads in a worker thread (`acp_skills.mcp.pool.load_sdk`, started
# by `AcpSkills.initialize`), with `importlib`, not an import statement.
AT_START_UP = {
    ("acp_skills/__init__.py", "__getattr__"),
    ("demo_agent/models/openai_chat.py", "__init__"),
}


def test_the_agent_imports_nothing_after_start_up() -> None:
    """No function of the library or the demo agent imports a module when it runs."""
    found = [
        place
        for package in ("acp_skills", "demo_agent")
        for path in sorted((ROOT / package).rglob("*.py"))
        for place in _imports_inside_functions(path)
    ]
    assert found == []
