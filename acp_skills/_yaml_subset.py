"""A direct parser for the YAML people actually write in frontmatter, or a quick "not mine".

    load_common_subset(source)   the mapping, exactly as ``_yaml12.load_mapping`` would build
                                 it, or ``None`` (declined: use ``load_mapping``)

Composing a typical frontmatter with PyYAML and building its values costs about 25 µs, most of
it creating and resolving node objects, and discovery pays it once per skill. Almost every real
frontmatter is a flat block mapping of ``key: value`` lines, so this module reads that shape
directly, in about a third of the time, and declines everything else, leaving it to the
reference loader. Results are identical by construction: anything this parser is not certain
about is declined, and plain scalars are resolved by the reference loader's own core-schema
function. A differential property test (``tests/test_yaml_subset.py``) holds the two side by
side.

The subset, one construct per line:

- a block mapping at column 0 (blank lines allowed) whose keys are plain words
  (``[A-Za-z_][A-Za-z0-9_.-]*``, at most 128 characters, not ``null``/``true``/``false``), with
  at most one level of nested block mapping under a key that has no value on its own line
  (``metadata:``);
- values on the key's line: plain scalars (resolved by the YAML 1.2 core schema, so ``12`` is an
  int and ``yes`` a string), single-quoted scalars (``''`` for a quote), double-quoted scalars
  without backslashes, flow lists of plain scalars (``[a, b]``), nothing at all (null);
- block scalars ``|`` and ``>`` with any chomping (``-``, ``+``, or none), whose content starts
  on the next line; folded (``>``) ones without more-indented lines.

Declined before reading, by a few scans of the text: tabs, carriage returns, a byte order mark,
any character YAML does not print as itself (controls, U+0085, U+2028/9, U+FFFE/F, surrogates),
a line ending in a space, a ``#`` after a space (a comment; one at the start of a line fails the
entry pattern), and text that does not end with a line break. Declined while reading: anything
else, including anchors, aliases, tags, directives and document markers, flow mappings, block
sequences, multi-line plain or quoted scalars, escapes, duplicate keys, odd indentation and
deeper nesting. Declining stops at the first line outside the subset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from ._yaml12 import NON_STRING_INITIALS, YamlError, plain_scalar_value

__all__ = ["load_common_subset"]


class _Decline(Exception):
    """Raised anywhere inside the parser: this text is not in the subset."""


# Characters YAML prints as themselves, less the line breaks it knows beyond `\n` (U+0085,
# U+2028, U+2029), `\r`, tab and the byte order mark. One search of the text finds any other.
_UNUSUAL_CHARACTER: Final = re.compile(
    "[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)

# One line of a block mapping, with its value classified by the group that matched:
#   1 indentation, 2 key, then at most one of
#   3 a plain scalar: it cannot start with an indicator (`-` only before a character that is
#     neither a space nor `:`, as in `-1`), and `: ` (or a final `:`) would make it a mapping;
#   4 a double-quoted scalar without escapes; 5 a single-quoted one (`''` is a quote);
#   6 a flow list whose items can only be plain scalars (no nested collections, no quotes, no
#     `:` of a flow mapping entry, no `#`);
#   7 a block scalar header: style and optional chomping, no indentation indicator.
# No value group at all means nothing follows the colon.
_ENTRY: Final = re.compile(
    r"( *)([A-Za-z_][A-Za-z0-9_.-]{0,127}):"
    r"(?: +(?:"
    r"((?:[^-?:,\[\]{}#&*!|>'\"%@` ]|-[^ :])[^:]*(?::+[^: ][^:]*)*)"
    r'|"([^"\\]*)"'
    r"|'([^']*(?:''[^']*)*)'"
    r"|\[([^\[\]{}'\":#]*)\]"
    r"|([|>][-+]?)"
    r"))?\Z"
)
_PLAIN, _DOUBLE_QUOTED, _SINGLE_QUOTED, _FLOW_LIST, _BLOCK_SCALAR = 3, 4, 5, 6, 7

# Characters that make a plain scalar impossible or mean something else when they come first.
_INDICATORS: Final = frozenset("-?:,[]{}#&*!|>'\"%@`")


def load_common_subset(source: str) -> Mapping[object, object] | None:
    """Parse frontmatter written in the common subset (see the module docstring).

    Args:
        source: The YAML text between the frontmatter delimiters.

    Returns:
        The same read-only mapping ``_yaml12.load_mapping`` returns for ``source``, or ``None``
        when ``source`` is outside the subset (including when it is not valid YAML at all).
    """
    # A line starting with `#` needs no check of its own: no entry line matches it.
    if (
        not source.endswith("\n")
        or " \n" in source
        or " #" in source
        or not _prints_as_itself(source)
    ):
        return None
    lines = source.split("\n")
    lines.pop()  # the empty string after the final line break
    try:
        mapping, _ = _block_mapping(lines, 0, 0)
    except _Decline:
        return None
    return mapping if mapping else None


def _prints_as_itself(source: str) -> bool:
    """Whether every character of ``source`` is one YAML prints as itself, or ``\n``."""
    if source.isascii():
        # The same test for ASCII, several times faster than the search: of ASCII, exactly
        # the printable characters (space to `~`) are printable to Python too.
        return source.replace("\n", "").isprintable()
    return _UNUSUAL_CHARACTER.search(source) is None


def _block_mapping(
    lines: list[str], start: int, indent: int
) -> tuple[Mapping[object, object], int]:
    """Read ``key: value`` lines at ``indent``; return the mapping and the line it stopped at.

    It stops at the first non-blank line indented less than ``indent``, or at the end.
    """
    result: dict[object, object] = {}
    count = len(lines)
    index = start
    match = _ENTRY.match
    while index < count:
        line = lines[index]
        if not line:
            index += 1
            continue
        entry = match(line)
        if entry is None:
            raise _Decline
        spaces = entry.end(1)
        if spaces != indent:
            if spaces < indent:
                break
            raise _Decline
        key = entry[2]
        # A key the core schema reads as null or a boolean is not a string key; a repeated
        # key is an error the reference loader words.
        if key in result or (
            key[0] in NON_STRING_INITIALS and type(plain_scalar_value(key)) is not str
        ):
            raise _Decline
        kind = entry.lastindex
        index += 1
        value: object
        if kind == _PLAIN:
            text = entry[_PLAIN]
            value = _plain(text) if text[0] in NON_STRING_INITIALS else text
        elif kind == _DOUBLE_QUOTED:
            value = entry[_DOUBLE_QUOTED]
        elif kind == _SINGLE_QUOTED:
            value = entry[_SINGLE_QUOTED].replace("''", "'")
        elif kind == _FLOW_LIST:
            value = _flow_items(entry[_FLOW_LIST])
        elif kind == _BLOCK_SCALAR:
            value, index = _block_scalar(lines, index, indent, entry[_BLOCK_SCALAR])
        else:
            value, index = _empty_value(lines, index, indent)
        result[key] = value
    return MappingProxyType(result), index


def _empty_value(lines: list[str], start: int, indent: int) -> tuple[object, int]:
    """A key with nothing after it: null, or the one nested mapping level below it."""
    index = start
    count = len(lines)
    while index < count and not lines[index]:
        index += 1
    if index < count:
        line = lines[index]
        nested = len(line) - len(line.lstrip(" "))
        if nested > indent:
            if indent:
                raise _Decline  # a second level of nesting
            return _block_mapping(lines, index, nested)
    return None, start


def _flow_items(inside: str) -> tuple[object, ...]:
    if not inside.strip(" "):
        return ()
    items: list[object] = []
    for raw in inside.split(","):
        item = raw.strip(" ")
        # An empty item (`[a,,b]`, or a trailing comma) is declined rather than interpreted.
        if not item or (
            item[0] in _INDICATORS and not (item[0] == "-" and item[1:2] not in ("", " "))
        ):
            raise _Decline
        items.append(_plain(item) if item[0] in NON_STRING_INITIALS else item)
    return tuple(items)


def _plain(text: str) -> object:
    try:
        return plain_scalar_value(text)
    except YamlError:
        raise _Decline from None  # an integer too long for Python: the reference says so


def _block_scalar(lines: list[str], start: int, indent: int, header: str) -> tuple[str, int]:
    """A literal (``|``) or folded (``>``) block scalar whose content starts at ``start``."""
    if start >= len(lines):
        raise _Decline
    style, chomping = header[0], header[1:]
    first = lines[start]
    content_indent = len(first) - len(first.lstrip(" "))
    # Leading blank lines and an empty scalar change how the indentation is detected.
    if not first or content_indent <= indent:
        raise _Decline
    content: list[str] = []
    index = start
    count = len(lines)
    while index < count:
        line = lines[index]
        if not line:
            content.append("")
        elif line.startswith(" " * content_indent):
            content.append(line[content_indent:])
        else:
            break
        index += 1
    # Blank lines at the end belong to the scalar's trailing line breaks, not its text.
    trailing = 0
    while not content[-1 - trailing]:
        trailing += 1
    body = content[: len(content) - trailing]
    text = "\n".join(body) if style == "|" else _fold(body)
    if chomping == "-":
        return text, index
    if chomping == "+":
        return text + "\n" * (1 + trailing), index
    return text + "\n", index


def _fold(body: list[str]) -> str:
    """Join folded lines: one line break becomes a space, n + 1 breaks keep n of them."""
    parts = [body[0]]
    breaks = 0
    for line in body[1:]:
        if not line:
            breaks += 1
            continue
        if line[0] == " ":
            raise _Decline  # more-indented lines are not folded; left to the reference
        parts.append("\n" * breaks if breaks else " ")
        parts.append(line)
        breaks = 0
    return "".join(parts)
