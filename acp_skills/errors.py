"""The exceptions of acp-skills, and the one value every reported problem is.

    ValueError
    └── SkillContractError     a provider returned a malformed candidate or definition
    Problem                    what is wrong (a stable code, a message, maybe a line)

Everything a user or a model can get wrong (a malformed SKILL.md, an unknown name) is reported
as a warning or a tool result instead; only a provider breaking its contract is an exception.
"""

from __future__ import annotations

from dataclasses import dataclass


class SkillContractError(ValueError):
    """A skill provider returned a value that breaks the provider contract.

    The message always starts ``skill provider "<name>" returned`` and names the field.
    """

    def __init__(self, provider: str, problem: str) -> None:
        super().__init__(f'skill provider "{provider}" returned {problem}')
        self.provider = provider
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Problem:
    """A problem, made where it arises and carried unchanged to every report.

    Attributes:
        code: A stable code from ``docs/diagnostics.md`` (``yaml-invalid``, ...).
        message: What is wrong, for a person.
        line: The line of the file (from 1) the problem is on, when known.
    """

    code: str
    message: str
    line: int | None = None
