"""How this package was installed (pipx, uv or an environment: the file each installer leaves at
its root), and the command that adds an extra in that form without dropping the others."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["DISTRIBUTION", "Installation", "extra_install_hint", "installation"]

DISTRIBUTION: Final = "acp-skills"

_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")
# Where the project a requirement names ends (`mcp<3,>=2.2` -> `mcp`).
_NAME_END = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class Installation:
    """An environment that holds this package, and what each of its extras requires."""

    kind: Literal["pipx", "uv", "environment"]
    prefix: str
    python: str
    extras: frozenset[str]
    requirements: Mapping[str, tuple[str, ...]]


def installation(prefix: str | None = None) -> Installation:
    """The environment at ``prefix`` (the running one by default), as its installer made it."""
    root = os.path.abspath(prefix if prefix is not None else sys.prefix)
    kind: Literal["pipx", "uv", "environment"] = "environment"
    if os.path.isfile(os.path.join(root, "pipx_metadata.json")):
        kind = "pipx"
    elif os.path.isfile(os.path.join(root, "uv-receipt.toml")):
        kind = "uv"
    if prefix is None:
        # The running interpreter's own search path: a system Python's site-packages need not
        # follow the venv layout.
        python, search = sys.executable, list(sys.path)
    else:
        where = {"base": root, "platbase": root}
        scripts = sysconfig.get_path("scripts", "venv", vars=where)
        python = os.path.join(scripts, "python.exe" if os.name == "nt" else "python")
        search = [sysconfig.get_path("purelib", "venv", vars=where)]
    requirements = _extra_requirements(search)
    extras = frozenset(
        extra
        for extra, needed in requirements.items()
        if all(_found(_NAME_END.split(item.strip(), 1)[0], search) for item in needed)
    )
    return Installation(
        kind=kind, prefix=root, python=python, extras=extras, requirements=requirements
    )


def extra_install_hint(extra: str, installed: Installation | None = None) -> str:
    """The command that adds ``extra`` to ``installed`` (default: this environment)."""
    where = installed if installed is not None else installation()
    packages = where.requirements.get(extra) or (extra,)
    if where.kind == "pipx":
        # pipx names a tool's environment after the tool (with any --suffix it was given).
        tool = os.path.basename(where.prefix)
        return f"run `pipx inject {shlex.join([tool, *packages])}`"
    if where.kind == "uv":
        kept = sorted(where.extras - {extra})
        spec = f".[{','.join([extra, *kept])}]"
        return (
            f"in your clone of acp-skills, run `uv tool install --reinstall {shlex.join([spec])}`"
        )
    return f"run `{shlex.join([where.python, '-m', 'pip', 'install', *packages])}`"


def version_of(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def path_hint(installed: Installation) -> str:
    """The command that puts this package's commands on ``PATH``, in the installer's form."""
    if installed.kind == "pipx":
        return "run `pipx ensurepath` and open a new shell"
    if installed.kind == "uv":
        return "run `uv tool update-shell` and open a new shell"
    scripts = os.path.dirname(installed.python)
    return f'activate the environment, or run `export PATH="{scripts}:$PATH"`'


def _found(name: str, search: list[str]) -> importlib.metadata.Distribution | None:
    # The first on the search path, as an import finds it; names compared as the index does.
    return next(iter(importlib.metadata.distributions(name=name, path=search)), None)


def _extra_requirements(search: list[str]) -> dict[str, tuple[str, ...]]:
    """Each extra of this package and what it requires, from its metadata on ``search``."""
    if (ours := _found(DISTRIBUTION, search)) is None:
        return {}
    metadata = ours.metadata
    requirements: dict[str, list[str]] = {
        extra: [] for extra in metadata.get_all("Provides-Extra") or []
    }
    for line in metadata.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        if (named := _EXTRA_MARKER.search(marker)) is not None and named[1] in requirements:
            requirements[named[1]].append(requirement.strip())
    return {extra: tuple(needed) for extra, needed in requirements.items()}
