"""`GuardedTransport`: the SDK's transport over stdio, hardened (docs/integration.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from typing import Any, Final, TypeAlias

from ..json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from ..quiet_log import get_logger
from ..text import well_formed

_log = get_logger(__name__)

# More than any model's context, or a 1 MiB file read at JSON's sixfold worst-case escaping.
DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024
# Turns are cancelled at the end of input: this only bounds a handler ignoring cancellation.
DEFAULT_DRAIN_SECONDS: Final = 30.0
_HEAD_BYTES: Final = 4096
# No field of the protocol holds more than 64 bits; a longer integer is out of range unread.
_MIN_INT, _MAX_INT, _MAX_DIGITS = -(2**63), 2**64 - 1, 21
# One top-level member of an overlong line's head: its key, then a scalar or where nesting starts.
_MEMBER = re.compile(r'(?:^\s*\{|\s*,)\s*"([^"\\]*)"\s*:\s*("(?:[^"\\]|\\.)*"|[^\s,{}\[\]]+|[{\[])')
_MESSAGES: Final = {-32700: "Parse error", -32600: "Invalid request", -32602: "Invalid params"}
_UNANSWERED: Final = "the client's input ended before it answered"
_Parsed: TypeAlias = tuple[dict[str, Any] | None, dict[str, Any] | None]


def _error(request_id: object, code: int, details: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": _MESSAGES.get(code, "Internal error")}
    if details is not None:
        error["data"] = {"details": details}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _dumps(message: dict[str, Any]) -> str:
    # Not ASCII-escaped: a lone surrogate stays one character, which `_write` then replaces.
    return json.dumps(message, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def _is_valid_id(value: object) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def _loads(raw: bytes) -> tuple[object, bool]:
    """A JSON line's value, and whether it holds a number beyond 64-bit or a double."""
    beyond = False

    def integer(digits: str) -> int:
        nonlocal beyond
        value = int(digits) if len(digits) <= _MAX_DIGITS else _MAX_INT + 1
        beyond = beyond or not _MIN_INT <= value <= _MAX_INT
        return value

    def real(text: str) -> float:
        nonlocal beyond
        beyond = beyond or not math.isfinite(value := float(text))
        return value

    # `int` refuses `NaN` and `Infinity`, which are Python's, not JSON's.
    return json.loads(raw, parse_constant=int, parse_int=integer, parse_float=real), beyond


def _leading_members(head: bytes) -> dict[str, object]:
    # Top-level members up to the first nested one (``...``); clients write ``id`` first.
    text, members, position = head.decode("utf-8", errors="replace"), dict[str, object](), 0
    while match := _MEMBER.match(text, position):
        if match[2] in ("{", "["):
            members[match[1]] = ...
            break
        try:
            members[match[1]] = json.loads(match[2])
        except ValueError:
            break
        position = match.end()
    return members


async def _read_line(reader: asyncio.StreamReader, max_bytes: int) -> tuple[bytes, int]:
    """One line and its size; past ``max_bytes`` only its head is kept, the rest discarded."""
    chunks: list[bytes] = []
    size, ended = 0, False
    while not ended:
        try:
            chunk, ended = await reader.readuntil(b"\n"), True
        except asyncio.LimitOverrunError as overrun:
            chunk = await reader.readexactly(overrun.consumed)
        except asyncio.IncompleteReadError as end:
            chunk, ended = end.partial, True
        size += len(chunk.removesuffix(b"\n"))
        chunks.append(chunk)
        if size > max_bytes:
            chunks = [b"".join(chunks)[:_HEAD_BYTES]]
    return b"".join(chunks), size


