"""What a person types after ``/name`` (`acp_skills.tool.expand_arguments`): its words, and
the Claude Code placeholders they fill, within bounds."""

from __future__ import annotations

import pytest

from acp_skills.tool import MAX_ARGUMENTS_CHARS, MAX_EXPANDED_CHARS, expand_arguments


@pytest.mark.parametrize(
    ("body", "arguments", "expected"),
    [
        ("Release $ARGUMENTS now.", "1.4.0", "Release 1.4.0 now."),
        ("Fix issue $ARGUMENTS.", '42 "high priority"', 'Fix issue 42 "high priority".'),
        ("Migrate $0 from $1 to $2.", "Bar React Vue", "Migrate Bar from React to Vue."),
        ("Migrate $ARGUMENTS[0] to $ARGUMENTS[1].", '"My Button" Vue', "Migrate My Button to Vue."),
        ("Fix $ARGUMENTS.", "", "Fix ."),
        ("Use $0 and $1.", "only", "Use only and $1."),
        ("awk '{print $1}'", "", "awk '{print $1}'"),
        ("No placeholders here.", "ignored", "No placeholders here."),
        ("Costs $5 and $ARGUMENTS[7].", "a b", "Costs $5 and $ARGUMENTS[7]."),
        ("Say $0 twice: $0.", "hi", "Say hi twice: hi."),
        ("Echo $ARGUMENTS", "$0 $ARGUMENTS", "Echo $0 $ARGUMENTS"),
        ("Word $0", "'unclosed quote", "Word 'unclosed"),
    ],
    ids=[
        "whole",
        "whole-raw",
        "positional",
        "indexed-quoted",
        "empty",
        "missing-stays",
        "shell-code-without-arguments",
        "no-placeholder",
        "out-of-range-stays",
        "repeated",
        "no-second-pass",
        "unclosed-quote",
    ],
)
def test_placeholders_are_filled_like_claude_code(body: str, arguments: str, expected: str) -> None:
    """$ARGUMENTS is the raw text, $N and $ARGUMENTS[N] the N-th word from 0; missing stay."""
    assert expand_arguments(body, arguments) == expected


def test_quotes_group_words() -> None:
    """Quotes group words and are removed; an unclosed quote falls back to whitespace."""
    assert expand_arguments("$0|$1|$2", "a 'b c' \"d e\"") == "a|b c|d e"
    assert expand_arguments("$0|$1|$2", "a 'b c") == "a|'b|c"
    assert expand_arguments("[$0]", "   ") == "[$0]"


def test_a_long_digit_run_is_not_a_placeholder() -> None:
    """Digits beyond six are left as text, so a body cannot make int() expensive."""
    body = "$" + "9" * 5000
    assert expand_arguments(body, "x") == body


def test_an_empty_quoted_pair_is_an_empty_word() -> None:
    assert expand_arguments("$0|$1|$2|$3", "a '' \"\" b") == "a|||b"


def test_long_arguments_no_placeholder_takes_leave_no_note() -> None:
    """Cut arguments a skill's placeholders never take leave the skill as it is, with no note."""
    assert expand_arguments("Run echo $HOME", "w " * MAX_ARGUMENTS_CHARS) == "Run echo $HOME"


def test_long_arguments_are_cut_with_a_note() -> None:
    """Past MAX_ARGUMENTS_CHARS the arguments are cut, and a note says so (contract §11)."""
    arguments = "w " * MAX_ARGUMENTS_CHARS
    expanded = expand_arguments("Use $ARGUMENTS.", arguments)
    assert expanded == (
        "Use " + arguments[:MAX_ARGUMENTS_CHARS] + ".\n\nNote: the arguments were cut to their "
        f"first {MAX_ARGUMENTS_CHARS} of {2 * MAX_ARGUMENTS_CHARS} characters."
    )


def test_placeholders_past_the_output_bound_stay_as_written() -> None:
    """20,000 placeholders of 4 KB would be 80 MB: filling stops at MAX_EXPANDED_CHARS."""
    body = "$ARGUMENTS\n" * 20_000
    expanded = expand_arguments(body, "x" * 4096)
    assert len(expanded) <= MAX_EXPANDED_CHARS + len(body)
    filled = expanded.count("x" * 4096)
    assert 0 < filled <= MAX_EXPANDED_CHARS // 4096
    assert expanded.count("$ARGUMENTS") == 20_000 - filled
    assert expanded.endswith(
        f"\n\nNote: later placeholders were left unfilled past {MAX_EXPANDED_CHARS} characters."
    )
