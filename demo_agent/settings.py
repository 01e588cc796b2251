"""The settings the demo agent and ``acp-skills`` share, so the command line sees exactly the
skills and the catalog the agent sees: where skills come from (``--skills-dir``,
``--examples``, ``--compat``) and how the catalog is fitted (budget, pins, hidden skills, the
description cap), given as flags or as ``ACP_SKILLS_*`` variables.

Editors start the agent without a shell, so nothing expands ``~`` for it: every path setting
is expanded here. A bad variable is a `SettingError` naming the variable (never a flag the
person did not pass); a bad flag stays argparse's usage error.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from acp_skills import LocalSkillProvider, is_skill_name

from . import EXAMPLE_SKILLS

DEFAULT_CATALOG_BUDGET: Final = 8000
"""The catalog budget, in characters, when neither a flag nor a variable sets one."""
CATALOG_MAX_LENGTH: Final = 1024
"""The longest a catalog description may be: the Agent Skills specification's maximum (the
library's own default is 500; a budget still shortens descriptions when it must)."""
COMPAT: Final = ("claude",)
_UNLIMITED: Final = ("none", "unlimited")

_T = TypeVar("_T")
_D = TypeVar("_D")

# A budget flag's value when the flag is absent: `--catalog-budget none` parses to None.
_NOT_GIVEN: Final = object()


class SettingError(ValueError):
    """A setting that cannot be used; the message names the variable or flag, in one line."""


def env(name: str) -> str | None:
    """The variable's value, stripped; ``None`` when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def expand_path(text: str) -> str:
    """``text`` with a leading ``~`` (or ``~user``) expanded, as a shell would."""
    return os.path.expanduser(text)


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/acp-skills-demo`` (``~/.local/state/acp-skills-demo`` when unset), where
    the demo agent keeps its session records unless told otherwise.

    A relative ``XDG_STATE_HOME`` counts as unset, as the XDG specification says.
    """
    base = env("XDG_STATE_HOME")
    if base is None or not os.path.isabs(expand_path(base)):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(expand_path(base)) / "acp-skills-demo"


# -- value checkers: argparse `type`s, and the checks of variables -----------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
    return value


def catalog_budget(text: str) -> int | None:
    """A positive number of characters, or ``none`` (also ``unlimited``) for no budget."""
    if text.strip().lower() in _UNLIMITED:
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} (a number of characters, or none)") from None


def skill_name(text: str) -> str:
    if not is_skill_name(text):
        raise argparse.ArgumentTypeError(
            f"not a skill name: {text!r} (lowercase letters and digits in hyphen-separated words)"
        )
    return text


def from_env(variable: str, convert: Callable[[str], _T], default: _D) -> _T | _D:
    """The variable converted as its flag's value would be; ``default`` when it is unset."""
    if (text := env(variable)) is None:
        return default
    try:
        return convert(text)
    except argparse.ArgumentTypeError as error:
        raise SettingError(f"{variable}: {error}") from None


def names_from_env(variable: str) -> list[str]:
    """Skill names separated by commas or spaces."""
    names = [name for name in re.split(r"[,\s]+", env(variable) or "") if name]
    for name in names:
        if not is_skill_name(name):
            raise SettingError(f"{variable} holds {name!r}, which is not a skill name")
    return names


# -- the skill settings, on both command lines ------------------------------------------------


def add_skill_arguments(parser: argparse.ArgumentParser) -> None:
    """``--skills-dir``, ``--examples`` and ``--compat``: where skills are looked up."""
    parser.add_argument(
        "--skills-dir",
        action="append",
        type=expand_path,
        default=None,
        metavar="DIR",
        help="an extra skills directory (repeatable), after the project's and before the "
        "user's. Env: ACP_SKILLS_DIRS (separated by the OS path separator).",
    )
    parser.add_argument(
        "--examples",
        action="store_true",
        help="also offer the example skills shipped with the package, after any --skills-dir.",
    )
    parser.add_argument(
        "--compat",
        action="append",
        choices=COMPAT,
        default=None,
        help="claude: also read Claude Code skills (<project>/.claude/skills, then "
        "~/.claude/skills, after every directory of ours) and replace $ARGUMENTS, "
        "$ARGUMENTS[N] and $N in a skill invoked as /name. Env: ACP_SKILLS_COMPAT.",
    )


