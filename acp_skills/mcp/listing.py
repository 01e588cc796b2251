"""`skills/list` over an MCP session (every page) and the checks a read must pass: size, then
SHA-256 digest, then (for ``SKILL.md``) the frontmatter the listing gave."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import mcp.types as types
from mcp import ClientSession
from pydantic import BaseModel, ConfigDict

from .._yaml import load_frontmatter

# A server that pages forever must not keep a listing going: 1,000 pages is far past any catalog.
MAX_PAGES: Final = 1000


class _ListSkills(types.Request[types.PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: types.PaginatedRequestParams


class _Page(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    skills: list[dict[str, Any]] = []
    nextCursor: str | None = None  # the wire spelling
    ttlMs: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFile:
    """One file of a skill as listed: what a read of ``uri`` must match."""

    uri: str
    digest: str  # "sha256:<64 hex>"
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedSkill:
    """A `skills/list` entry: the ``SKILL.md`` uri, its frontmatter verbatim, and the manifest
    (``None`` for a ``"dynamic"`` skill, whose files are not listed)."""

    uri: str
    frontmatter: Mapping[str, object]
    files: Mapping[str, ManifestFile] | None

    @property
    def base_uri(self) -> str:
        """The uri the skill's relative paths resolve against (ends with ``/``)."""
        return self.uri.rsplit("/", 1)[0] + "/"


@dataclass(frozen=True, slots=True)
class Listing:
    """What one server listed, and how long it may be kept (``ttl_ms``; 0: not at all)."""

    skills: tuple[ListedSkill, ...]
    ttl_ms: int


async def list_skills(session: ClientSession) -> Listing:
    """Every page of `skills/list`; entries that are not well formed are left out."""
    found: list[ListedSkill] = []
    cursor: str | None = None
    ttl: int | None = None
    for _ in range(MAX_PAGES):
        page = await session.send_request(
            _ListSkills(params=types.PaginatedRequestParams(cursor=cursor)), _Page
        )
        ttl = page.ttlMs if ttl is None else ttl
        found.extend(skill for entry in page.skills if (skill := _entry(entry)) is not None)
        if not (cursor := page.nextCursor):
            break
    return Listing(tuple(found), max(ttl or 0, 0))


def _entry(raw: Mapping[str, Any]) -> ListedSkill | None:
    uri, frontmatter, resources = raw.get("uri"), raw.get("frontmatter"), raw.get("resources")
    if not isinstance(uri, str) or not isinstance(frontmatter, dict):
        return None
    if resources == "dynamic":
        return ListedSkill(uri=uri, frontmatter=frontmatter, files=None)
    if not isinstance(resources, list):
        return None
    files: dict[str, ManifestFile] = {}
    for item in resources:
        if not isinstance(item, dict):
            return None
        file_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
        if not (isinstance(file_uri, str) and isinstance(digest, str) and isinstance(size, int)):
            return None
        files[file_uri] = ManifestFile(uri=file_uri, digest=digest.lower(), size=size)
    if uri not in files:  # the SKILL.md itself must be verifiable
        return None
    return ListedSkill(uri=uri, frontmatter=frontmatter, files=files)


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


def same_frontmatter(text: str, listed: Mapping[str, object]) -> bool:
    """Whether the YAML frontmatter of a ``SKILL.md`` text is the one the listing gave."""
    text = text.removeprefix("\ufeff")
    head, separator, _ = text[3:].partition("\n---")
    if not text.startswith("---") or not separator:
        return False
    fields = load_frontmatter(head.lstrip("\r\n"), first_line=2)
    return isinstance(fields, Mapping) and _plain(fields) == _plain(listed)


def _plain(value: object) -> object:
    # Mappings as dicts and sequences as lists: YAML's read-only values equal the listing's JSON.
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
