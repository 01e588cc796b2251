"""What goes on the ACP wire (discriminators explicit: the same JSON on SDK 0.12.x and 1.x),
what comes off it, and `ClientLink`."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from acp import RequestError
from acp import schema as acp_schema
from acp.connection import StreamDirection, StreamEvent
from acp.schema import ToolCallStatus, ToolKind

from ..json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from ..model import SkillSummary
from ..text import cut, one_line, shorten_description, well_formed
from ..tool import ToolResult

# Far above any real call (a skill name, a path, a query), far below a frame's 8 MiB.
MAX_ARGUMENTS_CHARS: Final = 1024 * 1024
# Far above any editor's workspace (each directory costs a project lookup, its roots' scans
# and a watch), far below what would make one session's discovery slow for everyone.
MAX_ADDITIONAL_DIRECTORIES: Final = 64
# A cancelled turn's last reports are shielded this long: a client not reading must not hold it.
CANCEL_REPORT_SECONDS: Final = 5.0
_PATH_LIMIT: Final = os.pathconf("/", "PC_PATH_MAX")  # in bytes, the final NUL included
_INVOCATION = re.compile(r"(?<!\S)/([a-z0-9]+(?:-[a-z0-9]+)*)(?!\S)")
_SESSION_OPENERS: Final = ("session/new", "session/load", "session/resume")

AcpClient = Any  # the SDK's `AgentSideConnection`, or a client of the same shape


class ClientLink:
    """The agent's side of the connection; it notes the sessions whose opening response has
    gone out (``answered``), then calls ``wake``."""

    def __init__(self) -> None:
        self.client: AcpClient = None  # until `AcpSkills.attach`
        self.reads_files = False
        self.answered: list[str] = []
        self.wake: Callable[[], None] | None = None
        self._openers: dict[object, str | None] = {}  # request id -> the session it names

    async def send(self, session_id: str, update: Any) -> None:
        if self.client is not None:
            await self.client.session_update(session_id=session_id, update=update)

    def require_client(self) -> None:
        if self.client is None:
            raise RuntimeError(
                "AcpSkills is not attached to a connection, so nothing a turn sends would reach "
                "the editor: call skills.attach(conn) with the SDK's AgentSideConnection (from "
                "your agent's on_connect(conn)), or serve the agent with skills.serve(agent)"
            )

    def reader(self, session_id: str) -> Callable[[str], Awaitable[str]] | None:
        if (client := self.client) is None or not self.reads_files:
            return None

        async def read_text(path: str) -> str:
            return str((await client.read_text_file(session_id=session_id, path=path)).content)

        return read_text

    def observe(self, event: StreamEvent) -> None:
        # The SDK calls this with each incoming frame, and with each outgoing one once written.
        message, request_id = event.message, event.message.get("id")
        if not isinstance(request_id, str | int):
            return
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") in _SESSION_OPENERS:
                named = field(message.get("params"), "sessionId")
                self._openers[request_id] = named if isinstance(named, str) else None
        elif "method" not in message and request_id in self._openers:
            session_id = self._openers.pop(request_id) or field(message.get("result"), "sessionId")
            if "error" not in message and isinstance(session_id, str) and self.wake is not None:
                self.answered.append(session_id)
                self.wake()


def text_block(text: str) -> acp_schema.TextContentBlock:
    return acp_schema.TextContentBlock(type="text", text=text)


def agent_text(text: str) -> acp_schema.AgentMessageChunk:
    return acp_schema.AgentMessageChunk(
        session_update="agent_message_chunk", content=text_block(text)
    )


def text_tool_content(text: str) -> list[Any]:
    return [acp_schema.ContentToolCallContent(type="content", content=text_block(text))]


def tool_call_update(
    tool_call_id: str, status: ToolCallStatus, text: str | None = None
) -> acp_schema.ToolCallProgress:
    content = None if text is None else text_tool_content(text)
    return acp_schema.ToolCallProgress(
        session_update="tool_call_update", tool_call_id=tool_call_id, status=status, content=content
    )


def tool_call_started(
    tool_call_id: str, tool_name: str, arguments: object, skill_tool_name: str
) -> acp_schema.ToolCallStart:
    """The ``tool_call`` update of a call; for the skill tool a ``read`` titled with its skill."""
    raw = dict(arguments) if isinstance(arguments, Mapping) else {"arguments": arguments}
    title, skill = one_line(tool_name) or "Tool", tool_name == skill_tool_name
    if skill:
        name, query = field(arguments, "name"), field(arguments, "query")
        name = one_line(name) if isinstance(name, str) else ""
        words = one_line(query) if isinstance(query, str) else ""
        title = f"Find skills: {cut(words, 80)}" if words and not name else f"Load skill {name}"
    kind: ToolKind = "read" if skill else "other"
    return acp_schema.ToolCallStart(
        session_update="tool_call",
        tool_call_id=tool_call_id,
        title=title.strip(),
        kind=kind,
        status="in_progress",
        raw_input=raw,
    )


def tool_call_finished(tool_call_id: str, result: ToolResult) -> acp_schema.ToolCallProgress:
    return tool_call_update(tool_call_id, "failed" if result.is_error else "completed", result.text)


def settle(call_id: str, outcome: object) -> tuple[ToolResult, acp_schema.ToolCallProgress]:
    """The model's result and the editor's last update (`TypeError`/`ValueError` if unfit)."""
    if isinstance(outcome, str):
        outcome = ToolResult(text=outcome, is_error=False)
    if isinstance(outcome, ToolResult):
        return outcome, tool_call_finished(call_id, outcome)
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


def available_commands(skills: Iterable[SkillSummary]) -> list[acp_schema.AvailableCommand]:
    """A slash command for each of ``skills``, cleaned and cut but not XML-escaped."""
    commands = []
    for skill in skills:
        hint = getattr(skill, "argument_hint", None)  # a candidate's, when it is one
        hint = shorten_description(hint, 200) if isinstance(hint, str) else None
        given = acp_schema.UnstructuredCommandInput(hint=hint) if hint else None
        text = shorten_description(skill.description, 200)
        wants = acp_schema.AvailableCommandInput(root=given) if given else None
        commands.append(acp_schema.AvailableCommand(name=skill.name, description=text, input=wants))
    return commands


def find_invocations_with_arguments(text: str, names: Iterable[str]) -> list[tuple[str, str]]:
    """The skills of ``names`` invoked as ``/name`` in ``text``, each once, in order, with the
    text after its first ``/name`` up to the end of the line or the next invocation."""
    allowed = set(names)
    matches = [match for match in _INVOCATION.finditer(text) if match[1] in allowed]
    found: dict[str, str] = {}
    stops = [match.start() for match in matches[1:]] + [len(text)]
    for match, stop in zip(matches, stops, strict=False):
        end_of_line = text.find("\n", match.end(), stop)
        found.setdefault(match[1], text[match.end() : stop if end_of_line < 0 else end_of_line])
    return [(name, arguments.strip()) for name, arguments in found.items()]


def prompt_text(prompt: Sequence[object]) -> str:
    """The text of a prompt's text blocks, joined with newlines."""
    texts = [(field(block, "type"), field(block, "text")) for block in prompt]
    return "\n".join(text for kind, text in texts if kind == "text" and isinstance(text, str))


