"""Bounds on a model's tool-call arguments: what is reported to the editor and recorded.

A call over a bound is not run: its recorded arguments become a short note, and its result is an
error, so neither the turn nor any later `session/load` can fail on what the model sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..json_depth import MAX_NESTING_DEPTH, nests_deeper_than

# Far above any real call (a skill name, a path, a query), far below a frame's 8 MiB.
MAX_ARGUMENTS_CHARS: Final = 1024 * 1024


def arguments_problem(arguments: object) -> str | None:
    """Why ``arguments`` (JSON text or decoded) may not be reported or recorded, or ``None``."""
    over = f"the arguments are over the {MAX_ARGUMENTS_CHARS}-character limit"
    deep = f"the arguments are nested more than {MAX_NESTING_DEPTH} levels deep"
    decoded = arguments
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            return over
        try:
            decoded = json.loads(arguments)
        except RecursionError:
            return deep
        except ValueError:
            return None  # not JSON: reported and recorded as the text it is
    if nests_deeper_than(decoded, MAX_NESTING_DEPTH):
        return deep
    if not isinstance(arguments, str):
        try:
            if len(json.dumps(arguments)) > MAX_ARGUMENTS_CHARS:
                return over
        except (TypeError, ValueError):
            return None  # not JSON at all: the record refuses it with its own message
    return None


def omitted_arguments(problem: str) -> str:
    """The JSON text recorded in place of refused arguments."""
    return json.dumps({"omitted": f"{problem}; the call was not run"})


def refusal_text(problem: str) -> str:
    """The error result of a call whose arguments are over a bound."""
    return f"Error: {problem}, so this call was not run. Send smaller arguments."


def bound_tool_calls(message: Mapping[str, Any]) -> tuple[dict[str, Any], dict[int, str]]:
    """``message`` with each over-bound call's arguments replaced, and the problems by index."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list | tuple):
        return dict(message), {}
    problems: dict[int, str] = {}
    bounded: list[object] = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(call, Mapping) and isinstance(function, Mapping):
            if (problem := arguments_problem(function.get("arguments", ""))) is not None:
                problems[index] = problem
                function = {**function, "arguments": omitted_arguments(problem)}
                call = {**call, "function": function}
        elif nests_deeper_than(call, MAX_NESTING_DEPTH):
            problems[index] = f"the call is nested more than {MAX_NESTING_DEPTH} levels deep"
            call = {"id": str(call.get("id", "")) if isinstance(call, Mapping) else ""}
        bounded.append(call)
    return {**message, "tool_calls": bounded}, problems
