"""One MCP server's configuration, from a session's ``mcpServers`` entry or ``--mcp-server``."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel


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
        """An ``mcpServers`` entry (the ACP SDK's model, or a dict), stdio or HTTP; raises
        ValueError with the reason for any other (SSE, no name, ...)."""
        raw = entry.model_dump() if isinstance(entry, BaseModel) else entry
        fields: Mapping[str, object] = raw if isinstance(raw, Mapping) else {}
        keys = ("name", "type", "command", "args", "url")
        label, kind, command, args, url = (fields.get(key) for key in keys)
        if not isinstance(label, str) or not (label := label.strip()):
            raise ValueError("it has no name")
        if kind is None and isinstance(command, str) and command.strip():
            if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
                raise ValueError("its args are not a list of strings")
            env = _pairs(fields.get("env"))
            return cls(label=label, command=command, args=tuple(args), env=env)
        if kind == "http" and isinstance(url, str) and url.startswith(("http://", "https://")):
            return cls(label=label, url=url, headers=_pairs(fields.get("headers")))
        if kind in (None, "http"):
            raise ValueError(f"it has no {'command' if kind is None else 'http or https url'}")
        raise ValueError(f"a server of type {kind!r} is not supported (stdio and http are)")

    @property
    def identity(self) -> str:
        """What trust remembers: the label and the command line or url (never the secrets)."""
        where = self.url if self.url is not None else shlex.join((self.command or "", *self.args))
        # A label holding "=" (or opening with a quote) is a JSON string: no two read the same.
        quoted = "=" in self.label or self.label.startswith('"')
        return f"{json.dumps(self.label, ensure_ascii=False) if quoted else self.label}={where}"


def parse_server_option(text: str) -> McpServer:
    """``LABEL=URL`` (streamable HTTP) or ``LABEL=COMMAND`` (stdio, split by shell rules);
    raises ValueError with the reason for anything else."""
    label, equals, rest = text.partition("=")
    label, rest = label.strip(), rest.strip()
    if not equals or not label or not rest:
        raise ValueError(f"expected LABEL=COMMAND or LABEL=URL, got {text!r}")
    if rest.startswith(("http://", "https://")):
        return McpServer(label=label, url=rest)
    command, *args = shlex.split(rest)  # not empty: `rest` holds more than spaces
    return McpServer(label=label, command=command, args=tuple(args))


def _pairs(items: object) -> tuple[tuple[str, str], ...]:
    # `env` and `headers`: [{name, value}], a model's dumped to dicts.
    pairs: list[tuple[str, str]] = []
    for item in items if isinstance(items, list | tuple) else ():
        name, value = (
            item.get(key) if isinstance(item, Mapping) else None for key in ("name", "value")
        )
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValueError("a name/value pair is not two strings")
        pairs.append((name, value))
    return tuple(pairs)
