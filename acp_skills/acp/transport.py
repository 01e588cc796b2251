"""`GuardedTransport`: the SDK's transport over stdio, hardened (docs/integration.md)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
from typing import Any, Final, NamedTuple

from ..json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from ..quiet_log import get_logger
from ..text import well_formed

_log = get_logger(__name__)

# More than any model's context, or a 1 MiB file read at JSON's sixfold worst-case escaping.
DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024
# Turns are cancelled at the end of input: this only bounds a handler ignoring cancellation.
DEFAULT_DRAIN_SECONDS: Final = 30.0
_HEAD_BYTES: Final = 4096
# No field of the protocol holds a number outside these (ids and counts are at most 64-bit).
_MIN_INT, _MAX_INT = -(2**63), 2**64 - 1
# More digits than this cannot be in range; bounding them also skips Python's 4300-digit guard.
_MAX_INT_DIGITS: Final = 21

_PARSE_ERROR, _INVALID_REQUEST, _INVALID_PARAMS, _INTERNAL_ERROR = -32700, -32600, -32602, -32603
_UNANSWERED: Final = "the client's input ended before it answered"
_MESSAGES: Final = {-32700: "Parse error", -32600: "Invalid request", -32602: "Invalid params"}


def _error(
    request_id: object, code: int, details: str | None = None, message: str | None = None
) -> dict[str, Any]:
    message = _MESSAGES.get(code, "Internal error") if message is None else message
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["data"] = {"details": details}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _dumps(message: dict[str, Any]) -> str:
    # Not ASCII-escaped: a lone surrogate stays one character, which `_write` then replaces.
    return json.dumps(message, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def _is_valid_id(value: object) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # `NaN` and `Infinity` are Python's, not JSON's


def _parse_int(digits: str) -> int | float:
    return math.inf if len(digits.lstrip("-")) > _MAX_INT_DIGITS else int(digits)


def _out_of_range(params: object) -> str | None:
    stack: list[tuple[dict[str, object] | list[object], str]] = []
    if isinstance(params, dict | list):
        stack.append((params, "params"))
    while stack:
        value, path = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, dict | list):
                stack.append((item, f"{path}.{key}"))
            elif (isinstance(item, float) and not math.isfinite(item)) or (
                isinstance(item, int) and not _MIN_INT <= item <= _MAX_INT
            ):
                return f"{path}.{key}"
    return None


def _leading_members(head: bytes) -> dict[str, object]:
    # Top-level members up to the first nested one (``...``); clients write ``id`` first.
    text = head.decode("utf-8", errors="replace")
    decoder, members = json.JSONDecoder(), dict[str, object]()
    position, separator = _skip_blanks(text, 0), "{"
    while text.startswith(separator, position):
        try:
            key, position = decoder.raw_decode(text, _skip_blanks(text, position + 1))
            position = _skip_blanks(text, position)
            if not isinstance(key, str) or not text.startswith(":", position):
                break
            position = _skip_blanks(text, position + 1)
            if text[position : position + 1] in ("{", "["):
                members[key] = ...
                break
            members[key], position = decoder.raw_decode(text, position)
        except ValueError:
            break
        position, separator = _skip_blanks(text, position), ","
    return members


def _skip_blanks(text: str, position: int) -> int:
    return len(text) - len(text[position:].lstrip(" \t\r\n"))


class _OverlongLine(NamedTuple):
    head: bytes
    size: int


async def _read_line(reader: asyncio.StreamReader, max_bytes: int) -> bytes | _OverlongLine:
    """Read one line; past ``max_bytes`` keep only its head and discard the rest as it is read."""
    chunks: list[bytes] = []
    head: bytes | None = None  # set once the line is known to be too long
    size = 0
    while True:
        complete = True
        try:
            chunk = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError as overrun:
            chunk = await reader.readexactly(overrun.consumed)
            complete = False
        except asyncio.IncompleteReadError as end:
            chunk = end.partial
        size += len(chunk)
        length = size - 1 if complete and chunk.endswith(b"\n") else size
        if head is None:
            chunks.append(chunk)
            if length > max_bytes:
                head = b"".join(chunks)[:_HEAD_BYTES]
                chunks.clear()
        if complete:
            return b"".join(chunks) if head is None else _OverlongLine(head=head, size=length)


class GuardedTransport:
    """The SDK's message-level transport over a pair of asyncio streams, with the guards above."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        max_depth: int = MAX_NESTING_DEPTH,
    ) -> None:
        if max_line_bytes < 1 or not drain_seconds > 0 or max_depth < 2:
            raise ValueError("max_line_bytes, drain_seconds and max_depth must be positive")
        self._reader, self._writer, self._max_depth = reader, writer, max_depth
        self._max_line_bytes, self._drain_seconds = max_line_bytes, drain_seconds
        self._write_lock = asyncio.Lock()
        self._closed = self._input_ended = self._output_lost = False
        self._owed: dict[object, int] = {}  # requests the SDK has not answered (ids can repeat)
        self._prompts: dict[object, str] = {}  # of those, the prompt turns, to cancel at the end
        self._awaited: set[object] = set()  # the agent's requests the client has not answered
        self._inbox: collections.deque[dict[str, Any]] = collections.deque()
        self._deadline = 0.0
        self._changed = asyncio.Event()  # an answer went out, or the output was lost
        self._line_task: asyncio.Future[bytes | _OverlongLine] | None = None

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame (dropped after ``close()`` or a lost output)."""
        if self._closed or self._output_lost:
            _log.debug("acp_frame_dropped", method=message.get("method"))
            return
        try:
            line = _dumps(message)
        except (TypeError, ValueError) as error:
            if "id" not in message or "method" in message:
                raise
            # A response the SDK cannot serialise still gets an answer, so no client waits
            # forever; an error keeps its code (a validation error's details may hold objects).
            code, text = _INTERNAL_ERROR, "Internal error"
            failed = message.get("error")
            if isinstance(failed, dict) and isinstance(failed.get("code"), int):
                code, text = failed["code"], str(failed.get("message", text))
            line = _dumps(_error(message["id"], code, str(error), text))
        self._note_outgoing(message)
        await self._write(line)

    async def _write(self, line: str) -> None:
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError:
            data = well_formed(line).encode("utf-8")
        try:
            async with self._write_lock:
                self._writer.write(data + b"\n")
                await self._writer.drain()
        except (ConnectionError, OSError) as error:
            self._lose_output(error)
        self._changed.set()

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message (malformed ones are answered here), ``None`` at the end."""
        while True:
            if self._inbox:
                return self._inbox.popleft()
            if self._output_lost:
                return None
            if self._input_ended:
                if await self._drained():
                    return None
            elif (raw := await self._next_line()) is None:
                if not self._output_lost:
                    self._end_input()
            elif (message := await self._parse(raw)) is not None:
                self._note_incoming(message)
                return message

    async def close(self) -> None:
        """Stop sending and close the writer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._line_task is not None:
            self._line_task.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()
            await self._writer.wait_closed()

    async def _reply(self, payload: dict[str, Any]) -> None:
        if not (self._closed or self._output_lost):
            await self._write(_dumps(payload))

    def _fail_awaited(self, request_id: object, refusal: dict[str, Any]) -> dict[str, Any] | None:
        # A refused answer to the agent's own request fails that request instead of hanging it.
        if request_id not in self._awaited:
            return None
        self._awaited.discard(request_id)
        return {**refusal, "id": request_id}

    def _note_incoming(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        if "method" in message and "id" in message:
            self._owed[request_id] = self._owed.get(request_id, 0) + 1
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            if message["method"] == "session/prompt" and isinstance(session_id, str):
                self._prompts[request_id] = session_id
        elif "id" in message:
            self._awaited.discard(request_id)

    def _note_outgoing(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        if "method" in message:
            if "id" in message:
                if self._input_ended:
                    self._inbox.append(_error(request_id, _INTERNAL_ERROR, _UNANSWERED))
                else:
                    self._awaited.add(request_id)
        elif (count := self._owed.pop(request_id, 0) - 1) > 0:
            self._owed[request_id] = count
        else:
            self._prompts.pop(request_id, None)

    def _end_input(self) -> None:
        self._input_ended = True
        self._deadline = asyncio.get_running_loop().time() + self._drain_seconds
        _log.debug("acp_input_ended", unanswered=sum(self._owed.values()))
        for request_id in sorted(self._awaited, key=repr):
            self._inbox.append(_error(request_id, _INTERNAL_ERROR, _UNANSWERED))
        self._awaited.clear()
        for session_id in dict.fromkeys(self._prompts.values()):
            params = {"sessionId": session_id}
            self._inbox.append({"jsonrpc": "2.0", "method": "session/cancel", "params": params})

    async def _drained(self) -> bool:
        self._changed.clear()
        if not self._owed:
            return True
        if (remaining := self._deadline - asyncio.get_running_loop().time()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
                return False
        reason, ids = "still running when the input ended", sorted(self._owed, key=repr)
        _log.warning("acp_requests_unanswered", reason=reason, seconds=self._drain_seconds, ids=ids)
        return True

    def _lose_output(self, error: BaseException) -> None:
        if self._output_lost:
            return
        self._output_lost = True
        _log.warning("acp_output_closed", reason="the client stopped reading", error=str(error))
        if self._line_task is not None:
            self._line_task.cancel()
        self._changed.set()

    async def _next_line(self) -> bytes | _OverlongLine | None:
        if self._line_task is None:
            self._line_task = asyncio.ensure_future(_read_line(self._reader, self._max_line_bytes))
        task = self._line_task
        try:
            line = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # `receive` itself was cancelled: the line stays for the next call
            line = b""  # cancelled by `_lose_output` or `close`
        except (ConnectionError, OSError) as error:
            _log.warning("acp_input_failed", error=str(error))
            line = b""
        self._line_task = None
        return line or None

    async def _parse(self, raw: bytes | _OverlongLine) -> dict[str, Any] | None:
        if isinstance(raw, _OverlongLine):
            return await self._refuse_overlong(raw)
        if not (raw := raw.strip()):
            return None
        try:
            message = json.loads(raw, parse_constant=_refuse_constant, parse_int=_parse_int)
        except (ValueError, RecursionError):
            _log.warning("acp_line_rejected", reason="not valid JSON", size=len(raw))
            await self._reply(_error(None, _PARSE_ERROR))
            return None
        if not isinstance(message, dict):
            kind = "a batch" if isinstance(message, list) else "not a JSON object"
            _log.warning("acp_line_rejected", reason=kind)
            await self._reply(_error(None, _INVALID_REQUEST, kind))
            return None
        if nests_deeper_than(message, self._max_depth):
            return await self._refuse_deep(message)
        if "method" in message:
            method = message["method"]
            if not _is_valid_id(message.get("id")):
                await self._reply(_error(None, _INVALID_REQUEST, "invalid id"))
                return None
            if not isinstance(method, str):
                if "id" in message:
                    await self._reply(_error(message["id"], _INVALID_REQUEST, "bad method"))
                return None
            params = message.get("params")
            if (where := _out_of_range(params)) is not None:
                _log.warning("acp_request_rejected", method=method, reason="number out of range")
                if "id" in message:
                    details = f"{where} is out of range"
                    await self._reply(_error(message["id"], _INVALID_PARAMS, details))
                return None
            if method == "session/cancel" and "id" in message:
                await self._reply({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                message = {k: v for k, v in message.items() if k != "id"}
            # Extension methods receive their params untouched, so only standard methods need it.
            if not method.startswith("_") and isinstance(params, dict):
                meta = params.get("_meta")
                if isinstance(meta, dict) and meta:
                    message = {**message, "params": {**params, "_meta": {"_meta": meta}}}
            return message
        if "id" in message:
            if not _is_valid_id(message["id"]):
                _log.warning("acp_line_rejected", reason="response with an invalid id")
                return None
            if "error" in message and not isinstance(message["error"], dict):
                failed = {"code": _INTERNAL_ERROR, "message": str(message["error"])}
                message = {**message, "error": failed}
            return message
        _log.warning("acp_line_rejected", reason="neither a request nor a response")
        await self._reply(_error(None, _INVALID_REQUEST, "neither a request nor a response"))
        return None

    async def _refuse_deep(self, message: dict[str, Any]) -> dict[str, Any] | None:
        # Refused before the SDK sees it: its observer deep-copies and its models validate
        # recursively, and a RecursionError there escapes its receive loop and ends the agent.
        request_id, method, limit = message.get("id"), message.get("method"), self._max_depth
        method = method if isinstance(method, str) else None
        _log.warning("acp_line_rejected", reason="nested too deep", limit=limit, method=method)
        refusal = _error(None, _INVALID_REQUEST, f"nested more than {limit} levels deep")
        valid_id = "id" in message and _is_valid_id(request_id)
        if "method" in message:
            if "id" in message:  # a notification is only dropped
                await self._reply({**refusal, "id": request_id if valid_id else None})
        elif valid_id:
            return self._fail_awaited(request_id, refusal)
        elif "id" not in message:
            await self._reply(refusal)
        return None

    async def _refuse_overlong(self, line: _OverlongLine) -> dict[str, Any] | None:
        members = _leading_members(line.head)
        request_id = members.get("id")
        size, limit, method = line.size, self._max_line_bytes, members.get("method")
        _log.warning("acp_line_rejected", reason="too long", size=size, limit=limit, method=method)
        details = f"the line is {size} bytes, over the {limit}-byte limit"
        refusal = _error(None, _INVALID_REQUEST, details)
        if "id" in members and _is_valid_id(request_id):
            if isinstance(method, str):
                await self._reply({**refusal, "id": request_id})
                return None
            answers = "result" in members or "error" in members
            if answers and (failed := self._fail_awaited(request_id, refusal)) is not None:
                return failed
        await self._reply(refusal)
        return None
