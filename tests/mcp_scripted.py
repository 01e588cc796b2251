"""Scripts for `tests/mcp_scripted_server.py`: a listing built from ``SKILL.md`` texts, or
anything else a server might send, and the `McpServer` that runs it (over stdio, or over
streamable HTTP from this process)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import json
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from acp_skills.mcp import McpServer
from tests.mcp_scripted_server import result_for

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
    contents = {uri: text} | {
        f"skill://{folder}/{name}": data for name, data in (files or {}).items()
    }
    manifest = [
        {"uri": file_uri, "digest": digest(data), "size": len(data.encode("utf-8"))}
        for file_uri, data in contents.items()
    ]
    entry = {
        "uri": uri,
        "frontmatter": dict(frontmatter),
        "resources": "dynamic" if dynamic else manifest,
    }
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


@contextlib.contextmanager
def scripted_http_server(script: Path) -> Iterator[str]:
    """The same server over streamable HTTP (JSON answers), on 127.0.0.1 in this process, until
    the block ends; yields its url. With ``unsized`` in the script, no answer says its length;
    ``gzip``: the methods whose answers come gzip-compressed, though the client asked for none."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            behaviour = json.loads(script.read_text(encoding="utf-8"))
            if "id" not in message:
                self.send_response(202)
                self.end_headers()
                return
            result = result_for(message["method"], message.get("params") or {}, behaviour)
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            compressed = message["method"] in behaviour.get("gzip", ())
            body = gzip.compress(body) if compressed else body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if compressed:
                self.send_header("Content-Encoding", "gzip")
            if not behaviour.get("unsized"):  # else the body ends when the connection does
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.send_response(405)  # no stream of server messages
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test's output is not the server's."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
