"""The ``skill`` tool: how the model loads a skill's full instructions, and reads its files.

Two audiences for failures: everything the model can get wrong or that can go wrong with a
provider becomes a `ToolResult` marked ``is_error`` whose text starts ``Error: ``; the tool never
raises (only cancellation propagates). Checks run in this order, each stopping at the first
problem:

1. the shape of the arguments (a JSON object, ``name`` a string, no unknown keys, ``path`` a
   string) and the syntax of ``name`` and ``path``; where the session's catalog left skills
   out, exactly one of ``name`` and ``query`` (a ``query`` is answered from the search index
   and skips the rest);
2. the name among every resolved skill of the session's ``cwd`` (`SkillRegistry.snapshot`);
3. ``disable_model_invocation`` on the candidate, *before* any body is loaded;
4. loading the definition (`SkillRegistry.get`), then the same flag on what was loaded;
5. with ``path`` only: the resource base must be a directory and the skill a bundle (a flat
   ``<name>.md`` shares its directory with other skills, so it has no resources); the path must
   lead inside the directory (symbolic links included) to a regular UTF-8 text file within the
   size cap, and must not reach a file or directory of a skill the model may not load.

Reads are confined by `acp_skills.confined.read_confined`, which walks the path one component at a
time from the skill directory's descriptor, so swapping a directory for a symbolic link during
the read cannot yield an outside file.
"""

from __future__ import annotations

import json
import ntpath
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio.to_thread
import structlog

from .arguments import expand_arguments
from .confined import ConfinedReadError, ConfinedReadFailure
from .fs import LocalFileSystem
from .model import (
    DirectoryResource,
    OpaqueResource,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    SkillSummary,
    UrlResource,
    is_skill_name,
    kind_of_value,
    require_positive_int,
)
from .registry import SkillRegistry
from .render import (
    SKILL_TOOL_NAME,
    cut,
    is_flat_skill,
    render_skill_content,
    render_skill_matches,
)
from .safe_text import escape_unsafe_characters
from .search import MAX_QUERY_LENGTH, SkillIndex

__all__ = [
    "DEFAULT_MAX_RESOURCE_BYTES",
    "MAX_RESOURCE_PATH_LENGTH",
    "SKILL_TOOL_NAME",
    "SkillTool",
    "ToolResult",
    "render_skill_content",
]

DEFAULT_MAX_RESOURCE_BYTES = 1_048_576
MAX_RESOURCE_PATH_LENGTH = 4096

_log = structlog.get_logger(__name__)

# Values echoed back in error texts are cut to this many characters: a model that sends a
# megabyte-long name must not get a megabyte of error back.
_QUOTE_LIMIT = 100

# `C:`, `C:\x`, `C:/x`: a drive letter makes a path absolute (or drive-relative) on Windows.
_DRIVE = re.compile(r"[A-Za-z]:")

_ALLOWED_ARGUMENTS = ("name", "path")
_SEARCH_ARGUMENTS = ("name", "path", "query")

# Search indexes kept per tool, one per snapshot (a registry revision and cwd): enough for the
# working directories of the sessions that search at the same time.
_INDEXES_KEPT = 8

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call gives back to the model.

    ``is_error`` marks a failure the model can read and react to; ``text`` then starts with
    ``Error: ``.
    """

    text: str
    is_error: bool


# -- argument checking -----------------------------------------------------------------------


def _quote(value: str) -> str:
    """Quote ``value`` for an error text: JSON string syntax shows control characters, cut long.

    ``json.dumps`` escapes C0 controls; DEL, C1 controls, bidirectional overrides and lone
    surrogates are escaped too, so a model's odd argument is shown, never acted on.
    """
    return escape_unsafe_characters(json.dumps(cut(value, _QUOTE_LIMIT), ensure_ascii=False))


class _Refusal(Exception):
    """Internal: a check failed; ``text`` is the whole error text for the model."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass(frozen=True, slots=True)
class _Request:
    """Checked arguments: a ``name`` (with an optional ``path``) or a ``query``."""

    name: str | None
    path: str | None
    query: str | None


