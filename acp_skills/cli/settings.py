"""The settings the demo agent and ``acp-skills`` share (public, docs/cli.md): one table of flags,
each with its ``ACP_SKILLS_*`` variable read as the flag would be, resolved into one `Settings`."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import os
import re
import shlex
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from ..local import LocalSkillProvider
from ..model import is_skill_name
from ..trust import TRUST_MODES, TrustMode, default_trust_file

EXAMPLE_SKILLS: Final = Path(__file__).resolve().parent / "example_skills"

_T = TypeVar("_T")
_D = TypeVar("_D")
_N = TypeVar("_N", int, float)


class SettingError(ValueError):
    """A setting that cannot be used; the message names the variable or flag, in one line."""


def env(name: str) -> str | None:
    """The variable's value, stripped; ``None`` when unset or blank."""
    return os.environ.get(name, "").strip() or None


def expand_path(text: str) -> str:
    """``text`` with a leading ``~`` expanded: editors start the agent without a shell."""
    return os.path.expanduser(text)


def _default_state_dir() -> Path:
    # A relative XDG_STATE_HOME counts as unset.
    base = expand_path(env("XDG_STATE_HOME") or "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "acp-skills-demo"


def _positive(convert: Callable[[str], _N], kind: str, bound: str) -> Callable[[str], _N]:
    def read(text: str) -> _N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be {bound}: {text!r}")
        return value

    return read


positive_int: Final = _positive(int, "a whole number", "at least 1")
positive_float: Final = _positive(float, "a number", "more than 0")


def _budget(text: str) -> int | None:
    return None if text.strip().lower() in ("none", "unlimited") else positive_int(text)


def _one_of(*choices: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        if (value := text.lower()) not in choices:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(choices)}, not {text!r}")
        return value

    return read


def _skill_name(text: str) -> str:
    if not is_skill_name(text):
        raise argparse.ArgumentTypeError(
            f"not a skill name: {text!r} (lowercase letters and digits in hyphen-separated words)"
        )
    return text


def _path(text: str) -> Path:
    return Path(expand_path(text))


def from_env(variable: str, convert: Callable[[str], _T], default: _D) -> _T | _D:
    """The variable converted as its flag's value would be; ``default`` when it is unset."""
    text = env(variable)
    return default if text is None else _read(variable, convert, text)


def _read(variable: str, convert: Callable[[str], _T], text: str) -> _T:
    try:
        return convert(text)
    except argparse.ArgumentTypeError as error:
        raise SettingError(f"{variable}: {error}") from None


def extra_install_hint(extra: str) -> str:
    """The command that adds ``extra`` in the form this package was installed (pipx, uv or an
    environment: the file each installer leaves at its root), keeping the extras it has."""
    try:
        requires = importlib.metadata.requires("acp-skills") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    ours = re.compile(rf"""\bextra\s*==\s*["']{re.escape(extra)}["']""")
    packages = [line.partition(";")[0].strip() for line in requires if ours.search(line)]
    root = sys.prefix
    if os.path.isfile(os.path.join(root, "pipx_metadata.json")):
        # pipx names a tool's environment after the tool (with any --suffix it was given).
        return f"run `pipx inject {shlex.join([os.path.basename(root), *(packages or [extra])])}`"
    if os.path.isfile(receipt := os.path.join(root, "uv-receipt.toml")):
        with open(receipt, "rb") as file:
            tool = (tomllib.load(file).get("tool", {}).get("requirements") or [{}])[0]
        extras = [extra, *(e for e in tool.get("extras", []) if e != extra)]
        spec = shlex.join([f".[{','.join(extras)}]"])
        return f"in your clone of acp-skills, run `uv tool install --reinstall {spec}`"
    return f"run `{shlex.join([sys.executable, '-m', 'pip', 'install', *(packages or [extra])])}`"


def _load_mcp() -> Any:
    # Only when a server is named: the commands start on the core alone (tests/test_cli.py). The
    # SDK itself loads at the first connection, so whether the extra is installed is asked here.
    if importlib.util.find_spec("mcp") is None:
        raise SettingError(
            "--mcp-server needs the mcp extra, which is not installed (no module 'mcp'): "
            + extra_install_hint("mcp")
        )
    return importlib.import_module("acp_skills.mcp")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the flags and variables say (docs/cli.md); each field's default is the agent's."""

    skills_dirs: tuple[str, ...] = ()
    examples: bool = False
    compat: tuple[str, ...] = ()
    catalog_budget: int | None = 8000
    pinned: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    # The Agent Skills specification's maximum (the library's own default is 500).
    catalog_max_length: int = 1024
    trust: TrustMode = "ask"
    mcp_servers: tuple[Any, ...] = ()  # `acp_skills.mcp.McpServer`s
    mcp_timeout: float = 10.0
    state_dir: Path = field(default_factory=_default_state_dir)

    def provider(
        self, *, watch: bool, dsh_home: str | None = None, agents_home: str | None = None
    ) -> LocalSkillProvider:
        """The `LocalSkillProvider` these settings describe."""
        return LocalSkillProvider(
            dsh_home,
            agents_home,
            custom_skill_dirs=list(self.skills_dirs),
            example_skill_dirs=[EXAMPLE_SKILLS] if self.examples else [],
            compat=self.compat,
            watch=watch,
        )

    def mcp_provider(self, transport: Any = None) -> Any:
        """An `McpSkillProvider` for the ``--mcp-server`` servers (and the sessions' own)."""
        servers, timeout = self.mcp_servers, self.mcp_timeout
        return _load_mcp().McpSkillProvider(servers=servers, timeout=timeout, transport=transport)

    def unusable_state_dir(self) -> str | None:
        """Why session records cannot be kept, or ``None``; a probe file proves ``sessions``
        writable, as permission bits alone do not tell (root, read-only mounts)."""
        sessions = self.state_dir / "sessions"
        try:
            sessions.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=sessions).close()
        except OSError as error:
            return f"cannot write in {sessions}: {error.strerror or error}"
        return None


@dataclass(frozen=True, slots=True)
class _Row:
    """One setting: field, flags and metavar, variable, reader (``None``: a switch), separator."""

    name: str
    flags: str
    variable: str | None
    read: Callable[[str], Any] | None
    many: str | None = None


_WORDS: Final = r"[,\s]+"
_GROUPS: Final = {
    "skills": (
        _Row("skills_dirs", "--skills-dir DIR", "ACP_SKILLS_DIRS", expand_path, os.pathsep),
        _Row("examples", "--examples", None, None),
        _Row("compat", "--compat TOOL", "ACP_SKILLS_COMPAT", _one_of("claude"), _WORDS),
    ),
    "catalog": (
        _Row("catalog_budget", "--catalog-budget --budget N", "ACP_SKILLS_CATALOG_BUDGET", _budget),
        _Row("pinned", "--pin NAME", "ACP_SKILLS_PIN", _skill_name, _WORDS),
        _Row("hidden", "--hide NAME", "ACP_SKILLS_HIDE", _skill_name, _WORDS),
    ),
    "mcp": (
        _Row("mcp_servers", "--mcp-server LABEL=COMMAND|URL", None, str, ""),
        _Row("mcp_timeout", "--mcp-timeout SECONDS", "ACP_SKILLS_MCP_TIMEOUT", positive_float),
    ),
    "trust": (_Row("trust", "--trust MODE", "ACP_SKILLS_TRUST", _one_of(*TRUST_MODES)),),
    "state": (_Row("state_dir", "--state-dir DIR", "ACP_SKILLS_STATE_DIR", _path),),
}
_HELP: Final = {  # docs/cli.md says more of each
    "skills_dirs": "an extra skills directory, after the project's (repeatable)",
    "examples": "also the example skills shipped with the package",
    "compat": "claude: also .claude/skills, and $ARGUMENTS filled in /name",
    "catalog_budget": "the catalog's most characters (default 8000; 'none': no limit)",
    "pinned": "a skill always listed in full, first (repeatable)",
    "hidden": "a skill never listed; it loads by its name (repeatable)",
    "mcp_servers": "an MCP server whose skills join (repeatable): a command (stdio) or a URL",
    "mcp_timeout": "seconds each request to an MCP server may take (default 10)",
    "trust": "project and MCP skills: ask (the default), all or none",
    "state_dir": "where session records are kept (default $XDG_STATE_HOME/acp-skills-demo, "
    "else ~/.local/state/acp-skills-demo)",
}
# Why the agent, which an editor starts in a project, refuses a relative path.
_RELATIVE: Final = {
    "skills_dirs": "would be the directory the agent was started in, usually a project, and its "
    "skills would be offered as your own",
    "state_dir": "would put conversation records inside the editor's working directory",
}


def add_arguments(parser: argparse.ArgumentParser, *groups: str) -> None:
    """The flags of ``groups`` (docs/cli.md); with none named, every flag of the agent."""
    for row in (row for group in groups or _GROUPS for row in _GROUPS[group]):
        flags = row.flags.split()
        options: dict[str, Any] = {"action": "store_true"}
        if row.read is not None:
            action = "append" if row.many is not None else "store"
            options = {"action": action, "type": row.read, "metavar": flags.pop()}
        parser.add_argument(
            *(flags if groups else flags[:1]),  # `--budget` is the command line's alone
            dest=row.name,
            default=argparse.SUPPRESS,
            help=_HELP[row.name] + (f". Env: {row.variable}." if row.variable else "."),
            **options,
        )


def resolve(args: argparse.Namespace, *, agent: bool = False) -> Settings:
    """Every setting from its flag, else its variable, else its default (`SettingError` if
    unusable); ``agent`` refuses a relative skills or state directory."""
    values: dict[str, Any] = {}
    for row in (row for rows in _GROUPS.values() for row in rows):
        if hasattr(args, row.name):
            named, value = row.flags.split()[0], getattr(args, row.name)
        elif row.variable is None or row.read is None or (text := env(row.variable)) is None:
            continue
        else:
            texts = re.split(row.many, text) if row.many else [text]
            read = [_read(row.variable, row.read, item) for item in texts if item.strip()]
            named, value = row.variable, read if row.many else read[0]
        why = _RELATIVE.get(row.name) if agent else None
        for path in (value if row.many is not None else [value]) if why else ():
            if not os.path.isabs(path):
                raise SettingError(
                    f"{named} must be an absolute path (or start with ~), not "
                    f"{os.fspath(path)!r}: a relative one {why}"
                )
        values[row.name] = tuple(value) if row.many is not None else value
    if servers := values.get("mcp_servers"):
        mcp = _load_mcp()
        try:
            values["mcp_servers"] = tuple(map(mcp.parse_server_option, servers))
        except ValueError as error:
            raise SettingError(f"--mcp-server: {error}") from None
    try:
        default_trust_file()  # a relative ACP_SKILLS_TRUST_FILE is refused before anything runs
    except ValueError as error:
        raise SettingError(str(error)) from None
    return Settings(**values)
