"""The package as a person installs it: wheel and sdist from ``python -m build``, the wheel in
a fresh venv with nothing of this checkout in reach, run from an unrelated directory."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from demo_agent import __version__
from tests.installed import ROOT, Installation, isolated_env

pytestmark = [pytest.mark.interop, pytest.mark.wheel, pytest.mark.timeout(1200)]

EXAMPLES = (
    "code-review/SKILL.md",
    "code-review/references/checklist.md",
    "commit-message.md",
    "python-style/SKILL.md",
    "release-checklist/SKILL.md",
)


def run_installed(
    installed: Installation, *command: str, cwd: Path, home: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with the venv's scripts first on PATH, from ``cwd``."""
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        command,
        cwd=cwd,
        env=isolated_env(home, path=str(installed.bin)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_build_makes_wheel_and_sdist_with_license_and_metadata(installed: Installation) -> None:
    """Both carry LICENSE; the metadata has the SPDX license, URLs, classifiers, keywords."""
    assert installed.wheel.name == f"acp_skills-{__version__}-py3-none-any.whl"
    assert installed.sdist.name == f"acp_skills-{__version__}.tar.gz"
    # No deprecation warning about the license (the old table form printed one on every build).
    assert not re.search(
        r"(?i)deprecat\w*.*licen[cs]e|licen[cs]e.*deprecat", installed.build_output
    )
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        dist_info = f"acp_skills-{__version__}.dist-info"
        metadata = Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
        license_text = wheel.read(f"{dist_info}/licenses/LICENSE").decode()
    assert license_text == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in license_text
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Documentation", "Issues", "Source"}
    assert urls["Source"] == "https://github.com/acp-skills/acp-skills"
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    # PEP 639: with a license expression, license classifiers are not allowed.
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert "agent-client-protocol" in (metadata["Keywords"] or "")
    for example in EXAMPLES:
        assert f"acp_skills/cli/example_skills/{example}" in names
    with tarfile.open(installed.sdist) as sdist:
        members = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml"} <= members
    for example in EXAMPLES:
        assert f"acp_skills/cli/example_skills/{example}" in members


def test_installed_demonstration_runs_in_any_directory(
    installed: Installation, tmp_path: Path
) -> None:
    """python -m demo_agent.demo from an empty directory finds the bundled example skills."""
    where = tmp_path / "anywhere"
    where.mkdir()
    located = run_installed(
        installed,
        "python",
        "-c",
        "import demo_agent; print(demo_agent.__file__)",
        cwd=where,
        home=tmp_path / "home",
    )
    assert Path(located.stdout.strip()).is_relative_to(installed.venv)
    result = run_installed(
        installed, "python", "-m", "demo_agent.demo", cwd=where, home=tmp_path / "home"
    )
    assert result.returncode == 0, result.stderr
    transcript = result.stdout
    assert "[commands] /code-review [branch or path]" in transcript
    assert "Load skill code-review: in_progress" in transcript
    assert "I loaded the `release-checklist` skill" in transcript
    assert transcript.count("[turn ended: end_turn]") == 3
    assert "No skills are available" not in transcript


def test_installed_command_says_where_skills_are_looked_up(
    installed: Installation, tmp_path: Path
) -> None:
    """acp-skills-demo --help lists the roots in order and where the bundled examples are."""
    result = run_installed(
        installed, "acp-skills-demo", "--help", cwd=tmp_path, home=tmp_path / "home"
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout[result.stdout.index("where skills are looked up") :]
    order = [
        "<project>/.dsh/skills",
        "<project>/.agents/skills",
        "each --skills-dir",
        "$DSH_HOME/skills",
        "$DSH_AGENTS_HOME/skills",
        "<project>/.claude/skills",
        "$CLAUDE_CONFIG_DIR/skills",
    ]
    positions = [text.index(root) for root in order]
    assert positions == sorted(positions)
    examples = installed.venv.resolve()
    bundled = [line.strip() for line in text.splitlines() if "example_skills" in line]
    assert bundled
    assert Path(bundled[0]).is_relative_to(examples)
    assert (Path(bundled[0]) / "code-review" / "SKILL.md").is_file()
    version = run_installed(
        installed, "acp-skills-demo", "--version", cwd=tmp_path, home=tmp_path / "home"
    )
    assert version.stdout.strip() == __version__


def test_installed_acp_skills_lists_a_project_s_skills(
    installed: Installation, tmp_path: Path
) -> None:
    """``acp-skills list --json`` from the wheel finds a project's skill, outside any clone."""
    project = tmp_path / "project"
    skill = project / ".agents" / "skills" / "tidy-imports"
    skill.mkdir(parents=True)
    (project / ".git").mkdir()
    (skill / "SKILL.md").write_text(
        "---\nname: tidy-imports\ndescription: Sort and group imports.\n---\nSort them.\n",
        encoding="utf-8",
    )
    result = run_installed(
        installed, "acp-skills", "list", "--json", cwd=project, home=tmp_path / "home"
    )
    assert result.returncode == 0, result.stderr
    [listed] = json.loads(result.stdout)["skills"]
    assert (listed["name"], listed["source"]) == ("tidy-imports", "project-agents")
    text = run_installed(installed, "acp-skills", "list", cwd=project, home=tmp_path / "home")
    assert "tidy-imports" in text.stdout
