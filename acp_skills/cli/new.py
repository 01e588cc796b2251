"""``acp-skills new NAME``: a skill to start from, that passes ``validate --strict``."""

from __future__ import annotations

import argparse
import os

from ..model import SKILL_FILE_NAME, is_skill_name
from ..project import find_project
from .output import PROBLEMS, Outcome, Style
from .validate import MAX_NAME_LENGTH

# Our own starting text: the description says what a description is for, the body what to write.
_TEMPLATE = """\
---
name: {name}
description: >-
  Replace this line with what the skill does and when to use it, in one or two sentences:
  the model sees only this description until it loads the skill.
---
# {title}

Write the instructions the model follows once it loads this skill: the steps, the commands to
run, what to check before calling the work done.

{resources}"""
_BUNDLE_RESOURCES = """\
Files beside this one (say `references/checklist.md`) are read with the skill tool's `path`;
name each one here, with when to read it.
"""
_FLAT_RESOURCES = """\
A single-file skill has no files of its own; make it a directory holding SKILL.md when it needs
some.
"""


def new(args: argparse.Namespace, style: Style) -> Outcome:
    """Write a new skill NAME under ``--dir`` (default: the project's ``.agents/skills``)."""
    name: str = args.name
    if not is_skill_name(name) or len(name) > MAX_NAME_LENGTH:
        return Outcome.failed(
            f"not a skill name: {name!r} (lowercase letters and digits in words joined by "
            f"single hyphens, at most {MAX_NAME_LENGTH} characters)"
        )
    if args.dir is not None:
        directory = os.path.abspath(args.dir)
    else:
        # Where the project's own skills are read from (a linked worktree's own tree).
        directory = find_project(os.getcwd()).skill_root("project-agents")
    path = os.path.join(
        directory, f"{name}.md" if args.flat else os.path.join(name, SKILL_FILE_NAME)
    )
    title = name.replace("-", " ").capitalize()
    resources = _FLAT_RESOURCES if args.flat else _BUNDLE_RESOURCES
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # "x": an existing skill is never overwritten, not even by a race.
        with open(path, "x", encoding="utf-8") as file:
            file.write(_TEMPLATE.format(name=name, title=title, resources=resources))
    except FileExistsError:
        return Outcome.failed(f"{path} exists already; nothing was written", PROBLEMS)
    except OSError as error:
        return Outcome.failed(f"cannot write {path}: {error.strerror or error}", PROBLEMS)
    lines = [
        f"Wrote {path}",
        "Next: write its description and instructions, then check it with "
        f"`acp-skills validate --strict {path}`. A new session offers it (a project's skills "
        "after the session's trust question).",
    ]
    return Outcome({"path": path}, lines)
