"""One test's private world for the demo agent: a home, a state directory, a skills directory
and a project, below one temporary directory, and the arguments and environment that point the
agent at them (the in-process rig, `tests.acp_peer.demo_peer`, and the process launcher,
`tests.agent_client`, both take it)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from acp_skills import JsonlSessionStore

__all__ = ["Sandbox", "write_skill"]


def write_skill(
    root: Path,
    name: str,
    description: str,
    body: str = "",
    /,
    **frontmatter: str | bool,
) -> Path:
    """Write ``root/name/SKILL.md`` with the given frontmatter and body; return its path.

    Extra frontmatter keys are written as given (``disableModelInvocation=True``); values go
    through JSON, which YAML reads back unchanged.
    """
    lines = ["---", f"name: {name}", f"description: {json.dumps(description)}"]
    lines += [f"{key}: {json.dumps(value)}" for key, value in frontmatter.items()]
    lines += ["---", body or f"# {name}\n\n1. Do the {name} thing.\n"]
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class Sandbox:
    """One test's private world for the agent.

    Attributes:
        root: everything lives below it.
        home: the agent's ``HOME`` (and ``DSH_HOME`` / ``DSH_AGENTS_HOME`` below it), empty.
        state_dir: ``--state-dir``: session records go to ``state_dir/sessions``.
        skills_dir: ``--skills-dir``: write skills here with `write_skill`.
        project: an absolute ``cwd`` for sessions (no ``.git`` and no project skills).
    """

    root: Path

    @classmethod
    def create(cls, root: Path) -> Self:
        """Make the directories below ``root``."""
        sandbox = cls(root)
        for directory in (sandbox.home, sandbox.state_dir, sandbox.skills_dir, sandbox.project):
            directory.mkdir(parents=True, exist_ok=True)
        return sandbox

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def skills_dir(self) -> Path:
        return self.root / "skills"

    @property
    def project(self) -> Path:
        return self.root / "project"

    def args(self, *extra: str) -> list[str]:
        """The agent's arguments: this sandbox's skills and state dirs, then ``extra``."""
        return [
            "--skills-dir",
            str(self.skills_dir),
            "--state-dir",
            str(self.state_dir),
            *extra,
        ]

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The agent's environment: a private home, then ``extra``."""
        env = {
            "HOME": str(self.home),
            "DSH_HOME": str(self.home / ".dsh"),
            "DSH_AGENTS_HOME": str(self.home / ".agents"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            # The suite's trust mode (conftest) is passed on.
            "ACP_SKILLS_TRUST": os.environ.get("ACP_SKILLS_TRUST", ""),
            "ACP_SKILLS_TRUST_FILE": str(self.home / ".config" / "acp-skills" / "trust.json"),
        }
        env.update(extra or {})
        return env

    def write_skill(
        self, name: str, description: str, body: str = "", /, **frontmatter: str | bool
    ) -> Path:
        """`write_skill` into this sandbox's skills dir."""
        return write_skill(self.skills_dir, name, description, body, **frontmatter)

    def record_path(self, session_id: str) -> Path:
        """Where the agent keeps the session's JSON Lines record."""
        return JsonlSessionStore(self.state_dir / "sessions").path_for(session_id)

    def read_record(self, session_id: str) -> list[dict[str, Any]]:
        """The session's record entries, as the JSON objects on disk."""
        path = self.record_path(session_id)
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def headers(self, session_id: str) -> list[dict[str, Any]]:
        """The request headers in the session's record, oldest first."""
        return [entry for entry in self.read_record(session_id) if entry["type"] == "header"]

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """The conversation messages in the session's record, oldest first."""
        return [
            entry["message"] for entry in self.read_record(session_id) if entry["type"] == "history"
        ]
