"""`skills/list` and `skills/get`, each entry read by the local files' frontmatter reader into a
`ListedSkill` or a `RejectedEntry`; the checks a read must pass; and `McpLocator`, what an MCP
candidate carries back to its server and to trust."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import mcp.types as types
from mcp import ClientSession, MCPError
from mcp.client.caching import MAX_TTL_MS
from pydantic import BaseModel, ConfigDict

from ..confined import case_match, listed_entries
from ..errors import Problem, ReadError
from ..frontmatter import ParsedSkill, canonical_json, listed_fields, read_fields
from .config import McpServer
from .transport import MAX_RESPONSE_BYTES, TOO_LARGE, ResponseTooLarge

# A server that pages forever must not keep a listing going: 1,000 pages is far past any catalog.
MAX_PAGES: Final = 1000
# What the extension's stable page says every host accepts of one skill, counted over its
# manifest (its SKILL.md included), and no more: beyond either, the entry is left out, told.
MAX_SKILL_FILES: Final = 512
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_INVALID_PARAMS: Final = -32602  # how a server says it serves no skill at a uri
# What trust keeps for a skill's listed frontmatter (its uri with this fragment), and for the
# SKILL.md of a skill listed without a manifest: no listed digest looks like "dynamic", so a
# switch between the two is a change either way.
FRONTMATTER_FRAGMENT: Final = "#frontmatter"
DYNAMIC_DIGEST: Final = "dynamic"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")  # every field as the server sent it


# "public": the answer holds nothing of the caller's, so any configuration reaching the same
# url may reuse it; "private" (and anything else a server sends): only the one that asked.
CacheScope: TypeAlias = Literal["public", "private"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFile:
    """One file of a skill as listed: what a read of ``uri`` must match."""

    uri: str
    digest: str  # "sha256:<64 hex>"
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedSkill:
    """An entry: its frontmatter read, its manifest (``None``: ``"dynamic"``), the pairs trust
    keeps for it."""

    uri: str
    frontmatter: Mapping[object, object]
    parsed: ParsedSkill
    files: Mapping[str, ManifestFile] | None
    served: frozenset[tuple[str, str]]

    @property
    def base_uri(self) -> str:
        """The uri the skill's relative paths resolve against (ends with ``/``)."""
        return self.uri.rsplit("/", 1)[0] + "/"


@dataclass(frozen=True, slots=True, kw_only=True)
class RejectedEntry:
    """An entry left out: its uri (when it has one) and why."""

    uri: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """The entries of one answer (a listing, or a `skills/get`), kept ``ttl_ms`` by ``scope``."""

    skills: tuple[ListedSkill, ...]
    rejected: tuple[RejectedEntry, ...]
    ttl_ms: int = 0
    scope: CacheScope = "private"


NOTHING: Final = Listing((), ())


@dataclass(frozen=True, slots=True)
class McpLocator:
    """The entry a load verifies against, and what trust keys on (`trust.ServedLocator`)."""

    server: McpServer
    skill: ListedSkill

    @property
    def server_label(self) -> str:
        return self.server.label

    @property
    def server_identity(self) -> str:
        return self.server.identity

    @property
    def skill_uri(self) -> str:
        return self.skill.uri

    @property
    def served(self) -> frozenset[tuple[str, str]]:
        return self.skill.served

    @property
    def dynamic(self) -> bool:
        """Whether the skill's files, ``SKILL.md`` included, are served unverified."""
        return self.skill.files is None


async def list_skills(session: ClientSession) -> Listing:
    """Every page of `skills/list`, kept as long and as widely as its strictest page allows.

    Raises:
        ResponseTooLarge: the entries of the pages together are over `MAX_RESPONSE_BYTES`.
    """
    entries: list[ListedSkill | RejectedEntry] = []
    params: dict[str, Any] = {}
    ttl, scope, size = MAX_TTL_MS, "public", 0
    # The listing's own entries are counted: other requests share the connection, and a lent
    # session's transport counts nothing.
    for _ in range(MAX_PAGES):
        page = await _request(session, "skills/list", params)
        skills = page.get("skills")
        if not isinstance(skills, list):
            raise ValueError("its skills/list answer holds no list of skills")
        size += len(json.dumps(skills, ensure_ascii=False, separators=(",", ":")).encode())
        if size > MAX_RESPONSE_BYTES:
            raise ResponseTooLarge(TOO_LARGE)
        page_ttl, page_scope = _freshness(page)
        ttl, scope = min(ttl, page_ttl), "private" if page_scope == "private" else scope
        entries.extend(read_entry(raw) for raw in skills)
        if not isinstance(cursor := page.get("nextCursor"), str) or not cursor:
            break
        params = {"cursor": cursor}
    else:  # said, as a skipped entry is: the skills of the pages not read are missing
        more = f"its listing goes on past {MAX_PAGES:,} pages, which are all that is read"
        entries.append(RejectedEntry(uri=None, reason=more))
    return _listing(entries, ttl, "public" if scope == "public" else "private")


async def get_skill(session: ClientSession, uri: str) -> Listing | None:
    """`skills/get` of ``uri``; ``None`` when the server serves no skill there (it answers
    invalid params). An entry for another uri is no answer for this one."""
    try:
        answer = await _request(session, "skills/get", {"uri": uri})
    except MCPError as error:
        if error.code == _INVALID_PARAMS:
            return None
        raise
    entry = read_entry(answer.get("skill"))
    if isinstance(entry, ListedSkill) and entry.uri != uri:
        entry = RejectedEntry(uri=uri, reason=f"the server answered with the entry of {entry.uri}")
    return _listing([entry], *_freshness(answer))


