"""A model behind any OpenAI-compatible Chat Completions endpoint (DeepSeek by default).

Uses the official ``openai`` package (the ``openai`` extra) for HTTP and its typed errors; the
server-sent events of its streamed response are read here, so that every reader of the stream is
closed the moment reading stops. Text is streamed as it arrives; tool calls are accumulated from
their streamed pieces. Cancelling the turn cancels the task awaiting the stream, which closes the
HTTP response.

What the endpoint sends is made well-formed here, where it enters: its JSON may carry lone
surrogates, which would fail the next request's encoding and every frame that shows them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import anyio
import structlog

from acp_skills.cli.settings import extra_install_hint

from . import ModelError, ModelReply, ModelRequest, OnText
from .chat_chunks import ReplyReader, malformed, used_call_ids, well_formed

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_KEY_VARIABLE",
    "DEFAULT_MODEL",
    "OpenAIChatModel",
]

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-chat"
DEFAULT_KEY_VARIABLE = "DEEPSEEK_API_KEY"

_LINE_END = re.compile(rb"\r\n|\r|\n")

_log = structlog.get_logger(__name__)


class OpenAIChatModel:
    """Chat Completions with tool calling and streaming.

    Args:
        base_url: the endpoint's base URL (``.../v1`` for most; DeepSeek takes its root).
        model: the model name.
        api_key: the key, or ``None`` when the variable named by ``key_variable`` is unset; the
            first request then answers with a message saying which variable to set.
        key_variable: named in that message.
        timeout: seconds for the whole request.
        max_tokens: the reply's token limit, or ``None`` for the endpoint's default.
    """

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        model: str = DEFAULT_MODEL,
        api_key: str | None,
        key_variable: str = DEFAULT_KEY_VARIABLE,
        timeout: float = 120.0,
        max_tokens: int | None = None,
    ) -> None:
        self._base_url = base_url
        self._model = model
        self._api_key = api_key
        self._key_variable = key_variable
        self._timeout = timeout
        self._max_tokens = max_tokens
        self._client: Any = None
        # Imported now, at start-up, not at the first request: an agent whose environment
        # became unreadable since (moved, permissions changed) must not fail mid-session.
        try:
            import openai
        except ImportError:
            self._openai: Any = None
        else:
            self._openai = openai

    @property
    def config(self) -> Mapping[str, Any]:
        config: dict[str, Any] = {"model": self._model, "base_url": self._base_url}
        if self._max_tokens is not None:
            config["max_tokens"] = self._max_tokens
        return config

    def _connect(self) -> Any:
        if self._client is None:
            if self._openai is None:
                raise ModelError(
                    f"The openai model needs the `openai` package: {extra_install_hint('openai')}."
                )
            # Retries would hide a failing endpoint behind long silences; the user can resend.
            self._client = self._openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout,
                max_retries=0,
            )
        return self._client

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        if not self._api_key:
            raise ModelError(
                f"No API key: set the {self._key_variable} environment variable for the agent "
                f"(or pick another variable with --api-key-env), name a file holding the key "
                f"with --api-key-file, or use --model offline."
            )
        client = self._connect()
        openai = self._openai

        arguments: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": "system", "content": request.system}, *_paired(request.messages)],
            "stream": True,
        }
        if request.tools:
            arguments["tools"] = list(request.tools)
        if self._max_tokens is not None:
            arguments["max_tokens"] = self._max_tokens
        reader = ReplyReader()
        try:
            # The client's own timeout is per socket operation, so an endpoint dripping a byte
            # at a time would run on for ever: the deadline covers the whole request.
            with anyio.fail_after(self._timeout):
                # The events are read here rather than by the client library's stream object,
                # whose generators, left suspended when reading stops early (a malformed piece,
                # a reply over the cap, a cancelled turn), wait in a reference cycle for the
                # garbage collector: here each is closed as reading stops.
                respond = client.chat.completions.with_streaming_response.create(**arguments)
                async with respond as response, aclosing(_events(response)) as events:
                    async for data in events:
                        if data == "[DONE]":
                            break
                        for content in reader.add(_chunk(data)):
                            await on_text(content)
        except (TimeoutError, openai.OpenAIError) as error:
            raise ModelError(self._explained(error)) from error
        if not reader.chunks:
            # Most often a plain JSON body: the endpoint ignored ``stream``.
            raise ModelError(
                "The model endpoint sent no streamed reply the agent could read. "
                "Check that --base-url points at a Chat Completions endpoint that streams."
            )
        tool_calls = reader.tool_calls(used_call_ids(request.messages))
        if reader.finish == "length":
            return ModelReply(text=reader.text, tool_calls=(), finish="length")
        return ModelReply(
            text=reader.text,
            tool_calls=tool_calls,
            finish="tool_calls" if tool_calls else "stop",
        )

    def _explained(self, error: Exception) -> str:
        """What the person reads of a request that failed: why, and what to do."""
        openai = self._openai
        if isinstance(error, TimeoutError | openai.APITimeoutError):
            return f"The model endpoint did not answer within {self._timeout:g} s. Try again later."
        if isinstance(error, openai.AuthenticationError):
            return (
                f"The model endpoint rejected the API key (HTTP 401). Check {self._key_variable}."
            )
        if isinstance(error, openai.RateLimitError):
            return (
                "The model endpoint is rate-limiting requests (HTTP 429). Wait a moment and try "
                "again."
            )
        if isinstance(error, openai.APIStatusError):
            return f"The model endpoint answered HTTP {error.status_code}: {_short(error.message)}"
        if isinstance(error, openai.APIConnectionError):
            return f"Could not reach the model endpoint at {self._base_url}: {_short(str(error))}"
        return f"The model request failed: {_short(str(error))}"


def _paired(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages as the API takes them.

    Drops the agent's own ``_`` keys, and assistant tool calls that never got their results (a
    turn cancelled in between): Chat Completions rejects a conversation where a tool call is not
    followed by its result.
    """
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    cleaned: list[Mapping[str, Any]] = []
    for message in messages:
        # Our own bookkeeping keys (see DISPLAY_KEY) are not part of the API's message shape.
        plain = {key: value for key, value in message.items() if not key.startswith("_")}
        calls = plain.pop("tool_calls", None)
        if calls:
            kept = [call for call in calls if call.get("id") in answered]
            if kept:
                plain["tool_calls"] = kept
            elif not plain.get("content"):
                continue
        cleaned.append(plain)
    return cleaned


