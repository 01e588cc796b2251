"""Arguments of a skill a person invokes as ``/name``, and the placeholders they fill.

Claude Code lets a skill's body refer to what the person typed after ``/name``; skills
written for it work here when an agent turns this on (`AcpSkills` ``expand_arguments``):

- ``$ARGUMENTS`` is the whole argument text, exactly as typed (empty when there is none);
- ``$ARGUMENTS[N]`` and its shorthand ``$N`` are the N-th argument, counting from 0, after
  splitting the text like a shell does (quotes group words and are removed);
- a positional placeholder with no argument to fill it stays as written, so a body that
  uses ``$1`` for something else (an ``awk`` program, say) is left alone unless the person
  passed that many arguments.

Substitution is one pass over the body: text that came from the arguments is never
expanded again. Pure functions, no I/O.
"""

from __future__ import annotations

import re
import shlex
from typing import Final

__all__ = ["expand_arguments", "split_arguments"]

# At most six digits: no skill has a million arguments, and int() of a long digit run costs.
_PLACEHOLDER: Final = re.compile(r"\$ARGUMENTS(?:\[(\d{1,6})\])?|\$(\d{1,6})")


def split_arguments(text: str) -> tuple[str, ...]:
    """Split argument text into words, with shell-style quoting.

    Text a shell could not split (an unclosed quote) falls back to splitting on whitespace:
    a person's typo must not lose their arguments.
    """
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


def expand_arguments(body: str, arguments: str) -> str:
    """Replace ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` in ``body`` (see the module doc).

    Args:
        body: a skill's instructions.
        arguments: what the person typed after ``/name``.

    Returns:
        The body with every placeholder that has a value replaced.
    """
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
