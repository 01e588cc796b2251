"""One MCP server's configuration, as a session's ``mcpServers`` entry or ``--mcp-server`` names
it, and the identity trust stores for it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServer:
    """A stdio server (``command``, ``args``, ``env``) or a streamable HTTP one (``url``,
    ``headers``), called ``label``. Hashable: equal configurations share one connection."""

    label: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.label:
            raise ValueError("an MCP server needs a label")
        if (self.command is None) == (self.url is None):
            raise ValueError(f'MCP server "{self.label}" needs exactly one of a command or a url')

    @classmethod
    def from_acp(cls, entry: object) -> McpServer:
        """An ``mcpServers`` entry (the ACP SDK's model, or the dict its lenient parsing may
        leave), stdio or HTTP; equal entries make equal servers.

        Raises:
            ValueError: an entry no server can be made of (SSE, no name, ...), with the reason.
        """
        kind, command = _entry_field(entry, "type"), _entry_field(entry, "command")
        if kind is None and command is not None:
            args = _entry_field(entry, "args") or ()
            if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
                raise ValueError("its args are not a list of strings")
            if not isinstance(command, str) or not command.strip():
                raise ValueError("it has no command")
            env = _pairs(_entry_field(entry, "env"))
            return cls(label=_label(entry), command=command, args=tuple(args), env=env)
        if kind == "http":
            url, headers = _entry_field(entry, "url"), _pairs(_entry_field(entry, "headers"))
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError("its url is not an http or https url")
            return cls(label=_label(entry), url=url, headers=headers)
        raise ValueError(f"a server of type {kind!r} is not supported (stdio and http are)")

    @property
    def identity(self) -> str:
        """What trust remembers: the label and the command line or url (never the secrets)."""
        where = self.url if self.url is not None else shlex.join((self.command or "", *self.args))
        # A label holding "=" (or opening with a quote) is written as a JSON string, so that
        # no other label and command read the same.
        quoted = "=" in self.label or self.label.startswith('"')
        label = json.dumps(self.label, ensure_ascii=False) if quoted else self.label
        return f"{label}={where}"


def parse_server_option(text: str) -> McpServer:
    """``LABEL=URL`` (streamable HTTP) or ``LABEL=COMMAND`` (stdio, split by shell rules).

    Raises:
        ValueError: anything else, with the reason.
    """
    label, equals, rest = text.partition("=")
    label, rest = label.strip(), rest.strip()
    if not equals or not label or not rest:
        raise ValueError(f"expected LABEL=COMMAND or LABEL=URL, got {text!r}")
    if rest.startswith(("http://", "https://")):
        return McpServer(label=label, url=rest)
    try:
        words = shlex.split(rest)
    except ValueError as error:
        raise ValueError(f"cannot split the command of MCP server {label!r}: {error}") from None
    if not words:
        raise ValueError(f"MCP server {label!r} has an empty command")
    return McpServer(label=label, command=words[0], args=tuple(words[1:]))


def _entry_field(entry: object, name: str) -> object:
    return entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)


def _label(entry: object) -> str:
    label = _entry_field(entry, "name")
    if not isinstance(label, str) or not label.strip():
        raise ValueError("it has no name")
    return label.strip()


def _pairs(items: object) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for item in items if isinstance(items, list | tuple) else ():
        name, value = _entry_field(item, "name"), _entry_field(item, "value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValueError("a name/value pair is not two strings")
        pairs.append((name, value))
    return tuple(pairs)
