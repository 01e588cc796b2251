"""Claude Code's ``$ARGUMENTS`` placeholders, filled from what a person typed after ``/name``.

Both jobs are linear and bounded, so they can run on the event loop: the words come from one
pass with the shell's quoting rules, the arguments are cut at `MAX_ARGUMENTS_CHARS` and the
filled text stops growing at `MAX_EXPANDED_CHARS`; what was cut is said in a note.
"""

from __future__ import annotations

import re
from typing import Final

# ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` (the N-th shell word from 0; a missing one stays).
# At most six digits: no skill has a million arguments, and int() of a long digit run costs.
_PLACEHOLDER: Final = re.compile(r"\$ARGUMENTS(?:\[(\d{1,6})\])?|\$(\d{1,6})")
MAX_ARGUMENTS_CHARS: Final = 16_384
MAX_EXPANDED_CHARS: Final = 262_144
_BLANKS: Final = frozenset(" \t\r\n")


def split_arguments(text: str) -> tuple[str, ...]:
    """Words of ``text``, shell-quoted; an unclosed quote falls back to whitespace splitting."""
    # The rules of shlex.split (POSIX mode, no comments) in one pass: a word is a run of bare,
    # single-quoted and double-quoted pieces; list appends and one join per word keep it linear.
    # An unclosed quote or a trailing backslash is a typo, which must not lose the arguments.
    words: list[str] = []
    piece: list[str] = []
    in_word = False
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char in _BLANKS:
            if in_word:
                words.append("".join(piece))
                piece, in_word = [], False
            index += 1
            continue
        in_word = True
        if char == "'":
            close = text.find("'", index + 1)
            if close < 0:
                return tuple(text.split())
            piece.append(text[index + 1 : close])
            index = close + 1
        elif char == '"':
            index += 1
            while True:
                if index >= size:
                    return tuple(text.split())
                char = text[index]
                if char == '"':
                    index += 1
                    break
                if char == "\\" and index + 1 < size and text[index + 1] in '\\"':
                    piece.append(text[index + 1])
                    index += 2
                    continue
                piece.append(char)
                index += 1
        elif char == "\\":
            if index + 1 >= size:
                return tuple(text.split())
            piece.append(text[index + 1])
            index += 2
        else:
            piece.append(char)
            index += 1
    if in_word:
        words.append("".join(piece))
    return tuple(words)


def expand_arguments(body: str, arguments: str) -> str:
    """``body`` with its placeholders filled from ``arguments`` (typed after ``/name``).

    Arguments past `MAX_ARGUMENTS_CHARS` are dropped, and once the text would pass
    `MAX_EXPANDED_CHARS` the remaining placeholders stay as written; a note at the end says so.
    """
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
