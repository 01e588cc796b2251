"""The module hops of one prompt turn with one ``skill`` call (docs/architecture.md, the walks).

    python bench/turn_hops.py [--project]

Serves `AcpSkills` over the in-process pair of the tests (`tests.acp_peer.connected`: the
SDK's own connections on a socket pair), opens a session, then runs one prompt turn whose
scripted model calls the ``skill`` tool once and then ends the turn. While that turn runs (the
client's ``session/prompt`` until its answer), `sys.setprofile` records every function of
``acp_skills`` that is called on the event loop's thread. A coroutine resumed after an await
is not a new call, and neither is a call inside the module already being walked: the trace is
the sequence of modules entered, consecutive calls within one module collapsed into one
entry. Leaf helpers (`LEAVES`: text hygiene, the values, the errors, logging) are left out of
the sequence, so a call into one never splits a module's run in two.

With ``--project`` the session's project has a skill that waits for trust, and the turn also
puts the trust question (answered "Trust for this session"); without it, the skill is one of
the person's own (a custom directory) and nothing is asked.

Prints each module's entry count, most first, then the hops in order. Worker threads (the
discovery's file reads, the project lookups) are not traced: the registry's cache is warm
before the turn, as it is in a running agent.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from acp_skills import LocalSkillProvider, SkillRegistry  # noqa: E402
from acp_skills.trust import TrustStore  # noqa: E402
from tests.acp_peer import ScriptedModelAgent, connected, skill_call, write_skill  # noqa: E402

PACKAGE = "acp_skills"
# Helpers every module may use (docs/architecture.md): a call into one is not a hop.
LEAVES = frozenset(
    {
        "acp_skills.text",
        "acp_skills.model",
        "acp_skills.errors",
        "acp_skills.quiet_log",
        "acp_skills.json_depth",
    }
)


class HopRecorder:
    """A profile function: the ``acp_skills`` modules entered, in order, collapsed."""

    def __init__(self) -> None:
        self.hops: list[str] = []
        self._seen: set[FrameType] = set()  # held: a resumed coroutine is no new call

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not isinstance(module, str) or not module.startswith(PACKAGE) or module in LEAVES:
            return
        if frame in self._seen:
            return
        self._seen.add(frame)
        if not self.hops or self.hops[-1] != module:
            self.hops.append(module)


async def one_turn(project_skill: bool) -> list[str]:
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        own, project = root / "own", root / "project"
        (project / ".git").mkdir(parents=True)
        if project_skill:
            write_skill(project / ".agents" / "skills", "review", "Review a change.", body="R.")
        else:
            write_skill(own, "review", "Review a change.", body="Review carefully.")
        own.mkdir(exist_ok=True)
        registry = SkillRegistry()
        registry.register_provider(
            LocalSkillProvider(
                custom_skill_dirs=[str(own)],
                dsh_home=str(root / "home" / ".dsh"),
                agents_home=str(root / "home" / ".agents"),
                watch=False,
            )
        )
        async with connected(
            registry,
            agent_type=ScriptedModelAgent,
            trust="ask",
            trust_store=TrustStore(root / "trust.json"),
            answer="allow_once",
        ) as peer:
            agent = peer.agent
            assert isinstance(agent, ScriptedModelAgent)
            session_id = await peer.new_session(project)
            agent.replies = [skill_call("c1", "review"), {"content": "done"}]
            recorder = HopRecorder()
            sys.setprofile(recorder)
            try:
                stop = await peer.ask(session_id, "review my change")
            finally:
                sys.setprofile(None)
            assert stop == "end_turn", stop
            results = [text for _, text in peer.client.tool_results(session_id)]
            assert any("R." in text or "Review carefully." in text for text in results), results
        return recorder.hops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--project", action="store_true", help="a project skill, admitted by the trust question"
    )
    args = parser.parse_args(argv)
    hops = asyncio.run(one_turn(args.project))
    counts = collections.Counter(hops)
    short = [hop.removeprefix(PACKAGE + ".") for hop in hops]
    print(f"{len(hops)} hops, {len(counts)} modules, most entries {max(counts.values())}")
    for module, count in counts.most_common():
        print(f"{count:4}  {module.removeprefix(PACKAGE + '.')}")
    print()
    print(" -> ".join(short))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
