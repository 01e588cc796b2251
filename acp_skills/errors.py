"""The one exception (a provider breaking its contract) and `Problem`, every reported problem."""

from __future__ import annotations

from dataclasses import dataclass


class SkillContractError(ValueError):
    """A provider returned a value that breaks the contract (the message names the field)."""

    def __init__(self, provider: str, problem: str) -> None:
        super().__init__(f'skill provider "{provider}" returned {problem}')
        self.provider = provider
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Problem:
    """A problem made where it arises: a code, a message and the line (from 1) when known."""

    code: str
    message: str
    line: int | None = None
