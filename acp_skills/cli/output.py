"""What a command produced, and how it is shown: aligned, coloured on a terminal, or JSON."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from ..diagnostics import SEVERITIES, Diagnostic, Severity
from ..text import for_editor, terminal_safe

PROG = "acp-skills"
OK, PROBLEMS, USAGE = 0, 1, 2
BOLD, DIM = "1", "2"
_COLOURS: Final[dict[Severity, str]] = {"error": "1;31", "warning": "1;33", "info": "36"}
# Only the styling `Style` writes reaches a terminal unescaped: it cannot move the cursor, rewrite
# a row, set a title, clear the screen or hide text (SGR 8) as any other styling could.
_OURS: Final = ("0", BOLD, DIM, *_COLOURS.values())
_OUR_STYLING: Final = re.compile("(" + "|".join(re.escape(f"\x1b[{c}m") for c in _OURS) + ")")


@dataclass(frozen=True, slots=True)
class Style:
    """ANSI styling, or none (piped, ``NO_COLOR``, a dumb terminal); the terminal's `Markup`."""

    enabled: bool

    def __call__(self, text: str, *codes: str) -> str:
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if self.enabled and text and codes else text

    def place(self, text: str) -> str:
        return self(text, BOLD)

    def code(self, text: str) -> str:
        return self(text, DIM)

    def severity(self, severity: Severity) -> str:
        return self(SEVERITIES[severity], _COLOURS[severity])

    def text(self, text: str) -> str:
        return text


@dataclass(slots=True)
class Outcome:
    """What a command produced, and its exit status (`emit` says where each part goes)."""

    payload: dict[str, Any]
    text: list[str] = field(default_factory=list)
    status: int = OK
    remarks: list[str] = field(default_factory=list)  # to stderr: stdout is the command's output
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def failed(cls, message: str, status: int = USAGE) -> Outcome:
        """A command that could not do its job: ``{"error": message}``, and the message."""
        return cls({"error": message}, [message], status)


def table(rows: Sequence[Sequence[str]], right: Collection[int], style: Style) -> list[str]:
    """Aligned columns (``right`` ones to the right), the heading bold (painted after padding)."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        cells[-1] = row[-1]
        codes = (BOLD,) if index == 0 else ()
        lines.append("  ".join(style(cell, *codes) for cell in cells).rstrip())
    return lines


def status_of(diagnostics: Iterable[Diagnostic]) -> int:
    """Errors and warnings are problems; notes are not."""
    return PROBLEMS if any(d.severity != "info" for d in diagnostics) else OK


def emit(outcome: Outcome, as_json: bool) -> None:
    """Print ``outcome``, every control spelt out but line feeds and our own styling."""
    _say(sys.stderr, outcome.warnings)
    if as_json:
        clean = for_editor(outcome.payload)  # no control a `\\x..` spelling would break
        _say(sys.stdout, [json.dumps(clean, indent=2, ensure_ascii=False)])
    else:
        _say(sys.stdout, outcome.text)
        _say(sys.stderr, outcome.remarks)


def _say(stream: TextIO, lines: Iterable[str]) -> None:
    # The split keeps our styling at odd positions; everything between is escaped.
    for line in lines:
        parts = _OUR_STYLING.split(line)
        safe = (p if i % 2 else terminal_safe(p, keep_newlines=True) for i, p in enumerate(parts))
        stream.write("".join(safe) + "\n")
    stream.flush()
