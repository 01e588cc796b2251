"""One MCP server's configuration: what the session (or ``--mcp-server``) names, and the
identity trust stores for it."""

from __future__ import annotations

import json
import shlex
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

    @property
    def identity(self) -> str:
        """What trust remembers: the label and the command line or url (never the env or
        headers, which hold secrets)."""
        where = self.url if self.url is not None else shlex.join((self.command or "", *self.args))
        # A label holding "=" (or opening with a quote) is written as a JSON string, so that
        # no other label and command read the same.
        quoted = "=" in self.label or self.label.startswith('"')
        label = json.dumps(self.label, ensure_ascii=False) if quoted else self.label
        return f"{label}={where}"


def parse_server_option(text: str) -> McpServer:
    """``LABEL=URL`` (http or https: streamable HTTP) or ``LABEL=COMMAND`` (stdio, split by
    shell rules); ``ValueError`` with the reason otherwise."""
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