def _parse_arguments(arguments: object, *, searchable: bool) -> _Request:
    if not searchable:
        return _Request(*_parse_load_arguments(arguments), None)
    if not isinstance(arguments, Mapping):
        raise _Refusal(
            f"Error: the {SKILL_TOOL_NAME} tool expects a JSON object with either a string "
            f'"name" or a string "query", got {kind_of_value(arguments, words="json")}'
        )
    _refuse_unexpected(arguments, _SEARCH_ARGUMENTS, "a skill search")
    # An explicit null means "not given", as models send it for optional parameters.
    name, query = arguments.get("name"), arguments.get("query")
    if name is None and query is None:
        raise _Refusal(
            f'Error: the {SKILL_TOOL_NAME} tool needs either "name" (the exact name of a skill '
            'to load) or "query" (a few words describing the task, to search for skills)'
        )
    if name is not None and query is not None:
        raise _Refusal(
            f'Error: give the {SKILL_TOOL_NAME} tool either "name" or "query", not both: '
            'search with "query" first, then load one of the results by "name"'
        )
    if name is not None:
        return _Request(*_parse_load_arguments(arguments, _SEARCH_ARGUMENTS), None)
    if not isinstance(query, str):
        raise _Refusal(
            f'Error: argument "query" of the {SKILL_TOOL_NAME} tool must be a string, '
            f"got {kind_of_value(query, words='json')}"
        )
    if arguments.get("path") is not None:
        raise _Refusal(
            f'Error: argument "path" of the {SKILL_TOOL_NAME} tool goes with "name", not '
            'with "query": load the skill by name to read its files'
        )
    if not query.strip():
        raise _Refusal(
            f'Error: argument "query" of the {SKILL_TOOL_NAME} tool is empty: describe the '
            "task in a few words"
        )
    if len(query) > MAX_QUERY_LENGTH:
        raise _Refusal(
            f'Error: argument "query" of the {SKILL_TOOL_NAME} tool is longer than '
            f"{MAX_QUERY_LENGTH} characters: describe the task in a few words"
        )
    return _Request(None, None, query)


def _refuse_unexpected(arguments: Mapping[Any, Any], allowed: tuple[str, ...], what: str) -> None:
    unexpected = [key for key in arguments if key not in allowed]
    if not unexpected:
        return
    shown = ", ".join(_quote(str(key)) for key in unexpected[:5])
    if len(unexpected) > 5:
        shown += ", ..."
    noun = "argument" if len(unexpected) == 1 else "arguments"
    accepted = " and ".join(", ".join(f'"{key}"' for key in allowed).rsplit(", ", 1))
    raise _Refusal(
        f"Error: unexpected {noun} {shown} for {what}; the {SKILL_TOOL_NAME} tool accepts "
        f"only {accepted}"
    )


def _parse_load_arguments(
    arguments: object, allowed: tuple[str, ...] = _ALLOWED_ARGUMENTS
) -> tuple[str, str | None]:
    if not isinstance(arguments, Mapping):
        raise _Refusal(
            f"Error: the {SKILL_TOOL_NAME} tool expects a JSON object with a string "
            f'"name", got {kind_of_value(arguments, words="json")}'
        )
    if "name" not in arguments:
        raise _Refusal(
            f'Error: the {SKILL_TOOL_NAME} tool needs a "name" argument: the exact name of a '
            "skill from the catalog"
        )
    name = arguments["name"]
    if not isinstance(name, str):
        raise _Refusal(
            f'Error: argument "name" of the {SKILL_TOOL_NAME} tool must be a string, '
            f"got {kind_of_value(name, words='json')}"
        )
    _refuse_unexpected(arguments, allowed, f"skill {_quote(name)}")
    # Models often send an explicit null for an optional parameter; it means "not given".
    path = arguments.get("path")
    if path is not None and not isinstance(path, str):
        raise _Refusal(
            f'Error: argument "path" for skill {_quote(name)} must be a string, '
            f"got {kind_of_value(path, words='json')}"
        )
    if not is_skill_name(name):
        raise _Refusal(
            f"Error: skill name {_quote(name)} is not valid: use the exact name from the skill "
            'catalog (lowercase letters and digits in hyphen-separated words, like "deploy-app")'
        )
    if path is not None:
        _check_path_syntax(name, path)
    return name, path


def _cannot_read(name: str, path: str, reason: str) -> _Refusal:
    return _Refusal(f"Error: cannot read {_quote(path)} from skill {_quote(name)}: {reason}")


def _check_path_syntax(name: str, path: str) -> None:
    """Refuse paths that can never be a file inside the skill's directory, before any I/O."""
    if not path:
        raise _cannot_read(name, path, "the path is empty")
    if len(path) > MAX_RESOURCE_PATH_LENGTH:
        raise _cannot_read(
            name, path, f"the path is longer than {MAX_RESOURCE_PATH_LENGTH} characters"
        )
    if "\0" in path:
        raise _cannot_read(name, path, "the path contains a NUL character")
    # Windows forms are refused on every platform: a skill's relative paths must mean the same
    # thing wherever the agent runs, and `\\server\share` or `C:\x` never name a bundle file.
    if path.startswith(("/", "\\")) or _DRIVE.match(path) or ntpath.isabs(path):
        raise _cannot_read(
            name, path, "the path is absolute; give a path relative to the skill's directory"
        )
    # Both separators count, so `..\secret` is refused even where `\` is an ordinary character.
    if ".." in re.split(r"[/\\]", path):
        raise _cannot_read(
            name,
            path,
            'the path contains a ".." segment; it must stay inside the skill\'s directory',
        )


