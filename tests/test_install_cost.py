"""bench/install_cost.py: how it counts, how it renders, and where in the README it writes.

The measurement itself (building, downloading, installing) takes minutes and is run by hand;
these are the parts that decide what the README says."""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

from tests.installed import ROOT


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "install_cost", ROOT / "bench" / "install_cost.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


install_cost = _load()
BLOCK_START = install_cost.BEGIN + "\n"
BLOCK_END = install_cost.END + "\n"


def report(*rows: object, runs: int = 3) -> object:
    return install_cost.Report(
        wheel_bytes=194_684, rows=rows, runs=runs, machine="on a test machine"
    )


def test_the_block_replaces_only_what_lies_between_the_markers() -> None:
    """Text before and after the markers, and the markers themselves, stay as they were."""
    text = f"# Title\nbefore\n{BLOCK_START}old figures\nmore\n{BLOCK_END}after\n"
    assert install_cost.with_block(text, "new figures\n") == (
        f"# Title\nbefore\n{BLOCK_START}new figures\n{BLOCK_END}after\n"
    )


@pytest.mark.parametrize(
    "text",
    ["no markers\n", BLOCK_START, BLOCK_END + BLOCK_START, BLOCK_START * 2 + BLOCK_END],
    ids=["none", "no-end", "reversed", "repeated"],
)
def test_markers_missing_out_of_order_or_repeated_are_refused(text: str) -> None:
    """The README is never rewritten at a guessed place."""
    with pytest.raises(ValueError, match="expected one line"):
        install_cost.with_block(text, "figures\n")


def test_the_readme_s_figures_are_the_block_the_script_writes() -> None:
    """README.md holds the markers once, and between them what `render` writes: the wheel's
    size, how it was measured, and the table."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    inside = readme.split(BLOCK_START, 1)[1].split(BLOCK_END, 1)[0]
    assert install_cost.with_block(readme, inside) == readme
    assert inside.startswith("The wheel built from this tree is about ")
    assert "`bench/install_cost.py --write-readme`" in " ".join(inside.split())
    assert "| command | time | size | packages |\n" in inside


def test_a_row_gives_the_range_of_its_times_the_median_size_and_the_packages() -> None:
    """Three runs: the fastest to the slowest, the middle size in MiB, the package count."""
    runs = tuple(
        install_cost.Cost(seconds=s, bytes_added=b, packages_added=12)
        for s, b in [(1.04, 14 * 2**20), (0.71, 13 * 2**20), (2.0, 15 * 2**20)]
    )
    text = install_cost.render(report(install_cost.Row("`uv tool install .`", runs=runs)))
    prose = " ".join(text.split("\n\n", 1)[0].split())
    assert prose.startswith("The wheel built from this tree is about 194,700 bytes ")
    assert "(on a test machine). Each command ran 3 times," in prose
    assert max(len(line) for line in text.split("\n\n", 1)[0].splitlines()) <= 96
    assert text.endswith("| `uv tool install .` | 0.7 to 2.0 s | 14.0 MiB | 12 |\n")


@pytest.mark.parametrize(
    ("exact", "shown"), [(200_505, 200_500), (200_551, 200_600), (194_684, 194_700)]
)
def test_the_wheel_s_size_is_given_to_the_nearest_hundred_bytes(exact: int, shown: int) -> None:
    """A figure the wheel carries in its own README settles only when rounded."""
    assert install_cost.shown_size(exact) == shown


def test_a_row_not_measured_says_why() -> None:
    """Without uv its rows stay in the table, saying they were not measured and why."""
    row = install_cost.Row("`uv tool install .`", missing="uv was not found")
    assert install_cost.render(report(row, runs=1)).endswith(
        "| `uv tool install .` | not measured: uv was not found | | |\n"
    )


def test_disk_usage_counts_a_hard_linked_file_once(tmp_path: Path) -> None:
    """uv links a tool's files from its cache: a file linked twice takes its blocks once."""
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    once = install_cost.disk_usage(tmp_path)
    os.link(tmp_path / "a", tmp_path / "b")
    assert install_cost.disk_usage(tmp_path) == once
    assert once >= 100_000


def test_distributions_are_counted_once_when_lib64_links_to_lib(tmp_path: Path) -> None:
    """A venv's ``lib64`` is often a link to ``lib``; each ``*.dist-info`` counts once."""
    where = {"base": str(tmp_path), "platbase": str(tmp_path)}
    site = Path(sysconfig.get_path("purelib", "venv", vars=where))
    for name in ("acp_skills-0.1.0", "anyio-4.4.0"):
        (site / f"{name}.dist-info").mkdir(parents=True)
    (site / "anyio").mkdir()
    (tmp_path / "lib64").symlink_to("lib")
    assert install_cost.distribution_count(tmp_path) == 2