class GuardedTransport:
    """The SDK's message-level transport over a pair of asyncio streams, guarded."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
    ) -> None:
        self._reader, self._writer = reader, writer
        self._max_line_bytes, self._drain_seconds = max_line_bytes, drain_seconds
        self._closed = self._input_ended = self._output_lost = False
        self._owed: dict[object, str | None] = {}  # unanswered request -> a prompt's session
        self._answered = asyncio.Event()  # set while no request is owed an answer
        self._answered.set()
        self._awaited: set[object] = set()  # the agent's requests the client has not answered
        self._received: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._reading = asyncio.ensure_future(self._read())

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame (dropped after ``close()`` or a lost output)."""
        request_id = message.get("id")
        try:
            line = _dumps(message)
        except (TypeError, ValueError) as problem:
            if "id" not in message or "method" in message:
                raise
            # A response that cannot be serialised still answers, so no client waits forever;
            # an error keeps its code (a validation error's details may hold objects).
            failed = error if isinstance(error := message.get("error"), dict) else {}
            line = _dumps(_error(request_id, failed.get("code", -32603), str(problem)))
        if "method" not in message:  # an answer: one request fewer owed
            self._owed.pop(request_id, None)
            if not self._owed:
                self._answered.set()
        elif "id" in message:  # the agent's own request, which only the client can answer
            if self._input_ended:
                self._received.put_nowait(_error(request_id, -32603, _UNANSWERED))
            else:
                self._awaited.add(request_id)
        await self._write(line)

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message, ``None`` at the end."""
        return await self._received.get()

    async def close(self) -> None:
        """Stop sending and close the writer."""
        self._closed = True
        self._reading.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()
            await self._writer.wait_closed()

    async def _read(self) -> None:
        # A task of its own: a lost output or `close` ends the wait, a cancelled `receive`
        # loses no line.
        try:
            with contextlib.suppress(ConnectionError, OSError):
                while (read := await _read_line(self._reader, self._max_line_bytes))[0]:
                    message, reply = self._parse(*read)
                    if reply is not None:
                        await self._write(_dumps(reply))
                    if message is not None:
                        self._received.put_nowait(message)
            await self._end_input()
        finally:
            self._received.put_nowait(None)

    async def _end_input(self) -> None:
        self._input_ended = True
        for request_id in self._awaited:
            self._received.put_nowait(_error(request_id, -32603, _UNANSWERED))
        self._awaited.clear()
        for session_id in dict.fromkeys(filter(None, self._owed.values())):
            cancel = {"jsonrpc": "2.0", "method": "session/cancel"}
            self._received.put_nowait(cancel | {"params": {"sessionId": session_id}})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._answered.wait(), self._drain_seconds)
        if self._owed:
            reason, ids = "still running when the input ended", list(self._owed)
            _log.warning(
                "acp_requests_unanswered", reason=reason, seconds=self._drain_seconds, ids=ids
            )

    async def _write(self, line: str) -> None:
        if self._closed or self._output_lost:
            return
        try:  # one write a frame: frames never interleave
            self._writer.write(well_formed(line).encode("utf-8") + b"\n")
            await self._writer.drain()
        except (ConnectionError, OSError) as error:
            if not self._output_lost:
                self._output_lost = True
                reason = "the client stopped reading"
                _log.warning("acp_output_closed", reason=reason, error=str(error))
                self._received.put_nowait(None)
                self._reading.cancel()

    def _parse(self, line: bytes, size: int) -> _Parsed:
        """What of ``line`` goes on to the SDK, and what is answered here."""
        if size > self._max_line_bytes:
            details = f"the line is {size} bytes, over the {self._max_line_bytes}-byte limit"
            return self._refuse(_leading_members(line), details, whole=False)
        if not (line := line.strip()):
            return None, None
        try:
            message, beyond = _loads(line)
        except (ValueError, RecursionError):
            _log.warning("acp_line_rejected", reason="not valid JSON", size=size)
            return None, _error(None, -32700)
        if not isinstance(message, dict):
            return self._refuse({}, "a batch" if isinstance(message, list) else "not a JSON object")
        if nests_deeper_than(message, MAX_NESTING_DEPTH):  # the SDK's copy would recurse
            return self._refuse(message, f"nested more than {MAX_NESTING_DEPTH} levels deep")
        request_id, method, params = message.get("id"), message.get("method"), message.get("params")
        if "method" not in message and "id" not in message:
            return self._refuse(message, "neither a request nor a response")
        if not _is_valid_id(request_id):
            return self._refuse(message, "invalid id")
        if "method" not in message:
            self._awaited.discard(request_id)
            if not isinstance(message.get("error", {}), dict):
                message["error"] = {"code": -32603, "message": str(message["error"])}
            return message, None
        if not isinstance(method, str):
            return self._refuse(message, "bad method")
        if beyond:  # a notification is only dropped
            _log.warning("acp_line_rejected", reason="number out of range", method=method)
            refusal = _error(request_id, -32602, "a number in the request is out of range")
            return None, refusal if "id" in message else None
        # Extension methods receive their params untouched, so only standard methods need it.
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not method.startswith("_") and isinstance(meta, dict) and meta:
            message["params"]["_meta"] = {"_meta": meta}
        if method == "session/cancel" and "id" in message:
            return message, {"jsonrpc": "2.0", "id": message.pop("id"), "result": {}}
        if "id" in message:
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            prompt = method == "session/prompt" and isinstance(session_id, str)
            self._owed[request_id] = session_id if prompt else None
            self._answered.clear()
        return message, None

    def _refuse(self, members: dict[str, Any], details: str, *, whole: bool = True) -> _Parsed:
        # A request is answered by its id, an answer fails the agent's request of its id, a
        # notification seen whole is dropped, and anything else is answered with `id: null`.
        _log.warning("acp_line_rejected", reason=details)
        refusal, request_id = _error(None, -32600, details), members.get("id")
        valid = "id" in members and _is_valid_id(request_id)
        if "method" in members and valid:
            return None, {**refusal, "id": request_id}
        if "result" in members or "error" in members:  # the SDK drops an id it did not send
            if not valid:
                return None, None
            self._awaited.discard(request_id)  # answered, if by an error
            return {**refusal, "id": request_id}, None
        if whole and "method" in members and "id" not in members:
            return None, None
        return None, refusal
