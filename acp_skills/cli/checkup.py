"""What ``acp-skills doctor`` checks of the install itself: the extras, the agent's command on
``PATH``, the trust file and the state directory, the SDK versions (docs/cli.md).

Each problem says the command that fixes it, in the form that fits how the package was
installed (`acp_skills.cli.install`)."""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..diagnostics import Diagnostic, diagnostic
from ..errors import Problem
from ..trust_store import TrustFileError, TrustStore, default_trust_file
from .install import Installation, extra_install_hint, installation
from .settings import (
    cannot_write_in,
    default_state_dir,
    env,
    expand_path,
    unusable_state_dir,
)

AGENT_COMMAND: Final = "acp-skills-demo"
# The optional parts a person may want, and what each is for (the `dev` extra is ours).
EXTRAS: Final = {"openai": "--model openai", "mcp": "--mcp-server and editors' MCP servers"}
SDKS: Final = ("agent-client-protocol", "mcp")


@dataclass(frozen=True, slots=True)
class Place:
    """A file or directory the agent reads and writes, and whether it can."""

    what: str
    path: str
    usable: bool
    problem: str = ""
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Checkup:
    """Everything ``doctor`` found about the install; ``problems`` are lines with their fix."""

    install: Installation
    agent_on_path: str | None
    sdks: dict[str, str | None]
    places: tuple[Place, ...]
    problems: tuple[Diagnostic, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "installer": self.install.kind,
            "extras": sorted(set(EXTRAS) & self.install.extras),
            "agentCommand": self.agent_on_path,
            "sdks": self.sdks,
            "places": [
                {"what": p.what, "path": p.path, "usable": p.usable, "problem": p.problem or None}
                for p in self.places
            ],
        }

    def lines(self) -> list[str]:
        installed = self.install
        lines = [f"installed with {installed.kind} in {installed.prefix}"]
        for extra, use in EXTRAS.items():
            if extra in installed.extras:
                lines.append(f"extra {extra}: installed ({use})")
            else:
                lines.append(
                    f"extra {extra}: not installed, needed for {use}; to add it, "
                    + extra_install_hint(extra, installed)
                )
        lines.append(
            f"{AGENT_COMMAND}: {self.agent_on_path}"
            if self.agent_on_path
            else f"{AGENT_COMMAND}: not on PATH"
        )
        for name, version in self.sdks.items():
            lines.append(f"{name}: {version or 'not installed'}")
        for place in self.places:
            state = "readable and writable" if place.usable else place.problem
            lines.append(f"{place.what}: {place.path} ({state})")
        return lines


def checkup(installed: Installation | None = None) -> Checkup:
    """Check the install this command runs from (or ``installed``)."""
    installed = installed if installed is not None else installation()
    problems: list[Diagnostic] = []
    agent = shutil.which(AGENT_COMMAND)
    if agent is None:
        message = f"{AGENT_COMMAND} is not on PATH: editors cannot start it by name; "
        problems.append(
            diagnostic(Problem("command-not-on-path", message + _path_fix(installed)), None)
        )
    state = env("ACP_SKILLS_STATE_DIR")
    places = (
        _check_trust_file(default_trust_file()),
        _check_state_dir(Path(expand_path(state)) if state else default_state_dir()),
    )
    problems.extend(
        diagnostic(Problem("place-unusable", f"{p.what}: {p.problem}; {p.fix}"), p.path)
        for p in places
        if not p.usable
    )
    sdks = {name: _version(name) for name in SDKS}
    return Checkup(installed, agent, sdks, places, tuple(problems))


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _path_fix(installed: Installation) -> str:
    if installed.kind == "pipx":
        return "run `pipx ensurepath` and open a new shell"
    if installed.kind == "uv":
        return "run `uv tool update-shell` and open a new shell"
    scripts = sysconfig.get_path("scripts", "venv", vars={"base": installed.prefix})
    return f'activate the environment, or run `export PATH="{scripts}:$PATH"`'


def _existing(path: str) -> str:
    """``path``, or its nearest ancestor that exists."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _check_state_dir(path: Path) -> Place:
    # The verdict the agent's start-up gives, here without creating anything but a probe.
    if (unusable := unusable_state_dir(path, create=False)) is None:
        return Place("state directory", str(path), True)
    where = str(unusable.path)
    fix = _permission_fix(where) if unusable.failed else _move_aside(where)
    return Place("state directory", str(path), False, str(unusable), fix)


def _check_trust_file(path: str) -> Place:
    # Proved by doing, without changing anything a person keeps: permission bits alone do not
    # tell (root, read-only mounts, access lists). Nothing is created but a probe, removed.
    if os.path.lexists(path):
        if not os.path.isfile(path):
            return Place("trust file", path, False, "not a regular file", _move_aside(path))
        if not os.access(path, os.R_OK):
            return Place("trust file", path, False, "not readable", _permission_fix(path))
    # The file is replaced by a write beside it (beside its target, when it is a link).
    probed = _existing(os.path.dirname(os.path.realpath(path)))
    if (failure := cannot_write_in(probed)) is not None:
        problem = f"cannot write in {probed}: {failure}"
        return Place("trust file", path, False, problem, _permission_fix(probed))
    # Readable bytes are not enough: decisions that do not parse grant nothing, and every
    # session would then ask again about projects the person trusted.
    place = Place("trust file", path, True)
    if not os.path.lexists(path):
        return place
    try:
        TrustStore(path).read()
    except TrustFileError as error:
        problem = str(error).removeprefix(f"{path}: ")
        return Place("trust file", path, False, problem, "repair it, or " + _move_aside(path))
    return place


def _move_aside(path: str) -> str:
    return f"move it aside: run `mv {shlex.quote(path)} {shlex.quote(path + '.old')}`"


def _permission_fix(path: str) -> str:
    return f"run `chmod u+rw {shlex.quote(path)}` (or give it to your user with chown)"
