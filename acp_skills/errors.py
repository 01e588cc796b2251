"""What can go wrong: `SkillContractError`, `Refusal`, `ReadError` and `Problem`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias


class SkillContractError(ValueError):
    """A provider returned a value that breaks the contract (the message names the field)."""

    def __init__(self, provider: str, problem: str) -> None:
        super().__init__(f'skill provider "{provider}" returned {problem}')


class Refusal(Exception):
    """A check of the ``skill`` tool failed; ``str()`` of it is the whole ``Error: `` text."""


# fmt: off
ReadFailure: TypeAlias = Literal[
    "not_found", "broken_link", "outside", "excluded", "directory", "not_regular", "too_large",
    "grew", "unreadable",
]
# fmt: on

# In a report's words (the model's: `acp_skills.content.unread_path`); `code` is a skipped file's.
_REASONS: Final[dict[ReadFailure, str]] = {
    "not_found": "file not found",
    "broken_link": "broken symbolic link",
    "outside": "the path resolves outside the directory",
    "excluded": "it belongs to another skill",
    "directory": "is a directory",
    "not_regular": "not a regular file",
    "too_large": "file is {size} bytes, over the {limit}-byte limit",
    "grew": "file grew past the {limit}-byte limit while being read",
    "unreadable": "{detail}",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadError:
    """Why a read gave no file; a directory inside a skill's lists its ``entries``."""

    failure: ReadFailure
    size: int = 0
    limit: int = 0
    detail: str = ""
    entries: tuple[str, ...] = ()

    @property
    def code(self) -> str:
        if self.failure == "broken_link":
            return "broken-link"
        return "file-too-large" if self.failure in ("too_large", "grew") else "file-unreadable"

    @property
    def reason(self) -> str:
        return _REASONS[self.failure].format(size=self.size, limit=self.limit, detail=self.detail)


@dataclass(frozen=True, slots=True)
class Problem:
    """A problem made where it arises: a code, a message and the line (from 1) when known."""

    code: str
    message: str
    line: int | None = None
