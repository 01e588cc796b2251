"""`skills/list` over an MCP session (every page) and `skills/get` of one uri, each entry read
into a `ListedSkill` (its frontmatter by the local files' reader, `acp_skills.frontmatter`) or a
`RejectedEntry` saying why it is left out, with how long and how widely the answer may be kept
(``ttlMs``, ``cacheScope``); the checks a read must pass: size, then SHA-256 digest; and what a
path the manifest does not list comes nearest to."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import mcp.types as types
from mcp import ClientSession, MCPError
from pydantic import BaseModel, ConfigDict

from ..confined import case_match, listed_entries
from ..errors import Problem, ReadError
from ..frontmatter import ParsedSkill, listed_fields, read_fields
from .transport import MAX_RESPONSE_BYTES, ResponseTooLarge

# A server that pages forever must not keep a listing going: 1,000 pages is far past any catalog.
MAX_PAGES: Final = 1000
# What the extension's stable page says every host accepts of one skill, counted over its
# manifest (its SKILL.md included), and no more: beyond either, the entry is left out, told.
MAX_SKILL_FILES: Final = 512
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
# However long a server says an answer stays fresh, it is asked again within a day.
MAX_TTL_MS: Final = 24 * 60 * 60 * 1000
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_INVALID_PARAMS: Final = -32602  # how a server says it serves no skill at a uri

# "public": the answer holds nothing of the caller's, so any configuration reaching the same
# server may reuse it; "private" (and anything else a server sends): only the configuration
# (with its env or headers, its authorization) that asked.
CacheScope: TypeAlias = Literal["public", "private"]


class _ListSkills(types.Request[types.PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: types.PaginatedRequestParams


class _UriParams(types.RequestParams):
    uri: str


class _GetSkill(types.Request[_UriParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"
    params: _UriParams


class _Cacheable(BaseModel):
    # Read leniently: a missing or malformed hint is the strictest one (0, private), never a
    # failed request.
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    ttlMs: Any = None  # the wire spelling
    cacheScope: Any = None

    @property
    def ttl_ms(self) -> int:
        ttl = self.ttlMs
        return min(ttl, MAX_TTL_MS) if type(ttl) is int and ttl > 0 else 0

    @property
    def scope(self) -> CacheScope:
        return "public" if self.cacheScope == "public" else "private"


class _Page(_Cacheable):
    skills: list[Any] = []
    nextCursor: str | None = None


class _Got(_Cacheable):
    skill: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFile:
    """One file of a skill as listed: what a read of ``uri`` must match."""

    uri: str
    digest: str  # "sha256:<64 hex>"
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedSkill:
    """A `skills/list` entry: the ``SKILL.md`` uri, its frontmatter (read-only, as a file's
    YAML is read) and what the local reader made of it, and the manifest (``None`` for a
    ``"dynamic"`` skill, whose files are not listed)."""

    uri: str
    frontmatter: Mapping[object, object]
    parsed: ParsedSkill
    files: Mapping[str, ManifestFile] | None

    @property
    def base_uri(self) -> str:
        """The uri the skill's relative paths resolve against (ends with ``/``)."""
        return self.uri.rsplit("/", 1)[0] + "/"


@dataclass(frozen=True, slots=True, kw_only=True)
class RejectedEntry:
    """A `skills/list` entry left out: its uri (when it has one) and why."""

    uri: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """What one server listed, what it listed that is left out, how long the listing may be
    kept (``ttl_ms``; 0: not at all) and by whom (``scope``)."""

    skills: tuple[ListedSkill, ...]
    rejected: tuple[RejectedEntry, ...]
    ttl_ms: int
    scope: CacheScope = "private"


@dataclass(frozen=True, slots=True)
class GotSkill:
    """A `skills/get` answer: the entry (or why it cannot be used), how long it may be kept and
    by whom."""

    entry: ListedSkill | RejectedEntry
    ttl_ms: int
    scope: CacheScope


NOTHING: Final = Listing((), (), 0)


async def list_skills(session: ClientSession) -> Listing:
    """Every page of `skills/list`; `ResponseTooLarge` when the entries of the pages together
    are over `MAX_RESPONSE_BYTES` as JSON. The listing is kept no longer than its
    shortest-lived page, and is public only if every page is."""
    found: list[ListedSkill] = []
    rejected: list[RejectedEntry] = []
    cursor: str | None = None
    scope: CacheScope
    ttl, scope = MAX_TTL_MS, "public"  # narrowed by each page
    # The listing's own entries are counted, not the connection's bytes: other requests share
    # the connection, and a lent session's transport counts nothing.
    size = 0
    for _ in range(MAX_PAGES):
        page = await session.send_request(
            _ListSkills(params=types.PaginatedRequestParams(cursor=cursor)), _Page
        )
        size += len(json.dumps(page.skills, ensure_ascii=False, separators=(",", ":")).encode())
        if size > MAX_RESPONSE_BYTES:
            raise ResponseTooLarge()
        ttl = min(ttl, page.ttl_ms)
        scope = "private" if page.scope == "private" else scope
        for raw in page.skills:
            if isinstance(entry := read_entry(raw), ListedSkill):
                found.append(entry)
            else:
                rejected.append(entry)
        if not (cursor := page.nextCursor):
            break
    else:  # said, as a skipped entry is: the skills of the pages not read are missing
        more = f"its listing goes on past {MAX_PAGES:,} pages, which are all that is read"
        rejected.append(RejectedEntry(uri=None, reason=more))
    return Listing(tuple(found), tuple(rejected), ttl, scope)


