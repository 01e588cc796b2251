"""How many examples a Hypothesis test tries, under the profile ``tests/conftest.py`` loads.

``default`` fits the three-minute run of ``python3 dev.py check``; ``thorough`` tries ten times
as many and runs from ``.ci/run`` (``HYPOTHESIS_PROFILE=thorough``). A test that sets its own
count says it with `examples`, so the count grows with the profile too (an explicit
``max_examples`` would override any profile).
"""

from __future__ import annotations

from typing import Final

from hypothesis import settings

__all__ = ["DEFAULT_EXAMPLES", "PROFILE_VARIABLE", "THOROUGH_EXAMPLES", "examples"]

PROFILE_VARIABLE: Final = "HYPOTHESIS_PROFILE"
DEFAULT_EXAMPLES: Final = 100
THOROUGH_EXAMPLES: Final = 10 * DEFAULT_EXAMPLES


def examples(default: int) -> int:
    """``default`` examples under the default profile, scaled by the loaded profile's count."""
    current = settings.default
    assert current is not None
    return max(1, default * current.max_examples // DEFAULT_EXAMPLES)
