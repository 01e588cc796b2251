"""Fixtures of the conformance suite: the schema, the TypeScript SDK, the agent under test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .fake_model import FakeModel
from .harness import AGENT_ENV, AgentSpec, agent_spec
from .npm import SdkUnavailable, ensure_sdk, sdk_dir
from .wire import Schema


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``demo_agent`` marker."""
    config.addinivalue_line(
        "markers",
        "demo_agent: needs the demo agent's own options, skills or records; skipped when "
        f"{AGENT_ENV} names another agent",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``demo_agent`` tests when another agent is under test."""
    foreign = os.environ.get(AGENT_ENV, "").strip()
    if not foreign:
        return
    skip = pytest.mark.skip(reason=f"demo-agent specific; {AGENT_ENV}={foreign!r}")
    for item in items:
        if item.get_closest_marker("demo_agent") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def npm_prefix() -> Path:
    """Where the pinned TypeScript SDK is installed (installing it on first use)."""
    try:
        return ensure_sdk()
    except SdkUnavailable as error:
        pytest.fail(f"the official TypeScript SDK is unavailable: {error}", pytrace=False)


@pytest.fixture(scope="session")
def schema(npm_prefix: Path) -> Schema:
    """The official ACP v1 JSON Schema, from the npm package."""
    path = sdk_dir(npm_prefix) / "schema" / "v1" / "schema.json"
    if not path.is_file():
        pytest.fail(f"the SDK package has no schema at {path}", pytrace=False)
    return Schema.load(path)


@pytest.fixture
def agent(tmp_path: Path) -> AgentSpec:
    """The agent under test, with a private home, state directory and project."""
    return agent_spec(tmp_path)


@pytest.fixture
async def fake_model() -> AsyncIterator[FakeModel]:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1."""
    async with FakeModel() as model:
        yield model
