"""The ``skill`` tool (contract §7, §12): one argument table -> its schemas and checker, the
checks and loading order of a call, and the ``$ARGUMENTS`` of a ``/name``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

import anyio.to_thread

from .catalog import SKILL_TOOL_NAME as TOOL
from .catalog import listable
from .content import (
    DEFAULT_MAX_RESOURCE_BYTES,
    ReadText,
    check_resource_path,
    describe_error,
    read_resource,
    render_skill_content,
    render_skill_matches,
)
from .errors import Refusal
from .model import (
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    is_skill_name,
    is_skill_uri,
    kind_of_value,
    require_positive_int,
)
from .quiet_log import get_logger
from .registry import SkillRegistry
from .search import MAX_QUERY_LENGTH, SkillIndex
from .text import for_model, quote
from .trust import SessionView
from .trust_text import trust_error

# shlex is quadratic in the length of a word: this cut bounds it to a few milliseconds.
MAX_ARGUMENTS_CHARS: Final = 16_384
MAX_EXPANDED_CHARS: Final = 262_144

_log = get_logger(__name__)
_T = TypeVar("_T")
_Skill = TypeVar("_Skill", SkillCandidate, SkillDefinition)

_TOOL_DESCRIPTION = (
    "Load the full instructions of a skill from this session's skill catalog. Call it with the "
    "skill's exact name before acting on a task that names the skill or clearly matches its "
    "summary; the catalog only shows summaries. With the optional `path`, it returns the text of "
    "one file from the skill's bundle instead (a path relative to the skill's base directory, "
    "such as `references/guide.md`)."
)
_SEARCH_DESCRIPTION = (
    f"{_TOOL_DESCRIPTION} The catalog does not list every skill: when none of the listed ones "
    "fits the task, call this tool with `query` (a few words describing the task) instead of "
    "`name`; it answers with the best matching skills, and you then load one by its name."
)
_PATH = (
    "A file of the skill's bundle to read instead of its instructions, relative to the skill's "
    "base directory (for example `references/guide.md`)."
)
# Each argument's description without `query` and with it (None: not accepted there). With
# `query`, the checker requires one of name and query: several model APIs refuse a top-level oneOf.
_ARGUMENTS: dict[str, tuple[str | None, str]] = {
    "name": (
        "The exact name of the skill, as listed in the skill catalog.",
        "The exact name of the skill to load. Give either `name` or `query`.",
    ),
    "query": (
        None,
        "A few words describing the task, to search every skill available in this session, "
        "including those the catalog does not list. Give either `name` or `query`.",
    ),
    "path": (f"Optional. {_PATH}", f"Optional, only with `name`. {_PATH}"),
}
# `$ARGUMENTS`, `$ARGUMENTS[N]`, `$N` (N from 0); six digits at most: int() of a long run costs.
_PLACEHOLDER: Final = re.compile(r"\$ARGUMENTS(?:\[(\d{1,6})\])?|\$(\d{1,6})")


def _accepted(searchable: bool) -> dict[str, str]:
    return {key: text for key, texts in _ARGUMENTS.items() if (text := texts[searchable])}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call gives back to the model; with ``is_error``, ``text`` starts ``Error: ``."""

    text: str
    is_error: bool


def _parse_arguments(arguments: object, searchable: bool) -> tuple[str | None, str | None, str]:
    """``(name, path, query)`` of a call, checked against the argument table; else `Refusal`."""
    if not isinstance(arguments, Mapping):
        wanted = 'either a string "name" or a string "query"' if searchable else 'a string "name"'
        got = kind_of_value(arguments, words="json")
        raise Refusal(f"Error: the {TOOL} tool expects a JSON object with {wanted}, got {got}")
    accepted = sorted(_accepted(searchable))
    if unexpected := [key for key in arguments if key not in accepted]:
        shown = ", ".join(quote(str(key)) for key in unexpected[:5])
        shown += ", ..." if len(unexpected) > 5 else ""
        noun = "argument" if len(unexpected) == 1 else "arguments"
        only = " and ".join(", ".join(f'"{key}"' for key in accepted).rsplit(", ", 1))
        raise Refusal(f"Error: unexpected {noun} {shown}; the {TOOL} tool accepts only {only}")
    # An explicit null means "not given", as models send it for optional parameters.
    for key, value in arguments.items():
        if value is not None and not isinstance(value, str):
            got = kind_of_value(value, words="json")
            raise Refusal(f'Error: argument "{key}" of the {TOOL} tool must be a string, got {got}')
    name, path, query = (arguments.get(key) for key in ("name", "path", "query"))
    if searchable and (name is None) == (query is None):
        raise Refusal(
            f'Error: the {TOOL} tool needs either "name" (the exact name of a skill to load) or '
            '"query" (a few words describing the task, to search for skills), not both'
        )
    if query is not None:
        if path is not None:
            raise Refusal(f'Error: argument "path" of the {TOOL} tool goes with "name" only')
        if not query.strip() or len(query) > MAX_QUERY_LENGTH:
            raise Refusal(
                f'Error: argument "query" of the {TOOL} tool must describe the task in a few '
                f"words (at most {MAX_QUERY_LENGTH} characters)"
            )
        return None, None, query
    if name is None:
        raise Refusal(
            f'Error: the {TOOL} tool needs a "name" argument: the exact name of a skill from the '
            "catalog"
        )
    if not is_skill_name(name) and not is_skill_uri(name):
        raise Refusal(
            f"Error: skill name {quote(name)} is not valid: use the exact name from the skill "
            'catalog (lowercase letters and digits in hyphen-separated words, like "deploy-app")'
        )
    if path is not None:
        check_resource_path(name, path)
    return name, path, ""


