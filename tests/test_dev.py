"""dev.py, the project's one entry point for setting up and checking: how it judges the run it
makes on the ACP SDK's 1.x line beside the main one."""

from __future__ import annotations

import pytest

from dev import NO_TESTS_COLLECTED, _second_run_verdict


@pytest.mark.parametrize(
    ("code", "extra", "verdict"),
    [
        (0, [], 0),
        (1, ["-k", "trust"], 1),
        (NO_TESTS_COLLECTED, [], NO_TESTS_COLLECTED),
        (NO_TESTS_COLLECTED, ["tests/test_model.py"], 0),
    ],
    ids=["passed", "failed", "empty-selection-of-its-own", "arguments-chose-no-acp-tests"],
)
def test_an_empty_second_run_passes_only_when_the_arguments_chose_it(
    code: int, extra: list[str], verdict: int
) -> None:
    """No tests collected is a pass only when the person's arguments chose the tests."""
    assert _second_run_verdict(code, extra) == verdict
