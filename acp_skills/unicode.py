"""Well-formed text: lone surrogates replaced before text is stored or sent.

JSON can carry a UTF-16 surrogate on its own (``"\\ud800"`` is valid JSON), and Python decodes
it into a one-character string that is not Unicode text: it cannot be encoded as UTF-8, so an
HTTP client sending it to a model fails, and a strict JSON reader on the other end of the
protocol rejects the frame. Undecodable file names come back from the operating system the same
way (``os.listdir`` escapes each bad byte as a lone surrogate). Text from a client, a model or
the disk therefore passes through here where it enters, and every lone surrogate becomes
U+FFFD, the replacement character.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["replace_lone_surrogates", "replace_lone_surrogates_in_json"]

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
