"""What a command produced, and how it is shown: aligned, coloured on a terminal, or JSON."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..diagnostics import SEVERITIES, Diagnostic, Severity
from ..text import for_editor, terminal_safe

OK, PROBLEMS, USAGE = 0, 1, 2
BOLD, DIM = "1", "2"
# The styling `Style` writes (bold, dim, three colours, reset) is all that reaches a terminal
# unescaped: it cannot move the cursor, rewrite a row, set a title, clear the screen, or hide
# text (SGR 8, concealed) as any other styling could.
_OUR_CODES = ("0", BOLD, DIM, *(";".join(colour) for _, colour in SEVERITIES.values()))
_OUR_STYLING = re.compile(
    "(" + "|".join(re.escape(f"\x1b[{code}m") for code in sorted(set(_OUR_CODES))) + ")"
)


@dataclass(frozen=True, slots=True)
class Style:
    """ANSI styling, or none at all (piped output, ``NO_COLOR``, a dumb terminal)."""

    enabled: bool

    def __call__(self, text: str, *codes: str) -> str:
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if self.enabled and text and codes else text

    # The terminal's `acp_skills.diagnostics.Markup`: bold places, dim codes, coloured severities.
    def place(self, text: str) -> str:
        return self(text, BOLD)

    def code(self, text: str) -> str:
        return self(text, DIM)

    def severity(self, severity: Severity) -> str:
        label, colour = SEVERITIES[severity]
        return self(label, *colour)

    def text(self, text: str) -> str:
        return text


@dataclass(slots=True)
class Outcome:
    """What a command produced: JSON for ``--json``, text otherwise, and the exit status."""

    payload: dict[str, Any]
    text: list[str] = field(default_factory=list)
    status: int = OK
    # Said on stderr in text mode, so stdout stays exactly the command's output.
    remarks: list[str] = field(default_factory=list)
    # Said on stderr whatever the mode: something the person must not miss.
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def failed(cls, message: str, status: int = USAGE) -> Outcome:
        """A command that could not do its job: ``{"error": message}``, and the message."""
        return cls({"error": message}, [message], status)


def table(
    rows: Sequence[Sequence[str]], right: frozenset[int], style: Style, dimmed: Collection[int]
) -> list[str]:
    """Aligned columns, the heading bold and rows ``dimmed`` dim (painted after padding)."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        codes = (BOLD,) if index == 0 else (DIM,) if index in dimmed else ()
        cells[-1] = row[-1]
        lines.append("  ".join(style(cell, *codes) for cell in cells).rstrip())
    return lines


def status_of(diagnostics: Sequence[Diagnostic]) -> int:
    # Errors and warnings are problems; notes are not.
    return PROBLEMS if any(d.severity != "info" for d in diagnostics) else OK


def emit(outcome: Outcome, as_json: bool) -> None:
    def say(stream: TextIO, lines: Iterable[str]) -> None:
        stream.writelines(_for_terminal(line) + "\n" for line in lines)
        stream.flush()

    say(sys.stderr, outcome.warnings)
    if as_json:
        clean = for_editor(outcome.payload)  # no control a `\\x..` spelling would break
        say(sys.stdout, [json.dumps(clean, indent=2, ensure_ascii=False)])
    else:
        say(sys.stdout, outcome.text)
        say(sys.stderr, outcome.remarks)


def _for_terminal(line: str) -> str:
    """``line`` with every control spelt out but its line feeds and our own styling."""
    # The split keeps the styling at odd positions; everything between is escaped.
    parts = _OUR_STYLING.split(line)
    return "".join(
        part if index % 2 else terminal_safe(part, keep_newlines=True)
        for index, part in enumerate(parts)
    )
