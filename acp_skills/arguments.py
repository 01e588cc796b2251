"""Arguments of a skill a person invokes as ``/name``, and the placeholders they fill.

As in Claude Code (opt-in, `AcpSkills` ``expand_arguments``): ``$ARGUMENTS`` is the whole text
as typed; ``$ARGUMENTS[N]`` and ``$N`` the N-th argument from 0, split like a shell does. A
positional placeholder with no argument stays as written (a body using ``$1`` in an ``awk``
program is left alone). One pass: text that came from the arguments is never expanded again.
"""

from __future__ import annotations

import re
import shlex
from typing import Final

__all__ = ["expand_arguments", "split_arguments"]

# At most six digits: no skill has a million arguments, and int() of a long digit run costs.
_PLACEHOLDER: Final = re.compile(r"\$ARGUMENTS(?:\[(\d{1,6})\])?|\$(\d{1,6})")


def split_arguments(text: str) -> tuple[str, ...]:
    """Split argument text into words, with shell-style quoting; text a shell could not split
    (an unclosed quote) is split on whitespace: a typo must not lose the arguments."""
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


def expand_arguments(body: str, arguments: str) -> str:
    """``body`` (a skill's instructions) with ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N``
    filled from ``arguments`` (what the person typed after ``/name``)."""
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
