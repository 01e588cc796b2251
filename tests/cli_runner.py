"""``acp-skills`` run in this process through `main(argv)`, with what it prints captured.

`run` gives back what a subprocess would (exit status, stdout, stderr): ``main`` runs with the
environment and working directory asked for, stdout and stderr are UTF-8 text streams that are
not a terminal, and afterwards the environment, the working directory and structlog's
configuration are as they were. `run_on_a_terminal` gives ``main`` a real pseudo-terminal as
stdout. ``main`` runs its own event loop (``asyncio.run``), which cannot start inside a running
one: called from an async test, it runs on a thread of its own.

Also here: the fixture corpus the command line is run against (`Corpus`).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import structlog

from acp_skills import LocalSkillProvider, SkillRegistry
from acp_skills.cli.main import main

__all__ = [
    "CORPUS",
    "Corpus",
    "Result",
    "captured_stream",
    "cli_env",
    "codes_by_file",
    "environment",
    "install_hint",
    "nowhere",
    "outside_the_event_loop",
    "run",
    "run_json",
    "run_on_a_terminal",
    "written",
]

CORPUS = Path(__file__).parent / "fixtures" / "skills-corpus"

# The variables a person may have set that would change what the command line finds.
_PERSONAL = ("ACP_SKILLS_DIRS", "NO_COLOR", "DSH_HOME", "DSH_AGENTS_HOME")


def install_hint(extra: str) -> str:
    """A regular expression for the hint that adds ``extra`` to the running installation, as
    every edge words it: one command, in backquotes, that names the extra's package (which
    command is decided by how the package was installed: tests/test_cli_install.py)."""
    return rf"(?:in your clone of acp-skills, )?run `[^`\n]*{re.escape(extra)}[^`\n]*`"


@dataclass(frozen=True)
class Result:
    """What a run of the command line gave: as `subprocess.CompletedProcess` names it."""

    returncode: int
    stdout: str
    stderr: str


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment without the person's own skill settings, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key not in _PERSONAL}
    env.update(extra)
    return env


@contextmanager
def environment(env: Mapping[str, str], cwd: str | Path | None = None) -> Iterator[None]:
    """Exactly ``env`` as the environment (and ``cwd`` as the working directory), then back."""
    saved_env = dict(os.environ)
    # Only a working directory that changes is put back: the one this process started in may
    # be out of its reach by then (a test that gave up root).
    saved_cwd = os.getcwd() if cwd is not None else None
    os.environ.clear()
    os.environ.update(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        if saved_cwd is not None:
            os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def captured_stream() -> io.TextIOWrapper:
    """A stream as a piped stdout is: UTF-8, strict until the program asks for escapes, not a
    terminal, with no file descriptor; `written` reads it."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")


def written(stream: io.TextIOWrapper) -> str:
    """What was written to a `captured_stream`."""
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def _main(
    args: Sequence[str], env: Mapping[str, str] | None, cwd: str | Path | None, stdout: TextIO
) -> tuple[int, str]:
    """``main(args)`` with ``stdout``; its status and what it wrote on stderr."""
    stderr = captured_stream()
    configured, config = structlog.is_configured(), structlog.get_config()
    try:
        with (
            environment(cli_env() if env is None else env, cwd),
            redirect_stdout(stdout),
            redirect_stderr(stderr),
        ):
            status = main(list(args))
    finally:
        # `main` configures structlog for its own process; this one goes on as it was.
        if configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()
    return status, written(stderr)


def outside_the_event_loop(call: Any, *args: Any) -> Any:
    """``call(*args)``, on a thread of its own when an event loop runs in this one (an async
    test): ``asyncio.run`` cannot start inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call(*args)
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(call, *args).result()


def run(*args: str, env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Result:
    """``acp-skills ARGS`` in this process, with ``env`` (default `cli_env()`) and ``cwd``."""

    def once() -> Result:
        stdout = captured_stream()
        status, stderr = _main(args, env, cwd, stdout)
        return Result(status, written(stdout), stderr)

    result: Result = outside_the_event_loop(once)
    return result


def run_json(*args: str, env: Mapping[str, str] | None = None) -> tuple[Any, int]:
    """``acp-skills ARGS --json``: the JSON it printed, and its exit status."""
    result = run(*args, "--json", env=env)
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout), result.returncode


def run_on_a_terminal(*args: str, env: Mapping[str, str] | None = None) -> Result:
    """``acp-skills ARGS`` with a pseudo-terminal as stdout; ``stdout`` is what the terminal
    received (its line discipline turns ``\\n`` into ``\\r\\n``)."""
    import pty  # POSIX only: imported where it is used, so the module loads everywhere

    primary, secondary = pty.openpty()
    received: list[bytes] = []

    def read_the_terminal() -> None:
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other side closed: everything was read
                return
            if not chunk:
                return
            received.append(chunk)

    reader = threading.Thread(target=read_the_terminal)
    reader.start()
    try:
        with open(secondary, "w", encoding="utf-8") as terminal:
            status, stderr = outside_the_event_loop(_main, args, env, None, terminal)
    finally:
        reader.join()
        os.close(primary)
    return Result(status, b"".join(received).decode("utf-8"), stderr)


# -- the fixture corpus ----------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """A private copy of ``tests/fixtures/skills-corpus`` (described in ``tests/test_cli.py``),
    and the options that make the command line look at it."""

    root: Path

    @classmethod
    def copy_to(cls, directory: Path) -> Corpus:
        """A copy in ``directory`` (no .git above its project)."""
        shutil.copytree(CORPUS, directory / "corpus")
        return cls(directory / "corpus")

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project_skills(self) -> Path:
        return self.project / ".agents" / "skills"

    @property
    def claude_skills(self) -> Path:
        return self.project / ".claude" / "skills"

    @property
    def codex_skills(self) -> Path:
        return self.home / ".codex" / "skills"

    def roots(self) -> list[str]:
        """The options that make the command line look from the project, with these homes."""
        return [
            "--cwd",
            str(self.project),
            "--dsh-home",
            str(self.home / ".dsh"),
            "--agents-home",
            str(self.home / ".agents"),
        ]

    def provider(self, *custom: Path) -> LocalSkillProvider:
        return LocalSkillProvider(
            dsh_home=self.home / ".dsh", agents_home=self.home / ".agents", custom_skill_dirs=custom
        )

    def registry(self, *custom: Path) -> SkillRegistry:
        registry = SkillRegistry()
        registry.register_provider(self.provider(*custom))
        return registry


def nowhere(tmp_path: Path) -> list[str]:
    """The options that look from an empty directory, with empty homes."""
    homes = ["--dsh-home", str(tmp_path / "d"), "--agents-home", str(tmp_path / "a")]
    return ["--cwd", str(tmp_path), *homes]


def codes_by_file(diagnostics: Sequence[dict[str, Any]], base: Path) -> list[tuple[str, str]]:
    """(code, path relative to ``base``) for each diagnostic, in order."""
    return [(d["code"], str(Path(d["path"]).relative_to(base))) for d in diagnostics]
