"""Text where it leaves the library, one cleaner per sink, each applied at its boundary only:
`for_model` (the catalog, the `skill` tool's results), `for_editor` (`_skills/list`, and
``--json``), `terminal_safe` (the command line's output, the demo's log) and `well_formed`
(session records, the transport's frames). The rest formats a shown value.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

DEFAULT_MAX_DESCRIPTION_LENGTH = 500

# Non-whitespace controls (C0 but tab to carriage return, U+001C-U+001F too, DEL, C1) and the
# bidi overrides and isolates; the bidi marks stay: right-to-left writing needs them.
_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|(?P<surrogate>[\ud800-\udfff])"
)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# What a terminal acts on (ESC starts a sequence that can move the cursor, set the window title
# or clear the screen; CR rewrites a row): every C0 control but tab, DEL, C1, the bidi ones.
_BUT_NEWLINE: Final = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_TERMINAL_UNSAFE: Final = re.compile(f"[\n{_BUT_NEWLINE}]")
_TERMINAL_UNSAFE_BUT_NEWLINE: Final = re.compile(f"[{_BUT_NEWLINE}]")
_ELLIPSIS: Final = "..."
_Value = TypeVar("_Value")


def _removed(match: re.Match[str]) -> str:
    # A lost character becomes U+FFFD: something was there. NEL is a line feed.
    return "\ufffd" if match["surrogate"] else "\n" if match[0] == "\x85" else ""


def _drop_unsafe(text: str) -> str:
    return _UNSAFE.sub(_removed, text)


def _spelt(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_model(text: str, *, markup: bool = True) -> str:
    """Text the model reads: unsafe characters removed (NEL becomes a line feed, a lone surrogate
    U+FFFD) and, inside the catalog's or a tool result's ``markup``, ``&<>`` escaped."""
    return html.escape(_drop_unsafe(text), quote=False) if markup else _drop_unsafe(text)


def for_editor(value: _Value) -> _Value:
    """A copy of a JSON value for the editor (or a program reading ``--json``), each string's
    unsafe characters removed as `for_model` removes them."""
    return _each_string(value, _drop_unsafe)


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: each control (but tab, and line feed when
    ``keep_newlines``) and bidi override spelt as ``\\x1b`` or ``\\u202e``; surrogates U+FFFD."""
    pattern = _TERMINAL_UNSAFE_BUT_NEWLINE if keep_newlines else _TERMINAL_UNSAFE
    return pattern.sub(_spelt, _repaired(text))


def well_formed(value: _Value) -> _Value:
    """``value`` (text, or a JSON value, copied) with each lone surrogate as U+FFFD; a split
    pair is joined back. Text that needs no repair is returned as it is."""
    return _each_string(value, _repaired)


def _repaired(text: str) -> str:
    if _SURROGATE.search(text) is None:
        return text
    # UTF-16 is the one codec that pairs surrogates: decoding joins pairs and replaces the rest.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _each_string(value: _Value, clean: Callable[[str], str]) -> _Value:
    # A walk, not a recursion: a value nested 100,000 deep is no problem. Each pending item is
    # (source value, container of the copy, where in that container the copy goes).
    holder: list[object] = [None]
    pending: list[tuple[object, Any, Any]] = [(value, holder, 0)]
    while pending:
        source, target, slot = pending.pop()
        if isinstance(source, str):
            target[slot] = clean(source)
        elif isinstance(source, Mapping):
            copied: dict[object, object] = {}
            target[slot] = copied
            for key, item in source.items():
                clean_key = clean(key) if isinstance(key, str) else key
                copied[clean_key] = None  # keeps the key order; filled in below
                pending.append((item, copied, clean_key))
        elif isinstance(source, list | tuple):
            items: list[object] = [None] * len(source)
            target[slot] = items
            pending.extend((item, items, index) for index, item in enumerate(source))
        else:
            target[slot] = source
    return cast(_Value, holder[0])


# -- formatting a shown value ----------------------------------------------------------------


def cut(text: str, limit: int) -> str:
    """``text`` if at most ``limit`` code points long, else its start and ``...`` in ``limit``."""
    return text if len(text) <= limit else text[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def cut_at_word(text: str, cap: int) -> str:
    """``text`` (longer than ``cap``) cut at a word boundary to at most ``cap``, ending ``...``."""
    # A first word longer than the room is cut inside. The kept text never shrinks as `cap`
    # grows, which the catalog budget's bisection relies on.
    room = cap - len(_ELLIPSIS)
    space = room if text[room] == " " else text.rfind(" ", 0, room)
    return text[: space if space > 0 else room].rstrip(" ,;:") + _ELLIPSIS


def check_max_length(max_length: object) -> int:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"max_length must be an integer >= 3, got {max_length!r}")
    return max_length


def one_line(text: str) -> str:
    """``text`` without unsafe characters, each run of whitespace (line breaks included) one
    space, stripped: a title, or a line of the trust card, that cannot start another."""
    # `str.split()` breaks on all Unicode whitespace, NEL and the line and file separators too;
    # U+FEFF is no whitespace to Python, but a byte-order mark left inside joined text.
    return " ".join(_drop_unsafe(text).replace("\ufeff", " ").split())


def spelt(text: str) -> str:
    """A value inside a line of a report: `terminal_safe` with line feeds spelt too (``\\x0a``),
    so it can neither start a line nor act."""
    return terminal_safe(text)


def shorten_description(text: str, max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH) -> str:
    """`one_line`, cut to ``max_length`` (>= 3): unsafe characters never count toward it."""
    return cut(one_line(text), check_max_length(max_length))


def normalize_description(text: str, max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH) -> str:
    """`shorten_description`, then ``&<>`` escaped (last, so a cut never splits an entity)."""
    return html.escape(shorten_description(text, max_length), quote=False)


def escape_attribute(value: str) -> str:
    """``value`` for a double-quoted attribute: ``&``, ``"``, ``<``, ``>`` escaped."""
    return html.escape(value, quote=False).replace('"', "&quot;")


def quote(value: str, limit: int = 100) -> str:
    """``value`` in JSON string syntax, cut to ``limit``, each unsafe character as ``\\uXXXX``."""
    quoted = json.dumps(cut(value, limit), ensure_ascii=False)
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)
