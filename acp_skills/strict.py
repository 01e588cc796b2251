"""Strict validation: the Agent Skills specification (agentskills.io), beyond the runtime's needs.

The runtime is lenient: it accepts any skill it can use safely (`acp_skills.diagnostics` says
what it met on the way). A skill meant to travel between tools should also follow the
specification, which ``acp-skills validate --strict`` checks:

* ``name``: 1 to 64 characters of the name grammar, equal to its directory's name;
* ``description``: 1 to 1024 characters;
* ``compatibility``: when present, a string of 1 to 500 characters;
* ``metadata``: when present, a mapping of strings to strings;
* ``allowed-tools``: when present, a string or a list of strings;
* no frontmatter key outside the specification's and this runtime's own;
* a skill is a directory holding ``SKILL.md`` (a flat ``<name>.md`` is this runtime's extension).

Pure: it reads parsed values and returns `Diagnostic` records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Final

from .diagnostics import CODES, Diagnostic
from .frontmatter import ParsedSkill
from .model import SKILL_FILE_NAME

__all__ = [
    "MAX_COMPATIBILITY_LENGTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NAME_LENGTH",
    "strict_diagnostics",
    "under_strict_rules",
]

MAX_NAME_LENGTH: Final = 64
MAX_DESCRIPTION_LENGTH: Final = 1024
MAX_COMPATIBILITY_LENGTH: Final = 500

# What the runtime only mentions but the specification forbids.
_ERRORS_WHEN_STRICT: Final = frozenset({"name-mismatch", "unknown-key", "field-ignored"})


def under_strict_rules(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The runtime's records with the severity strict validation gives them: a name that
    differs from its directory, an unknown key or an ignored field becomes an ``error``."""
    return tuple(
        replace(d, severity="error") if d.code in _ERRORS_WHEN_STRICT else d for d in diagnostics
    )


def strict_diagnostics(path: str, parsed: ParsedSkill) -> tuple[Diagnostic, ...]:
    """The specification's checks the runtime does not make, for one well-formed skill file.

    Args:
        path: The skill file.
        parsed: What the parser made of it.

    Returns:
        One ``error`` per rule broken, in the order of the module docstring.
    """
    found: list[Diagnostic] = []

    def report(code: str, message: str) -> None:
        found.append(
            Diagnostic(
                code=code,
                severity=CODES[code].severity,
                path=path,
                message=message,
                skill=parsed.name,
            )
        )

    if len(parsed.name) > MAX_NAME_LENGTH:
        report(
            "name-too-long",
            f"name is {len(parsed.name)} characters, over the specification's {MAX_NAME_LENGTH}",
        )
    if len(parsed.description) > MAX_DESCRIPTION_LENGTH:
        report(
            "description-too-long",
            f"description is {len(parsed.description)} characters, over the specification's "
            f"{MAX_DESCRIPTION_LENGTH}",
        )
    fields = parsed.fields
    if "compatibility" in fields:
        problem = _compatibility_problem(fields["compatibility"])
        if problem:
            report("compatibility-invalid", problem)
    metadata = fields.get("metadata")
    # A metadata that is no mapping (or has non-string keys) is already a `field-ignored`.
    if isinstance(metadata, Mapping) and all(isinstance(key, str) for key in metadata):
        offending = [key for key, value in metadata.items() if not isinstance(value, str)]
        if offending:
            listed = ", ".join(repr(key) for key in offending)
            report(
                "metadata-invalid",
                f"metadata values must be strings (quote them); not a string: {listed}",
            )
    if "allowed-tools" in fields and not _is_tool_list(fields["allowed-tools"]):
        report(
            "allowed-tools-invalid",
            "'allowed-tools' must be a space-separated string or a list of strings",
        )
    if os.path.basename(path) != SKILL_FILE_NAME:
        report(
            "flat-skill",
            f"a skill is a directory holding {SKILL_FILE_NAME}; move this file to "
            f"{parsed.name}/{SKILL_FILE_NAME}",
        )
    return tuple(found)


def _compatibility_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "'compatibility' must be a string"
    if not value.strip():
        return "'compatibility' is empty (leave it out instead)"
    if len(value) > MAX_COMPATIBILITY_LENGTH:
        return (
            f"'compatibility' is {len(value)} characters, over the specification's "
            f"{MAX_COMPATIBILITY_LENGTH}"
        )
    return None


def _is_tool_list(value: object) -> bool:
    # The frontmatter reader turns YAML sequences into tuples.
    if isinstance(value, str):
        return True
    return isinstance(value, tuple | list) and all(isinstance(item, str) for item in value)
