from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
import structlog
from hypothesis import HealthCheck, settings

from acp_skills import JsonlSessionStore
from acp_skills.cli.main import main as cli_main
from acp_skills.model import PrefixContext
from acp_skills.record import InMemorySessionStore, SessionStore
from tests.hypothesis_profiles import DEFAULT_EXAMPLES, PROFILE_VARIABLE, THOROUGH_EXAMPLES
from tests.installed import Installation, build_and_install

# Trust (docs/trust.md) would hold back every project skill the other suites put in their
# temporary projects; they test other things, so they run as a person who trusts everything.
# Set here, in the environment, so the agent and CLI subprocesses inherit it; the trust tests
# set their own mode.
os.environ["ACP_SKILLS_TRUST"] = "all"
# As after an install: the environment's commands (acp-skills-demo) are on PATH, so `doctor`
# finds the agent's command where an editor would; the doctor tests of a missing one say so.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])

# Hypothesis profiles (docs/testing.md): `default` fits the three-minute run, `thorough`
# (HYPOTHESIS_PROFILE=thorough, or --hypothesis-profile=thorough) is what .ci/run adds. Neither
# has a deadline or the too_slow health check: on a busy machine a timing is no verdict.
settings.register_profile(
    "default",
    max_examples=DEFAULT_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=THOROUGH_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get(PROFILE_VARIABLE) or "default")


def pytest_report_header() -> str:
    """Which line of the ACP SDK this run tests (`python3 dev.py check` runs two)."""
    return f"agent-client-protocol {metadata.version('agent-client-protocol')}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of the built wheel (the `installed` fixture) is in the slow interop tier."""
    for item in items:
        if "installed" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.interop)


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Iterator[None]:
    """The command line configures structlog when run in process (`main(argv)`); each test
    starts from the configuration the one before found."""
    configured, config = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**config)
    else:
        structlog.reset_defaults()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``acp-skills ARGV`` in this process: its status, stdout and stderr."""

    def run(*argv: str) -> tuple[int, str, str]:
        status = cli_main(list(argv))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


@pytest.fixture
def anyio_backend() -> str:
    """The ACP SDK is asyncio-only, so every async test runs on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installation:
    """This checkout built into a wheel and installed in a fresh venv, once per test session."""
    return build_and_install(tmp_path_factory.mktemp("installed"))


# A session context, and each store implementation so both are held to the same behaviour
# (the tests of records, prefixes and sessions).
@pytest.fixture
def context(tmp_path: Path) -> PrefixContext:
    return PrefixContext(session_id="s1", cwd=str(tmp_path), tool_names=frozenset({"skill"}))


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    if request.param == "jsonl":
        return JsonlSessionStore(tmp_path / "sessions")
    return InMemorySessionStore()


@pytest.fixture
def threads_started(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Counts the worker threads the code under test starts (`anyio.to_thread.run_sync`): no
    file I/O on the event loop, a search index built once."""
    started = 0
    original = anyio.to_thread.run_sync

    async def counting(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal started
        started += 1
        return await original(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return lambda: started
