"""How this package was installed, and the command that adds one of its extras in that form
without dropping the extras it has (a tool reinstalled with only the extra asked for loses the
others). pipx and uv are told apart by the file each leaves at the root of the environment it
makes; an extra counts as installed when every package its metadata requires is there."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["DISTRIBUTION", "Installation", "extra_install_hint", "installation"]

DISTRIBUTION: Final = "acp-skills"

_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")
# Where the project a requirement names ends (`mcp<3,>=2.2` -> `mcp`).
_NAME_END = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class Installation:
    """An environment that holds this package: its installer (``pipx``, ``uv``, else
    ``environment``), directory, interpreter, installed extras, and what each extra requires
    (empty when the package's metadata is not there)."""

    kind: Literal["pipx", "uv", "environment"]
    prefix: str
    python: str
    extras: frozenset[str]
    requirements: Mapping[str, tuple[str, ...]]


def installation(prefix: str | None = None) -> Installation:
    """The environment at ``prefix`` (the running one by default), as its installer made it."""
    root = os.path.abspath(prefix if prefix is not None else sys.prefix)
    # What each installer leaves at the root of an environment it made.
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
    distributions = list(importlib.metadata.distributions(path=search))
    installed = {_name(d) for d in distributions}
    requirements = _extra_requirements(distributions)
    extras = frozenset(
        extra
        for extra, needed in requirements.items()
        if all(_normalized(_NAME_END.split(item.strip(), 1)[0]) in installed for item in needed)
    )
    return Installation(
        kind=kind, prefix=root, python=python, extras=extras, requirements=requirements
    )


def extra_install_hint(extra: str, installed: Installation | None = None) -> str:
    """The command that adds ``extra`` to the environment this package runs in (or to
    ``installed``): ``run `pipx inject acp-skills 'openai>=1.40'` ``. A tool keeps its extras:
    pipx injects the packages; uv reinstalls from the clone with every extra already there."""
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


def _normalized(name: str) -> str:
    """A project name as the package index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _name(distribution: importlib.metadata.Distribution) -> str:
    return _normalized(distribution.metadata["Name"] or "")


def _extra_requirements(
    distributions: Iterable[importlib.metadata.Distribution],
) -> dict[str, tuple[str, ...]]:
    """Each extra of this package and what it requires, from its metadata among
    ``distributions`` (the first found wins, as it does on the search path)."""
    ours = [d for d in distributions if _name(d) == _normalized(DISTRIBUTION)]
    if not ours:
        return {}
    metadata = ours[0].metadata
    requirements: dict[str, list[str]] = {
        extra: [] for extra in metadata.get_all("Provides-Extra") or []
    }
    for line in metadata.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        if (named := _EXTRA_MARKER.search(marker)) is not None and named[1] in requirements:
            requirements[named[1]].append(requirement.strip())
    return {extra: tuple(needed) for extra, needed in requirements.items()}
