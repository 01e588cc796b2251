from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The ACP SDK is asyncio-only, so every async test runs on asyncio."""
    return "asyncio"
