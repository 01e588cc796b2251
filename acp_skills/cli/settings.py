"""The settings the demo agent and ``acp-skills`` share (public, docs/cli.md): each flag, and its
``ACP_SKILLS_*`` variable read as the flag would be. Editors start the agent without a shell,
so every path is ``~``-expanded here. A bad variable is a `SettingError` naming it (never a
flag the person did not pass); a bad flag stays argparse's usage error."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from ..local import LocalSkillProvider
from ..model import is_skill_name
from ..trust import TRUST_MODES, trust_mode
from ..trust_store import default_trust_file
from .install import extra_install_hint

__all__ = [
    "CATALOG_MAX_LENGTH",
    "DEFAULT_CATALOG_BUDGET",
    "EXAMPLE_SKILLS",
    "SettingError",
    "UnusableStateDir",
    "add_catalog_arguments",
    "add_mcp_options",
    "add_skill_arguments",
    "add_trust_argument",
    "build_provider",
    "catalog_budget",
    "default_state_dir",
    "env",
    "expand_path",
    "extra_install_hint",
    "from_env",
    "mcp_provider_from",
    "mcp_timeout",
    "positive_float",
    "positive_int",
    "resolve_skill_settings",
    "resolve_trust",
    "unusable_state_dir",
]

EXAMPLE_SKILLS: Final = Path(__file__).resolve().parent / "example_skills"
DEFAULT_CATALOG_BUDGET: Final = 8000
# The Agent Skills specification's maximum (the library's own default is 500).
CATALOG_MAX_LENGTH: Final = 1024
COMPAT: Final = ("claude",)
DEFAULT_MCP_TIMEOUT: Final = 10.0

_T = TypeVar("_T")
_D = TypeVar("_D")
_N = TypeVar("_N", int, float)

# A budget flag's value when the flag is absent: `--catalog-budget none` parses to None.
_NOT_GIVEN: Final = object()


class SettingError(ValueError):
    """A setting that cannot be used; the message names the variable or flag, in one line."""


def env(name: str) -> str | None:
    """The variable's value, stripped; ``None`` when unset or blank."""
    return os.environ.get(name, "").strip() or None


def expand_path(text: str) -> str:
    """``text`` with a leading ``~`` (or ``~user``) expanded, as a shell would."""
    return os.path.expanduser(text)


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/acp-skills-demo``; a relative ``XDG_STATE_HOME`` counts as unset."""
    base = expand_path(env("XDG_STATE_HOME") or "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "acp-skills-demo"


@dataclass(frozen=True, slots=True)
class UnusableStateDir:
    """Why session records cannot be kept: the directory at fault, what failed there (``create``,
    ``write in``, or empty: it is not a directory) and the system's reason."""

    path: Path
    failed: str = ""
    reason: str = ""

    def __str__(self) -> str:
        if not self.failed:
            return f"{self.path} is not a directory"
        return f"cannot {self.failed} {self.path}: {self.reason}"


def unusable_state_dir(state_dir: Path, *, create: bool = True) -> UnusableStateDir | None:
    """Why session records cannot be kept under ``state_dir``, or ``None``: the one verdict of
    the agent's start-up and of ``doctor``. With ``create`` (the agent) ``sessions`` is made
    first; without (doctor) only a probe is written, in its nearest existing ancestor."""
    sessions = state_dir / "sessions"
    try:
        for directory in (state_dir, sessions):
            if directory.exists() and not directory.is_dir():
                return UnusableStateDir(directory)
        if create:
            sessions.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return UnusableStateDir(sessions, "create", error.strerror or str(error))
    probed = existing_ancestor(sessions)
    if (failure := cannot_write_in(probed)) is not None:
        return UnusableStateDir(Path(probed), "write in", failure)
    return None


def existing_ancestor(path: str | os.PathLike[str]) -> str:
    """``path``, or its nearest ancestor that exists."""
    path = os.fspath(path)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def cannot_write_in(directory: str) -> str | None:
    """Why no file can be created in ``directory``, or ``None``. Proved by doing, as permission
    bits alone do not tell (root, read-only mounts, access lists): a probe is made and removed."""
    try:
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as error:
        return error.strerror or str(error)
    return None


def positive_int(text: str) -> int:
    return _positive(text, int, "a whole number", "at least 1")


def positive_float(text: str) -> float:
    return _positive(text, float, "a number", "more than 0")


def _positive(text: str, convert: Callable[[str], _N], kind: str, bound: str) -> _N:
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be {bound}: {text!r}")
    return value