# -- confined reads ----------------------------------------------------------------------------


def _refuses(skill: SkillSummary, *, by_model: bool) -> bool:
    return skill.disable_model_invocation if by_model else not skill.user_invocable


def _hidden_from_model(snapshot: SkillSnapshot) -> tuple[str, ...]:
    """The files and directories of the skills the model may not load, for ``excluded``.

    A bundle's whole directory is its own; of a flat skill only its file is (its directory is
    a root shared with other skills).
    """
    paths: list[str] = []
    for skill in snapshot.skills:
        if not skill.disable_model_invocation:
            continue
        if skill.path is not None:
            paths.append(skill.path)
        base = skill.resource_base
        if isinstance(base, DirectoryResource) and not is_flat_skill(skill.path, base):
            paths.append(base.path)
    return tuple(paths)


def _read_refusal(name: str, path: str, problem: ConfinedReadError, limit: int) -> _Refusal:
    reasons: dict[ConfinedReadFailure, str] = {
        "outside": "the path resolves outside the skill's directory",
        "excluded": "it belongs to a skill that is not available for model invocation",
        "not_found": "no such file in the skill's directory",
        "directory": "it is a directory, not a file",
        "not_regular": "it is not a regular file",
        "too_large": f"the file is {problem.size} bytes, over the {limit}-byte limit",
        "grew": f"the file is over the {limit}-byte limit",
        "changed": "it changed while being read",
        "unreadable": f"it could not be read ({problem.detail})",
    }
    return _cannot_read(name, path, reasons[problem.failure])


def _decode_text(name: str, path: str, data: bytes) -> str:
    if b"\0" in data:
        raise _cannot_read(name, path, "it is a binary file (it contains NUL bytes), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _cannot_read(name, path, "it is not a UTF-8 text file") from None


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return cut(text, 300)


# -- the tool ----------------------------------------------------------------------------------


def _parameters_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "The exact name of the skill, as listed in the skill catalog.",
            },
            "path": {
                "type": "string",
                "description": (
                    "Optional. A file of the skill's bundle to read instead of its instructions, "
                    "relative to the skill's base directory (for example `references/guide.md`)."
                ),
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def _search_parameters_schema() -> dict[str, Any]:
    # No "required": exactly one of name and query is, which the tool checks itself. Schema
    # combinators (oneOf) would say it, but several model APIs refuse them at the top level.
    return {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": (
                    "The exact name of the skill to load. Give either `name` or `query`."
                ),
            },
            "query": {
                "type": "string",
                "description": (
                    "A few words describing the task, to search every skill available in this "
                    "session, including those the catalog does not list. Give either `name` "
                    "or `query`."
                ),
            },
            "path": {
                "type": "string",
                "description": (
                    "Optional, only with `name`. A file of the skill's bundle to read instead "
                    "of its instructions, relative to the skill's base directory (for example "
                    "`references/guide.md`)."
                ),
            },
        },
        "additionalProperties": False,
    }


ReadText = Callable[[str], Awaitable[str]]
"""Reads a file's text by absolute path, typically the ACP client's ``fs/read_text_file``."""