def add_catalog_arguments(parser: argparse.ArgumentParser, *flags: str) -> None:
    """The catalog budget (under ``flags``), ``--pin`` and ``--hide``."""
    parser.add_argument(
        *flags,
        dest="catalog_budget",
        type=catalog_budget,
        default=_NOT_GIVEN,
        metavar="CHARACTERS",
        help=f"the most characters the skill catalog may take in a session (default "
        f"{DEFAULT_CATALOG_BUDGET}; 'none' for no limit). Beyond it, descriptions are shortened, "
        "then skills left out and found by the skill tool's query. "
        "Env: ACP_SKILLS_CATALOG_BUDGET.",
    )
    parser.add_argument(
        "--pin",
        action="append",
        type=skill_name,
        default=None,
        metavar="NAME",
        help="a skill always listed in the catalog in full, first (repeatable). "
        "Env: ACP_SKILLS_PIN (names separated by commas).",
    )
    parser.add_argument(
        "--hide",
        action="append",
        type=skill_name,
        default=None,
        metavar="NAME",
        help="a skill never listed in the catalog nor found by a query; it still loads by its "
        "exact name (repeatable). Env: ACP_SKILLS_HIDE (names separated by commas).",
    )


def resolve_skill_settings(args: argparse.Namespace, *, absolute_dirs: bool = False) -> None:
    """Fill what no flag gave from the ``ACP_SKILLS_*`` variables (flags win).

    ``absolute_dirs`` (the agent): a relative skills directory is refused. An editor starts the
    agent in a project, so a relative one would be that project's directory, its skills
    trusted as the person's own. The command line, typed by a person, resolves it against its
    own working directory.

    Raises:
        SettingError: a variable holds a value its flag would refuse, or (``absolute_dirs``) a
            skills directory is relative.
    """
    where = "--skills-dir"
    if not args.skills_dir:
        where = "ACP_SKILLS_DIRS"
        dirs = (env("ACP_SKILLS_DIRS") or "").split(os.pathsep)
        args.skills_dir = [expand_path(d) for d in dirs if d.strip()]
    for directory in args.skills_dir if absolute_dirs else ():
        if not os.path.isabs(directory):
            raise SettingError(
                f"{where} must be an absolute path (or start with ~), not {directory!r}: a "
                "relative one would be the directory the agent was started in, usually a "
                "project, and its skills would be offered as your own"
            )
    if args.compat is None:
        args.compat = [name.strip() for name in (env("ACP_SKILLS_COMPAT") or "").split(",")]
        args.compat = [name for name in args.compat if name]
        for name in args.compat:
            if name not in COMPAT:
                known = ", ".join(COMPAT)
                raise SettingError(f"ACP_SKILLS_COMPAT: unknown tool {name!r} (known: {known})")
    if hasattr(args, "catalog_budget"):
        if args.catalog_budget is _NOT_GIVEN:
            args.catalog_budget = from_env(
                "ACP_SKILLS_CATALOG_BUDGET", catalog_budget, DEFAULT_CATALOG_BUDGET
            )
        args.pin = args.pin if args.pin is not None else names_from_env("ACP_SKILLS_PIN")
        args.hide = args.hide if args.hide is not None else names_from_env("ACP_SKILLS_HIDE")


def build_provider(
    args: argparse.Namespace,
    *,
    watch: bool,
    dsh_home: str | None = None,
    agents_home: str | None = None,
) -> LocalSkillProvider:
    """The skills on disk: the project's and the user's, and ``--skills-dir`` in between,
    then the bundled examples with ``--examples`` (their source is ``examples``)."""
    return LocalSkillProvider(
        dsh_home,
        agents_home,
        custom_skill_dirs=list(args.skills_dir or []),
        example_skill_dirs=[EXAMPLE_SKILLS] if args.examples else [],
        compat=tuple(args.compat),
        watch=watch,
    )
