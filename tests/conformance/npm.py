"""The official TypeScript SDK, installed once into a cache directory with npm.

Nothing of the npm package is vendored: `ensure_sdk` runs ``npm install`` into
``<repo>/.cache/npm-conformance/`` (gitignored) the first time, under a file lock so parallel
runs do not collide, and leaves a marker naming the pinned versions so later runs skip it.
``ACP_CONFORMANCE_NPM_DIR`` points the suite at an existing install prefix instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SDK_PACKAGE", "SDK_VERSION", "ZOD_VERSION", "SdkUnavailable", "ensure_sdk", "node"]

SDK_PACKAGE = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"
ZOD_VERSION = "4.6.7"  # the SDK's required peer dependency

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PREFIX = ROOT / ".cache" / "npm-conformance"
_SPECS = (f"{SDK_PACKAGE}@{SDK_VERSION}", f"zod@{ZOD_VERSION}")
_MARKER = ".installed"
_INSTALL_TIMEOUT = 300.0


class SdkUnavailable(RuntimeError):
    """Node, npm or the pinned package cannot be had; the message says why and what to do."""


def node() -> str:
    """The ``node`` executable; `SdkUnavailable` when it is not on PATH."""
    found = shutil.which("node")
    if found is None:
        raise SdkUnavailable(
            "`node` is not on PATH: the TypeScript conformance checks need Node.js 18 or later"
        )
    return found


def sdk_dir(prefix: Path) -> Path:
    """Where the SDK package lives under an install prefix."""
    return prefix / "node_modules" / "@agentclientprotocol" / "sdk"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        if sys.platform == "win32":
            import msvcrt

            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_sdk() -> Path:
    """Install the pinned SDK (once) and return the prefix; `SdkUnavailable` says why not."""
    override = os.environ.get("ACP_CONFORMANCE_NPM_DIR", "").strip()
    prefix = Path(override).resolve() if override else DEFAULT_PREFIX
    wanted = " ".join(_SPECS)
    marker = prefix / _MARKER
    package_json = sdk_dir(prefix) / "package.json"
    if override:
        if not package_json.is_file():
            raise SdkUnavailable(f"ACP_CONFORMANCE_NPM_DIR={override}: no {SDK_PACKAGE} there")
        return prefix
    with _locked(prefix.parent / "npm-conformance.lock"):
        if package_json.is_file() and marker.is_file() and marker.read_text() == wanted:
            return prefix
        npm = shutil.which("npm")
        if npm is None:
            raise SdkUnavailable(
                f"`npm` is not on PATH: it is needed once to install {wanted} into {prefix}"
            )
        prefix.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        command = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *_SPECS]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SdkUnavailable(f"{' '.join(command)} failed: {error}") from error
        if done.returncode != 0 or not package_json.is_file():
            raise SdkUnavailable(
                f"{' '.join(command)} exited with {done.returncode}:\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
        marker.write_text(wanted)
        return prefix
