"""The ``skill`` tool (contract §7, §12): one argument table -> its schemas and checker; what it
gives back (a skill, a query's matches, a bundle's file read confined to its directory); and the
``$ARGUMENTS`` of a ``/name``. Every mistake is a `ToolResult` whose text starts ``Error: ``."""

from __future__ import annotations

import functools
import ntpath
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

import anyio.to_thread

from .catalog import SKILL_TOOL_NAME as TOOL
from .catalog import listable
from .errors import ReadError, ReadFailure, Refusal
from .fs import MAX_LISTED_ENTRIES, read_confined
from .model import (
    SKILL_FILE_NAME,
    DirectoryResource,
    OpaqueResource,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillSnapshot,
    UrlResource,
    is_skill_name,
    is_skill_uri,
    kind_of_value,
    require_positive_int,
)
from .quiet_log import get_logger
from .registry import SkillRegistry
from .search import MAX_QUERY_LENGTH, SkillIndex, SkillMatch
from .text import cut, escape_attribute, for_model, normalize_description, quote
from .trust import SessionView
from .trust_text import trust_error

DEFAULT_MAX_RESOURCE_BYTES = 1_048_576
MAX_RESOURCE_PATH_LENGTH = 4096
# shlex is quadratic in the length of a word: this cut bounds it to a few milliseconds.
MAX_ARGUMENTS_CHARS: Final = 16_384
MAX_EXPANDED_CHARS: Final = 262_144

_log = get_logger(__name__)
_T = TypeVar("_T")
_Skill = TypeVar("_Skill", SkillCandidate, SkillDefinition)
# Reads a file's text by absolute path, typically the ACP client's `fs/read_text_file`.
ReadText = Callable[[str], Awaitable[str]]

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
# `C:`, `C:\x`, `C:/x`: a drive letter makes a path absolute (or drive-relative) on Windows.
_DRIVE = re.compile(r"[A-Za-z]:")
_BINARY = "it is a binary file (it contains NUL bytes), not text"
# ``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` (the N-th shell word from 0; a missing one stays).
# At most six digits: no skill has a million arguments, and int() of a long digit run costs.
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
    """The model-facing ``skill`` tool: ``name``, ``description``, ``parameters`` (JSON Schema);
    a ``query`` never finds ``hidden_skills``; ``max_resource_bytes`` bounds a ``path`` read.

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
        """Run the tool on the model's decoded ``arguments`` (a ``query`` only if ``searchable``)
        over what the session's ``view`` offers (without one, all the registry finds)."""
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
                found = await _read_resource(definition, path, snapshot, limit, read_text)
            return ToolResult(text=found, is_error=False)
        except Refusal as refusal:
            return _refused(refusal)

    async def _search(self, query: str, snapshot: SkillSnapshot) -> str:
        # Built once per snapshot (the same object while the registry's catalog is cached).
        if self._index is None or self._index[0] is not snapshot:
            index = await anyio.to_thread.run_sync(
                SkillIndex, listable(snapshot.skills, self._hidden)
            )
            self._index = (snapshot, index)
        return render_skill_matches(self._index[1].search(query))

    async def invoke_for_user(
        self,
        name: str,
        options: SkillLookupOptions,
        *,
        snapshot: SkillSnapshot | None = None,
        arguments: str | None = None,
    ) -> ToolResult:
        """Load and render a skill a person invoked (``/name``; not a ``user_invocable=False``
        one), its ``$ARGUMENTS`` filled from ``arguments`` if given."""
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
    return ToolResult(text=for_model(str(refusal), markup=False), is_error=True)


def _allowed(name: str, skill: _Skill | None, gone: str, *, by_model: bool) -> _Skill:
    if skill is None:
        raise Refusal(f"Error: skill {quote(name)} {gone}")
    if by_model and skill.disable_model_invocation:
        raise Refusal(f"Error: skill {quote(name)} is not available for model invocation")
    if not by_model and not skill.user_invocable:
        raise Refusal(f"Error: skill {quote(name)} cannot be invoked as a command")
    return skill


def describe_error(error: BaseException) -> str:
    """An exception's type and message, cut, for an error text."""
    return cut(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__, 300)


