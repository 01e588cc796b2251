"""The baseline for the start-up benchmark (bench/agent_cells.py): an ACP agent on the same
SDK that does nothing but answer ``initialize``."""

from __future__ import annotations

import asyncio
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp.schema import AgentCapabilities, Implementation, InitializeResponse


class BareAgent:
    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="bare", version="0"),
            auth_methods=[],
        )


if __name__ == "__main__":
    asyncio.run(run_agent(BareAgent()))  # type: ignore[arg-type]
