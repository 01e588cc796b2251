"""`acp_skills.quiet_log`: an application that configures no logging hears only warnings, on
stderr; one that configures structlog gets every event through its own configuration.

Each application is a fresh interpreter: whether logging was configured is its process's state,
and this test process has its own (pytest's handlers, the suite's structlog set-up); a process
also shows that nothing reaches stdout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_DISCOVER = """
import asyncio, sys
from acp_skills import LocalSkillProvider, SkillLookupOptions
{setup}
provider = LocalSkillProvider(custom_skill_dirs=[sys.argv[1]], watch=False)
asyncio.run(provider.list(SkillLookupOptions(cwd=sys.argv[1])))
"""
_CONFIGURE = """
import logging, structlog
structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
)
"""


def _discover(tmp_path: Path, setup: str = "") -> subprocess.CompletedProcess[str]:
    skills = tmp_path / "skills"
    (skills / "good").mkdir(parents=True)
    (skills / "good" / "SKILL.md").write_text("---\nname: good\ndescription: fine\n---\nbody\n")
    (skills / "broken.md").write_text("---\nname: broken\n---\nno description\n")
    code = _DISCOVER.format(setup=setup)
    return subprocess.run(
        [sys.executable, "-c", code, str(skills)], capture_output=True, text=True, timeout=120
    )


def test_without_logging_configured_only_warnings_reach_stderr(tmp_path: Path) -> None:
    """No debug line (``skills_discovered``), nothing on stdout, the skipped file once."""
    done = _discover(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert [line for line in lines if "skill_file_skipped" in line] == [lines[0]]
    assert "broken.md" in lines[0]
    assert "skills_discovered" not in done.stderr


def test_an_application_that_configures_structlog_gets_debug_events(tmp_path: Path) -> None:
    done = _discover(tmp_path, _CONFIGURE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "skills_discovered" in done.stderr
    assert "skill_file_skipped" in done.stderr
