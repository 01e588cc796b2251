"""The live-reload safety sweep (`acp_skills.sweep`): its fingerprint of a root (a pure function
over real files), and what a sweep finds. The watcher thread finding a change no event reported
through it: tests/test_watch.py."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from acp_skills.sweep import SafetySweep, fingerprint, fingerprint_root


def write_skill(path: Path, name: str, description: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n")
    return path


def a_root(tmp_path: Path) -> Path:
    """A root with two bundles, a flat skill, a resource and a file that is not a skill."""
    root = tmp_path / "skills"
    write_skill(root / "deploy" / "SKILL.md", "deploy", "Deploy.")
    write_skill(root / "review" / "SKILL.md", "review", "Review.")
    (root / "review" / "references").mkdir()
    (root / "review" / "references" / "guide.md").write_text("# Guide\n")
    write_skill(root / "notes.md", "notes", "Notes.")
    (root / "README.txt").write_text("Not a skill.\n")
    return root


def later_mtime(path: Path) -> None:
    stamp = path.stat()
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))


def remove_bundle(bundle: Path) -> None:
    for below in sorted(bundle.rglob("*"), reverse=True):
        below.rmdir() if below.is_dir() else below.unlink()
    bundle.rmdir()


# Each change below is one discovery would see (and `is_relevant_change` counts).
RELEVANT_CHANGES: dict[str, Callable[[Path], object]] = {
    "SKILL.md mtime": lambda root: later_mtime(root / "deploy" / "SKILL.md"),
    "SKILL.md size": lambda root: (root / "deploy" / "SKILL.md").write_text("---\n---\n"),
    "SKILL.md mode": lambda root: (root / "deploy" / "SKILL.md").chmod(0o200),
    "SKILL.md replaced": lambda root: write_skill(root / "x.new", "deploy", "Deploy.").replace(
        root / "deploy" / "SKILL.md"
    ),
    "SKILL.md removed": lambda root: (root / "deploy" / "SKILL.md").unlink(),
    "bundle added": lambda root: write_skill(root / "ship" / "SKILL.md", "ship", "Ship."),
    "empty bundle added": lambda root: (root / "empty").mkdir(),
    "bundle removed": lambda root: remove_bundle(root / "review"),
    "bundle renamed": lambda root: (root / "review").rename(root / "critique"),
    "flat renamed": lambda root: (root / "notes.md").rename(root / "memo.md"),
    "flat mtime": lambda root: later_mtime(root / "notes.md"),
    "flat added": lambda root: write_skill(root / "more.md", "more", "More."),
    "flat removed": lambda root: (root / "notes.md").unlink(),
}


@pytest.mark.parametrize("change", list(RELEVANT_CHANGES.values()), ids=list(RELEVANT_CHANGES))
def test_every_change_discovery_would_see_changes_the_fingerprint(
    tmp_path: Path, change: Callable[[Path], object]
) -> None:
    root = a_root(tmp_path)
    before = fingerprint_root(str(root))
    change(root)
    assert fingerprint_root(str(root)) != before


def test_a_change_that_cannot_matter_leaves_the_fingerprint_alone(tmp_path: Path) -> None:
    """What `is_relevant_change` ignores: other files in a root or a bundle, resources, the
    bundle directory's own metadata, and ``.system`` where the root skips it."""
    root = a_root(tmp_path)
    (root / ".system").mkdir()
    skips = [(str(root), True)]
    before = fingerprint(skips)
    (root / "README.txt").write_text("Edited.\n")
    (root / ".deploy.md.swp").write_text("swap\n")
    (root / "deploy" / "notes.md").write_text("# Notes\n")
    (root / "deploy" / "scripts").mkdir()
    (root / "review" / "references" / "guide.md").write_text("# Guide, edited\n")
    (root / "review").chmod(0o750)
    write_skill(root / ".system" / "tool" / "SKILL.md", "tool", "Tool.")
    assert fingerprint(skips) == before
    # Where ``.system`` is not skipped, it is a bundle like any other.
    assert fingerprint([(str(root), False)]) != {str(root): before[str(root)]}


def test_a_missing_root_and_its_appearing_differ(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    missing = fingerprint([(str(root), False)])
    assert missing == {str(root): None}
    root.mkdir()
    assert fingerprint([(str(root), False)]) == {str(root): {}}


def test_the_sweep_tells_new_entries_from_new_stamps(tmp_path: Path) -> None:
    """Only entries that came or went call for watching anew; an edited file does not."""
    root = tmp_path / "skills"
    (root / "one").mkdir(parents=True)
    (root / "one" / "SKILL.md").write_text("---\nname: one\ndescription: d\n---\n")
    sweep = SafetySweep(interval=0)
    sweep.cover([(str(root), False)])
    assert sweep.sweep() == ([], False)
    (root / "one" / "SKILL.md").write_text("---\nname: one\ndescription: longer d\n---\n")
    assert sweep.sweep() == ([str(root)], False)
    (root / "two").mkdir()
    assert sweep.sweep() == ([str(root)], True)
    sweep.stop()
    assert not sweep.due()