async def _events(response: Any) -> AsyncGenerator[str, None]:
    """The data of each server-sent event: its ``data:`` lines joined, sent at a blank line."""
    data: list[str] = []
    async with aclosing(_lines(response)) as lines:
        async for line in lines:
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                yield "\n".join(data)
                data = []
    if data:
        yield "\n".join(data)


async def _lines(response: Any) -> AsyncGenerator[str, None]:
    """The body's lines, ended at CRLF, LF or CR as server-sent events end them (text lines
    end at U+2028 and more besides, which JSON carries as they are)."""
    pending = b""
    async with aclosing(response.iter_bytes()) as chunks:
        async for chunk in chunks:
            pending += chunk
            held = pending.endswith(b"\r")  # perhaps the first half of a CRLF
            *lines, pending = _LINE_END.split(pending[:-1] if held else pending)
            pending += b"\r" if held else b""
            for line in lines:
                yield line.decode(errors="replace")
    if pending:
        yield pending.removesuffix(b"\r").decode(errors="replace")


def _chunk(data: str) -> object:
    """One event's JSON: a reply piece, or the error the endpoint sent instead."""
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise malformed(f"{type(error).__name__}: {_short(str(error), 80)}") from None
    if isinstance(chunk, dict) and (sent := chunk.get("error")):
        message = sent.get("message") if isinstance(sent, dict) else sent
        said = message if isinstance(message, str) and message else "an error instead of a reply"
        raise ModelError(f"The model request failed: {_short(said)}")
    return chunk


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(well_formed(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
