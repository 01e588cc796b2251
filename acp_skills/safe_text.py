"""Text that is safe to show and to encode: what never reaches a model or an editor as it is.

Two jobs on the same characters. `replace_lone_surrogates` (and its JSON-walking form) makes text
well-formed where it enters from a client, a model or the disk, so it can always be encoded and
stored. `remove_unsafe_characters` goes further for text that is shown:

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
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "escape_unsafe_characters",
    "remove_unsafe_characters",
    "replace_lone_surrogates",
    "replace_lone_surrogates_in_json",
]

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


# -- well-formed text ---------------------------------------------------------------------
# JSON can carry a UTF-16 surrogate on its own (``"\\ud800"`` is valid JSON), and Python decodes
# it into a one-character string that is not Unicode text: it cannot be encoded as UTF-8, so an
# HTTP client sending it to a model fails, and a strict JSON reader on the other end of the
# protocol rejects the frame. Undecodable file names come back from the operating system the same
# way (``os.listdir`` escapes each bad byte as a lone surrogate). Text from a client, a model or
# the disk therefore passes through here where it enters, and every lone surrogate becomes
# U+FFFD, the replacement character (a split pair is joined back, unlike in
# `remove_unsafe_characters`, whose input has been through here already where it matters).

_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (``text`` itself when it has none).

    A high surrogate directly followed by a low one (the two halves of one character, split
    into two code points) becomes that character.
    """
    if _SURROGATE.search(text) is None:
        return text
    # UTF-16 is the one codec that pairs surrogates: encoding lets every surrogate through
    # as its two bytes, and decoding joins proper pairs and replaces the rest.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def replace_lone_surrogates_in_json(value: object) -> Any:
    """A copy of a decoded JSON value whose strings (object keys included) are well-formed.

    Objects become dicts and arrays lists; other values are kept as they are. The walk uses no
    recursion, so a value nested as deeply as a JSON decoder allows is copied all the same.
    """
    holder: list[object] = [None]
    # (source value, container of the copy, where in that container the copy goes)
    pending: list[tuple[object, Any, Any]] = [(value, holder, 0)]
    while pending:
        source, target, slot = pending.pop()
        if isinstance(source, str):
            target[slot] = replace_lone_surrogates(source)
        elif isinstance(source, Mapping):
            copied: dict[object, object] = {}
            target[slot] = copied
            for key, item in source.items():
                clean_key = replace_lone_surrogates(key) if isinstance(key, str) else key
                copied[clean_key] = None  # keeps the key order; filled in below
                pending.append((item, copied, clean_key))
        elif isinstance(source, list | tuple):
            items: list[object] = [None] * len(source)
            target[slot] = items
            pending.extend((item, items, index) for index, item in enumerate(source))
        else:
            target[slot] = source
    return holder[0]
