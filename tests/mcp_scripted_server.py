"""A small MCP skills server over stdio that serves exactly what a JSON script says, read again
at every request: ``SCRIPT``. Only the standard library, so it starts in a few milliseconds.

The script (`write_script` in ``tests/mcp_scripted.py`` builds it):
- ``skills``: the `skills/list` entries, verbatim (so an entry may be anything a server sends);
- ``files``: ``{uri: text}`` answered by `resources/read`;
- ``silent``: methods never answered (``server/discover`` for a server that never answers);
- ``padding``: ``{method: bytes}`` of padding added to that method's answers;
- ``stderr`` and ``exit``: written to stderr, then exit with that status, before anything else
  (with ``exit_on``, a method: when that method is first asked instead);
- ``pid``: a file to write the server's own pid to;
- ``helper``: a file to write the pid of a helper process (same process group) to; it sleeps;
- ``extension``: ``false`` to declare no skills extension;
- ``record``: a file each received method is appended to, one a line;
- ``stubborn``: ``true`` for a server that ignores SIGTERM and the end of its input: only a
  kill stops it.

`answer` is what the server does with one message, so that a test can serve a script in its
own process too (tests/mcp_memory.py); the keys about the process itself (``stderr``,
``exit``, ``pid``, ``helper``, ``stubborn``) then have no meaning.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

PROCESS_KEYS = ("stderr", "exit", "exit_on", "pid", "helper", "stubborn")


def result_for(
    method: str, params: dict[str, Any], script: dict[str, Any]
) -> dict[str, Any] | None:
    """The result the script gives ``method`` (``None``: an unknown method)."""
    cache = {"ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
    padding = {"padding": "x" * size} if (size := script.get("padding", {}).get(method)) else {}
    if method == "server/discover":
        declared = script.get("extension", True)
        extensions: dict[str, Any] = {"io.modelcontextprotocol/skills": {}} if declared else {}
        capabilities = {"resources": {}, "extensions": extensions}
        return {"supportedVersions": ["2026-07-28"], "capabilities": capabilities, **cache}
    if method == "skills/list":
        # With ``pages``: the same skills on each of that many pages.
        page = int(params.get("cursor") or 0) + 1
        more = {"nextCursor": str(page)} if page < script.get("pages", 1) else {}
        return {"skills": script.get("skills", []), **cache, **padding, **more}
    if method == "resources/read":
        uri = params.get("uri")
        text = script.get("files", {}).get(uri)
        contents = [] if text is None else [{"uri": uri, "mimeType": "text/markdown", "text": text}]
        return {"contents": contents, "resultType": "complete", **padding}
    return None


def answer(message: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The answer to one received message, by the script at ``path`` as it is now (``None``:
    no answer); the method is recorded first when the script says where."""
    method, request_id = message.get("method"), message.get("id")
    with open(path, encoding="utf-8") as file:
        script = json.load(file)
    if (record := script.get("record")) is not None:
        with open(record, "a", encoding="utf-8") as out:
            out.write(f"{method}\n")
    if request_id is None or method in script.get("silent", ()):
        return None  # a notification, or a request this server never answers
    result = result_for(str(method), message.get("params") or {}, script)
    if result is None:
        error = {"code": -32601, "message": f"unknown method {method}"}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> None:
    path = sys.argv[1]
    with open(path, encoding="utf-8") as file:
        script = json.load(file)
    if (pid := script.get("pid")) is not None:
        with open(pid, "w", encoding="utf-8") as out:
            out.write(str(os.getpid()))
    if (helper := script.get("helper")) is not None:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(helper, "w", encoding="utf-8") as out:
            out.write(str(child.pid))
    if script.get("stubborn"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "exit_on" not in script:
        _exit_if_told(script)
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == script.get("exit_on"):
            _exit_if_told(script)
        reply = answer(message, path)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    if script.get("stubborn"):
        while True:  # its input ended: it stays all the same
            signal.pause()


def _exit_if_told(script: dict[str, Any]) -> None:
    if "stderr" in script:
        sys.stderr.write(script["stderr"])
        sys.stderr.flush()
    if "exit" in script:
        os._exit(script["exit"])


if __name__ == "__main__":
    main()
