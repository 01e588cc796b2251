"""The history a turn yields (Chat Completions messages), as the body of an Anthropic Messages
request: `anthropic_request` (docs/history.md says what it changes and why). Pure: values in,
values out, nothing is logged."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["anthropic_request"]

# A tool_use id the Messages endpoint accepts; any other id is replaced, the same way on both
# sides of the pair.
_TOOL_USE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
# Roles whose text belongs in the request's `system` (a prefix contributor may use them).
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_ROLES: Final = _SYSTEM_ROLES | {"user", "assistant", "tool"}
# A message's blocks of one kind (and their id key) pair with the next or the previous
# message's blocks of the other kind: each call with its result, each result with its call.
_PAIRS: Final = {
    "assistant": ("tool_use", "id", 1, "tool_result", "tool_use_id"),
    "user": ("tool_result", "tool_use_id", -1, "tool_use", "id"),
}

# A message of the request as it is being built: {"role": "user" | "assistant", "content": [...]}.
_Message = dict[str, Any]


def anthropic_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str = "",
    tools: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The body of a Messages request (``messages``, and ``system`` and ``tools`` when there are
    any) for ``messages`` as `PromptTurn.requests` yields them, the agent's ``system`` prompt and
    ``tools`` as `PromptTurn.tools` lists them; add ``model`` and ``max_tokens`` and post it.

    Raises:
        ValueError: a message or tool is not of the Chat Completions shape (another role,
            content that is not text, a tool without a name), or no message is the person's.
    """
    system_parts = [system] if system.strip() else []
    turns: list[_Message] = []
    ids = _ToolUseIds()
    for index, message in enumerate(messages):
        role, where = message.get("role"), f"message {index}"
        if role not in _ROLES:
            raise ValueError(f"{where} has the role {role!r}, which has no Messages counterpart")
        text = _text(message.get("content"), where)
        if role in _SYSTEM_ROLES:
            system_parts += [text] if text else []
        elif role == "tool":
            answered = ids.answered(str(message.get("tool_call_id", "")))
            result = {"type": "tool_result", "tool_use_id": answered}
            _add(turns, "user", [{**result, "content": text} if text else result])
        else:
            # The endpoint refuses a text block with nothing but whitespace in it.
            blocks = [{"type": "text", "text": text}] if text.strip() else []
            if role == "assistant":
                blocks += [ids.tool_use(call, f"{where}'s tool call") for call in _calls(message)]
            _add(turns, role, blocks)
    if not (turns := _well_formed(turns)):
        raise ValueError("no message of the person's to send")
    body: dict[str, Any] = {"messages": turns}
    if system_parts:
        body["system"] = "\n\n".join(system_parts)
    if tools:
        body["tools"] = [_tool(tool, index) for index, tool in enumerate(tools)]
    return body


def _add(turns: list[_Message], role: str, blocks: list[dict[str, Any]]) -> None:
    # Messages of one role in a row become one message (the endpoint wants them to alternate).
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": list(blocks)})


def _well_formed(turns: list[_Message]) -> list[_Message]:
    """Empty messages out; leading assistant messages out; each call kept only with its
    result in the next message, each result only after its call; results first."""
    # Each step can leave work for another (a message emptied by pairing, an assistant message
    # first once an empty one before it is gone): repeated until a pass removes nothing.
    while True:
        before = [(turn["role"], len(turn["content"])) for turn in turns]
        merged: list[_Message] = []
        for turn in turns:
            if turn["content"]:
                _add(merged, turn["role"], turn["content"])
        while merged and merged[0]["role"] == "assistant":
            merged = merged[1:]
        for position, turn in enumerate(merged):
            kind, key, step, other_kind, other_key = _PAIRS[turn["role"]]
            near = position + step
            other = merged[near]["content"] if 0 <= near < len(merged) else []
            partners = {block[other_key] for block in other if block["type"] == other_kind}
            turn["content"] = [
                b for b in turn["content"] if b["type"] != kind or b[key] in partners
            ]
        turns = merged
        if [(turn["role"], len(turn["content"])) for turn in turns] == before:
            break
    for turn in turns:
        turn["content"].sort(key=lambda block: block["type"] != "tool_result")  # stable
    return turns


@dataclass(slots=True)
class _ToolUseIds:
    """The ids of the request's tool calls, made acceptable and unique, each result given the
    id of the call it answers: the latest call of that id (Chat Completions ids are only unique
    where a provider makes them so)."""

    _used: set[str] = field(default_factory=set)
    _latest: dict[str, str] = field(default_factory=dict)

    def tool_use(self, call: Mapping[str, Any], where: str) -> dict[str, Any]:
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        if not isinstance(name := function.get("name"), str) or not name:
            raise ValueError(f"{where} has no function name")
        original = str(call.get("id", ""))
        given = _acceptable(original)
        if given in self._used:  # the same id in an earlier call: this call gets its own
            given = _acceptable(f"{original}-{len(self._used)}", hashed=True)
        self._used.add(given)
        self._latest[original] = given
        return {"type": "tool_use", "id": given, "name": name, "input": _input(function)}

    def answered(self, original: str) -> str:
        # A result whose call is not there keeps an id no call has: it is left out later.
        return self._latest.get(original, "unanswered-" + _acceptable(original, hashed=True))


def _acceptable(original: str, *, hashed: bool = False) -> str:
    if not hashed and _TOOL_USE_ID.fullmatch(original):
        return original
    return "toolu_" + hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _input(function: Mapping[str, Any]) -> dict[str, Any]:
    # A call's input is an object there: JSON text of an object is carried as that object (as
    # the turn decoded it for the tool); anything else the model sent, as its text.
    arguments = function.get("arguments", "")
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError):
        return {"arguments": arguments}
    return decoded if isinstance(decoded, dict) else {"arguments": arguments}


def _calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    calls = message.get("tool_calls")
    calls = calls if isinstance(calls, list | tuple) else []
    return [call for call in calls if isinstance(call, Mapping)]


def _text(content: object, where: str) -> str:
    """Chat Completions content as text: a string, ``None``, or a list of text parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list | tuple):
        raise ValueError(f"{where} has content of type {type(content).__name__}, not text")
    for part in content:
        if not (isinstance(part, Mapping) and part.get("type") == "text"):
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            raise ValueError(f"{where} has a content part of type {kind!r}, not text")
    return "".join(str(part.get("text", "")) for part in content)


def _tool(tool: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A Chat Completions function as a Messages tool; one with ``input_schema`` is kept."""
    if "input_schema" in tool:
        return dict(tool)
    function = tool.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError(f"tool {index} is not a Chat Completions function with a name")
    converted: dict[str, Any] = {"name": function["name"]}
    if isinstance(description := function.get("description"), str) and description:
        converted["description"] = description
    schema = function.get("parameters")
    converted["input_schema"] = dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
    return converted
