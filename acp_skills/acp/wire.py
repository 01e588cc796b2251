"""What skills put on the ACP wire: pure update builders, prompt text and ``cwd`` checks.

Only `ClientLink`, the one way updates and file reads reach the client, keeps state. Frames are
made well-formed where they leave (`acp_skills.acp.transport`): builders only render.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from acp import RequestError
from acp.helpers import start_tool_call, text_block, tool_content, update_tool_call
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    ToolCallProgress,
    ToolCallStart,
    UnstructuredCommandInput,
)

from ..model import SkillSummary, is_skill_name
from ..text import (
    cut,
    remove_unsafe_characters,
    replace_lone_surrogates_in_json,
    shorten_description,
)
from ..tool import ToolResult

# A description longer than this is cut for the editor's command menu.
COMMAND_DESCRIPTION_MAX = 200
# A search's words shown in a tool call's title are cut to this many characters.
_TITLE_QUERY_MAX = 80

# `/name` at the start or after whitespace, followed by whitespace or the end: so `/a/b`, `5/8`
# and `foo/bar` are not invocations. The name grammar is checked separately.
_INVOCATION = re.compile(r"(?<!\S)/([a-z0-9]+(?:-[a-z0-9]+)*)(?!\S)")


class AcpClient(Protocol):
    """The part of the SDK's client proxy (`acp.core.AgentSideConnection`) the glue uses."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any: ...


class ClientLink:
    """The client: where updates go (nowhere until `AcpSkills.attach`), and whether it reads
    files for us (`AcpSkills.initialize`)."""

    def __init__(self) -> None:
        self.client: AcpClient | None = None
        self.reads_files = False

    async def send(self, session_id: str, update: Any) -> None:
        """Send one ``session/update`` for ``session_id``."""
        if self.client is not None:
            await self.client.session_update(session_id=session_id, update=update)

    def reader(self, session_id: str) -> Callable[[str], Awaitable[str]] | None:
        """The ``read_text`` the skill tool uses for this session, or ``None`` (read the disk)."""
        client = self.client
        if client is None or not self.reads_files:
            return None

        async def read_text(path: str) -> str:
            response = await client.read_text_file(session_id=session_id, path=path)
            return str(response.content)

        return read_text


def skill_tool_call_start(tool_call_id: str, arguments: object) -> ToolCallStart:
    """The ``tool_call`` update announcing a ``skill`` call (kind ``read``, in progress)."""
    name = arguments.get("name") if isinstance(arguments, Mapping) else None
    query = arguments.get("query") if isinstance(arguments, Mapping) else None
    # The name is the model's; an editor shows the title: no control characters in it.
    name = remove_unsafe_characters(name) if isinstance(name, str) else None
    title = f"Load skill {name}" if name else "Load skill"
    if not name and isinstance(query, str) and query.strip():
        # A search (the session's catalog left skills out): the words, on one short line.
        words = " ".join(remove_unsafe_characters(query).split())
        title = f"Find skills: {cut(words, _TITLE_QUERY_MAX)}"
    return start_tool_call(
        tool_call_id, title, kind="read", status="in_progress", raw_input=_raw_input(arguments)
    )


def tool_call_started(tool_call_id: str, tool_name: str, arguments: object) -> ToolCallStart:
    """The ``tool_call`` update announcing a call of one of the agent's own tools."""
    return start_tool_call(
        tool_call_id,
        remove_unsafe_characters(tool_name) or "Tool",
        kind="other",
        status="in_progress",
        raw_input=_raw_input(arguments),
    )


def tool_call_finished(tool_call_id: str, result: ToolResult) -> ToolCallProgress:
    """The ``tool_call_update`` closing any tool call: completed, or failed with the error."""
    return update_tool_call(
        tool_call_id,
        status="failed" if result.is_error else "completed",
        content=[tool_content(text_block(result.text))],
    )


def _raw_input(arguments: object) -> dict[str, Any]:
    return dict(arguments) if isinstance(arguments, Mapping) else {"arguments": arguments}


def available_commands(skills: Iterable[SkillSummary]) -> list[AvailableCommand]:
    """Slash commands for the user-invocable skills, in the order given.

    Descriptions and ``argument-hint`` hints are cleaned of control characters, normalized and
    cut, not XML-escaped (an editor shows them literally). A summary whose name is not a skill
    name is left out: ``/name`` could never invoke it.
    """
    commands = []
    for skill in skills:
        if not skill.user_invocable or not is_skill_name(skill.name):
            continue
        hint = getattr(skill, "argument_hint", None)
        hint = shorten_description(hint, COMMAND_DESCRIPTION_MAX) if isinstance(hint, str) else None
        commands.append(
            AvailableCommand(
                name=skill.name,
                description=shorten_description(skill.description, COMMAND_DESCRIPTION_MAX),
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint))
                if hint
                else None,
            )
        )
    return commands


