"""`anthropic_request`: a turn's Chat Completions history as an Anthropic Messages request body."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

# A tool_use id the Messages endpoint accepts; any other id, or one used before, is replaced.
_TOOL_USE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
# Roles whose text belongs in the request's `system` (a prefix contributor may use them).
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_TURNS: Final = frozenset({"user", "assistant"})
_ROLES: Final = _SYSTEM_ROLES | _TURNS | {"tool"}


def anthropic_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str = "",
    tools: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The Messages body for what `PromptTurn.requests` yields and `PromptTurn.tools` lists
    (add ``model`` and ``max_tokens``); `ValueError` for what is not of the Chat Completions
    shape, or no message of the person's."""
    system_parts, roles, texts = [system] if system.strip() else [], [], []
    for index, message in enumerate(messages):
        if (role := message.get("role")) not in _ROLES:
            raise ValueError(f"message {index} has the role {role!r}, which has no Messages one")
        roles.append(role)
        texts.append(text := _text(message.get("content"), f"message {index}"))
        system_parts += [text] if role in _SYSTEM_ROLES and text else []
    # The conversation starts with the person: what comes before their first words is left out.
    index = next((i for i, role in enumerate(roles) if role == "user" and texts[i].strip()), -1)
    if index < 0:
        raise ValueError("no message of the person's to send")
    turns: list[dict[str, Any]] = []
    used: set[str] = set()
    while index < len(messages):
        role, text, message, where = roles[index], texts[index], messages[index], f"message {index}"
        index += 1
        # The endpoint refuses a text block with nothing but whitespace in it.
        blocks = [{"type": "text", "text": text}] if text.strip() and role in _TURNS else []
        if role != "assistant":
            _add(turns, "user", blocks)  # a result not right after its call is left out
            continue
        # A call is kept with its result, in the tool messages right after the reply; the
        # endpoint refuses a call without its result, and a result without its call.
        results: dict[str, str] = {}
        while index < len(messages) and roles[index] == "tool":
            results.setdefault(str(messages[index].get("tool_call_id", "")), texts[index])
            index += 1
        answers, calls = [], message.get("tool_calls")
        for call in calls if isinstance(calls, list | tuple) else []:
            answer = results.get(str(call.get("id", ""))) if isinstance(call, Mapping) else None
            if answer is not None:
                blocks.append(tool_use := _tool_use(call, f"{where}'s tool call", used))
                result = {"type": "tool_result", "tool_use_id": tool_use["id"]}
                answers.append(result | {"content": answer} if answer else result)
        _add(turns, "assistant", blocks)
        _add(turns, "user", answers)  # before the next prompt's text, as the endpoint wants
    body: dict[str, Any] = {"messages": turns}
    if system_parts:
        body["system"] = "\n\n".join(system_parts)
    if tools:
        body["tools"] = [_tool(tool, index) for index, tool in enumerate(tools)]
    return body


def _add(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    # One role's messages in a row become one (the endpoint wants them to alternate); none if empty.
    if blocks and turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    elif blocks:
        turns.append({"role": role, "content": blocks})


def _tool_use(call: Mapping[str, Any], where: str, used: set[str]) -> dict[str, Any]:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    if not isinstance(name := function.get("name"), str) or not name:
        raise ValueError(f"{where} has no function name")
    given = str(call.get("id", ""))
    if not _TOOL_USE_ID.fullmatch(given) or given in used:  # its result follows it
        hashed = f"{given}-{len(used)}".encode("utf-8", "surrogatepass")
        given = "toolu_" + hashlib.sha256(hashed).hexdigest()[:24]
    used.add(given)
    # An object there: JSON text of one as that object (as the turn decoded it), else the text.
    if not isinstance(arguments := function.get("arguments"), Mapping):
        try:
            text = arguments if isinstance(arguments, str) and arguments.strip() else "{}"
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            decoded = None
        arguments = decoded if isinstance(decoded, dict) else {"arguments": arguments}
    return {"type": "tool_use", "id": given, "name": name, "input": dict(arguments)}


def _text(content: object, where: str) -> str:
    # A string, None, or a list of text parts.
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
    function = tool.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError(f"tool {index} is not a Chat Completions function with a name")
    converted: dict[str, Any] = {"name": function["name"]}
    if isinstance(description := function.get("description"), str) and description:
        converted["description"] = description
    schema = function.get("parameters")
    converted["input_schema"] = dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
    return converted
