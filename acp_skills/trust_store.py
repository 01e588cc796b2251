"""The trust file (contract §13, §13a): every stored decision, outside any project; bounded
reads, atomic writes that keep a symbolic link at the path, under a lock."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from .errors import ReadError
from .fs import read_local_file, replace_file
from .json_depth import MAX_NESTING_DEPTH, nests_deeper_than

try:
    import fcntl
except ImportError:  # Windows (not supported, docs/architecture.md): importing still works,
    fcntl = None  # type: ignore[assignment]  # and each write stays atomic (docs/trust.md)

if TYPE_CHECKING:
    from .trust import TrustSource

Decision: TypeAlias = Literal["trusted", "refused"]
# (resource uri, "sha256:..." digest, or "dynamic" for a dynamic skill's own SKILL.md) as a
# server listed it
Pair: TypeAlias = tuple[str, str]
# Server decisions are stored under this prefix; a project key is an absolute path.
SERVER_KEY_PREFIX: Final = "mcp:"
# Far above any person's decisions (a thousand projects take about 100 KiB), far below memory.
MAX_TRUST_FILE_BYTES: Final = 16 * 1024 * 1024


def default_trust_file() -> str:
    """``$ACP_SKILLS_TRUST_FILE``, else ``$XDG_CONFIG_HOME/acp-skills/trust.json`` (default
    ``~/.config``; a relative ``XDG_CONFIG_HOME`` counts as unset, as XDG says).

    Raises:
        ValueError: ``ACP_SKILLS_TRUST_FILE`` is a relative path (it would be read from
            whatever directory the agent was started in, usually a project).
    """
    if override := os.environ.get("ACP_SKILLS_TRUST_FILE", "").strip():
        if not os.path.isabs(path := os.path.expanduser(override)):
            raise ValueError(
                f"ACP_SKILLS_TRUST_FILE must be an absolute path (or start with ~), not "
                f"{override!r}: a relative one would be read from the directory the agent "
                "was started in, usually a project"
            )
        return os.path.normpath(path)
    config = os.path.expanduser(os.environ.get("XDG_CONFIG_HOME", "").strip())
    if not os.path.isabs(config):
        config = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(os.path.normpath(config), "acp-skills", "trust.json")


class TrustFileError(Exception):
    """The trust file exists but cannot be read as decisions (it is left untouched)."""


@dataclass(slots=True)
class StoredTrust:
    """A decision per source key, and the (uri, digest) pairs each trusted server holds."""

    decisions: dict[str, Decision] = field(default_factory=dict)
    served: dict[str, frozenset[Pair]] = field(default_factory=dict)

    def decided(self, source: TrustSource, decision: Decision | None) -> StoredTrust:
        """These decisions with ``decision`` for ``source`` (``None`` forgets it): a trusted
        server's pairs replace those it had for the same uris."""
        key, decisions, served = source.key, dict(self.decisions), dict(self.served)
        kept = served.pop(key, frozenset())
        decisions.pop(key, None)
        if decision is not None:
            decisions[key] = decision
        if decision == "trusted" and key.startswith(SERVER_KEY_PREFIX):
            items: frozenset[Pair] = getattr(source, "items", frozenset())
            replaced = {uri for uri, _ in items}
            served[key] = items | {pair for pair in kept if pair[0] not in replaced}
        return StoredTrust(decisions, served)


