"""An Anthropic Messages endpoint on 127.0.0.1 for the tests (stdlib only): ``POST /v1/messages``.

It checks each request as the real endpoint does before any model sees it, and refuses a
malformed one with HTTP 400 and an ``invalid_request_error`` naming the first problem: a
conversation that does not start with the person or does not alternate, a message or text
block that is empty, a ``tool_result`` whose ``tool_use`` is not in the message just before, a
``tool_use`` not answered in the very next message, results after other content, a bad id or
input, a tool without an object schema. An accepted request is answered with the next scripted
reply (content blocks), or a short text. Everything received and every refusal is kept.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnthropic", "anthropic_endpoint", "problem_of", "text", "tool_use"]

_ID = re.compile(r"[a-zA-Z0-9_-]+")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def text(words: str) -> dict[str, Any]:
    """A text block of a scripted reply."""
    return {"type": "text", "text": words}


def tool_use(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool_use block of a scripted reply."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)}


def problem_of(body: Mapping[str, Any]) -> str | None:
    """Why the Messages endpoint refuses ``body``, or ``None`` when it takes it."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    tokens = body.get("max_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        return "max_tokens: Field required"
    if (problem := _system_problem(body.get("system"))) is not None:
        return problem
    if (problem := _tools_problem(body.get("tools"))) is not None:
        return problem
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        if (problem := _message_problem(messages, index, message)) is not None:
            return problem
    return None


def _system_problem(system: object) -> str | None:
    if system is None or isinstance(system, str):
        return None
    if isinstance(system, list) and all(_is_text_block(block) for block in system):
        return None
    return "system: Input should be a valid string or a list of text blocks"


def _tools_problem(tools: object) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for index, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            return f"tools.{index}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if name in names:
            return "tools: Tool names must be unique."
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            return f"tools.{index}.input_schema.type: Input should be 'object'"
    return None


def _message_problem(messages: Sequence[Any], index: int, message: object) -> str | None:
    where = f"messages.{index}"
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
        return f"{where}.role: Input should be 'user' or 'assistant'"
    role = message["role"]
    if index == 0 and role != "user":
        return 'messages: first message must use the "user" role'
    if index > 0 and messages[index - 1].get("role") == role:
        return (
            'messages: roles must alternate between "user" and "assistant", but found multiple '
            f'"{role}" roles in a row'
        )
    last_assistant = index == len(messages) - 1 and role == "assistant"
    blocks = _blocks(message.get("content"))
    if blocks is None:
        return f"{where}.content: Input should be a valid string or a list of content blocks"
    if not blocks and not last_assistant:
        return (
            f"{where}: all messages must have non-empty content except for the optional final "
            "assistant message"
        )
    for number, block in enumerate(blocks):
        if (problem := _block_problem(messages, index, number, block, blocks)) is not None:
            return problem
    if role == "assistant":
        calls = [block["id"] for block in blocks if block.get("type") == "tool_use"]
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = {
            block.get("tool_use_id")
            for block in (_blocks(following.get("content")) or [] if following else [])
            if block.get("type") == "tool_result"
        }
        if missing := [call for call in calls if call not in answered]:
            return (
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message."
            )
    return None


def _blocks(content: object) -> list[dict[str, Any]] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(block, Mapping) for block in content):
        return [dict(block) for block in content]
    return None


def _is_text_block(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "text"


def _block_problem(
    messages: Sequence[Any], index: int, number: int, block: Mapping[str, Any], blocks: list[Any]
) -> str | None:
    where, role = f"messages.{index}.content.{number}", messages[index]["role"]
    kind = block.get("type")
    if kind == "text":
        words = block.get("text")
        if not isinstance(words, str) or not words.strip():
            return "messages: text content blocks must contain non-whitespace text"
        return None
    if kind == "tool_use":
        if role != "assistant":
            return f"{where}: tool_use blocks are only allowed in assistant messages"
        if not isinstance(block.get("id"), str) or not _ID.fullmatch(block["id"]):
            return f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if not isinstance(block.get("name"), str) or not block["name"]:
            return f"{where}.name: Field required"
        if not isinstance(block.get("input"), Mapping):
            return f"{where}.input: Input should be a valid dictionary"
        earlier = [
            b.get("id")
            for m in messages[:index]
            for b in (_blocks(m.get("content")) or [])
            if b.get("type") == "tool_use"
        ]
        earlier += [b.get("id") for b in blocks[:number] if b.get("type") == "tool_use"]
        if block["id"] in earlier:
            return f"{where}: `tool_use` ids must be unique"
        return None
    if kind == "tool_result":
        if role != "user":
            return f"{where}: tool_result blocks are only allowed in user messages"
        if any(b.get("type") != "tool_result" for b in blocks[:number]):
            return f"{where}: tool_result blocks must come before any other content"
        preceding = messages[index - 1] if index > 0 else None
        called = {
            b.get("id")
            for b in (_blocks(preceding.get("content")) or [] if preceding else [])
            if b.get("type") == "tool_use"
        }
        if block.get("tool_use_id") not in called:
            return (
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block.get('tool_use_id')}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        content = block.get("content", "")
        if not isinstance(content, str | list):
            return f"{where}.content: Input should be a valid string or a list of blocks"
        return None
    return f"{where}.type: Input tag {kind!r} found using 'type' does not match any expected tag"


@dataclass
class FakeAnthropic:
    """What the endpoint of `anthropic_endpoint` was sent and answered.

    ``replies`` are the content blocks of each accepted request's answer, in order (a text
    answer once they run out); ``received`` every request body, ``refused`` each refusal's
    message (with the index of the request in ``received``); ``url`` where it listens.
    """

    replies: list[list[dict[str, Any]]] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    url: str = ""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON answer to one request (also kept)."""
        self.received.append(body)
        if (problem := problem_of(body)) is not None:
            self.refused.append((len(self.received) - 1, problem))
            error = {"type": "invalid_request_error", "message": problem}
            return 400, {"type": "error", "error": error}
        content = self.replies.pop(0) if self.replies else [text("ok")]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return 200, {
            "id": f"msg_{len(self.received)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }


@contextlib.contextmanager
def anthropic_endpoint(replies: Sequence[list[dict[str, Any]]] = ()) -> Iterator[FakeAnthropic]:
    """The endpoint, serving ``replies`` until the block ends."""
    fake = FakeAnthropic(replies=list(replies))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, answer = fake.answer(json.loads(raw))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests assert on what was received instead."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll: `shutdown` waits for the serving loop to look again.
    thread = threading.Thread(
        target=functools.partial(server.serve_forever, poll_interval=0.02), daemon=True
    )
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1/messages"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
