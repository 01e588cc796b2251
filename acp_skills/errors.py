"""The exceptions of acp-skills.

    ValueError
    └── SkillContractError     a provider returned a malformed candidate or definition

Everything a user or a model can get wrong (a malformed SKILL.md, an unknown name) is reported
as a warning or a tool result instead; only a provider breaking its contract is an exception.
"""

from __future__ import annotations


class SkillContractError(ValueError):
    """A skill provider returned a value that breaks the provider contract.

    The message always starts ``skill provider "<name>" returned`` and names the field.
    """

    def __init__(self, provider: str, problem: str) -> None:
        super().__init__(f'skill provider "{provider}" returned {problem}')
        self.provider = provider
        self.problem = problem
