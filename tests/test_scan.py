"""One scan of given roots (`acp_skills._scan`): a skill file parsed from its head gives what the
whole file gives."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_skills import _scan
from acp_skills.frontmatter import ParsedSkill
from tests.hypothesis_profiles import examples

# Discovery parses an ASCII file from its head (the body is never decoded); whatever the file,
# the outcome must be the one the whole file's text gives.
_LINES = st.sampled_from(
    [
        "---",
        "---\r",
        "----",
        "--- ",
        "name: demo",
        "description: Does things.",
        "a: b: c",
        "- x",
        "  folded",
        "...",
        "",
        "disableModelInvocation: yes",
        "name: Demo",
        "# note",
        "x" * 200,
    ]
)


@settings(max_examples=examples(800), deadline=None)
@given(
    lines=st.lists(_LINES, max_size=12),
    tail=st.sampled_from(["", "\n", "\r\n", "\n---", "\n---\n"]),
    # Around the 4 KiB head (the frontmatter's end falls just before, on and after its cut),
    # and around the frontmatter size limit.
    padding=st.sampled_from(
        [0, 1, *range(4096 - 48, 4096 + 8, 3), 64 * 1024 - 40, 64 * 1024, 70_000]
    ),
)
def test_a_file_read_from_its_head_parses_as_the_whole_file(
    lines: list[str], tail: str, padding: int
) -> None:
    body = "\n".join(lines)
    # Padding inside the frontmatter moves its end around the head's cut and the size limit.
    text = "---\nname: demo\ndescription: d\nnote: " + "p" * padding + "\n" + body + tail
    content = text.encode("ascii")
    expected = _scan.parse_file(content, with_body=True)
    got = _scan.parse_file(content)
    if isinstance(expected, ParsedSkill):
        assert isinstance(got, ParsedSkill)
        assert replace(expected, body="") == got
    else:
        assert got == expected


@pytest.mark.parametrize("line", ["----", "---x", "--- #"])
@pytest.mark.parametrize("shift", [-2, -1, 0, 1, 2])
def test_a_line_cut_by_the_head_is_never_taken_for_the_closing_one(line: str, shift: int) -> None:
    """A `---...` line that the 4 KiB head cuts short does not end the frontmatter there."""
    start = "---\nname: demo\ndescription: d\nnote: "
    # The line's first three characters end at the head's cut (moved by `shift`).
    padding = 4096 - 4 - len(start) + shift
    text = start + "p" * padding + "\n" + line + "\nmore: x\n---\nbody\n"
    assert text.index("\n" + line) + 4 == 4096 + shift
    content = text.encode("ascii")
    expected = _scan.parse_file(content, with_body=True)
    got = _scan.parse_file(content)
    assert not isinstance(expected, ParsedSkill)  # the `---...` line is not valid YAML here
    assert got == expected
