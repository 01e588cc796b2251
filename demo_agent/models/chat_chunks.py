"""Reading a streamed Chat Completions reply, piece by piece, without trusting its shape.

An endpoint may send anything: arguments as a JSON object instead of text, a tool-call piece
without its ``index``, content that is not a string, a reply without end. Each is a
`ModelError` whose message the person sees, never an exception from deep inside the agent.
Tool-call ids are made unique within the conversation: endpoints omit them, or number them
from zero in every response, and two calls sharing an id would pair the wrong results.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from . import ModelError, ToolCall

__all__ = ["MAX_REPLY_CHARACTERS", "ReplyReader", "used_call_ids", "well_formed"]

MAX_REPLY_CHARACTERS: Final = 2_000_000
"""A streamed reply (text plus tool-call arguments) longer than this is stopped."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a split pair is joined)."""
    # UTF-16 pairs surrogates on the way back and replaces those left alone.
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def malformed(what: str) -> ModelError:
    """The error for a reply the agent cannot read; ``what`` says which part was wrong."""
    return ModelError(
        f"The model endpoint sent a reply the agent could not read ({what}). "
        "Try again, or check --base-url."
    )


def _field(value: object, name: str) -> object:
    # A piece is JSON as it came: any value where an object was expected has no fields.
    return value.get(name) if isinstance(value, Mapping) else None


def _list(value: object, what: str) -> list[object]:
    if not isinstance(value, list | None):
        raise malformed(f"{what} is not a list")
    return value or []


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise malformed(f"{what} is a {type(value).__name__}, not a string")
    return value


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class ReplyReader:
    """Accumulates the chunks of one streamed reply: `add` each, then read the result."""

    def __init__(self, limit: int = MAX_REPLY_CHARACTERS) -> None:
        self._limit = limit
        self._size = 0
        self._text: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self.chunks = 0
        self.finish: str | None = None

    @property
    def text(self) -> str:
        return "".join(self._text)

    def _grow(self, amount: int) -> None:
        self._size += amount
        if self._size > self._limit:
            raise ModelError(
                f"The model's reply passed {self._limit:,} characters and was stopped."
            )

    def add(self, chunk: object) -> Iterator[str]:
        """Take one chunk; yields its new text, to be shown as it comes.

        Raises:
            ModelError: the chunk is malformed, or the reply grew past the limit.
        """
        self.chunks += 1
        for choice in _list(_field(chunk, "choices"), "choices"):
            delta = _field(choice, "delta")
            content = _text(_field(delta, "content"), "content")
            if content:
                self._grow(len(content))
                content = well_formed(content)
                self._text.append(content)
                yield content
            self._add_calls(_field(delta, "tool_calls"))
            finish = _field(choice, "finish_reason")
            if finish is not None:
                self.finish = _text(finish, "finish_reason")

    def _add_calls(self, pieces: object) -> None:
        for piece in _list(pieces, "tool_calls"):
            index = _field(piece, "index")
            if isinstance(index, bool) or not isinstance(index, int):
                raise malformed("a tool-call piece has no index")
            partial = self._calls.setdefault(index, _PartialCall())
            partial.id = _text(_field(piece, "id"), "a tool-call id") or partial.id
            function = _field(piece, "function")
            if function is not None:
                name = _text(_field(function, "name"), "a tool name")
                arguments = _text(_field(function, "arguments"), "tool-call arguments")
                self._grow(len(name) + len(arguments))
                partial.name += name
                partial.arguments += arguments

    def tool_calls(self, used: set[str]) -> tuple[ToolCall, ...]:
        """The calls in index order, each id unique among ``used`` (which gains them)."""
        calls = []
        for _, call in sorted(self._calls.items()):
            call_id = well_formed(call.id)
            if not call_id or call_id in used:
                call_id = f"call-{uuid.uuid4().hex[:16]}"
            used.add(call_id)
            calls.append(
                ToolCall(
                    id=call_id,
                    name=well_formed(call.name),
                    arguments=well_formed(call.arguments),
                )
            )
        return tuple(calls)


def used_call_ids(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The tool-call ids the conversation already holds."""
    used: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                used.add(call["id"])
        if isinstance(message.get("tool_call_id"), str):
            used.add(message["tool_call_id"])
    return used
