"""A `skills/list` or `skills/get` entry read, without the MCP SDK, by the local files'
frontmatter reader; `McpLocator`, what a served skill carries to its load and to trust."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from ..errors import Problem
from ..frontmatter import ParsedSkill, canonical_json, listed_fields, read_fields
from .config import McpServer

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")


class ManifestFile(NamedTuple):
    digest: str  # "sha256:<64 hex>"
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedSkill:
    """An entry read: its manifest (``None``: ``"dynamic"``) and the pairs trust keeps for it."""

    uri: str
    parsed: ParsedSkill  # its `fields`: the frontmatter as listed
    files: Mapping[str, ManifestFile] | None
    served: frozenset[tuple[str, str]]

    @property
    def base_uri(self) -> str:
        """The uri the skill's relative paths resolve against (ends with ``/``)."""
        return self.uri.rsplit("/", 1)[0] + "/"


class RejectedEntry(NamedTuple):
    uri: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """The entries of one answer, fresh for ``ttl_ms``; a ``public`` one is kept by url."""

    skills: tuple[ListedSkill, ...]
    rejected: tuple[RejectedEntry, ...]
    ttl_ms: int = 0
    public: bool = False


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


def read_entry(raw: object) -> ListedSkill | RejectedEntry:
    """The skill a local file with the entry's frontmatter would make, or why it is left out."""
    if not isinstance(raw, Mapping) or not isinstance(uri := raw.get("uri"), str) or not uri:
        return RejectedEntry(None, "the entry has no uri")
    if isinstance(fields := listed_fields(raw.get("frontmatter")), Problem):
        return RejectedEntry(uri, fields.message)
    if isinstance(parsed := read_fields(fields), Problem):
        return RejectedEntry(uri, parsed.message)
    files = None if (resources := raw.get("resources")) == "dynamic" else _manifest(resources)
    if isinstance(files, str):
        return RejectedEntry(uri, files)
    if files is not None and uri not in files:
        return RejectedEntry(uri, "its manifest does not list its SKILL.md")
    # Trust keeps the listed frontmatter (the catalog's text comes from it, before any read) as
    # the uri with a fragment, and a dynamic skill's SKILL.md with a digest no listed one looks
    # like: a switch between the two is a change.
    digest = hashlib.sha256(canonical_json(fields).encode("utf-8", "surrogatepass")).hexdigest()
    served = {(uri + "#frontmatter", "sha256:" + digest)}
    if files is None:
        served.add((uri, "dynamic"))
    else:
        served.update((file_uri, file.digest) for file_uri, file in files.items())
    return ListedSkill(uri=uri, parsed=parsed, files=files, served=frozenset(served))


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
        files[uri] = ManifestFile(digest, size)
    return files
