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
# shlex is quadratic in the length of a word: this cut bounds it to a few milliseconds.
MAX_ARGUMENTS_CHARS: Final = 16_384
MAX_EXPANDED_CHARS: Final = 262_144


def expand_arguments(body: str, arguments: str) -> str:
    """``body`` with its placeholders filled from ``arguments``; past the bounds, the arguments
    are cut or the remaining placeholders stay as written, and a note at the end says so."""
    if "$" not in body:
        return body
    total, arguments = len(arguments), arguments[:MAX_ARGUMENTS_CHARS]
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unclosed quote or a trailing backslash is a typo: keep the words
        words = arguments.split()
    # Growth is what filling adds beyond the body (the body itself was already accepted).
    room: int | None = MAX_EXPANDED_CHARS - len(body)
    filled_any = False  # a placeholder took something of the arguments

    def fill(match: re.Match[str]) -> str:
        nonlocal room, filled_any
        placeholder, index = match.group(0), match.group(1) or match.group(2)
        if index is None:
            value = arguments
        else:
            value = words[int(index)] if int(index) < len(words) else placeholder
        if room is None or len(value) - len(placeholder) > room:
            room = None  # once one stays as written, every later one does too
            return placeholder
        room -= len(value) - len(placeholder)
        filled_any = filled_any or value != placeholder
        return value

    filled = _PLACEHOLDER.sub(fill, body)
    notes = []
    if total > MAX_ARGUMENTS_CHARS and filled_any:
        notes.append(f"the arguments were cut to their first {MAX_ARGUMENTS_CHARS} of {total}")
    if room is None:
        notes.append(f"later placeholders were left unfilled past {MAX_EXPANDED_CHARS}")
    return filled + "".join(f"\n\nNote: {note} characters." for note in notes)