def render_skill_content(definition: SkillDefinition) -> str:
    """Render a loaded skill as the text the model receives (contract §7)."""
    # The body is verbatim: escaping would change the author's instructions.
    hints = "\n".join(_resource_hints(definition))
    return (
        f'<skill_content name="{escape_attribute(definition.name)}">\n<skill_resources>\n{hints}\n'
        f"</skill_resources>\n\n<skill_instructions>\n{definition.content}\n"
        "</skill_instructions>\n</skill_content>"
    )


def _resource_hints(definition: SkillDefinition) -> list[str]:
    # Interpolated values are escaped like catalog descriptions (contract §7).
    base = definition.resource_base
    relative = "Relative paths in this skill (scripts, references, assets) resolve against that"
    if isinstance(base, DirectoryResource) and own_directory(definition) is None:
        # Its directory is shared with other skills: nothing in it belongs to this one.
        return [
            f"Base directory: {for_model(base.path)}",
            "This skill is a single file with no files of its own: the directory holds other "
            "skills too, so no resource paths are offered.",
        ]
    if isinstance(base, DirectoryResource):
        hints = [f"Base directory: {for_model(base.path)}", f"{relative} directory."]
        if not definition.disable_model_invocation:
            hints.append(
                f"To read one of its files, call the `{TOOL}` tool with this skill's "
                "name and the file's path relative to that directory as `path`."
            )
    elif isinstance(base, UrlResource):
        hints = [f"Base URL: {for_model(base.url)}", f"{relative} URL."]
        if definition.source.startswith("mcp:"):  # the MCP provider's source: mcp:LABEL
            label = for_model(definition.source.removeprefix("mcp:"))
            hints.insert(0, f'Served by the MCP server "{label}".')
    elif isinstance(base, OpaqueResource):
        hints = [f"How to reach this skill's resources: {for_model(base.description)}"]
    else:
        hints = [
            "This skill has no resource directory or URL; any resources it refers to are "
            f'managed by the skill provider "{for_model(definition.provider)}".'
        ]
    return [
        *hints,
        "Load a resource this skill refers to only when the task needs it, not ahead of time.",
    ]


def render_skill_matches(matches: Sequence[SkillMatch]) -> str:
    """The answer to a ``query``: one ``name: description`` line per match, best first."""
    if not matches:
        return (
            "No skill matches the query. Try other words for the task (what it works on, the "
            "tool or kind of file involved), or load a skill from the catalog by its exact name."
        )
    head = f"Skills matching the query, best first. Load one by calling the `{TOOL}` tool with"
    lines = (f"{for_model(m.name)}: {normalize_description(m.description, 200)}" for m in matches)
    return "\n".join((f"{head} its exact name:", *lines))


def own_directory(skill: SkillCandidate | SkillDefinition) -> str | None:
    """The directory that holds ``skill``'s files alone: ``None`` without a directory base, or
    for a flat ``<name>.md`` lying directly in a directory it shares with other skills."""
    if not isinstance(base := skill.resource_base, DirectoryResource):
        return None
    if skill.path is not None:
        folder, file_name = os.path.split(os.path.normpath(skill.path))
        shared = os.path.normcase(folder) == os.path.normcase(os.path.normpath(base.path))
        if file_name != SKILL_FILE_NAME and shared:
            return None
    return base.path


def cannot_read(name: str, path: str, reason: str) -> Refusal:
    """The refusal of ``path`` of skill ``name``, whoever serves its files."""
    return Refusal(f"Error: cannot read {quote(path)} from skill {quote(name)}: {reason}")


def unread_path(
    name: str, path: str, failure: ReadError, *, limit: int, within: str = "the skill's directory"
) -> Refusal:
    """Why ``path`` of skill ``name``, on disk or served (``within``), gave no file."""
    reasons: dict[ReadFailure, str] = {
        "outside": "the path resolves outside the skill's directory",
        "excluded": "it belongs to a skill that is not available for model invocation",
        "not_found": f"no such file in {within}",
        "directory": "it is a directory, not a file",
        "not_regular": "it is not a regular file",
        "too_large": f"the file is {failure.size} bytes, over the {limit}-byte limit",
        "grew": f"the file is over the {limit}-byte limit",
        "changed": "it changed while being read",
        "unreadable": f"it could not be read ({failure.detail})",
    }
    reason, entries = reasons[failure.failure], failure.entries
    if failure.failure == "directory" and not entries:
        reason += "; it is empty"
    elif failure.failure == "directory":
        more = " (and more)" if len(entries) >= MAX_LISTED_ENTRIES else ""
        reason += f"; it holds: {', '.join(quote(entry) for entry in entries)}{more}"
    return cannot_read(name, path, reason)


