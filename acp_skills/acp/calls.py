"""An agent's own tool calls: the `ToolCall` ``run_tool`` receives, and its outcome settled."""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

from acp import schema as acp_schema

from ..tool import ToolResult
from . import wire

ToolOutcome: TypeAlias = ToolResult | str | acp_schema.ToolCallUpdate


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of the agent's own tool; ``arguments`` decoded (text that is not JSON stays)."""

    id: str
    name: str
    arguments: object


AgentToolRunner: TypeAlias = Callable[[ToolCall], Awaitable[ToolOutcome]]


def settle(call_id: str, outcome: object) -> tuple[ToolResult, acp_schema.ToolCallProgress]:
    """The model's result and the editor's last update (`TypeError`/`ValueError` if unfit)."""
    if isinstance(outcome, str):
        outcome = ToolResult(text=outcome, is_error=False)
    if isinstance(outcome, ToolResult):
        return outcome, wire.tool_call_finished(call_id, outcome)
    if not isinstance(outcome, acp_schema.ToolCallUpdate):
        raise TypeError(
            "run_tool must return a str, a ToolResult or an acp.schema.ToolCallUpdate, "
            f"got {type(outcome).__name__}"
        )
    if outcome.tool_call_id != call_id:
        raise ValueError(f"run_tool returned the update of call {outcome.tool_call_id!r}")
    # A result is the call's end: anything but `failed` is `completed`.
    failed = outcome.status == "failed"
    shown = {name: getattr(outcome, name) for name in outcome.model_fields_set}
    shown |= {"session_update": "tool_call_update", "status": "failed" if failed else "completed"}
    parts = [_block_text(block) for block in outcome.content or ()]
    text = "\n\n".join(part for part in parts if part) or outcome.title or "(no output)"
    text = text if not failed or text.startswith("Error: ") else f"Error: {text}"
    return ToolResult(text=text, is_error=failed), acp_schema.ToolCallProgress(**shown)


def _block_text(block: object) -> str:
    if isinstance(block, acp_schema.ContentToolCallContent):
        content = block.content
        return content.text if isinstance(content, acp_schema.TextContentBlock) else ""
    if isinstance(block, acp_schema.FileEditToolCallContent):
        before, after = (block.old_text or "").splitlines(True), block.new_text.splitlines(True)
        source = f"a{block.path}" if block.old_text is not None else "/dev/null"
        lines = difflib.unified_diff(before, after, source, f"b{block.path}")
        return "".join(line if line.endswith("\n") else f"{line}\n" for line in lines).rstrip()
    if isinstance(block, acp_schema.TerminalToolCallContent):
        return f"(the output is in terminal {block.terminal_id})"
    return ""
