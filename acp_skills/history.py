"""The history a turn yields, in the Anthropic Messages shape (docs/history.md).

`acp_skills.acp.PromptTurn.requests` yields each request's messages in the OpenAI Chat
Completions shape (the session's prefix, then its history; `PrefixedSession.request_messages`
builds it) and `PromptTurn.tools` lists the tools as Chat Completions functions.
`anthropic_request` turns both, with the agent's system prompt, into the body of an Anthropic
Messages request, which the agent completes with ``model`` and ``max_tokens``.

The two shapes order a conversation differently, and the Messages endpoint refuses what Chat
Completions allows: the conversation starts with the person and alternates between the person
and the assistant; no message and no text is empty; every ``tool_use`` is answered by a
``tool_result`` in the very next message, results before any text; a result answers a call of
the message just before it. So the prefix and the prompt after it become one user message,
results and the person's next words another, and what cannot be paired (a call never answered,
a result whose call is gone, an assistant message before the person spoke) is left out, as a
Chat Completions endpoint would refuse it too. Pure: values in, values out, nothing is logged.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["anthropic_request"]

# A tool_use id the Messages endpoint accepts; any other id is replaced, the same way on both
# sides of the pair.
_TOOL_USE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
# Roles whose text belongs in the request's `system` (a prefix contributor may use them).
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})

Role = Literal["user", "assistant"]


@dataclass(slots=True)
class _Turn:
    role: Role
    blocks: list[dict[str, Any]] = field(default_factory=list)


def anthropic_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str = "",
    tools: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The body of an Anthropic Messages request for one request of a turn: ``messages`` as
    `PromptTurn.requests` yields them, ``system`` the agent's system prompt, ``tools`` as
    `PromptTurn.tools` lists them. The body has ``messages``, and ``system`` and ``tools`` when
    there are any; add ``model`` and ``max_tokens`` and post it. Keys starting with ``_`` are
    ignored, as the turn leaves them out.

    Raises:
        ValueError: a message or tool is not of the Chat Completions shape (a role other than
            ``system``, ``developer``, ``user``, ``assistant`` or ``tool``; content that is not
            text; a tool without a name), or no message is the person's.
    """
    system_parts = [system] if system.strip() else []
    turns: list[_Turn] = []
    ids = _ToolUseIds()
    for index, message in enumerate(messages):
        role = message.get("role")
        where = f"message {index}"
        if role in _SYSTEM_ROLES:
            if text := _text(message.get("content"), where):
                system_parts.append(text)
        elif role == "user":
            _add(turns, "user", _text_blocks(_text(message.get("content"), where)))
        elif role == "assistant":
            ids.next_message()
            blocks = _text_blocks(_text(message.get("content"), where))
            blocks += [ids.tool_use(call, f"{where}'s tool call") for call in _calls(message)]
            _add(turns, "assistant", blocks)
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": ids.answered(str(message.get("tool_call_id", ""))),
            }
            if text := _text(message.get("content"), where):  # an empty result has none
                result["content"] = text
            _add(turns, "user", [result])
        else:
            raise ValueError(f"{where} has the role {role!r}, which has no Messages counterpart")
    turns = _well_formed(turns)
    if not turns:
        raise ValueError("no message of the person's to send")
    body: dict[str, Any] = {"messages": [{"role": t.role, "content": t.blocks} for t in turns]}
    if system_parts:
        body["system"] = "\n\n".join(system_parts)
    if tools:
        body["tools"] = [_tool(tool, index) for index, tool in enumerate(tools)]
    return body


def _add(turns: list[_Turn], role: Role, blocks: list[dict[str, Any]]) -> None:
    # Messages of one role in a row become one message (the endpoint wants them to alternate).
    if turns and turns[-1].role == role:
        turns[-1].blocks.extend(blocks)
    else:
        turns.append(_Turn(role, list(blocks)))


def _well_formed(turns: list[_Turn]) -> list[_Turn]:
    """Empty messages out; leading assistant messages out; each call kept only with its
    result in the next message, each result only after its call; results first."""
    # Each step can leave work for another (a message emptied by pairing, an assistant message
    # first once an empty one before it is gone): repeated until a pass removes nothing.
    while True:
        before = [(turn.role, len(turn.blocks)) for turn in turns]
        merged: list[_Turn] = []
        for turn in turns:
            if turn.blocks:
                _add(merged, turn.role, turn.blocks)
        while merged and merged[0].role == "assistant":
            merged = merged[1:]
        _pair(merged)
        turns = merged
        if [(turn.role, len(turn.blocks)) for turn in turns] == before:
            break
    for turn in turns:
        turn.blocks.sort(key=lambda block: block["type"] != "tool_result")  # stable
    return turns


def _pair(turns: list[_Turn]) -> None:
    for position, turn in enumerate(turns):
        if turn.role == "assistant":
            following = turns[position + 1] if position + 1 < len(turns) else None
            answered = _ids(following, "tool_result") if following is not None else set()
            turn.blocks = [b for b in turn.blocks if b["type"] != "tool_use" or b["id"] in answered]
        else:
            preceding = turns[position - 1] if position > 0 else None
            called = _ids(preceding, "tool_use") if preceding is not None else set()
            turn.blocks = [
                b for b in turn.blocks if b["type"] != "tool_result" or b["tool_use_id"] in called
            ]


def _ids(turn: _Turn, kind: str) -> set[str]:
    key = "id" if kind == "tool_use" else "tool_use_id"
    return {block[key] for block in turn.blocks if block["type"] == kind}


class _ToolUseIds:
    """The ids of the request's tool calls, made acceptable and unique, each result given the
    id of the call it answers: the latest call of that id (Chat Completions ids are only unique
    where a provider makes them so)."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._latest: dict[str, str] = {}
        self._message = 0

    def next_message(self) -> None:
        self._message += 1

    def tool_use(self, call: Mapping[str, Any], where: str) -> dict[str, Any]:
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where} has no function name")
        original = str(call.get("id", ""))
        given = _acceptable(original)
        if given in self._used:  # the same id in an earlier message: this call gets its own
            given = _acceptable(f"{original}-{self._message}-{len(self._used)}", hashed=True)
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
    if not isinstance(calls, list | tuple):
        return []
    return [call for call in calls if isinstance(call, Mapping)]


def _text(content: object, where: str) -> str:
    """Chat Completions content as text: a string, ``None``, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        texts = []
        for part in content:
            if not (isinstance(part, Mapping) and part.get("type") == "text"):
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise ValueError(f"{where} has a content part of type {kind!r}, not text")
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise ValueError(f"{where} has content of type {type(content).__name__}, not text")


def _text_blocks(text: str) -> list[dict[str, Any]]:
    # The endpoint refuses a text block with nothing but whitespace in it.
    return [{"type": "text", "text": text}] if text.strip() else []


def _tool(tool: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A Chat Completions function (``{"type": "function", "function": {...}}``) as a Messages
    tool; a tool already in the Messages shape (with ``input_schema``) is kept as it is."""
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
