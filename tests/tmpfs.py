"""A small tmpfs for tests that need a full disk: mounted when the tests run as root."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` on ``directory`` for the block (skipped when not root)."""
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a tmpfs, which only root can mount")
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until the file system is full; return its path."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as file:
        chunk = b"\0" * 4096
        try:
            while True:
                file.write(chunk)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
    return filler
