"""Characters that never reach a model or an editor as they are.

Descriptions, hints and names come from skill authors and providers, and are shown to the model
(the catalog) and to a person (slash commands, ``_skills/list``, tool-call titles). Three kinds of
character do harm there and nothing else:

* control characters that are not whitespace: C0 (U+0000 to U+001F, but for tab, line
  feed, vertical tab, form feed and carriage return), DEL (U+007F) and C1 (U+0080 to U+009F).
  They are invisible, and terminals and editors may act on them. NEL (U+0085), the one C1
  control Unicode counts as whitespace (a line break), becomes a line feed rather than
  vanishing, so the words it separated stay apart;
* the bidirectional overrides and isolates (U+202A to U+202E, U+2066 to U+2069): they reorder
  what a person sees without changing what the model reads. The bidirectional *marks*
  (U+200E, U+200F, U+061C) are kept: right-to-left writing needs them and they cannot reorder
  a run of text;
* lone surrogates (U+D800 to U+DFFF): a Python string (or a JSON ``\\ud800`` escape) can hold
  one, but it is not Unicode, and encoding it as UTF-8 fails, which would break the whole
  frame or request that carries it.

Whitespace is kept because every consumer either collapses it (one-line descriptions) or may show
it (a description in an editor's list). U+001C to U+001F count as whitespace to ``str.split`` but
not to Unicode; they are information separators with no place in prose, so they are removed.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["escape_unsafe_characters", "remove_unsafe_characters"]

_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|(?P<surrogate>[\ud800-\udfff])"
)
_REPLACEMENT_CHARACTER: Final = "\ufffd"
_NEXT_LINE: Final = "\x85"


def _removed(match: re.Match[str]) -> str:
    if match.group("surrogate"):
        # A lone surrogate stands for a character that was lost: show that something was there.
        return _REPLACEMENT_CHARACTER
    return "\n" if match.group() == _NEXT_LINE else ""


def remove_unsafe_characters(text: str) -> str:
    """Remove non-whitespace controls and bidirectional overrides; replace lone surrogates.

    Lone surrogates become U+FFFD (the replacement character) and NEL a line feed; everything
    else listed in this module's docstring is dropped. Other whitespace is left alone.
    """
    return _UNSAFE.sub(_removed, text)


def escape_unsafe_characters(text: str) -> str:
    """Spell each unsafe character as a ``\\uXXXX`` escape instead of removing it.

    For text shown in JSON string syntax (a model's own argument quoted back in an error), where
    the escape keeps what was sent visible without letting it act.
    """
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
