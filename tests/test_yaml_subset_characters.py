"""The subset parser declines exactly the ASCII characters YAML does not print as themselves."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from acp_skills._yaml12 import YamlError, load_mapping
from acp_skills._yaml_subset import load_common_subset

_NON_PRINTING = [chr(code) for code in (*range(0x0A), *range(0x0B, 0x20), 0x7F)]


@pytest.mark.parametrize("character", _NON_PRINTING, ids=[f"U+{ord(c):04X}" for c in _NON_PRINTING])
@pytest.mark.parametrize("where", ["value", "second-line", "non-ascii-text"])
def test_non_printing_ascii_character_is_declined(character: str, where: str) -> None:
    """A control character anywhere (in ASCII text or not) sends the text to the reference."""
    source = {
        "value": f"name: a{character}b\n",
        "second-line": f"name: ab\ndescription: x{character}\n",
        "non-ascii-text": f"name: café{character}\n",
    }[where]
    assert load_common_subset(source) is None


@pytest.mark.parametrize("code", range(0x20, 0x7F))
def test_printable_ascii_character_is_read_as_the_reference_reads_it(code: int) -> None:
    """Each printable ASCII character in a value gives the reference's result, or a decline."""
    source = f"description: a{chr(code)}b\nname: ok\n"
    fast = load_common_subset(source)
    if fast is None:
        return  # declined: the reference decides, which is always allowed
    try:
        reference = load_mapping(source, first_line=2)
    except YamlError:
        pytest.fail(f"the subset read {source!r}, which the reference refuses")
    assert isinstance(reference, Mapping)
    assert dict(fast) == dict(reference)


def test_plain_ascii_frontmatter_is_read_directly() -> None:
    """Everyday ASCII frontmatter is read by the subset parser, not declined."""
    mapping = load_common_subset("name: pdf-tools\ndescription: Fill in PDF forms.\n")
    assert mapping == {"name": "pdf-tools", "description": "Fill in PDF forms."}
