"""How deep a JSON value nests, found without recursion, so no value can raise `RecursionError`."""

from __future__ import annotations

from typing import Final

# Real frames and tool arguments nest about ten levels; 64 stays far below every recursive
# walk downstream (the SDK's deep copy and validation, pydantic, the record's check at 100).
MAX_NESTING_DEPTH: Final = 64


def nests_deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` holds containers (dicts, lists, tuples) more than ``limit`` levels deep."""
    level = [value] if isinstance(value, dict | list | tuple) else []
    for _ in range(limit):  # `level`: the containers one level deeper each time
        children = (item.values() if isinstance(item, dict) else item for item in level)
        level = [
            child for items in children for child in items if isinstance(child, dict | list | tuple)
        ]
    return bool(level)
