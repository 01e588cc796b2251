"""How deep a JSON value nests, found without recursion, so no value can raise `RecursionError`."""

from __future__ import annotations

from typing import Final

# Real protocol frames and tool arguments nest about ten levels; 64 leaves room for any
# extension's `_meta` while staying far below every recursive walk downstream (the SDK's
# deep copy and validation, pydantic's serialiser, the record's own check at 100).
MAX_NESTING_DEPTH: Final = 64


def nests_deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` holds containers (dicts, lists, tuples) more than ``limit`` levels deep."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: list[object]
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth > limit:
            return True
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, dict | list | tuple)
        )
    return False
