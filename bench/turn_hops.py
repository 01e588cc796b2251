"""The module hops of one prompt turn with one ``skill`` call (docs/architecture.md, the walks).

    python bench/turn_hops.py [--project]

Serves `AcpSkills` over the in-process pair of the tests (`tests.acp_peer.connected`: the
SDK's own connections on a socket pair), opens a session, then runs one prompt turn whose
scripted model calls the ``skill`` tool once and then ends the turn. While that turn runs (the
client's ``session/prompt`` until its answer), `sys.setprofile` records every function of
``acp_skills`` called on the event loop's thread. A module is *entered* when one of its
functions is called from outside it: from another module of ``acp_skills`` (the nearest one
on the stack) or from outside the package (the SDK, the agent). A call within a module is no
entry, and neither is a coroutine resumed after an await. The trace is the sequence of
modules entered, consecutive entries into one module collapsed into one. Leaf helpers
(`LEAVES`: text hygiene, the values, the errors, logging, and `acp/wire.py`, whose builders and
client link call the SDK and nothing else of the library) are left out: a call into one is no
hop, and a module they call back into is entered from the module that called them.

With ``--project`` the session's project has a skill that waits for trust, and the turn also
puts the trust question (answered "Trust for this session"); without it, the skill is one of
the person's own (a custom directory) and nothing is asked.

Prints each module's entry count, most first (and how many of them came from outside the
package: the agent calling the turn, the SDK calling back), then the hops in order, an entry
from outside marked ``^``. Worker threads (the
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

from acp_skills.trust import TrustStore  # noqa: E402
from tests.acp_peer import (  # noqa: E402
    ScriptedModelAgent,
    connected,
    fixture_registry,
    skill_call,
    text_content,
    write_skill,
)

PACKAGE = "acp_skills"
SCRIPTED: dict[str, Any] = {"agent_type": ScriptedModelAgent, "trust": "ask"}
# Helpers every module may use (docs/architecture.md): a call into one is not a hop.
LEAVES = frozenset(
    {
        "acp_skills.text",
        "acp_skills.model",
        "acp_skills.errors",
        "acp_skills.quiet_log",
        "acp_skills.json_depth",
        # Pure builders and the client link: it calls the SDK and nothing else of the library.
        "acp_skills.acp.wire",
    }
)


class HopRecorder:
    """A profile function: the ``acp_skills`` modules entered, in order, collapsed."""

    def __init__(self) -> None:
        self.hops: list[str] = []
        self.from_outside: list[bool] = []  # each hop: entered from outside ``acp_skills``
        self._seen: set[FrameType] = set()  # held: a resumed coroutine is no new call

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (module := _module(frame)) is None or frame in self._seen:
            return
        self._seen.add(frame)
        caller = frame.f_back
        while caller is not None and _module(caller) is None:
            caller = caller.f_back
        entered = caller is None or _module(caller) != module
        if entered and (not self.hops or self.hops[-1] != module):
            self.hops.append(module)
            self.from_outside.append(caller is None)


def _module(frame: FrameType) -> str | None:
    """The ``acp_skills`` module ``frame`` runs in, ``None`` outside it or in a leaf helper."""
    module = frame.f_globals.get("__name__", "")
    if not isinstance(module, str) or not module.startswith(PACKAGE) or module in LEAVES:
        return None
    return module


async def one_turn(project_skill: bool) -> HopRecorder:
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        own, project = root / "own", root / "project"
        (project / ".git").mkdir(parents=True)
        if project_skill:
            write_skill(project / ".agents" / "skills", "review", "Review a change.", body="R.")
        else:
            write_skill(own, "review", "Review a change.", body="Review carefully.")
        own.mkdir(exist_ok=True)
        store = TrustStore(root / "trust.json")  # "ask", the default: nothing decided yet
        registry = fixture_registry(root, own)
        async with connected(registry, answer="allow_once", trust_store=store, **SCRIPTED) as peer:
            agent: Any = peer.agent
            session_id = await peer.new_session(project)
            agent.replies = [skill_call("c1", "review"), {"content": "done"}]
            recorder = HopRecorder()
            sys.setprofile(recorder)
            try:
                stop = await peer.ask(session_id, "review my change")
            finally:
                sys.setprofile(None)
            assert stop == "end_turn", stop
            finished = peer.wire.updates(session_id, "tool_call_update")
            results = [text_content(update) for update in finished if update.get("content")]
            assert any("R." in text or "Review carefully." in text for text in results), results
        return recorder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--project", action="store_true", help="a project skill, admitted by the trust question"
    )
    args = parser.parse_args(argv)
    recorder = asyncio.run(one_turn(args.project))
    hops, counts = recorder.hops, collections.Counter(recorder.hops)
    outside = collections.Counter(
        h for h, out in zip(hops, recorder.from_outside, strict=True) if out
    )
    print(f"{len(hops)} hops, {len(counts)} modules, most entries {max(counts.values())}")
    print("entries  module  (of them from outside acp_skills: the agent, the SDK)")
    for module, count in counts.most_common():
        print(f"{count:7}  {module.removeprefix(PACKAGE + '.')}  ({outside[module]})")
    print()
    # An entry from outside the package (the agent's call, an SDK callback) is marked with ^.
    shown = [
        ("^" if out else "") + hop.removeprefix(PACKAGE + ".")
        for hop, out in zip(hops, recorder.from_outside, strict=True)
    ]
    print(" -> ".join(shown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
