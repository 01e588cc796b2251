"""How the package was installed, and the command that adds an extra without losing the others:
environments laid out as pipx, uv and ``python -m venv`` leave them, in temporary directories."""

from __future__ import annotations

import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from acp_skills.cli.install import extra_install_hint, installation
from tests.installed import ROOT


def our_metadata() -> str:
    """This package's METADATA as a wheel carries it: its extras and what each requires, from
    pyproject.toml (whatever this checkout's own install state)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = ["Metadata-Version: 2.4", f"Name: {project['name']}", f"Version: {project['version']}"]
    lines += [f"Requires-Dist: {requirement}" for requirement in project["dependencies"]]
    for extra, requirements in project["optional-dependencies"].items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {item}; extra == "{extra}"' for item in requirements]
    return "\n".join(lines) + "\n"


def environment(root: Path, *, marker: str | None = None, has: tuple[str, ...] = ()) -> Path:
    """A virtual environment's layout at ``root`` holding this package and the projects
    ``has``, with the file its installer leaves (``marker``) at its root."""
    site = Path(sysconfig.get_path("purelib", "venv", vars={"base": root, "platbase": root}))
    ours = site / "acp_skills-0.1.0.dist-info"
    ours.mkdir(parents=True)
    (ours / "METADATA").write_text(our_metadata(), encoding="utf-8")
    for project in has:
        info = site / f"{project}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n")
    if marker is not None:
        (root / marker).write_text("{}\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("has", [(), ("mcp",), ("mcp", "openai")], ids=["none", "mcp", "both"])
def test_extras_count_as_installed_when_every_package_they_require_is_there(
    tmp_path: Path, has: tuple[str, ...]
) -> None:
    """An extra is installed when the environment holds each project it requires."""
    found = installation(str(environment(tmp_path / "env", has=has)))
    assert found.extras == frozenset(has)
    assert found.requirements["openai"] == ("openai>=1.40",)


@pytest.mark.parametrize("name", ["acp-skills", "acp-skills@2"], ids=["plain", "suffixed"])
def test_a_pipx_tool_is_told_to_inject_the_packages_so_its_extras_stay(
    tmp_path: Path, name: str
) -> None:
    """pipx: `pipx inject` into the tool's environment (named as pipx named it), never
    `pipx install --force '.[openai]'`, which would drop an installed `[mcp]`."""
    root = environment(
        tmp_path / "pipx" / "venvs" / name, marker="pipx_metadata.json", has=("mcp",)
    )
    found = installation(str(root))
    assert found.kind == "pipx"
    assert extra_install_hint("openai", found) == f"run `pipx inject {name} 'openai>=1.40'`"


@pytest.mark.parametrize(
    ("has", "spec"),
    [((), "'.[openai]'"), (("mcp",), "'.[openai,mcp]'")],
    ids=["alone", "with-mcp"],
)
def test_a_uv_tool_is_reinstalled_with_the_extra_and_every_extra_it_has(
    tmp_path: Path, has: tuple[str, ...], spec: str
) -> None:
    """uv: the tool is reinstalled from the clone with the new extra plus those it had."""
    root = environment(tmp_path / "tools" / "acp-skills", marker="uv-receipt.toml", has=has)
    found = installation(str(root))
    assert found.kind == "uv"
    assert extra_install_hint("openai", found) == (
        f"in your clone of acp-skills, run `uv tool install --reinstall {spec}`"
    )


def test_any_other_environment_is_told_to_pip_install_into_its_own_python(
    tmp_path: Path,
) -> None:
    """A venv made by hand: its own interpreter's pip adds the extra's packages."""
    root = environment(tmp_path / "venv", has=("openai",))
    found = installation(str(root))
    python = sysconfig.get_path("scripts", "venv", vars={"base": root, "platbase": root})
    assert found.kind == "environment"
    assert extra_install_hint("mcp", found) == (
        f"run `{python}/python -m pip install 'mcp>=2.2,<3'`"
    )


def test_an_environment_without_this_package_s_metadata_is_offered_the_extra_by_name(
    tmp_path: Path,
) -> None:
    """A source checkout on the path carries no metadata: the package is named like its extra."""
    found = installation(str(tmp_path))
    assert found.requirements == {}
    assert found.extras == frozenset()
    assert extra_install_hint("openai", found).endswith("-m pip install openai`")


def test_the_running_environment_is_read_from_its_own_search_path() -> None:
    """Without a prefix: this interpreter, and the extras the test environment has."""
    found = installation()
    assert found.python == sys.executable
    assert {"openai", "mcp"} <= found.extras
    assert extra_install_hint("openai") == extra_install_hint("openai", found)
