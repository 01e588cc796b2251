"""Arguments of a skill invoked as ``/name``: ``$ARGUMENTS`` (the whole text), ``$ARGUMENTS[N]``
and ``$N`` (the N-th shell word from 0; without one it stays, as ``$1`` in ``awk``), in one pass."""

from __future__ import annotations

import re
import shlex
from typing import Final

# At most six digits: no skill has a million arguments, and int() of a long digit run costs.
_PLACEHOLDER: Final = re.compile(r"\$ARGUMENTS(?:\[(\d{1,6})\])?|\$(\d{1,6})")


def split_arguments(text: str) -> tuple[str, ...]:
    """Words of ``text``, shell-quoted; an unclosed quote falls back to whitespace splitting."""
    try:
        return tuple(shlex.split(text))
    except ValueError:  # a typo must not lose the arguments
        return tuple(text.split())


def expand_arguments(body: str, arguments: str) -> str:
    """``body`` with its placeholders filled from ``arguments`` (typed after ``/name``)."""
    if "$" not in body:
        return body
    words: tuple[str, ...] | None = None

    def fill(match: re.Match[str]) -> str:
        nonlocal words
        index = match.group(1) or match.group(2)
        if index is None:
            return arguments
        if words is None:
            words = split_arguments(arguments)
        position = int(index)
        return words[position] if position < len(words) else match.group(0)

    return _PLACEHOLDER.sub(fill, body)
