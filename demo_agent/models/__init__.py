"""The small interface between the demo agent and the models behind it.

Messages use the OpenAI Chat Completions shape (``{"role", "content"}``, assistant
``tool_calls``, ``tool`` results) because it is what most hosted models speak; the offline
model reads the same messages, so both take exactly the same path through the agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "DISPLAY_KEY",
    "ChatModel",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "OnText",
    "ToolCall",
]

DISPLAY_KEY = "_display"
"""A history message key the agent keeps for itself (what the person typed, for replay).

Keys starting with ``_`` are never sent to a model API.
"""

ERROR_KEY = "_is_error"
"""A tool-result history key: whether the tool call failed (for replay)."""

OnText = Callable[[str], Awaitable[None]]
"""Receives each piece of the reply's text as soon as the model produces it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything one model request is built from."""

    system: str
    tools: Sequence[Mapping[str, Any]]
    messages: Sequence[Mapping[str, Any]]
    # `PromptTurn.trust_note`: skills the session withholds, for a reply that lists skills
    # (the offline model's) to tell the person; a hosted model is not sent it.
    trust_note: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReply:
    """What the model answered. ``finish`` is ``length`` when it was cut off at its limit."""

    text: str
    tool_calls: tuple[ToolCall, ...] = field(default=())
    finish: Literal["stop", "tool_calls", "length"] = "stop"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call the model asked for; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


class ModelError(Exception):
    """The model could not answer (no key, refused, rate-limited, down, timed out).

    The message is written for the person in the editor: the agent shows it as its reply.
    """


class ChatModel(Protocol):
    """A model the agent can talk to."""

    @property
    def config(self) -> Mapping[str, Any]:
        """What the request header records about the model (name, endpoint, limits)."""

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Answer one request, streaming text through ``on_text``.

        Raises:
            ModelError: the model could not answer; the message says why.
        """
