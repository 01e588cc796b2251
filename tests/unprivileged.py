"""Permission checks mean nothing to root: as root (as in CI), a permission test runs its check
in a child process that gives up root once it has imported everything and set up its files."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

__all__ = ["run_unprivileged"]

_DROP_ROOT = """
if os.geteuid() == 0:
    os.setuid(65534)  # nobody
"""


def run_unprivileged(setup: str, check: str, directory: Path) -> str:
    """Run ``setup`` (as the current user), then ``check`` without root; return the output.

    Both are Python with ``os``, ``sys``, ``anyio`` and ``LocalFileSystem`` imported and the
    test's directory in ``sys.argv[1]``.
    """
    for path in (directory, *directory.parents):
        if path == Path(tempfile.gettempdir()):
            break
        path.chmod(path.stat().st_mode | 0o755)  # let the unprivileged child reach it
    script = "\n".join(
        [
            "import os, sys, anyio",
            # Everything the check needs is imported while the interpreter can still read its
            # own installation (it may live under root's home).
            "import anyio._backends._asyncio",
            "from acp_skills import LocalFileSystem",
            textwrap.dedent(setup),
            _DROP_ROOT,
            textwrap.dedent(check),
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()
