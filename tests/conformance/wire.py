"""Frames on the wire, checked against the official ACP v1 JSON Schema (Draft 2020-12).

The schema ships in the npm package ``@agentclientprotocol/sdk`` as ``schema/v1/schema.json``.
Each method's types carry ``x-method`` (the wire name) and ``x-side`` (the side that handles
the request or notification, or that sends the response; ``protocol`` for a notification either
side sends, ``$/cancel_request``); a response is checked against the response type of the
request it answers, found by id among the requests the other side sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator

__all__ = ["AGENT", "CLIENT", "PROTOCOL", "Frame", "FrameLog", "Schema", "Side"]

Side = Literal["client", "agent"]
CLIENT: Side = "client"
AGENT: Side = "agent"
# The ``x-side`` of a method either side may send (``$/cancel_request``).
PROTOCOL = "protocol"

_KINDS = ("Request", "Response", "Notification")


def _other(side: Side) -> Side:
    return AGENT if side == CLIENT else CLIENT


@dataclass(frozen=True, slots=True)
class Frame:
    """One JSON-RPC message and the side that sent it."""

    sender: Side
    message: object


class Schema:
    """The ACP v1 schema, indexed by method and message kind."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self._defs: Mapping[str, Any] = document["$defs"]
        self._by_method: dict[tuple[str, str], tuple[str, str]] = {}
        for name, definition in self._defs.items():
            method = definition.get("x-method")
            kind = next((k for k in _KINDS if name.endswith(k)), None)
            if isinstance(method, str) and kind is not None:
                self._by_method[(method, kind)] = (name, definition.get("x-side", ""))
        self._validators: dict[str, Draft202012Validator] = {}
        Draft202012Validator.check_schema(document)

    @classmethod
    def load(cls, path: Path) -> Schema:
        """Read ``schema/v1/schema.json``."""
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def errors(self, definition: str, instance: object) -> list[str]:
        """Why ``instance`` does not match ``$defs[definition]`` (empty when it does)."""
        validator = self._validators.get(definition)
        if validator is None:
            validator = Draft202012Validator({"$defs": self._defs, "$ref": f"#/$defs/{definition}"})
            self._validators[definition] = validator
        return [_describe(e) for e in validator.iter_errors(instance)]

    def envelope_errors(self, message: Mapping[str, Any]) -> list[str]:
        """Why ``message`` is not a JSON-RPC 2.0 envelope of the schema (empty when it is)."""
        # The schema's top level is an anyOf over every message of both sides, milliseconds a
        # frame; its parts are checked instead: `jsonrpc` and the id here (RequestId), params,
        # results and errors per method.
        errors = []
        if message.get("jsonrpc") != "2.0":
            errors.append(f"jsonrpc: {message.get('jsonrpc')!r} is not '2.0'")
        if "id" in message:
            errors += [f"id: {e}" for e in self.errors("RequestId", message["id"])]
        return errors

    def lookup(self, method: str, kind: str) -> tuple[str, str] | None:
        """The ``(definition name, x-side)`` of a method's request/response/notification."""
        return self._by_method.get((method, kind))


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    return f"{where}: {error.message[:300]}"


@dataclass
class FrameLog:
    """Every frame of one connection, in order, with schema checks per direction."""

    schema: Schema
    # Off: the client's own frames are not checked (the robustness tests send malformed ones
    # on purpose); their ids still match the agent's responses.
    check_client: bool = True
    frames: list[Frame] = field(default_factory=list)

    def add(self, sender: Side, message: object) -> None:
        """Record one frame."""
        self.frames.append(Frame(sender, message))

    def sent_by(self, sender: Side) -> list[Mapping[str, Any]]:
        """The frames one side sent that are JSON objects."""
        return [
            f.message for f in self.frames if f.sender == sender and isinstance(f.message, dict)
        ]

    def problems(self) -> list[str]:
        """Every schema violation, each as ``#index sender: what``."""
        pending: dict[tuple[Side, object], str] = {}
        found: list[str] = []
        for index, frame in enumerate(self.frames):
            errors = self._frame_errors(frame.sender, frame.message, pending)
            if frame.sender == AGENT or self.check_client:
                found.extend(f"#{index} {frame.sender}: {error}" for error in errors)
        return found

    def assert_valid(self) -> None:
        """Fail listing the violations (the first 20)."""
        problems = self.problems()
        assert not problems, "frames violate the ACP v1 schema:\n" + "\n".join(problems[:20])

    def _frame_errors(
        self, sender: Side, message: object, pending: dict[tuple[Side, object], str]
    ) -> list[str]:
        if not isinstance(message, dict):
            return [f"not a JSON object: {json.dumps(message)[:200]}"]
        errors = self.schema.envelope_errors(message)
        method = message.get("method")
        if "method" in message and not isinstance(method, str):
            if "id" in message:
                pending[(sender, _id_key(message["id"]))] = "(not a method name)"
            return [*errors, f"method {method!r} is not a string"]
        if isinstance(method, str):
            kind = "Request" if "id" in message else "Notification"
            if kind == "Request":
                key = (sender, _id_key(message["id"]))
                if key in pending:
                    errors.append(f"request id {message['id']!r} reused while pending")
                pending[key] = method
            if method.startswith("_"):
                # Extension methods: any params, as long as the envelope is JSON-RPC.
                return errors
            found = self.schema.lookup(method, kind)
            if found is None:
                return [*errors, f"{method!r} is not an ACP v1 {kind.lower()}"]
            definition, handler = found
            if handler not in (_other(sender), PROTOCOL):
                errors.append(f"{method!r} is handled by the {handler}, not sent by it")
            params = message.get("params")
            errors += [f"params of {method}: {e}" for e in self.schema.errors(definition, params)]
            return errors
        if "id" not in message:
            return [*errors, "neither a request, a notification nor a response"]
        if ("result" in message) == ("error" in message):
            errors.append("a response needs exactly one of result and error")
        answered = pending.pop((_other(sender), _id_key(message["id"])), None)
        if "error" in message:
            errors += [f"error: {e}" for e in self.schema.errors("Error", message["error"])]
            if answered is None and message["id"] is not None:
                errors.append(f"error for id {message['id']!r}, which no request carried")
            return errors
        if answered is None:
            return [*errors, f"result for id {message['id']!r}, which no request carried"]
        if answered.startswith("_"):
            return errors
        found = self.schema.lookup(answered, "Response")
        if found is None and self.schema.lookup(answered, "Notification") is not None:
            # A notification sent as a request (`session/cancel` with an id) is acknowledged.
            if message.get("result") not in ({}, None):
                errors.append(f"result for {answered!r} sent as a request must be empty")
            return errors
        if found is None:
            return [*errors, f"result for {answered!r}, which has no ACP v1 response type"]
        definition, _ = found
        result = message.get("result")
        return errors + [
            f"result of {answered}: {e}" for e in self.schema.errors(definition, result)
        ]


def _id_key(value: object) -> object:
    # Ids are strings, integers or null; anything else (unhashable) is keyed by its JSON text.
    return value if isinstance(value, str | int | None) else json.dumps(value)
