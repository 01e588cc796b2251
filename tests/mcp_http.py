"""The FastMCP skills server of `tests/mcp_skills_server.py`: the bundles it serves, and the server
over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

SERVER = str(Path(__file__).with_name("mcp_skills_server.py"))


def write_served_skill(
    root: Path, name: str, description: str, body: str, *, extra: str = ""
) -> Path:
    """A bundle for the server to serve: ``root/name/SKILL.md`` (``extra`` frontmatter lines
    after the description) and a ``notes.md`` resource."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n", encoding="utf-8"
    )
    (folder / "notes.md").write_text(f"notes of {name}\n", encoding="utf-8")
    return folder


@contextlib.contextmanager
def http_skills_server(root: Path) -> Iterator[str]:
    """Serve the skills under ``root`` on a free port until the block ends; yields the url.

    The socket listens before the server process starts and is handed to it: a request made
    before the server is ready waits in the socket's backlog, so nothing waits for readiness.
    """
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, SERVER, str(root), "--http", str(listening.fileno())],
            pass_fds=[listening.fileno()],
            stderr=subprocess.DEVNULL,
        )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