def prompt_context(prompt: Sequence[object]) -> list[str]:
    """A prompt's attachments: ``<context uri="...">TEXT</context>`` or ``(attached: URI)``."""
    parts = []
    for block in prompt:
        resource = field(block, "resource")
        if isinstance(text := field(resource, "text"), str):
            uri = field(resource, "uri")
            parts.append(
                f'<context uri="{uri if isinstance(uri, str) else ""}">\n{text}\n</context>'
            )
        if field(block, "type") == "resource_link" and isinstance(uri := field(block, "uri"), str):
            parts.append(f"(attached: {uri})")
    return parts


def field(value: object, name: str, key: str | None = None) -> object:
    """``value.name``, or ``value[key or name]`` when the SDK's lenient parsing left a dict."""
    return value.get(key or name) if isinstance(value, Mapping) else getattr(value, name, None)


def sequence(value: object) -> Sequence[Any]:
    """``value`` if it is a list or tuple, else ``()``."""
    return value if isinstance(value, list | tuple) else ()


def decode_tool_arguments(arguments: object) -> object:
    """A tool call's arguments decoded (text that does not decode kept), well-formed."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return well_formed(arguments)


def arguments_problem(arguments: object) -> str | None:
    """Why ``arguments`` (JSON text or decoded) may not be reported or recorded, or ``None``."""
    try:  # text that is not JSON is reported and recorded as it is; the record refuses the rest
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        if len(text) > MAX_ARGUMENTS_CHARS:
            return f"the arguments are over the {MAX_ARGUMENTS_CHARS}-character limit"
        deep = nests_deeper_than(json.loads(text), MAX_NESTING_DEPTH)
    except RecursionError:
        deep = True
    except (TypeError, ValueError):
        return None
    return f"the arguments are nested more than {MAX_NESTING_DEPTH} levels deep" if deep else None


def tool_calls(message: Mapping[str, Any]) -> dict[int, tuple[str, str, object]]:
    """The id, function name and arguments of each tool call of a message, by its index."""
    found = {}
    for index, call in enumerate(sequence(message.get("tool_calls"))):
        if isinstance(call, Mapping):
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            arguments = function.get("arguments", "")
            found[index] = (str(call.get("id", "")), str(function.get("name", "")), arguments)
    return found


def bound_tool_calls(message: Mapping[str, Any]) -> tuple[dict[str, Any], dict[int, str]]:
    """``message`` with each over-bound call's arguments replaced, and the problems by index."""
    problems = {
        index: problem
        for index, (_, _, arguments) in tool_calls(message).items()
        if (problem := arguments_problem(arguments)) is not None
    }
    bounded = list(sequence(message.get("tool_calls")))
    for index, problem in problems.items():
        omitted = json.dumps({"omitted": f"{problem}; the call was not run"})
        call = bounded[index]
        bounded[index] = {**call, "function": {**call["function"], "arguments": omitted}}
    return ({**message, "tool_calls": bounded} if problems else dict(message)), problems


def check_cwd(cwd: object, what: str = "cwd") -> str:
    """``cwd`` if absolute, without NUL and within the path limit, else -32602 naming ``what``."""
    # `surrogatepass`: a lone surrogate from JSON must be measured, not crash the check.
    length = len(cwd.encode("utf-8", "surrogatepass")) if isinstance(cwd, str) else 0
    if length >= _PATH_LIMIT:
        reason = f"{what} is longer than the platform's path limit"
        raise RequestError.invalid_params(
            {"reason": reason, "length": length, "limit": _PATH_LIMIT - 1}
        )
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\0" in cwd:
        raise RequestError.invalid_params({what: cwd, "reason": f"{what} must be an absolute path"})
    return cwd


def check_additional_directories(directories: Sequence[str] | None) -> tuple[str, ...]:
    """A request's ``additionalDirectories``, each checked, at most 64; else -32602."""
    directories = directories or ()
    if len(directories) > MAX_ADDITIONAL_DIRECTORIES:
        reason = f"at most {MAX_ADDITIONAL_DIRECTORIES} additional directories"
        raise RequestError.invalid_params({"reason": reason, "count": len(directories)})
    return tuple(check_cwd(directory, "additionalDirectories") for directory in directories)
