"""The ``skill`` tool (contract §7, §8, §12): every mistake and provider failure is a `ToolResult`
marked ``is_error`` whose text starts ``Error: ``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio.to_thread

from .arguments import expand_arguments
from .catalog import SKILL_TOOL_NAME as TOOL
from .catalog import listable
from .content import (
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

DEFAULT_MAX_RESOURCE_BYTES = 1_048_576

_log = get_logger(__name__)
_INDEXES_KEPT = 8
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
# Each argument's description without `query` and with it (None: not accepted there), for both
# schemas and the checker. With `query`, the checker itself requires one of name and query:
# several model APIs refuse a top-level oneOf.
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


def _accepted(searchable: bool) -> dict[str, str]:
    # The arguments accepted with or without `query`, with their descriptions.
    return {key: text for key, texts in _ARGUMENTS.items() if (text := texts[searchable])}


def _parameters_schema(searchable: bool) -> dict[str, Any]:
    properties = {
        key: {"type": "string", "description": text} for key, text in _accepted(searchable).items()
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if not searchable:
        schema["required"] = ["name"]
    schema["additionalProperties"] = False
    return schema


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
    name, path, query = (_string(arguments, key) for key in ("name", "path", "query"))
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


def _string(arguments: Mapping[Any, Any], key: str) -> Any:
    if (value := arguments.get(key)) is not None and not isinstance(value, str):
        got = kind_of_value(value, words="json")
        raise Refusal(f'Error: argument "{key}" of the {TOOL} tool must be a string, got {got}')
    return value


class SkillTool:
    """The model-facing ``skill`` tool: ``name``, ``description``, ``parameters`` (JSON Schema).

    With ``searchable=True`` (a session whose catalog left skills out) it also answers a
    ``query``, never with ``hidden_skills``; ``max_resource_bytes`` bounds a ``path`` read.

    Raises:
        ValueError: if ``max_resource_bytes`` is not a positive integer.
    """

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
        self._indexes: OrderedDict[int, tuple[SkillSnapshot, SkillIndex]] = OrderedDict()
        self.name = TOOL
        self.description = _TOOL_DESCRIPTION
        self.parameters: dict[str, Any] = _parameters_schema(False)

    def description_for(self, *, searchable: bool) -> str:
        """The tool's description, with or without ``query``."""
        return _SEARCH_DESCRIPTION if searchable else self.description

    def parameters_for(self, *, searchable: bool) -> dict[str, Any]:
        """The tool's JSON Schema, with or without ``query`` (a fresh dict)."""
        return _parameters_schema(searchable)

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
        """Run the tool once on the model's decoded ``arguments``: the rendered skill, a file's
        text (through ``read_text`` if given, else from disk), a query's matches, or an error.
        The lookup is the session's; ``view`` is what the session offers and withholds
        (`acp_skills.trust.view`; without it, every skill the registry finds)."""
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
            found = await self._loading(
                name, self._registry.read_path(candidate, path, limit=limit)
            )
            if found is None:
                snapshot = snapshot or await self._lookup(name, options)
                found = await read_resource(
                    definition, path, snapshot=snapshot, limit=limit, read_text=read_text
                )
            return ToolResult(text=found, is_error=False)
        except Refusal as refusal:
            return _refused(refusal)

    async def _search(self, query: str, snapshot: SkillSnapshot) -> str:
        # One index per snapshot (the same object while cached); holding it keeps its id unique.
        if (kept := self._indexes.get(id(snapshot))) is not None and kept[0] is snapshot:
            self._indexes.move_to_end(id(snapshot))
            index = kept[1]
        else:
            searchable = listable(snapshot.skills, self._hidden)
            index = await anyio.to_thread.run_sync(SkillIndex, searchable)
            self._indexes[id(snapshot)] = (snapshot, index)
            while len(self._indexes) > _INDEXES_KEPT:
                self._indexes.popitem(last=False)
        return render_skill_matches(index.search(query), tool_name=self.name)

    async def invoke_for_user(
        self,
        name: str,
        *,
        cwd: str,
        servers: tuple[Hashable, ...] = (),
        snapshot: SkillSnapshot | None = None,
        arguments: str | None = None,
        additional_directories: tuple[str, ...] = (),
    ) -> ToolResult:
        """Load and render a skill a person invoked (``/name``; not a ``user_invocable=False``
        one), its placeholders filled from ``arguments`` if given."""
        options = SkillLookupOptions(
            cwd=cwd, servers=servers, additional_directories=additional_directories
        )
        try:
            _, definition = await self._load(name, options, snapshot, by_model=False)
        except Refusal as refusal:
            return _refused(refusal)
        if arguments is not None:
            content = expand_arguments(definition.content, arguments)
            definition = replace(definition, content=content)
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
            # The providers that find skills by uri decide; naming a uri names that skill, even
            # one a skill of the same name shadows. The session's trust judges it as it would
            # judge it listed: one no question named waits.
            found = await self._loading(name, self._registry.find_uri(name, options))
            if found is not None and view is not None and (held := view.judged(found)):
                raise Refusal(trust_error(name, held))
            gone = "is not served by any server of this session"
        # Refused before loading (a provider never reads a body it may not show), and after
        # (the file may have changed since).
        found = _allowed(name, found, gone, by_model=by_model)
        # The snapshot's candidate: no second discovery when a provider timed out.
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
    # The model's sink (the editor shows the same text): every error is cleaned here, whatever
    # part of it a server wrote. Plain text, not markup: nothing to escape.
    return ToolResult(text=for_model(refusal.text, markup=False), is_error=True)


def _allowed(name: str, skill: _Skill | None, gone: str, *, by_model: bool) -> _Skill:
    if skill is None:
        raise Refusal(f"Error: skill {quote(name)} {gone}")
    if skill.disable_model_invocation if by_model else not skill.user_invocable:
        why = (
            "is not available for model invocation"
            if by_model
            else "cannot be invoked as a command"
        )
        raise Refusal(f"Error: skill {quote(name)} {why}")
    return skill
