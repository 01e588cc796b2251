"""The library's own slash commands: ``/skills``, and the answer to a ``/name`` that is no command.

Pure builders, like `acp_skills.acp.updates`: `AcpSkills.turn` decides when a prompt is answered
by one of these instead of the model, and sends the text.

* ``/skills`` answers with the skills the session's working directory resolves to and every
  problem discovery met (the same `Diagnostic` records as ``acp-skills doctor`` and
  ``_skills/list``). It is advertised after the skills' own commands, unless a user-invocable
  skill is itself called ``skills``: a person's skill always wins over the built-in.
* A prompt that starts with ``/word`` where ``word`` is no command gets a short note naming
  the commands that exist, instead of reaching the model as plain text.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Final

from acp.schema import AvailableCommand

from ..catalog import CatalogFit, describe_catalog_fit
from ..diagnostics import Diagnostic
from ..model import SkillSnapshot, SkillSummary
from ..text import remove_unsafe_characters, shorten_description

__all__ = [
    "SKILLS_COMMAND",
    "SKILLS_COMMAND_DESCRIPTION",
    "builtin_commands",
    "leading_slash_word",
    "no_such_command",
    "skills_report",
    "user_commands",
]

SKILLS_COMMAND: Final = "skills"
SKILLS_COMMAND_DESCRIPTION: Final = "Show the skills available here and any problems with them"

# How many problems `/skills` lists before pointing at `acp-skills doctor`: a chat message is
# no place for a hundred lines.
_MAX_PROBLEMS_SHOWN: Final = 20
_DESCRIPTION_SHOWN: Final = 120

# A slash word opening the prompt: `/word` followed by whitespace or the end. Wider than the
# skill-name grammar on purpose, so `/Deploy` or `/run_tests` get a "no such command" note (and
# a suggestion) rather than silently reaching the model; `/usr/bin` and `5/8` are no words.
_LEADING_SLASH_WORD: Final = re.compile(r"\s*/([A-Za-z0-9][A-Za-z0-9_-]*)(?!\S)")

_SEVERITY_ORDER: Final = {"error": 0, "warning": 1, "info": 2}
_SEVERITY_LABEL: Final = {"error": "error", "warning": "warning", "info": "note"}


def user_commands(skills: Iterable[SkillSummary]) -> list[str]:
    """The names a person can type as ``/name``: user-invocable skills, then the built-ins."""
    names = [skill.name for skill in skills if skill.user_invocable]
    if SKILLS_COMMAND not in names:
        names.append(SKILLS_COMMAND)
    return names


def builtin_commands(skills: Iterable[SkillSummary]) -> list[AvailableCommand]:
    """The built-in commands to advertise after the skills' own: ``/skills``, unless a
    user-invocable skill already takes that name."""
    if any(skill.user_invocable and skill.name == SKILLS_COMMAND for skill in skills):
        return []
    return [AvailableCommand(name=SKILLS_COMMAND, description=SKILLS_COMMAND_DESCRIPTION)]


def leading_slash_word(text: str) -> str | None:
    """The ``word`` of a prompt that starts with ``/word`` (leading whitespace allowed)."""
    match = _LEADING_SLASH_WORD.match(text)
    return match.group(1) if match else None


def no_such_command(word: str, snapshot: SkillSnapshot) -> str:
    """The note answering ``/word`` when it is no command, naming the commands that exist."""
    commands = user_commands(snapshot.skills)
    model_only = any(skill.name == word and not skill.user_invocable for skill in snapshot.skills)
    if model_only:
        opening = (
            f"`/{word}` is not a command: the skill `{word}` is for the model only "
            "(its `user-invocable` is false)."
        )
    else:
        opening = f"`/{word}` is not a command here."
        close = difflib.get_close_matches(word.lower(), commands, n=1, cutoff=0.6)
        if close:
            opening += f" Did you mean `/{close[0]}`?"
    listed = ", ".join(f"`/{name}`" for name in commands)
    return f"{opening}\n\nCommands: {listed}.\n\nNothing was sent to the model."


def skills_report(
    cwd: str,
    snapshot: SkillSnapshot,
    diagnostics: Sequence[Diagnostic] | None,
    fit: CatalogFit | None = None,
) -> str:
    """What ``/skills`` answers: the resolved skills and the problems found, as Markdown.

    Args:
        cwd: The session's working directory.
        snapshot: The skills resolved for it now (a new session would see these).
        diagnostics: The problems (`SkillRegistry.diagnose`), or ``None`` when they could not
            be gathered.
        fit: What the catalog budget did to this session's catalog, when it has one.
    """
    lines = [f"**Skills for `{_clean(cwd)}`** ({len(snapshot.skills)})", ""]
    if not snapshot.skills:
        lines.append("No skills found.")
    for skill in snapshot.skills:
        lines.append(_skill_line(skill))
    lines.append("")
    if fit is not None:
        lines.extend(_clean(line) for line in describe_catalog_fit(fit).splitlines())
        lines.append("")
    if diagnostics is None:
        lines.append("The problems could not be gathered (see the agent's log).")
    elif not diagnostics:
        lines.append("No problems found.")
    else:
        ordered = sorted(diagnostics, key=lambda d: _SEVERITY_ORDER.get(d.severity, 3))
        lines.append(f"**Problems** ({_tally(ordered)})")
        lines.append("")
        lines.extend(_diagnostic_line(d) for d in ordered[:_MAX_PROBLEMS_SHOWN])
        hidden = len(ordered) - _MAX_PROBLEMS_SHOWN
        if hidden > 0:
            lines.append(f"- ... and {hidden} more")
        lines.append("")
        lines.append(f"Run `acp-skills doctor --cwd {_clean(cwd)}` in a terminal for details.")
    if not snapshot.complete:
        lines.append("")
        lines.append("A skill provider did not answer in time: this list may be incomplete.")
    return "\n".join(lines).rstrip("\n")


def _skill_line(skill: SkillSummary) -> str:
    notes = [_clean(skill.source)]
    if not skill.user_invocable:
        notes.append("model only")
    if skill.disable_model_invocation:
        notes.append("hidden from the model")
    shown = f"/{skill.name}" if skill.user_invocable else skill.name
    description = shorten_description(skill.description, _DESCRIPTION_SHOWN)
    return f"- `{shown}` — {description} ({', '.join(notes)})"


def _diagnostic_line(diagnostic: Diagnostic) -> str:
    where = _clean(diagnostic.path) if diagnostic.path is not None else ""
    if where and diagnostic.line is not None:
        where += f":{diagnostic.line}"
    label = _SEVERITY_LABEL.get(diagnostic.severity, diagnostic.severity)
    located = f" `{where}`:" if where else ":"
    return f"- {label} `{diagnostic.code}`{located} {_clean(diagnostic.message)}"


def _tally(diagnostics: Sequence[Diagnostic]) -> str:
    parts = []
    for severity in ("error", "warning", "info"):
        count = sum(1 for d in diagnostics if d.severity == severity)
        if count:
            label = _SEVERITY_LABEL[severity]
            parts.append(f"{count} {label}{'' if count == 1 else 's'}")
    return ", ".join(parts)


def _clean(text: str) -> str:
    # Paths and messages can quote what is on disk: no control characters in the editor.
    return remove_unsafe_characters(text)
