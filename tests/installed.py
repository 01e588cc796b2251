"""The package as a person gets it: built with ``python -m build``, installed in a fresh venv.

`build_and_install` makes one wheel and one sdist from this checkout and installs the wheel
(dependencies from the package index, as ``pip install`` would) into a new virtual environment
that knows nothing of this checkout. The tests that need it share one `Installation` per test
session (the ``installed`` fixture in ``conftest.py``): building and installing take tens of
seconds, and the tests carry the ``wheel`` marker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "Installation", "build_and_install", "isolated_env"]

ROOT = Path(__file__).resolve().parents[1]

# Generous: a cold package cache on a busy machine.
_STEP_SECONDS = 600


@dataclass(frozen=True, slots=True)
class Installation:
    """A built distribution and the fresh venv it is installed in.

    Attributes:
        wheel: the built ``.whl``.
        sdist: the built ``.tar.gz`` (the wheel was built from it).
        build_output: what ``python -m build`` printed (stdout and stderr).
        venv: the virtual environment's directory.
        bin: its scripts directory (``acp-skills-demo`` lives there).
        python: its interpreter.
    """

    wheel: Path
    sdist: Path
    build_output: str
    venv: Path
    bin: Path
    python: Path


def isolated_env(home: Path, *, path: str | None = None) -> dict[str, str]:
    """An environment that names nothing of this checkout: a private home, no PYTHONPATH."""
    env = {
        "HOME": str(home),
        "PATH": path if path is not None else os.defpath,
        "LANG": "C.UTF-8",
    }
    # The package index settings of this machine (mirrors, certificates) still apply.
    for name, value in os.environ.items():
        if name.startswith("PIP_") or name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
            env[name] = value
    return env


def _run(command: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=_STEP_SECONDS,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}")
    return result.stdout


def build_and_install(work: Path) -> Installation:
    """Build this checkout into ``work/dist`` and install the wheel into ``work/venv``.

    Raises:
        RuntimeError: a step failed; the message carries its output.
    """
    dist = work / "dist"
    # `python -m build` without --sdist/--wheel builds the sdist, then the wheel from it.
    build_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    output = _run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=work, env=build_env
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    environment = work / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(environment)
    scripts = environment / ("Scripts" if os.name == "nt" else "bin")
    python = scripts / ("python.exe" if os.name == "nt" else "python")
    home = work / "home"
    home.mkdir(exist_ok=True)
    _run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        cwd=work,
        env=isolated_env(home, path=f"{scripts}{os.pathsep}{os.defpath}"),
    )
    return Installation(
        wheel=wheel,
        sdist=sdist,
        build_output=output,
        venv=environment,
        bin=scripts,
        python=python,
    )