class SkillTool:
    """The model-facing ``skill`` tool; a ``query`` never finds ``hidden_skills``."""

    def __init__(
        self,
        registry: SkillRegistry,
        *,
        max_resource_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
        hidden_skills: Iterable[str] = (),
    ) -> None:
        self._max_resource_bytes = require_positive_int("max_resource_bytes", max_resource_bytes)
        self._registry = registry
        self._hidden = frozenset(hidden_skills)
        self._index: tuple[SkillSnapshot, SkillIndex] | None = None  # the last one built
        self.name = TOOL
        self.description = _TOOL_DESCRIPTION
        self.parameters: dict[str, Any] = self.parameters_for(searchable=False)

    def description_for(self, *, searchable: bool) -> str:
        """The tool's description, with or without ``query``."""
        return _SEARCH_DESCRIPTION if searchable else self.description

    def parameters_for(self, *, searchable: bool) -> dict[str, Any]:
        """The tool's JSON Schema, with or without ``query`` (a fresh dict)."""
        accepted = _accepted(searchable).items()
        properties = {key: {"type": "string", "description": text} for key, text in accepted}
        required = {} if searchable else {"required": ["name"]}
        schema = {"type": "object", "properties": properties, **required}
        return schema | {"additionalProperties": False}

    async def call(
        self,
        arguments: object,
        *,
        cwd: str,
        servers: tuple[Hashable, ...] = (),
        read_text: ReadText | None = None,
        searchable: bool = False,
        additional_directories: tuple[str, ...] = (),
        view: SessionView | None = None,
    ) -> ToolResult:
        """Run the tool over what the session's ``view`` offers (without one, all there is)."""
        options = SkillLookupOptions(
            cwd=cwd, servers=servers, additional_directories=additional_directories
        )
        # One snapshot for the lookup and a read (a uri is looked up without one).
        snapshot = view.offered if view is not None else None
        try:
            name, path, query = _parse_arguments(arguments, searchable)
            if name is None:
                text = await self._search(query, snapshot or await self._lookup(None, options))
                return ToolResult(text=text, is_error=False)
            if snapshot is None and not is_skill_uri(name):
                snapshot = await self._lookup(name, options)
            candidate, definition = await self._load(name, options, snapshot, view=view)
            if path is None:
                return ToolResult(text=render_skill_content(definition), is_error=False)
            limit = self._max_resource_bytes
            reading = self._registry.read_path(candidate, path, limit=limit)
            if (found := await self._loading(name, reading)) is None:
                snapshot = snapshot or await self._lookup(name, options)
                found = await read_resource(definition, path, snapshot, limit, read_text)
            return ToolResult(text=found, is_error=False)
        except Refusal as refusal:
            return _refused(refusal)

    async def _search(self, query: str, snapshot: SkillSnapshot) -> str:
        # Built once per snapshot (the same object while the registry's catalog is cached).
        if self._index is None or self._index[0] is not snapshot:
            skills = listable(snapshot.skills, self._hidden)
            self._index = (snapshot, await anyio.to_thread.run_sync(SkillIndex, skills))
        return render_skill_matches(self._index[1].search(query))

    async def invoke_for_user(
        self,
        name: str,
        options: SkillLookupOptions,
        *,
        snapshot: SkillSnapshot | None = None,
        arguments: str | None = None,
    ) -> ToolResult:
        """Load and render a skill a person invoked as ``/name``, ``arguments`` filled in."""
        try:
            _, definition = await self._load(name, options, snapshot, by_model=False)
        except Refusal as refusal:
            return _refused(refusal)
        if arguments is not None:
            definition = replace(
                definition, content=expand_arguments(definition.content, arguments)
            )
        return ToolResult(text=render_skill_content(definition), is_error=False)

    async def _load(
        self,
        name: str,
        options: SkillLookupOptions,
        snapshot: SkillSnapshot | None,
        *,
        by_model: bool = True,
        view: SessionView | None = None,
    ) -> tuple[SkillCandidate, SkillDefinition]:
        gone = "is unknown or no longer available"
        if not is_skill_uri(name):
            snapshot = snapshot or await self._lookup(name, options)
            found = next((skill for skill in snapshot.skills if skill.name == name), None)
            # A skill the view withholds has its own error by exact name, never "unknown".
            if found is None and view is not None and (held := view.withheld.get(name)):
                raise Refusal(trust_error(name, held))
        else:
            # A uri names that skill even where another shadows its name; trust judges it as
            # it would judge it listed.
            found = await self._loading(name, self._registry.find_uri(name, options))
            if found is not None and view is not None and (held := view.judged(found)):
                raise Refusal(trust_error(name, held))
            gone = "is not served by any server of this session"
        # Checked before loading (no body it may not show is read), and after (it may have changed).
        found = _allowed(name, found, gone, by_model=by_model)
        # The snapshot's candidate, not `get`: no second discovery when a provider timed out.
        definition = await self._loading(name, self._registry.load(found, options))
        return found, _allowed(name, definition, gone, by_model=by_model)

    async def _loading(self, name: str | None, loading: Awaitable[_T]) -> _T:
        # A provider's own `Error: ` text passes (a skill changed on its MCP server).
        try:
            return await loading
        except Refusal:
            raise
        except Exception as error:
            why = describe_error(error)
            if name is None:
                _log.warning("skill_search_failed", error=repr(error))
                raise Refusal(f"Error: the skill search failed: {why}") from None
            _log.warning("skill_load_failed", skill=name, error=repr(error))
            raise Refusal(f"Error: skill {quote(name)} could not be loaded: {why}") from None

    async def _lookup(self, name: str | None, options: SkillLookupOptions) -> SkillSnapshot:
        return await self._loading(name, self._registry.snapshot(options))


