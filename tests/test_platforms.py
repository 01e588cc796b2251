"""The platforms the package says it runs on: its classifiers agree with docs/architecture.md."""

from __future__ import annotations

import tomllib

from tests.installed import ROOT


def test_the_classifiers_name_the_tested_and_expected_platforms_only() -> None:
    """Linux (tested) and macOS (expected); never "OS Independent", which Windows would read as
    support (docs/architecture.md, "Platforms")."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    systems = [c for c in project["classifiers"] if c.startswith("Operating System ::")]
    assert systems == ["Operating System :: MacOS", "Operating System :: POSIX :: Linux"]
    platforms = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = platforms.split("### Platforms\n", 1)[1].split("\n### ", 1)[0]
    for system in systems:
        assert f"`{system}`" in section.replace("\n  ", " ")
    assert "**Windows is not supported**" in section
