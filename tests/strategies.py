"""Hypothesis strategies and checks that more than one test file draws on: skill names by the
grammar (contract §2), and text a hostile or careless author may write, with the characters
that must never reach a model or an editor (contract §6), written out independently of the
implementation."""

from __future__ import annotations

import html

from hypothesis import strategies as st

# Hyphen-separated words of lower-case ASCII letters and digits.
SKILL_NAMES = st.from_regex(r"[a-z0-9]+(?:-[a-z0-9]+)*", fullmatch=True)

# The contract's list of characters removed from descriptions.
BIDI_OVERRIDES_AND_ISOLATES = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
KEPT_CONTROLS = frozenset("\t\n\x0b\x0c\r")  # ASCII whitespace; NEL becomes a line feed


def is_forbidden(character: str) -> bool:
    """C0 and C1 controls but whitespace, DEL, bidi overrides and isolates, surrogates."""
    point = ord(character)
    if character in KEPT_CONTROLS:
        return False
    return (
        point < 0x20
        or 0x7F <= point <= 0x9F
        or point in BIDI_OVERRIDES_AND_ISOLATES
        or 0xD800 <= point <= 0xDFFF
    )


def forbidden_in(text: str) -> list[str]:
    """The characters of ``text`` that must never reach a model or an editor."""
    return [character for character in text if is_forbidden(character)]


# Characters a hostile or careless description may hold, drawn often on purpose.
SPECIAL_CHARACTERS = [
    *map(chr, range(0x00, 0x20)),
    *map(chr, range(0x7F, 0xA0)),
    *map(chr, sorted(BIDI_OVERRIDES_AND_ISOLATES)),
    "\u200e",  # left-to-right mark: kept
    "\ufeff",
    "\u2028",
    "\u00a0",
    "<",
    "&",
]

any_character = st.one_of(
    st.characters(),
    st.sampled_from(SPECIAL_CHARACTERS),
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates, often: st.characters() rarely
)
descriptions = st.lists(any_character, max_size=120).map("".join)


def expected_catalog_description(text: str, limit: int) -> str:
    """§6 spelled out: remove, collapse whitespace (and U+FEFF), truncate, escape."""
    kept = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    kept = kept.replace("\x85", "\n")
    kept = "".join(c for c in kept if not is_forbidden(c))
    collapsed = " ".join(kept.replace("\ufeff", " ").split())
    if len(collapsed) > limit:
        collapsed = collapsed[: limit - 3] + "..."
    return html.escape(collapsed, quote=False)