def find_invocations(text: str, names: Iterable[str]) -> list[str]:
    """The skills invoked as ``/name`` in ``text``, each once, in order of first appearance.

    Only names in ``names`` count (pass the user-invocable ones); anything else stays text.
    """
    return [name for name, _arguments in find_invocations_with_arguments(text, names)]


def find_invocations_with_arguments(text: str, names: Iterable[str]) -> list[tuple[str, str]]:
    """Like `find_invocations`, with each skill's arguments: the text after its ``/name`` up
    to the end of the line or the next invocation, stripped (the first, if invoked twice)."""
    allowed = set(names)
    # One pass, keeping only the invocation whose arguments are still open: a prompt full of
    # `/name`s costs no more memory than one without.
    found: dict[str, str] = {}
    open_since: tuple[str, int] | None = None
    for match in _INVOCATION.finditer(text):
        name = match.group(1)
        if name not in allowed:
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
    """The text of a prompt's text blocks, joined with newlines (other blocks are skipped)."""
    parts = []
    for block in prompt:
        text = field(block, "text")
        if field(block, "type") == "text" and isinstance(text, str):
            parts.append(text)
    return "\n".join(parts)


def prompt_context(prompt: Sequence[object]) -> list[str]:
    """What a prompt attaches: ``<context uri="...">TEXT</context>`` for an embedded text
    resource, ``(attached: URI)`` for a link (the agent only holds its address)."""
    parts = []
    for block in prompt:
        resource = field(block, "resource")
        text = field(resource, "text")
        if isinstance(text, str):
            uri = field(resource, "uri")
            parts.append(
                f'<context uri="{uri if isinstance(uri, str) else ""}">\n{text}\n</context>'
            )
        uri = field(block, "uri")
        if field(block, "type") == "resource_link" and isinstance(uri, str):
            parts.append(f"(attached: {uri})")
    return parts


def field(value: object, name: str, key: str | None = None) -> object:
    """``value.name``, or ``value[key or name]`` when the SDK's lenient parsing left a dict."""
    if isinstance(value, Mapping):
        return value.get(key or name)
    return getattr(value, name, None)


def sequence(value: object) -> Sequence[Any]:
    """``value`` if it is a list or tuple, else ``()`` (records are files people can edit)."""
    return value if isinstance(value, list | tuple) else ()


def decode_tool_arguments(arguments: object) -> object:
    """The decoded arguments of a model's tool call, well-formed.

    OpenAI-style APIs send arguments as JSON text; text that does not decode is passed on as it
    is, so the tool answers with a readable error instead of the turn failing. A ``\\udfff``
    escape only becomes a lone surrogate once decoded, so decoding is where the model's
    arguments are made well-formed (U+FFFD) before any tool sees them.
    """
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return replace_lone_surrogates_in_json(arguments)


def _path_limit() -> int:
    """The platform's longest path in bytes, its terminating NUL included (``PATH_MAX``)."""
    try:
        limit = os.pathconf("/", "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or no answer
        limit = -1
    return limit if limit > 0 else 4096


_PATH_LIMIT = _path_limit()


def _path_bytes(path: str) -> int:
    # `surrogatepass`: a lone surrogate from JSON must be measured, not crash the check.
    return len(path.encode("utf-8", "surrogatepass"))


def is_absolute_cwd(cwd: object) -> bool:
    """Whether ``cwd`` is absolute, without NUL, and shorter than the platform's path limit."""
    return (
        isinstance(cwd, str)
        and os.path.isabs(cwd)
        and "\0" not in cwd
        and _path_bytes(cwd) < _PATH_LIMIT
    )


def check_cwd(cwd: object) -> str:
    """Return ``cwd`` if it can be a session's working directory (`is_absolute_cwd`).

    Raises:
        acp.RequestError: invalid params (-32602) saying why not; an over-long ``cwd`` is not
            echoed back, only its length and the limit.
    """
    if isinstance(cwd, str) and _path_bytes(cwd) >= _PATH_LIMIT:
        raise RequestError.invalid_params(
            {
                "reason": "cwd is longer than the platform's path limit",
                "length": _path_bytes(cwd),
                "limit": _PATH_LIMIT - 1,
            }
        )
    if not isinstance(cwd, str) or not is_absolute_cwd(cwd):
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd must be an absolute path"})
    return cwd
