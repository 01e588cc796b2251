"""The demo agent, counting its discoveries: each `LocalSkillProvider.list` call appends a line
to the file named by ``$BENCH_DISCOVERY_LOG``. Used by ``agent_cells.py sessions``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from acp_skills import LocalSkillProvider, SkillCandidate, SkillLookupOptions
from demo_agent.__main__ import main

_LOG = os.environ["BENCH_DISCOVERY_LOG"]
_list = LocalSkillProvider.list


def _note_discovery() -> None:
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write("list\n")


async def _counted_list(
    self: LocalSkillProvider, options: SkillLookupOptions
) -> Sequence[SkillCandidate]:
    _note_discovery()
    return await _list(self, options)


if __name__ == "__main__":
    setattr(LocalSkillProvider, "list", _counted_list)  # noqa: B010 (mypy refuses assigning a method)
    sys.exit(main())