class TrustStore:
    """Stored decisions, one per source key, in a JSON file written atomically."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else default_trust_file()
        self._lock = threading.Lock()

    def read(self) -> StoredTrust:
        """Everything stored (nothing for a missing file); a regular file only, opened without
        blocking, at most `MAX_TRUST_FILE_BYTES`, nested at most `MAX_NESTING_DEPTH` levels.

        Raises:
            TrustFileError: the file exists but cannot be read as decisions.
        """
        content = read_local_file(self.path, MAX_TRUST_FILE_BYTES)
        cannot = f"{self.path}: cannot read trust decisions"
        if isinstance(content, ReadError):
            if content.failure in ("not_found", "broken_link"):
                return StoredTrust()
            raise TrustFileError(f"{cannot}: {content.reason}")
        try:
            data = json.loads(content.decode("utf-8"))
            too_deep = nests_deeper_than(data, MAX_NESTING_DEPTH)
        except RecursionError:  # the decoder's own limit, far below 100,000 brackets
            too_deep = True
        except ValueError as error:  # not UTF-8, not JSON, a number too long to convert
            raise TrustFileError(f"{cannot}: {error}") from None
        if too_deep:
            raise TrustFileError(f"{cannot}: nested more than {MAX_NESTING_DEPTH} levels deep")
        projects = data.get("projects") if isinstance(data, dict) else None
        servers = data.get("servers", []) if isinstance(data, dict) else None
        if not isinstance(projects, list) or not isinstance(servers, list):
            raise TrustFileError(f'{self.path}: expected {{"projects": [...], "servers": [...]}}')
        stored = StoredTrust()
        for entry in projects:
            if isinstance(entry, dict) and isinstance(key := entry.get("path"), str):
                _take(stored, _current_key(key), entry)
        for entry in servers:
            if isinstance(entry, dict) and isinstance(server := entry.get("server"), str):
                _take(stored, SERVER_KEY_PREFIX + server, entry, server=True)
        return stored

    def decisions(self) -> dict[str, Decision]:
        """Every stored decision by source key."""
        return self.read().decisions

    def decide(self, source: TrustSource, decision: Decision | None) -> bool:
        """Store ``decision`` for ``source`` (`StoredTrust.decided`); whether anything changed.
        Under a thread's lock and a file's beside the decisions (which each write replaces):
        none overwrites another."""
        with self._lock, _locked(self.path + ".lock"):
            stored = self.read()
            if (after := stored.decided(source, decision)) == stored:
                return False
            self._write(after)
            return True

    def _write(self, stored: StoredTrust) -> None:
        projects, servers = [], []
        for key, value in sorted(stored.decisions.items()):
            if not key.startswith(SERVER_KEY_PREFIX):
                projects.append({"path": key, "decision": value})
                continue
            entry: dict[str, object] = {"server": key[len(SERVER_KEY_PREFIX) :], "decision": value}
            if value == "trusted":
                pairs = sorted(stored.served.get(key, ()))
                entry["resources"] = [{"uri": uri, "digest": digest} for uri, digest in pairs]
            servers.append(entry)
        data: dict[str, object] = {"projects": projects} | ({"servers": servers} if servers else {})
        # A symbolic link at the path (a dotfiles repository's) stays: its target is rewritten.
        target = os.path.realpath(self.path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        text = json.dumps(data, indent=2) + "\n"
        replace_file(target, text.encode("utf-8"), prefix=".trust-", sync=True)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield  # closing the file releases the lock
    finally:
        os.close(fd)


def _current_key(key: str) -> str:
    # Server decisions were once stored among the projects as "mcp:LABEL:LABEL=WHERE"; read
    # them under today's key, so that a refusal made then still holds.
    label, separator, endpoint = key.removeprefix(SERVER_KEY_PREFIX).partition(":")
    if key.startswith(SERVER_KEY_PREFIX) and separator and endpoint.startswith(label + "="):
        return SERVER_KEY_PREFIX + endpoint
    return key


def _take(
    stored: StoredTrust, key: str, entry: Mapping[str, object], *, server: bool = False
) -> None:
    decision = entry.get("decision")
    if decision == "trusted" or decision == "refused":
        stored.decisions[key] = decision
    if decision == "trusted" and server:  # the pairs it was trusted with, well-formed ones only
        pairs = entry.get("resources")
        stored.served[key] = frozenset(
            (item["uri"], item["digest"])
            for item in (pairs if isinstance(pairs, list) else ())
            if isinstance(item, dict)
            and isinstance(item.get("uri"), str)
            and isinstance(item.get("digest"), str)
        )