class SkillTool:
    """The model-facing ``skill`` tool.

    ``name``, ``description`` and ``parameters`` (a JSON Schema object) are what an agent
    advertises to its model; `call` runs one invocation.

    A session whose catalog left skills out for lack of room calls the tool with
    ``searchable=True``: it then also answers a ``query`` (`description_for` and
    `parameters_for` give that session's schema). The search covers every skill the model may
    load, except those a person hid.

    Args:
        registry: where skills are looked up and loaded.
        max_resource_bytes: the largest file a ``path`` read returns, in bytes; a positive integer.
        hidden_skills: names a ``query`` never returns (the catalog's hidden skills); they
            still load by exact name.

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
        require_positive_int("max_resource_bytes", max_resource_bytes)
        self._registry = registry
        self._max_resource_bytes = max_resource_bytes
        self._hidden = frozenset(hidden_skills)
        self._fs = LocalFileSystem()
        self._indexes: OrderedDict[int, tuple[SkillSnapshot, SkillIndex]] = OrderedDict()
        self.name = SKILL_TOOL_NAME
        self.description = _TOOL_DESCRIPTION
        # A fresh dict per tool, so an agent that adjusts its copy cannot affect another tool.
        self.parameters: dict[str, Any] = _parameters_schema()

    def description_for(self, *, searchable: bool) -> str:
        """The tool's description for a session, with or without ``query``."""
        return _SEARCH_DESCRIPTION if searchable else self.description

    def parameters_for(self, *, searchable: bool) -> dict[str, Any]:
        """The tool's JSON Schema for a session, with or without ``query`` (a fresh dict)."""
        return _search_parameters_schema() if searchable else _parameters_schema()

    async def call(
        self,
        arguments: object,
        *,
        cwd: str,
        read_text: ReadText | None = None,
        searchable: bool = False,
    ) -> ToolResult:
        """Run the tool once.

        Args:
            arguments: the decoded JSON arguments the model sent.
            cwd: the calling session's working directory (selects project skills).
            read_text: reads a resource file's text by absolute path through the ACP client
                (``fs/read_text_file``); when ``None``, files are read from the local disk.
            searchable: whether the calling session's schema has ``query`` (its catalog left
                skills out); then exactly one of ``name`` and ``query`` must be given.

        Returns:
            The rendered skill (or, with ``path``, the file's text exactly as stored), the
            matches of a ``query``, or an error result. Never raises, except for cancellation.
        """
        try:
            text = await self._call(arguments, cwd, read_text, searchable)
            return ToolResult(text=text, is_error=False)
        except _Refusal as refusal:
            return ToolResult(text=refusal.text, is_error=True)
        except Exception as error:
            # A bug of ours must not take the agent down either: the model gets an error result
            # and the traceback goes to the log. Cancellation is a BaseException and passes.
            _log.error("skill_tool_failed", error=repr(error), exc_info=error)
            subject = "the skill tool"
            if isinstance(arguments, Mapping) and isinstance(arguments.get("name"), str):
                subject = f"skill {_quote(arguments['name'])}"
            return ToolResult(
                text=f"Error: {subject} failed unexpectedly: {_describe(error)}", is_error=True
            )

    async def _call(
        self, arguments: object, cwd: str, read_text: ReadText | None, searchable: bool
    ) -> str:
        request = _parse_arguments(arguments, searchable=searchable)
        options = SkillLookupOptions(cwd=cwd)
        if request.query is not None:
            return await self._search(request.query, options)
        name, path = request.name, request.path
        assert name is not None
        snapshot = await self._snapshot(name, options)
        definition = await self._load(name, options, snapshot=snapshot)
        if path is None:
            return render_skill_content(definition)
        return await self._read_resource(definition, path, read_text, snapshot)

    async def _search(self, query: str, options: SkillLookupOptions) -> str:
        try:
            snapshot = await self._registry.snapshot(options)
        except Exception as error:
            _log.warning("skill_search_failed", error=repr(error))
            raise _Refusal(f"Error: the skill search failed: {_describe(error)}") from None
        index = await self._index(snapshot)
        return render_skill_matches(index.search(query), tool_name=self.name)

    async def _index(self, snapshot: SkillSnapshot) -> SkillIndex:
        """The search index of ``snapshot``, built once per snapshot.

        The registry hands out the same snapshot object for as long as its catalog for a
        ``cwd`` is cached (until the next revision), so the index lives as long as that
        catalog. Building it for thousands of skills takes a while: it runs in a worker thread.
        """
        kept = self._indexes.get(id(snapshot))
        if kept is not None and kept[0] is snapshot:
            self._indexes.move_to_end(id(snapshot))
            return kept[1]
        searchable = [skill for skill in snapshot.skills if skill.name not in self._hidden]
        index = await anyio.to_thread.run_sync(SkillIndex, searchable)
        # Holding the snapshot keeps its id from being reused by another object.
        self._indexes[id(snapshot)] = (snapshot, index)
        while len(self._indexes) > _INDEXES_KEPT:
            self._indexes.popitem(last=False)
        return index

    async def invoke_for_user(
        self,
        name: str,
        *,
        cwd: str,
        snapshot: SkillSnapshot | None = None,
        arguments: str | None = None,
    ) -> ToolResult:
        """Load a skill a person invoked (``/name``) and render it like a tool result.

        Unlike the model's calls, a person may invoke a skill marked
        ``disable_model_invocation`` (that is what such skills are for); ``user_invocable=False``
        skills are refused. Pass the turn's ``snapshot`` to avoid discovering again.

        With ``arguments`` (what the person typed after ``/name``), the placeholders
        ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` in the body are filled first, as Claude
        Code does (`acp_skills.arguments`); with ``None`` the body is rendered verbatim.
        """
        try:
            definition = await self._load(
                name, SkillLookupOptions(cwd=cwd), by_model=False, snapshot=snapshot
            )
        except _Refusal as refusal:
            return ToolResult(text=refusal.text, is_error=True)
        if arguments is not None:
            definition = replace(
                definition, content=expand_arguments(definition.content, arguments)
            )
        return ToolResult(text=render_skill_content(definition), is_error=False)

    async def _load(
        self,
        name: str,
        options: SkillLookupOptions,
        *,
        by_model: bool = True,
        snapshot: SkillSnapshot | None = None,
    ) -> SkillDefinition:
        unavailable = _Refusal(f"Error: skill {_quote(name)} is unknown or no longer available")
        if by_model:
            refused = _Refusal(f"Error: skill {_quote(name)} is not available for model invocation")
        else:
            refused = _Refusal(f"Error: skill {_quote(name)} cannot be invoked as a command")
        if snapshot is None:
            snapshot = await self._snapshot(name, options)
        found = next((skill for skill in snapshot.skills if skill.name == name), None)
        if found is None:
            raise unavailable
        if _refuses(found, by_model=by_model):
            # Refused before loading, so a provider never even reads a body it may not show.
            raise refused
        try:
            # `load` takes the snapshot's candidate: no second discovery, which matters when a
            # provider timed out and nothing was cached.
            definition = await self._registry.load(found, options)
        except Exception as error:
            raise self._load_failed(name, error) from None
        if definition is None:
            raise unavailable
        # The file may have changed since discovery: trust what was loaded, not the catalog.
        if _refuses(definition, by_model=by_model):
            raise refused
        return definition

    async def _snapshot(self, name: str, options: SkillLookupOptions) -> SkillSnapshot:
        # `except Exception` lets cancellation (a BaseException) through untouched.
        try:
            return await self._registry.snapshot(options)
        except Exception as error:
            raise self._load_failed(name, error) from None

    def _load_failed(self, name: str, error: Exception) -> _Refusal:
        _log.warning("skill_load_failed", skill=name, error=repr(error))
        return _Refusal(f"Error: skill {_quote(name)} could not be loaded: {_describe(error)}")

    async def _read_resource(
        self,
        definition: SkillDefinition,
        path: str,
        read_text: ReadText | None,
        snapshot: SkillSnapshot,
    ) -> str:
        name = definition.name
        base = definition.resource_base
        if isinstance(base, UrlResource):
            raise _cannot_read(
                name, path, "its resources live under a URL, not in a local directory"
            )
        if isinstance(base, OpaqueResource):
            raise _cannot_read(
                name,
                path,
                "its resources are managed by its provider; follow the resource hints in the "
                "skill's instructions",
            )
        if base is None:
            raise _cannot_read(name, path, "it has no resource directory")
        if is_flat_skill(definition.path, base):
            raise _cannot_read(
                name,
                path,
                "it is a single-file skill, so it has no resource files of its own; its "
                "directory holds other skills",
            )
        limit = self._max_resource_bytes
        excluded = _hidden_from_model(snapshot)
        found = await self._fs.read_confined(base.path, path, limit, excluded=excluded)
        if isinstance(found, ConfinedReadError):
            raise _read_refusal(name, path, found, limit)
        text = _decode_text(name, path, found.data)
        if read_text is None:
            return text
        # The local checks above decided *whether* the file may be read; the client supplies
        # the text, so an unsaved editor buffer and the client's own permissions apply.
        try:
            text = await read_text(found.path)
        except Exception as error:
            _log.warning(
                "skill_resource_read_failed", skill=name, path=found.path, error=repr(error)
            )
            raise _cannot_read(
                name, path, f"the client could not read it ({_describe(error)})"
            ) from None
        if not isinstance(text, str):
            raise _cannot_read(name, path, "the client did not return text")
        if len(text.encode("utf-8", "surrogatepass")) > limit:
            raise _cannot_read(name, path, f"the file is over the {limit}-byte limit")
        if "\0" in text:
            raise _cannot_read(name, path, "it is a binary file (it contains NUL bytes), not text")
        # The client read the file by its path, out of our hands: make sure the path still
        # names the file that was checked, so a directory swapped for a symbolic link while
        # the client read cannot pass an outside file off as this one.
        again = await self._fs.read_confined(base.path, path, limit, excluded=excluded)
        if isinstance(again, ConfinedReadError) or again.identity != found.identity:
            raise _cannot_read(name, path, "it changed while being read")
        return text
