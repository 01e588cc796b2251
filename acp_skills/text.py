"""Text where it leaves the library, one cleaner per sink at its boundary: the model, the editor,
a terminal, storage or the wire; and the shapes of a value shown inside one of them."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

DEFAULT_MAX_DESCRIPTION_LENGTH = 500
# Controls but whitespace (U+001C-U+001F are no whitespace here), DEL, C1, and the bidi
# overrides and isolates (the bidi marks stay: right-to-left writing needs them).
_UNSAFE: Final = "\x00-\x08\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_SURROGATE: Final = "[\ud800-\udfff]"
# A terminal acts on more (ESC starts a sequence that can move the cursor, set the title or
# clear the screen; CR rewrites a row): vertical tab, form feed and carriage return too.
_TERMINAL_UNSAFE: Final = _UNSAFE + "\x0b-\x0d"
_Value = TypeVar("_Value")


def _drop_unsafe(text: str) -> str:
    # NEL is a line feed; a lone surrogate becomes U+FFFD: something was there.
    return re.sub(f"[{_UNSAFE}]", "", re.sub(_SURROGATE, "\ufffd", text.replace("\x85", "\n")))


def for_model(text: str, *, markup: bool = True) -> str:
    """Text the model reads: unsafe characters removed and, in ``markup``, ``&<>`` escaped."""
    return html.escape(_drop_unsafe(text), quote=False) if markup else _drop_unsafe(text)


def for_editor(value: _Value) -> _Value:
    """A copy of a JSON value for the editor (or ``--json``), cleaned as `for_model` cleans."""
    return _each_string(value, _drop_unsafe)


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` safe on a terminal or inside a report's line: each control (but tab, and line
    feed when ``keep_newlines``) and bidi override spelt (``\\x1b``); surrogates U+FFFD."""
    unsafe = f"[{_TERMINAL_UNSAFE}]" if keep_newlines else f"[\n{_TERMINAL_UNSAFE}]"
    return re.sub(unsafe, _spelt, _repaired(text))


def _spelt(found: re.Match[str]) -> str:
    code = ord(found[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def well_formed(value: _Value) -> _Value:
    """``value`` (text, or a JSON value, copied) with a split surrogate pair joined, a lone one
    U+FFFD; text that needs no repair as it is."""
    return _each_string(value, _repaired)


def _repaired(text: str) -> str:
    if re.search(_SURROGATE, text) is None:
        return text
    # UTF-16 is the one codec that pairs surrogates: decoding joins pairs and replaces the rest.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _each_string(value: _Value, clean: Callable[[str], str]) -> _Value:
    # A walk, not a recursion: a value nested 100,000 deep is no problem. A pending slot of the
    # copy holds its source value until it is cleaned or copied in turn.
    holder: list[Any] = [value]
    pending: list[tuple[Any, Any]] = [(holder, 0)]
    while pending:
        target, slot = pending.pop()
        if isinstance(item := target[slot], str):
            target[slot] = clean(item)
        elif isinstance(item, Mapping):
            copied = {clean(k) if isinstance(k, str) else k: v for k, v in item.items()}
            target[slot] = copied
            pending.extend((copied, key) for key in copied)
        elif isinstance(item, list | tuple):
            target[slot] = listed = list(item)
            pending.extend((listed, index) for index in range(len(listed)))
    return cast(_Value, holder[0])


def cut(text: str, limit: int) -> str:
    """``text`` if at most ``limit`` code points long, else its start and ``...`` in ``limit``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cut_at_word(text: str, cap: int) -> str:
    """``text`` (longer than ``cap``) cut at a word boundary to at most ``cap``, ending ``...``."""
    # A first word longer than the room is cut inside. The kept text never shrinks as `cap`
    # grows, which the catalog budget's bisection relies on.
    room = cap - 3
    space = room if text[room] == " " else text.rfind(" ", 0, room)
    return text[: space if space > 0 else room].rstrip(" ,;:") + "..."


def check_max_length(max_length: object) -> int:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"max_length must be an integer >= 3, got {max_length!r}")
    return max_length


def one_line(text: str) -> str:
    """``text`` cleaned, each run of whitespace (a line break, a BOM) one space, stripped."""
    return " ".join(_drop_unsafe(text).replace("\ufeff", " ").split())


def shorten_description(text: str, max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH) -> str:
    """`one_line`, cut to ``max_length`` (>= 3)."""
    return cut(one_line(text), check_max_length(max_length))


def normalize_description(text: str, max_length: int = DEFAULT_MAX_DESCRIPTION_LENGTH) -> str:
    """`shorten_description`, then ``&<>`` escaped (last, so a cut never splits an entity)."""
    return html.escape(shorten_description(text, max_length), quote=False)


def escape_attribute(value: str) -> str:
    """``value`` for a double-quoted attribute: ``&``, ``"``, ``<``, ``>`` escaped."""
    return html.escape(value, quote=False).replace('"', "&quot;")


def quote(value: str) -> str:
    """``value`` in JSON string syntax, cut to 100, each unsafe character as ``\\uXXXX``."""
    quoted = json.dumps(cut(value, 100), ensure_ascii=False)
    return re.sub(f"[{_UNSAFE}]|{_SURROGATE}", lambda found: f"\\u{ord(found[0]):04x}", quoted)
