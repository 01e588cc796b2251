"""What goes on the ACP wire: update builders (discriminators explicit, so the same JSON on SDK
0.12.x and 1.x), prompt text, ``cwd`` checks, `ClientLink`, and the tool-call argument bounds."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from acp import RequestError
from acp import schema as acp_schema
from acp.connection import StreamDirection, StreamEvent

from ..json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from ..model import SkillSummary
from ..text import cut, one_line, shorten_description, well_formed
from ..tool import ToolResult

COMMAND_DESCRIPTION_MAX = 200  # in the editor's command menu
_TITLE_QUERY_MAX = 80  # a search's words in a tool call's title
# Far above any real call (a skill name, a path, a query), far below a frame's 8 MiB.
MAX_ARGUMENTS_CHARS: Final = 1024 * 1024

_INVOCATION = re.compile(r"(?<!\S)/([a-z0-9]+(?:-[a-z0-9]+)*)(?!\S)")
_SESSION_OPENERS: Final = ("session/new", "session/load", "session/resume")


# The SDK's `AgentSideConnection`, or a client of the same shape.
AcpClient = Any


class ClientLink:
    """The agent's side of the connection; as the SDK's stream observer it notes the sessions
    whose opening response has gone out (``answered``), then calls ``wake``."""

    def __init__(self) -> None:
        self.client: AcpClient = None  # until `AcpSkills.attach`
        self.reads_files = False
        self.answered: list[str] = []
        self.wake: Callable[[], None] | None = None
        self._openers: dict[str | int, str | None] = {}  # request id -> the session it names

    async def send(self, session_id: str, update: Any) -> None:
        if self.client is not None:
            await self.client.session_update(session_id=session_id, update=update)

    def require_client(self) -> None:
        """`RuntimeError` when no connection is attached (a turn's replies would be lost)."""
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
            response = await client.read_text_file(session_id=session_id, path=path)
            return str(response.content)

        return read_text

    def observe(self, event: StreamEvent) -> None:
        # The SDK calls this for every frame, an outgoing one once it is written: an opening's
        # response seen here has gone out, so commands sent after it follow it.
        message = event.message
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") in _SESSION_OPENERS:
                named = field(message.get("params"), "sessionId")
                self._openers[request_id] = named if isinstance(named, str) else None
            return
        if "method" in message or request_id not in self._openers:
            return
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


def tool_call_start(
    tool_call_id: str,
    title: str,
    *,
    kind: acp_schema.ToolKind,
    status: acp_schema.ToolCallStatus,
    content: list[Any] | None = None,
    raw_input: object = None,
) -> acp_schema.ToolCallStart:
    return acp_schema.ToolCallStart(
        session_update="tool_call",
        tool_call_id=tool_call_id,
        title=title,
        kind=kind,
        status=status,
        content=content,
        raw_input=raw_input,
    )


def tool_call_update(
    tool_call_id: str, status: acp_schema.ToolCallStatus, text: str | None = None
) -> acp_schema.ToolCallProgress:
    """A ``tool_call_update`` changing a call's status (and its content to ``text``, if any)."""
    content = None if text is None else text_tool_content(text)
    return acp_schema.ToolCallProgress(
        session_update="tool_call_update", tool_call_id=tool_call_id, status=status, content=content
    )


def tool_call_started(
    tool_call_id: str, tool_name: str, arguments: object, skill_tool_name: str | None = None
) -> acp_schema.ToolCallStart:
    """The ``tool_call`` update of a call; for the skill tool a ``read`` titled with its skill."""
    raw = dict(arguments) if isinstance(arguments, Mapping) else {"arguments": arguments}
    if tool_name != skill_tool_name:
        title = one_line(tool_name) or "Tool"
        return tool_call_start(
            tool_call_id, title, kind="other", status="in_progress", raw_input=raw
        )
    name, query = field(arguments, "name"), field(arguments, "query")
    # The editor shows the model's name in the title: on one line, no control characters.
    name = one_line(name) if isinstance(name, str) else None
    title = f"Load skill {name}" if name else "Load skill"
    if not name and isinstance(query, str) and query.strip():
        words = one_line(query)
        title = f"Find skills: {cut(words, _TITLE_QUERY_MAX)}"
    return tool_call_start(tool_call_id, title, kind="read", status="in_progress", raw_input=raw)


def tool_call_finished(tool_call_id: str, result: ToolResult) -> acp_schema.ToolCallProgress:
    return tool_call_update(tool_call_id, "failed" if result.is_error else "completed", result.text)


def available_commands(skills: Iterable[SkillSummary]) -> list[acp_schema.AvailableCommand]:
    """A slash command for each of ``skills``, cleaned and cut but not XML-escaped."""
    commands = []
    for skill in skills:
        hint = getattr(skill, "argument_hint", None)  # a candidate's, when it is one
        hint = shorten_description(hint, COMMAND_DESCRIPTION_MAX) if isinstance(hint, str) else None
        shown = shorten_description(skill.description, COMMAND_DESCRIPTION_MAX)
        given = None
        if hint:
            hinted = acp_schema.UnstructuredCommandInput(hint=hint)
            given = acp_schema.AvailableCommandInput(root=hinted)
        commands.append(
            acp_schema.AvailableCommand(name=skill.name, description=shown, input=given)
        )
    return commands


def find_invocations(text: str, names: Iterable[str]) -> list[str]:
    """The skills of ``names`` invoked as ``/name`` in ``text``, each once, in order."""
    return [name for name, _arguments in find_invocations_with_arguments(text, names)]


def find_invocations_with_arguments(text: str, names: Iterable[str]) -> list[tuple[str, str]]:
    """Like `find_invocations`, with what follows each first ``/name`` on its line, stripped."""
    allowed = set(names)
    # One pass, holding only the invocation whose arguments are still open.
    found: dict[str, str] = {}
    open_since: tuple[str, int] | None = None
    for match in _INVOCATION.finditer(text):
        if (name := match.group(1)) not in allowed:
            continue
        if open_since is not None:
            found[open_since[0]] = _arguments(text, open_since[1], match.start())
            open_since = None
        if name not in found:
            found[name] = ""  # its place in the order of first appearance
            open_since = (name, match.end())
    if open_since is not None:
        found[open_since[0]] = _arguments(text, open_since[1], len(text))
    return list(found.items())


def _arguments(text: str, start: int, stop: int) -> str:
    end_of_line = text.find("\n", start, stop)
    return text[start : stop if end_of_line < 0 else end_of_line].strip()


def prompt_text(prompt: Sequence[object]) -> str:
    """The text of a prompt's text blocks, joined with newlines."""
    texts = [(field(block, "type"), field(block, "text")) for block in prompt]
    return "\n".join(text for kind, text in texts if kind == "text" and isinstance(text, str))


def prompt_context(prompt: Sequence[object]) -> list[str]:
    """A prompt's attachments: ``<context uri="...">TEXT</context>``, or ``(attached: URI)``."""
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
    """``value`` if it is a list or tuple, else ``()`` (people can edit records)."""
    return value if isinstance(value, list | tuple) else ()


def decode_tool_arguments(arguments: object) -> object:
    """A tool call's decoded arguments, well-formed; text that does not decode is kept as is."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return well_formed(arguments)


def arguments_problem(arguments: object) -> str | None:
    """Why ``arguments`` (JSON text or decoded) may not be reported or recorded, or ``None``."""
    over = f"the arguments are over the {MAX_ARGUMENTS_CHARS}-character limit"
    deep = f"the arguments are nested more than {MAX_NESTING_DEPTH} levels deep"
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            return over
        try:
            decoded = json.loads(arguments)
        except RecursionError:
            return deep
        except ValueError:
            return None  # not JSON: reported and recorded as the text it is
        return deep if nests_deeper_than(decoded, MAX_NESTING_DEPTH) else None
    if nests_deeper_than(arguments, MAX_NESTING_DEPTH):
        return deep
    try:
        return over if len(json.dumps(arguments)) > MAX_ARGUMENTS_CHARS else None
    except (TypeError, ValueError):
        return None  # not JSON at all: the record refuses it with its own message


def bound_tool_calls(message: Mapping[str, Any]) -> tuple[dict[str, Any], dict[int, str]]:
    """``message`` with each over-bound call's arguments replaced, and the problems by index."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list | tuple):
        return dict(message), {}
    problems: dict[int, str] = {}
    bounded: list[object] = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(call, Mapping) and isinstance(function, Mapping):
            if (problem := arguments_problem(function.get("arguments", ""))) is not None:
                problems[index] = problem
                omitted = json.dumps({"omitted": f"{problem}; the call was not run"})
                call = {**call, "function": {**function, "arguments": omitted}}
        elif nests_deeper_than(call, MAX_NESTING_DEPTH):
            problems[index] = f"the call is nested more than {MAX_NESTING_DEPTH} levels deep"
            call = {"id": str(call.get("id", "")) if isinstance(call, Mapping) else ""}
        bounded.append(call)
    return {**message, "tool_calls": bounded}, problems


def _path_limit() -> int:
    try:
        limit = os.pathconf("/", "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or no answer
        limit = -1
    return limit if limit > 0 else 4096


_PATH_LIMIT = _path_limit()


def check_cwd(cwd: object, what: str = "cwd") -> str:
    """``cwd`` if absolute, without NUL and within the platform's path limit, else invalid
    params (-32602) saying why; ``what`` names the parameter."""
    # `surrogatepass`: a lone surrogate from JSON must be measured, not crash the check.
    if (
        isinstance(cwd, str)
        and (length := len(cwd.encode("utf-8", "surrogatepass"))) >= _PATH_LIMIT
    ):
        reason = f"{what} is longer than the platform's path limit"
        raise RequestError.invalid_params(
            {"reason": reason, "length": length, "limit": _PATH_LIMIT - 1}
        )
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\0" in cwd:
        raise RequestError.invalid_params({what: cwd, "reason": f"{what} must be an absolute path"})
    return cwd


# Far above any editor's workspace (each directory costs a project lookup, its roots' scans
# and a watch), far below what would make one session's discovery slow for everyone.
MAX_ADDITIONAL_DIRECTORIES = 64


def check_additional_directories(directories: Sequence[str] | None) -> tuple[str, ...]:
    """A request's ``additionalDirectories`` (a list: the SDK's model), each as `check_cwd`
    wants it, at most `MAX_ADDITIONAL_DIRECTORIES`; else invalid params."""
    directories = directories or ()
    if len(directories) > MAX_ADDITIONAL_DIRECTORIES:
        reason = f"at most {MAX_ADDITIONAL_DIRECTORIES} additional directories"
        raise RequestError.invalid_params({"reason": reason, "count": len(directories)})
    return tuple(check_cwd(directory, "additionalDirectories") for directory in directories)