async def _request(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    # The extension's methods, as the protocol writes them: the SDK has no skills API yet.
    request = types.Request[dict[str, Any], str](method=method, params=params)
    return (await session.send_request(request, _Answer)).model_extra or {}


def _freshness(answer: Mapping[str, Any]) -> tuple[int, CacheScope]:
    # Read leniently: a missing or malformed hint is the strictest one (0, private).
    ttl = answer.get("ttlMs")
    ttl_ms = min(ttl, MAX_TTL_MS) if type(ttl) is int and ttl > 0 else 0
    return ttl_ms, "public" if answer.get("cacheScope") == "public" else "private"


def _listing(
    entries: Sequence[ListedSkill | RejectedEntry], ttl_ms: int, scope: CacheScope
) -> Listing:
    skills = tuple(entry for entry in entries if isinstance(entry, ListedSkill))
    rejected = tuple(entry for entry in entries if isinstance(entry, RejectedEntry))
    return Listing(skills, rejected, ttl_ms, scope)


def read_entry(raw: object) -> ListedSkill | RejectedEntry:
    """One entry: a skill a local file with its frontmatter would make, with a verifiable
    manifest, or why it is left out."""
    if not isinstance(raw, Mapping):
        return RejectedEntry(uri=None, reason="the entry is not an object")
    if not isinstance(uri := raw.get("uri"), str) or not uri:
        return RejectedEntry(uri=None, reason="the entry has no uri")
    fields = listed_fields(raw.get("frontmatter"))
    if isinstance(fields, Problem):
        return RejectedEntry(uri=uri, reason=fields.message)
    if isinstance(parsed := read_fields(fields), Problem):
        return RejectedEntry(uri=uri, reason=parsed.message)
    resources = raw.get("resources")
    files = None if resources == "dynamic" else _manifest(resources)
    if isinstance(files, str):
        return RejectedEntry(uri=uri, reason=files)
    if files is not None and uri not in files:
        return RejectedEntry(uri=uri, reason="its manifest does not list its SKILL.md")
    # What trust keeps: the listed frontmatter (the catalog's text comes from the listing,
    # before any file is read), and every listed file or, for a dynamic skill, its SKILL.md.
    listed = canonical_json(fields).encode("utf-8", "surrogatepass")
    served = {(uri + FRONTMATTER_FRAGMENT, "sha256:" + hashlib.sha256(listed).hexdigest())}
    if files is None:
        served.add((uri, DYNAMIC_DIGEST))
    else:
        served.update((file.uri, file.digest) for file in files.values())
    return ListedSkill(
        uri=uri, frontmatter=fields, parsed=parsed, files=files, served=frozenset(served)
    )


def _manifest(resources: object) -> dict[str, ManifestFile] | str:
    # The files of a manifest, or what is wrong with it.
    if not isinstance(resources, list):
        return 'its "resources" is neither a list nor "dynamic"'
    files: dict[str, ManifestFile] = {}
    for item in resources:
        keys = ("uri", "digest", "size")
        uri, digest, size = (item.get(key) if isinstance(item, Mapping) else None for key in keys)
        if not isinstance(uri, str):
            return "a file of its manifest has no uri"
        if not isinstance(digest, str) or not _DIGEST.match(digest := digest.lower()):
            return f'the digest of {uri!r} is not "sha256:" and 64 hexadecimal digits'
        if type(size) is not int or size < 0:
            return f"the size of {uri!r} is not a whole number of bytes"
        files[uri] = ManifestFile(uri=uri, digest=digest, size=size)
    if len(files) > MAX_SKILL_FILES:
        return f"its manifest lists {len(files)} files, over the {MAX_SKILL_FILES} a skill may have"
    if (total := sum(file.size for file in files.values())) > MAX_SKILL_BYTES:
        return (
            f"its files come to {total} bytes, over the {MAX_SKILL_BYTES} bytes (16 MiB) a skill "
            "may hold"
        )
    return files


async def read_text(session: ClientSession, uri: str) -> bytes | None:
    """`resources/read` of ``uri``: its one text block as UTF-8 (``None``: no text came)."""
    for content in (await session.read_resource(uri)).contents:
        if content.uri == uri and isinstance(content, types.TextResourceContents):
            return content.text.encode("utf-8", "surrogatepass")
    return None


def matches(data: bytes, listed: ManifestFile) -> bool:
    """Size first (cheap), then the SHA-256 digest."""
    return (
        len(data) == listed.size and listed.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    )


def unlisted(skill: ListedSkill, segments: Sequence[str]) -> ReadError:
    """Why ``segments`` (below the base uri) names no file of the manifest: a folder of it, with
    its names, or no file, with the path that differs from it only in case, if one."""
    base = skill.base_uri
    paths = [uri[len(base) :].split("/") for uri in skill.files or () if uri.startswith(base)]

    def names_in(folder: Sequence[str]) -> set[str]:
        depth = len(folder)
        below = [path for path in paths if len(path) > depth and path[:depth] == list(folder)]
        return {path[depth] + ("/" if len(path) > depth + 1 else "") for path in below}

    if names := names_in(segments):
        return ReadError(failure="directory", entries=listed_entries(names))
    # The first name that is not there, proposed as it is there but for case; the rest of the
    # path as it was asked (as `acp_skills.confined` proposes a path on disk).
    for depth, segment in enumerate(segments):
        here = {name.removesuffix("/") for name in names_in(segments[:depth])}
        if segment not in here:
            match = case_match(segment, here)
            near = "/".join([*segments[:depth], match, *segments[depth + 1 :]]) if match else ""
            return ReadError(failure="not_found", near=near)
    return ReadError(failure="not_found")
