"""A scripted OpenAI-compatible Chat Completions endpoint on 127.0.0.1 (streaming only).

The demo agent's ``openai`` model talks to it over real HTTP. What it answers depends on the
last message of the request:

* a ``tool`` result -> a short text reply;
* user text containing ``[slow]`` -> one text chunk (``SLOW_CHUNK``), then nothing until the
  client hangs up: a turn that is provably in the middle of a model request;
* user text containing ``[deep N]`` -> a ``skill`` call whose arguments nest N levels deep;
* user text containing ``load skill NAME`` (``... file PATH``) -> a ``skill`` tool call for NAME
  (and the resource PATH);
* user text carrying a skill invoked as ``/name`` -> a reply naming that skill;
* anything else -> ``PLAIN_REPLY``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["PLAIN_REPLY", "SLOW_CHUNK", "FakeModel"]

SLOW_CHUNK = "thinking slowly..."
PLAIN_REPLY = "Hello from the fake model."
_LOAD = re.compile(r"load skill ([a-z0-9-]+)(?: file (\S+))?")
_DEEP = re.compile(r"\[deep (\d+)\]")
_INVOKED = re.compile(r'<skill_content name="([^"]+)">')


class FakeModel:
    """The endpoint; use ``async with FakeModel() as model`` and pass ``model.base_url``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.slow_started = asyncio.Event()
        self.slow_hung_up = asyncio.Event()
        self.slow_requests = 0
        self._slow_changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aenter__(self) -> FakeModel:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in tuple(self._writers):
            writer.close()
        for task in tuple(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def wait_for_slow(self, count: int) -> None:
        """Return once ``count`` slow requests have started (in all)."""
        async with self._slow_changed:
            await self._slow_changed.wait_for(lambda: self.slow_requests >= count)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
        self.requests.append(body)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\nconnection: close\r\n\r\n"
        )
        messages = body.get("messages") or [{}]
        last: Mapping[str, Any] = messages[-1]
        raw_content = last.get("content")
        content = raw_content if isinstance(raw_content, str) else ""
        if last.get("role") == "tool":
            await self._text(writer, f"Done: read {len(content)} characters of the skill.")
        elif "[slow]" in content:
            await self._chunk(writer, {"role": "assistant", "content": SLOW_CHUNK})
            self.slow_started.set()
            async with self._slow_changed:
                self.slow_requests += 1
                self._slow_changed.notify_all()
            await reader.read()  # returns b"" when the client hangs up
            self.slow_hung_up.set()
            return
        elif (invoked := _INVOKED.search(content)) is not None:
            await self._text(writer, f"Following the {invoked.group(1)} skill.")
        elif (deep := _DEEP.search(content)) is not None:
            depth = int(deep.group(1))
            text = '{"name": ' + "[" * depth + "]" * depth + "}"
            call = {
                "index": 0,
                "id": f"call-{len(self.requests)}",
                "type": "function",
                "function": {"name": "skill", "arguments": text},
            }
            await self._chunk(writer, {"role": "assistant", "tool_calls": [call]})
            await self._chunk(writer, {}, finish="tool_calls")
        elif (load := _LOAD.search(content)) is not None:
            arguments = {"name": load.group(1)}
            if load.group(2):
                arguments["path"] = load.group(2)
            call = {
                "index": 0,
                "id": f"call-{len(self.requests)}",
                "type": "function",
                "function": {"name": "skill", "arguments": json.dumps(arguments)},
            }
            await self._chunk(writer, {"role": "assistant", "tool_calls": [call]})
            await self._chunk(writer, {}, finish="tool_calls")
        else:
            await self._text(writer, PLAIN_REPLY)
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()

    async def _text(self, writer: asyncio.StreamWriter, text: str) -> None:
        middle = len(text) // 2
        await self._chunk(writer, {"role": "assistant", "content": text[:middle]})
        await self._chunk(writer, {"content": text[middle:]}, finish="stop")

    async def _chunk(
        self, writer: asyncio.StreamWriter, delta: dict[str, Any], finish: str | None = None
    ) -> None:
        chunk = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await writer.drain()
