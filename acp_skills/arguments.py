"""Claude Code's ``$ARGUMENTS`` placeholders, filled from what a person typed after ``/name``;
bounded (arguments cut before `shlex` splits them, filling stopped at a size), so both run on
the event loop."""

from __future__ import annotations

import re
import shlex
from typing import Final

# ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` (the N-th shell word from 0; a missing one stays).
# At most six digits: no skill has a million arguments, and int() of a long digit run costs.
_PLACEHOLDER: Final = re.compile(r"\$ARGUMENTS(?:\[(\d{1,6})\])?|\$(\d{1,6})")
MAX_ARGUMENTS_CHARS: Final = 16_384
MAX_EXPANDED_CHARS: Final = 262_144


def split_arguments(text: str) -> tuple[str, ...]:
    """Words of ``text``, shell-quoted; an unclosed quote falls back to whitespace splitting."""
    # shlex is quadratic in the length of a word; the cut at MAX_ARGUMENTS_CHARS bounds it to a
    # few milliseconds. An unclosed quote or a trailing backslash is a typo, which must not lose
    # the arguments.
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


def expand_arguments(body: str, arguments: str) -> str:
    """``body`` with its placeholders filled from ``arguments``; what the bounds left out (the
    arguments past `MAX_ARGUMENTS_CHARS`, placeholders past `MAX_EXPANDED_CHARS`) is noted."""
    if "$" not in body:
        return body
    notes: list[str] = []
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        notes.append(
            f"Note: the arguments were cut to their first {MAX_ARGUMENTS_CHARS} of "
            f"{len(arguments)} characters."
        )
        arguments = arguments[:MAX_ARGUMENTS_CHARS]
    words = split_arguments(arguments)
    parts: list[str] = []
    grown, done, left = 0, 0, 0
    for match in _PLACEHOLDER.finditer(body):
        if (index := match.group(1) or match.group(2)) is None:
            value = arguments
        else:
            position = int(index)
            value = words[position] if position < len(words) else match.group(0)
        # Growth is what filling adds beyond the body: the body itself was already accepted.
        if left or grown + len(value) - len(match.group(0)) > MAX_EXPANDED_CHARS - len(body):
            left += 1
            continue
        grown += len(value) - len(match.group(0))
        parts += (body[done : match.start()], value)
        done = match.end()
    parts.append(body[done:])
    if left:
        notes.append(
            f"Note: {left} placeholder{'s' if left != 1 else ''} left unfilled: the filled "
            f"text would pass {MAX_EXPANDED_CHARS} characters."
        )
    return "".join(parts) + "".join(f"\n\n{note}" for note in notes)
