"""Strict validation: the Agent Skills specification's rules, beyond the runtime's."""

from __future__ import annotations

import pytest

from acp_skills.diagnostics import Diagnostic, Severity
from acp_skills.frontmatter import ParsedSkill, parse_skill_file
from acp_skills.strict import strict_diagnostics, under_strict_rules


def parsed(frontmatter: str) -> ParsedSkill:
    outcome = parse_skill_file(f"---\n{frontmatter}---\nbody\n")
    assert isinstance(outcome, ParsedSkill)
    return outcome


_LONG_NAME = "a" * 65
_RULES = [
    ("name-65", f"name: {_LONG_NAME}\ndescription: d\n", ["name-too-long"]),
    ("name-64", f"name: {'a' * 64}\ndescription: d\n", []),
    ("description-1025", f"name: x\ndescription: {'d' * 1025}\n", ["description-too-long"]),
    ("description-1024", f"name: x\ndescription: {'d' * 1024}\n", []),
    (
        "compatibility-501",
        f"name: x\ndescription: d\ncompatibility: {'c' * 501}\n",
        ["compatibility-invalid"],
    ),
    ("compatibility-500", f"name: x\ndescription: d\ncompatibility: {'c' * 500}\n", []),
    (
        "compatibility-number",
        "name: x\ndescription: d\ncompatibility: 3\n",
        ["compatibility-invalid"],
    ),
    (
        "compatibility-empty",
        "name: x\ndescription: d\ncompatibility: ''\n",
        ["compatibility-invalid"],
    ),
    (
        "metadata-number",
        "name: x\ndescription: d\nmetadata: {version: 1.0}\n",
        ["metadata-invalid"],
    ),
    ("metadata-nested", "name: x\ndescription: d\nmetadata: {a: {b: c}}\n", ["metadata-invalid"]),
    ("metadata-strings", "name: x\ndescription: d\nmetadata: {version: '1.0'}\n", []),
    # Not a mapping at all: the runtime already says `field-ignored` (an error when strict).
    ("metadata-list", "name: x\ndescription: d\nmetadata: [a]\n", []),
    ("tools-string", "name: x\ndescription: d\nallowed-tools: Read Bash(git:*)\n", []),
    ("tools-list", "name: x\ndescription: d\nallowed-tools: [Read, Grep]\n", []),
    ("tools-number", "name: x\ndescription: d\nallowed-tools: 3\n", ["allowed-tools-invalid"]),
    (
        "tools-mixed",
        "name: x\ndescription: d\nallowed-tools: [Read, 3]\n",
        ["allowed-tools-invalid"],
    ),
]


@pytest.mark.parametrize(
    ("frontmatter", "codes"),
    [(frontmatter, codes) for _, frontmatter, codes in _RULES],
    ids=[case for case, *_ in _RULES],
)
def test_specification_limits(frontmatter: str, codes: list[str]) -> None:
    """Each limit of the specification, at the limit and one past it."""
    found = strict_diagnostics("/r/x/SKILL.md", parsed(frontmatter))
    assert [d.code for d in found] == codes
    assert all(d.severity == "error" for d in found)


def test_a_flat_skill_is_outside_the_specification() -> None:
    """The specification knows only <name>/SKILL.md; the message says where to move the file."""
    [found] = strict_diagnostics("/r/notes.md", parsed("name: notes\ndescription: d\n"))
    assert found.code == "flat-skill"
    assert "notes/SKILL.md" in found.message


def test_strict_rules_turn_the_runtime_s_notes_into_errors() -> None:
    """A name mismatch, an unknown key or an ignored field is an error; other records stay."""
    kinds: list[tuple[str, Severity]] = [
        ("name-mismatch", "warning"),
        ("unknown-key", "info"),
        ("field-ignored", "warning"),
        ("skill-file-absent", "info"),
        ("skill-shadowed", "info"),
    ]
    records = [
        Diagnostic(code=code, severity=severity, path="/p", message="m") for code, severity in kinds
    ]
    assert [d.severity for d in under_strict_rules(records)] == [
        "error",
        "error",
        "error",
        "info",
        "info",
    ]