async def get_skill(session: ClientSession, uri: str) -> GotSkill | None:
    """`skills/get` of ``uri``; ``None`` when the server serves no skill there (it answers
    invalid params, as the extension says). An entry for another uri is no answer for this one."""
    try:
        got = await session.send_request(_GetSkill(params=_UriParams(uri=uri)), _Got)
    except MCPError as error:
        if error.code == _INVALID_PARAMS:
            return None
        raise
    entry = read_entry(got.skill)
    if isinstance(entry, ListedSkill) and entry.uri != uri:
        entry = RejectedEntry(uri=uri, reason=f"the server answered with the entry of {entry.uri}")
    return GotSkill(entry, got.ttl_ms, got.scope)


def read_entry(raw: object) -> ListedSkill | RejectedEntry:
    """One `skills/list` entry: a skill whose frontmatter a local file could have, with a
    manifest whose every file is verifiable, or why it is left out."""
    if not isinstance(raw, Mapping):
        return RejectedEntry(uri=None, reason="the entry is not an object")
    uri = raw.get("uri")
    if not isinstance(uri, str) or not uri:
        return RejectedEntry(uri=None, reason="the entry has no uri")
    fields = listed_fields(raw.get("frontmatter"))
    if isinstance(fields, Problem):
        return RejectedEntry(uri=uri, reason=fields.message)
    parsed = read_fields(fields)
    if isinstance(parsed, Problem):
        return RejectedEntry(uri=uri, reason=parsed.message)
    resources = raw.get("resources")
    if resources == "dynamic":
        return ListedSkill(uri=uri, frontmatter=fields, parsed=parsed, files=None)
    files = _manifest(resources)
    if isinstance(files, str):
        return RejectedEntry(uri=uri, reason=files)
    if uri not in files:
        return RejectedEntry(uri=uri, reason="its manifest does not list its SKILL.md")
    return ListedSkill(uri=uri, frontmatter=fields, parsed=parsed, files=files)


def _manifest(resources: object) -> dict[str, ManifestFile] | str:
    # The files of a manifest, or what is wrong with it.
    if not isinstance(resources, list):
        return 'its "resources" is neither a list nor "dynamic"'
    files: dict[str, ManifestFile] = {}
    for item in resources:
        file_uri = item.get("uri") if isinstance(item, Mapping) else None
        digest = item.get("digest") if isinstance(item, Mapping) else None
        size = item.get("size") if isinstance(item, Mapping) else None
        if not isinstance(file_uri, str):
            return "a file of its manifest has no uri"
        if not isinstance(digest, str) or not _DIGEST.match(digest := digest.lower()):
            return f'the digest of {file_uri!r} is not "sha256:" and 64 hexadecimal digits'
        if type(size) is not int or size < 0:
            return f"the size of {file_uri!r} is not a whole number of bytes"
        files[file_uri] = ManifestFile(uri=file_uri, digest=digest, size=size)
    if len(files) > MAX_SKILL_FILES:
        return f"its manifest lists {len(files)} files, over the {MAX_SKILL_FILES} a skill may have"
    if (total := sum(file.size for file in files.values())) > MAX_SKILL_BYTES:
        return (
            f"its files come to {total} bytes, over the {MAX_SKILL_BYTES} bytes (16 MiB) a skill "
            "may hold"
        )
    return files


def text_of(result: types.ReadResourceResult, uri: str) -> bytes | None:
    """The bytes of the one content block for ``uri`` (text as UTF-8), or ``None``."""
    for content in result.contents:
        if content.uri == uri and isinstance(content, types.TextResourceContents):
            return content.text.encode("utf-8", "surrogatepass")
    return None


def matches(data: bytes, listed: ManifestFile) -> bool:
    """Size first (cheap), then the SHA-256 digest."""
    return (
        len(data) == listed.size and listed.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    )


def unlisted(skill: ListedSkill, segments: Sequence[str]) -> ReadError:
    """Why the path ``segments`` (below the skill's base uri) names no file of its manifest: a
    directory of it (``directory``, with its names, as a directory on disk is listed), or no
    file (``not_found``, with the path whose names differ from it only in case, if one)."""
    # The manifest as a tree: each folder's names below the base uri, a folder's with "/".
    children: dict[tuple[str, ...], set[str]] = {}
    for uri in skill.files or ():
        if not uri.startswith(skill.base_uri):
            continue  # a file of the manifest outside the skill's own folder: no path names it
        parts = uri[len(skill.base_uri) :].split("/")
        for depth, part in enumerate(parts):
            folder = "/" if depth < len(parts) - 1 else ""
            children.setdefault(tuple(parts[:depth]), set()).add(part + folder)
    if (names := children.get(tuple(segments))) is not None:
        return ReadError(failure="directory", entries=listed_entries(names))
    # The first name that is not there, proposed as it is there but for case; the rest of the
    # path as it was asked (as `acp_skills.confined` proposes a path on disk).
    for depth, segment in enumerate(segments):
        here = {name.removesuffix("/") for name in children.get(tuple(segments[:depth]), ())}
        if segment in here:
            continue
        if (match := case_match(segment, here)) is not None:
            near = "/".join([*segments[:depth], match, *segments[depth + 1 :]])
            return ReadError(failure="not_found", near=near)
        break
    return ReadError(failure="not_found")