def catalog_budget(text: str) -> int | None:
    """A positive number of characters, or ``none`` (also ``unlimited``) for no budget."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} (a number of characters, or none)") from None


def compat_tool(text: str) -> str:
    if text not in COMPAT:
        raise argparse.ArgumentTypeError(f"unknown tool {text!r} (known: {', '.join(COMPAT)})")
    return text


def skill_name(text: str) -> str:
    if not is_skill_name(text):
        raise argparse.ArgumentTypeError(
            f"not a skill name: {text!r} (lowercase letters and digits in hyphen-separated words)"
        )
    return text


def from_env(variable: str, convert: Callable[[str], _T], default: _D) -> _T | _D:
    """The variable converted as its flag's value would be; ``default`` when it is unset."""
    text = env(variable)
    return default if text is None else _read(variable, convert, text)


def _read(variable: str, convert: Callable[[str], _T], text: str) -> _T:
    try:
        return convert(text)
    except argparse.ArgumentTypeError as error:
        raise SettingError(f"{variable}: {error}") from None


def add_skill_arguments(parser: argparse.ArgumentParser) -> None:
    """``--skills-dir``, ``--examples`` and ``--compat``: where skills are looked up."""
    parser.add_argument(
        "--skills-dir",
        action="append",
        type=expand_path,
        metavar="DIR",
        help="an extra skills directory, after the project's and before the user's (repeatable; "
        "Env: ACP_SKILLS_DIRS, separated by the OS path separator)",
    )
    parser.add_argument(
        "--examples",
        action="store_true",
        help="also offer the example skills shipped with the package, after any --skills-dir.",
    )
    parser.add_argument(
        "--compat",
        action="append",
        type=compat_tool,
        metavar="TOOL",
        help="claude: also read Claude Code's skills (.claude/skills) and fill $ARGUMENTS and $N "
        "in a skill invoked as /name (Env: ACP_SKILLS_COMPAT)",
    )


def add_catalog_arguments(parser: argparse.ArgumentParser, *flags: str) -> None:
    """The catalog budget (under ``flags``), ``--pin`` and ``--hide``."""
    parser.add_argument(
        *flags,
        dest="catalog_budget",
        type=catalog_budget,
        default=_NOT_GIVEN,
        metavar="CHARACTERS",
        help=f"the most characters a session's skill catalog may take (default "
        f"{DEFAULT_CATALOG_BUDGET}; 'none': no limit; Env: ACP_SKILLS_CATALOG_BUDGET)",
    )
    for flag, what in (
        ("--pin", "always listed in the catalog in full, first"),
        ("--hide", "never listed in the catalog nor found by a query (it loads by its name)"),
    ):
        parser.add_argument(
            flag,
            action="append",
            type=skill_name,
            metavar="NAME",
            help=f"a skill {what} (repeatable; Env: ACP_SKILLS_{flag[2:].upper()}, by commas)",
        )


# Each setting a variable may give when its flag did not: its `args` name, the variable, how one
# value is read (the flag's own reader), the default, and (for a list) what separates values.
_FROM_ENV: Final[tuple[tuple[str, str, Callable[[str], Any], Any, str | None], ...]] = (
    ("skills_dir", "ACP_SKILLS_DIRS", expand_path, None, re.escape(os.pathsep)),
    ("compat", "ACP_SKILLS_COMPAT", compat_tool, None, r"\s*,\s*"),
    ("catalog_budget", "ACP_SKILLS_CATALOG_BUDGET", catalog_budget, DEFAULT_CATALOG_BUDGET, None),
    ("pin", "ACP_SKILLS_PIN", skill_name, None, r"[,\s]+"),
    ("hide", "ACP_SKILLS_HIDE", skill_name, None, r"[,\s]+"),
)


def resolve_skill_settings(args: argparse.Namespace, *, absolute_dirs: bool = False) -> None:
    """Fill what no flag gave from the ``ACP_SKILLS_*`` variables (flags win); ``absolute_dirs``
    (the agent, which an editor starts in a project) refuses a relative skills directory.

    Raises:
        SettingError: a variable holds a value its flag would refuse, or (``absolute_dirs``) a
            skills directory is relative.
    """
    where = "--skills-dir" if args.skills_dir else "ACP_SKILLS_DIRS"
    for name, variable, read, default, separator in _FROM_ENV:
        # A list flag not given is None; the budget's, `_NOT_GIVEN` (None is `none`).
        absent = None if separator is not None else _NOT_GIVEN
        if not hasattr(args, name) or getattr(args, name) is not absent:
            continue
        text = env(variable) or ""
        if separator is None:
            setattr(args, name, _read(variable, read, text) if text else default)
        else:
            items = [item for item in re.split(separator, text) if item.strip()]
            setattr(args, name, [_read(variable, read, item) for item in items])
    for directory in args.skills_dir if absolute_dirs else ():
        if not os.path.isabs(directory):
            raise SettingError(
                f"{where} must be an absolute path (or start with ~), not {directory!r}: a "
                "relative one would be the directory the agent was started in, usually a "
                "project, and its skills would be offered as your own"
            )