def check_resource_path(name: str, path: str) -> None:
    """Refuse paths that can never be a file inside the skill's directory, before any I/O."""
    refuse = functools.partial(cannot_read, name, path)
    if not path:
        raise refuse("the path is empty")
    if len(path) > MAX_RESOURCE_PATH_LENGTH:
        raise refuse(f"the path is longer than {MAX_RESOURCE_PATH_LENGTH} characters")
    if "\0" in path:
        raise refuse("the path contains a NUL character")
    # Windows forms are refused everywhere: a skill's relative paths mean the same on every
    # platform, and both separators count, so `..\secret` is refused even where `\` is a letter.
    if path.startswith(("/", "\\")) or _DRIVE.match(path) or ntpath.isabs(path):
        raise refuse("the path is absolute; give a path relative to the skill's directory")
    if ".." in re.split(r"[/\\]", path):
        raise refuse('the path contains a ".." segment; it must stay inside the skill\'s directory')


async def _read_resource(
    definition: SkillDefinition,
    path: str,
    snapshot: SkillSnapshot,
    limit: int,
    read_text: ReadText | None,
) -> str:
    """The text of ``path`` (already checked) in ``definition``'s bundle; else `Refusal`."""
    name = definition.name
    refuse = functools.partial(cannot_read, name, path)
    if (directory := own_directory(definition)) is None:
        if isinstance(definition.resource_base, DirectoryResource):
            raise refuse(
                "it is a single-file skill, so it has no resource files of its own; its "
                "directory holds other skills"
            )
        raise refuse("it has no local directory; follow the resource hints in its instructions")
    # Skills hidden from the model: a bundle's whole directory, a flat skill's file only.
    hidden = (skill for skill in snapshot.skills if skill.disable_model_invocation)
    excluded = [p for skill in hidden for p in (skill.path, own_directory(skill)) if p is not None]
    found = await anyio.to_thread.run_sync(read_confined, directory, path, limit, excluded)
    if isinstance(found, ReadError):
        raise unread_path(name, path, found, limit=limit)
    if b"\0" in found.data:
        raise refuse(_BINARY)
    try:
        text = found.data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("it is not a UTF-8 text file") from None
    if read_text is None:
        return text
    # The local checks decided *whether* the file may be read; the client supplies the
    # text, so an unsaved editor buffer and the client's own permissions apply.
    try:
        text = await read_text(found.path)
    except Exception as error:
        _log.warning("skill_resource_read_failed", skill=name, path=found.path, error=repr(error))
        raise refuse(f"the client could not read it ({describe_error(error)})") from None
    if not isinstance(text, str):
        raise refuse("the client did not return text")
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise refuse(f"the file is over the {limit}-byte limit")
    if "\0" in text:
        raise refuse(_BINARY)
    # The client read by path, out of our hands: the path must still name the checked file,
    # so a directory swapped for a symbolic link meanwhile cannot pass an outside file off.
    again = await anyio.to_thread.run_sync(read_confined, directory, path, limit, excluded)
    if isinstance(again, ReadError) or again.identity != found.identity:
        raise refuse("it changed while being read")
    return text


def expand_arguments(body: str, arguments: str) -> str:
    """``body``'s placeholders filled from ``arguments`` in one pass, bounded (it runs on the
    event loop); past a bound, a note at the end says what was left out."""
    if "$" not in body:
        return body
    total, arguments = len(arguments), arguments[:MAX_ARGUMENTS_CHARS]
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unclosed quote or a trailing backslash is a typo: keep the words
        words = arguments.split()
    # Growth is what filling adds beyond the body (the body itself was already accepted).
    room: int | None = MAX_EXPANDED_CHARS - len(body)
    filled_any = False  # a placeholder took something of the arguments

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
