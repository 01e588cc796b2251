"""`extra_install_hint`: the command that adds an extra in the form this package was installed
(contract §14a), told apart by the file each installer leaves at the environment's root."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from acp_skills.cli.settings import extra_install_hint
from tests.installed import ROOT

OPENAI = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]["openai"]


def installed_by(
    root: Path, monkeypatch: pytest.MonkeyPatch, marker: str | None, text: str = ""
) -> None:
    """This interpreter's environment, as if it lived at ``root`` with ``marker`` there."""
    root.mkdir(parents=True)
    if marker is not None:
        (root / marker).write_text(text, encoding="utf-8")
    monkeypatch.setattr(sys, "prefix", str(root))


@pytest.mark.parametrize("name", ["acp-skills", "acp-skills@2"], ids=["plain", "suffixed"])
def test_a_pipx_tool_is_told_to_inject_the_packages_so_its_extras_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """pipx: `pipx inject` into the tool's environment (named as pipx named it), never
    `pipx install --force '.[openai]'`, which would drop an installed `[mcp]`."""
    installed_by(tmp_path / "pipx" / "venvs" / name, monkeypatch, "pipx_metadata.json", "{}")
    packages = " ".join(f"'{item}'" if set(item) & set("<>=,") else item for item in OPENAI)
    assert extra_install_hint("openai") == f"run `pipx inject {name} {packages}`"


@pytest.mark.parametrize(
    ("receipt", "spec"),
    [
        ("", "'.[openai]'"),
        ('[tool]\nrequirements = [{ name = "acp-skills", extras = ["mcp"] }]\n', "'.[openai,mcp]'"),
    ],
    ids=["alone", "with-mcp"],
)
def test_a_uv_tool_is_reinstalled_with_the_extra_and_every_extra_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receipt: str, spec: str
) -> None:
    """uv: the tool is reinstalled from the clone with the new extra plus those its receipt
    records."""
    installed_by(tmp_path / "tools" / "acp-skills", monkeypatch, "uv-receipt.toml", receipt)
    assert extra_install_hint("openai") == (
        f"in your clone of acp-skills, run `uv tool install --reinstall {spec}`"
    )


def test_any_other_environment_is_told_to_pip_install_into_its_own_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv made by hand: its own interpreter's pip adds the extra's packages."""
    installed_by(tmp_path / "venv", monkeypatch, None)
    hint = extra_install_hint("openai")
    assert hint.startswith(f"run `{sys.executable} -m pip install ")
    assert all(item in hint for item in OPENAI)
