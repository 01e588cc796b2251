from __future__ import annotations

import pytest

from tests.installed import Installation, build_and_install


@pytest.fixture
def anyio_backend() -> str:
    """The ACP SDK is asyncio-only, so every async test runs on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installation:
    """This checkout built into a wheel and installed in a fresh venv, once per test session."""
    return build_and_install(tmp_path_factory.mktemp("installed"))
