"""Scripts for `tests/mcp_scripted_server.py`: a listing built from ``SKILL.md`` texts, or
anything else a server might send, and the `McpServer` that runs it."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from acp_skills.mcp import McpServer

SCRIPTED_SERVER = str(Path(__file__).with_name("mcp_scripted_server.py"))


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def skill_text(frontmatter: str, body: str = "Do the thing.") -> str:
    """A ``SKILL.md`` of these frontmatter lines (YAML, without the ``---`` lines)."""
    return f"---\n{frontmatter.rstrip()}\n---\n{body}\n"


def served(
    folder: str,
    text: str,
    frontmatter: Mapping[str, object],
    *,
    dynamic: bool = False,
    files: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """One `skills/list` entry for ``skill://FOLDER/SKILL.md`` holding ``text`` (listed with
    ``frontmatter``, and ``files`` beside it), and what `resources/read` answers for it."""
    uri = f"skill://{folder}/SKILL.md"
    contents = {uri: text} | {f"skill://{folder}/{name}": data for name, data in (files or {}).items()}
    manifest = [
        {"uri": file_uri, "digest": digest(data), "size": len(data.encode("utf-8"))}
        for file_uri, data in contents.items()
    ]
    entry = {"uri": uri, "frontmatter": dict(frontmatter), "resources": "dynamic" if dynamic else manifest}
    return entry, contents


def write_script(
    path: Path,
    entries: Sequence[tuple[dict[str, Any], dict[str, str]]] = (),
    **behaviour: object,
) -> Path:
    """Write the script the server reads at every request (so a test may change it)."""
    files: dict[str, str] = {}
    for _, contents in entries:
        files.update(contents)
    script = {"skills": [entry for entry, _ in entries], "files": files, **behaviour}
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def scripted_server(script: Path, label: str = "team") -> McpServer:
    """The stdio server that serves ``script``."""
    return McpServer(label=label, command=sys.executable, args=(SCRIPTED_SERVER, str(script)))
