"""Skill trees for the benchmarks: N bundles of about 12 KB, about 300 bytes of frontmatter.

The frontmatter uses only fields of the Agent Skills specification, written in a way every
measured library reads the same (no flow collections, which strictyaml refuses), so that each
one can be checked to return the same catalog.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

BODY_LINE = "Check every changed line against the checklist and report findings by severity.\n"
BODY = BODY_LINE * (12_000 // len(BODY_LINE))


def skill_name(index: int) -> str:
    return f"skill-{index:05d}"


def description(index: int) -> str:
    return (
        f"Reviews pull requests for correctness, style and security issues (variant {index}); "
        "use it when the user asks for a careful review of a diff or a branch before it is merged."
    )


def skill_file(index: int) -> str:
    text = description(index)
    folded = text[:90].rsplit(" ", 1)
    return (
        "---\n"
        f"name: {skill_name(index)}\n"
        "description: >-\n"
        f"  {folded[0]}\n"
        f"  {folded[1]}{text[90:]}\n"
        "license: Apache-2.0\n"
        "metadata:\n"
        "  owner: platform-team\n"
        '  version: "1.2"\n'
        "---\n"
        f"{BODY}"
    )


def make_tree(root: Path, count: int) -> None:
    """Write ``count`` bundles ``skill-NNNNN/SKILL.md`` under ``root`` (created if needed)."""
    root.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        bundle = root / skill_name(index)
        bundle.mkdir(exist_ok=True)
        (bundle / "SKILL.md").write_text(skill_file(index), encoding="utf-8")


def catalog_digest(entries: Iterable[tuple[str, str]]) -> str:
    """A digest of a catalog's (name, description) pairs, independent of their order."""
    lines = sorted(f"{name}\t{text}" for name, text in entries)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def expected_digest(count: int) -> str:
    return catalog_digest((skill_name(index), description(index)) for index in range(count))
