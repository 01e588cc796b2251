"""What the ``skill`` tool gives back (contract §7, §12): a rendered skill and its resource hints,
a query's matches, and a file of a skill's bundle read confined to its directory."""

from __future__ import annotations

import functools
import ntpath
import os
import re
from collections.abc import Awaitable, Callable, Sequence

import anyio.to_thread

from .catalog import SKILL_TOOL_NAME as TOOL
from .errors import ReadError, ReadFailure, Refusal
from .fs import MAX_LISTED_ENTRIES, read_confined
from .model import (
    SKILL_FILE_NAME,
    DirectoryResource,
    OpaqueResource,
    SkillCandidate,
    SkillDefinition,
    SkillSnapshot,
    UrlResource,
)
from .quiet_log import get_logger
from .search import SkillMatch
from .text import cut, escape_attribute, for_model, normalize_description, quote

DEFAULT_MAX_RESOURCE_BYTES = 1_048_576
MAX_RESOURCE_PATH_LENGTH = 4096
# `C:`, `C:\x`, `C:/x`: a drive letter makes a path absolute (or drive-relative) on Windows.
_DRIVE = re.compile(r"[A-Za-z]:")
_BINARY = "it is a binary file (it contains NUL bytes), not text"
_log = get_logger(__name__)
# Reads a file's text by absolute path, typically the ACP client's `fs/read_text_file`.
ReadText = Callable[[str], Awaitable[str]]


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
    base = definition.resource_base
    relative = "Relative paths in this skill (scripts, references, assets) resolve against that"
    if isinstance(base, DirectoryResource) and own_directory(definition) is None:
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
            hints.insert(0, f'Served by the MCP server "{for_model(definition.source[4:])}".')
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
    """The directory that holds ``skill``'s files alone (a flat skill's is shared: ``None``)."""
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
    # Windows forms are refused everywhere: a skill's relative paths mean the same everywhere.
    if path.startswith(("/", "\\")) or _DRIVE.match(path) or ntpath.isabs(path):
        raise refuse("the path is absolute; give a path relative to the skill's directory")
    if ".." in re.split(r"[/\\]", path):
        raise refuse('the path contains a ".." segment; it must stay inside the skill\'s directory')


async def read_resource(
    definition: SkillDefinition,
    path: str,
    snapshot: SkillSnapshot,
    limit: int,
    read_text: ReadText | None,
) -> str:
    """The text of ``path`` (already checked) in ``definition``'s bundle."""
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
    # The local checks decided *whether*; the client's text has its unsaved buffers.
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
    # The client read by path: it must still name the checked file (no link swapped in).
    again = await anyio.to_thread.run_sync(read_confined, directory, path, limit, excluded)
    if isinstance(again, ReadError) or again.identity != found.identity:
        raise refuse("it changed while being read")
    return text