def add_trust_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--trust ask|all|none``; `resolve_trust` fills it from ``ACP_SKILLS_TRUST``."""
    parser.add_argument("--trust", choices=TRUST_MODES, help=help)


def resolve_trust(args: argparse.Namespace) -> None:
    """``args.trust`` from ``ACP_SKILLS_TRUST`` when no flag gave it (``ask`` when neither), if
    the command has the flag; and the trust file's place checked.

    Raises:
        SettingError: ``ACP_SKILLS_TRUST`` is no mode, or ``ACP_SKILLS_TRUST_FILE`` is relative.
    """
    if hasattr(args, "trust") and args.trust is None:
        value = env("ACP_SKILLS_TRUST") or "ask"
        try:
            args.trust = trust_mode(value)
        except ValueError:
            known = ", ".join(TRUST_MODES)
            raise SettingError(f"ACP_SKILLS_TRUST must be one of {known}, not {value!r}") from None
    try:
        default_trust_file()
    except ValueError as error:
        raise SettingError(str(error)) from None


def add_mcp_options(parser: argparse.ArgumentParser, meaning: str | None = None) -> None:
    """``--mcp-server LABEL=COMMAND|URL`` (``meaning``: what it is for, when not a server whose
    skills join every session) and ``--mcp-timeout SECONDS``."""
    meaning = meaning or "an MCP server whose skills join every session (repeatable)"
    parser.add_argument(
        "--mcp-server",
        action="append",
        metavar="LABEL=COMMAND|URL",
        help=f"{meaning}: a command run over stdio (split by shell rules) or an http(s) URL "
        "(streamable HTTP)",
    )
    parser.add_argument(
        "--mcp-timeout",
        type=positive_float,
        metavar="SECONDS",
        help="the MCP listing deadline (default: $ACP_SKILLS_MCP_TIMEOUT, else "
        f"{DEFAULT_MCP_TIMEOUT:g})",
    )


def mcp_provider_from(options: Sequence[str], timeout: float | None) -> Any:
    """The `McpSkillProvider` for ``--mcp-server`` values.

    Raises:
        SettingError: a value is malformed, or the ``mcp`` extra is not installed.
    """
    try:
        # Loaded only when a server is named, so the commands start on the core alone (pinned
        # by tests/test_cli.py); importing it imports the SDK, so it tells whether the extra is
        # installed now, never mid-session.
        mcp = importlib.import_module("acp_skills.mcp")
    except ImportError as error:
        missing = f"no module {error.name!r}" if error.name else str(error)
        raise SettingError(
            f"--mcp-server needs the mcp extra, which is not installed ({missing}): "
            + extra_install_hint("mcp")
        ) from None
    timeout = mcp_timeout(timeout)
    try:
        servers = [mcp.parse_server_option(option) for option in options]
    except ValueError as error:
        raise SettingError(f"--mcp-server: {error}") from None
    return mcp.McpSkillProvider(servers=servers, timeout=timeout)


def mcp_timeout(flag: float | None) -> float:
    """``--mcp-timeout``, else ``ACP_SKILLS_MCP_TIMEOUT``, else 10 s."""
    if flag is not None:
        return flag
    return from_env("ACP_SKILLS_MCP_TIMEOUT", positive_float, DEFAULT_MCP_TIMEOUT)


def build_provider(
    args: argparse.Namespace,
    *,
    watch: bool,
    dsh_home: str | None = None,
    agents_home: str | None = None,
) -> LocalSkillProvider:
    """The skills on disk: the project's and the user's, ``--skills-dir`` in between, then the
    bundled examples with ``--examples`` (their source is ``examples``)."""
    return LocalSkillProvider(
        dsh_home,
        agents_home,
        custom_skill_dirs=list(args.skills_dir or []),
        example_skill_dirs=[EXAMPLE_SKILLS] if args.examples else [],
        compat=tuple(args.compat),
        watch=watch,
    )