def _refused(refusal: Refusal) -> ToolResult:
    # The model's sink: every error is cleaned here, whatever part of it a server wrote.
    return ToolResult(text=for_model(str(refusal), markup=False), is_error=True)


def _allowed(name: str, skill: _Skill | None, gone: str, *, by_model: bool) -> _Skill:
    if skill is None:
        raise Refusal(f"Error: skill {quote(name)} {gone}")
    if by_model and skill.disable_model_invocation:
        raise Refusal(f"Error: skill {quote(name)} is not available for model invocation")
    if not by_model and not skill.user_invocable:
        raise Refusal(f"Error: skill {quote(name)} cannot be invoked as a command")
    return skill


def expand_arguments(body: str, arguments: str) -> str:
    """``body``'s placeholders filled from ``arguments``; past a bound, a note says what was not."""
    if "$" not in body:
        return body
    total, arguments = len(arguments), arguments[:MAX_ARGUMENTS_CHARS]
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unclosed quote or a trailing backslash is a typo: keep the words
        words = arguments.split()
    room: int | None = MAX_EXPANDED_CHARS - len(body)
    filled_any = False

    def fill(match: re.Match[str]) -> str:
        nonlocal room, filled_any
        placeholder, index = match.group(0), match.group(1) or match.group(2)
        if index is None:
            value = arguments
        else:
            value = words[int(index)] if int(index) < len(words) else placeholder
        if room is None or len(value) - len(placeholder) > room:
            room = None  # once one stays as written, every later one does too
            return placeholder
        room -= len(value) - len(placeholder)
        filled_any = filled_any or value != placeholder
        return value

    filled = _PLACEHOLDER.sub(fill, body)
    notes = []
    if total > MAX_ARGUMENTS_CHARS and filled_any:
        notes.append(f"the arguments were cut to their first {MAX_ARGUMENTS_CHARS} of {total}")
    if room is None:
        notes.append(f"later placeholders were left unfilled past {MAX_EXPANDED_CHARS}")
    return filled + "".join(f"\n\nNote: {note} characters." for note in notes)
