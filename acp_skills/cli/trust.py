"""``acp-skills trust``: store, refuse, forget or list the trust decisions of projects (§13)."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from typing import TypeAlias

from ..model import SkillCandidate, SkillSnapshot
from ..trust import (
    SERVER_KEY_PREFIX,
    Decision,
    ServerSource,
    StoredTrust,
    TrustFileError,
    TrustSource,
    TrustState,
    TrustStates,
    TrustStore,
    project_of,
    sources_at,
    trust_mode,
    trust_states,
)
from .output import OK, PROBLEMS, USAGE, Outcome, Style


async def trust(args: argparse.Namespace, style: Style) -> Outcome:
    """Trust (or ``--refuse``, ``--forget``) the project PATH belongs to, or ``--list`` them."""
    # A few small local files: nothing here is worth a thread.
    return _trust(args, style)


def _trust(args: argparse.Namespace, style: Style) -> Outcome:
    store = TrustStore()
    try:
        if args.list:
            if args.path is not None:
                return Outcome({"error": "--list takes no PATH"}, ["--list takes no PATH"], USAGE)
            return _listed(store, style)
        decision: Decision | None = (
            None if args.forget else ("refused" if args.refuse else "trusted")
        )
        source: TrustSource
        if args.path is not None and args.path.startswith(SERVER_KEY_PREFIX):
            if decision == "trusted":
                message = (
                    "an MCP server is trusted by answering its question in a session (the answer "
                    "stores the digests it lists); here it can only be --refuse'd or --forget'd"
                )
                return Outcome({"error": message}, [message], USAGE)
            # Only the key matters to a refusal or forgetting (the label is for messages).
            source = ServerSource("", args.path[len(SERVER_KEY_PREFIX) :])
        else:
            path = os.path.abspath(args.path if args.path is not None else os.getcwd())
            if not os.path.exists(path):
                message = f"not found: {path}"
                return Outcome({"error": message}, [message], USAGE)
            source = project_of(path)
        changed = store.decide(source, decision)
    except (TrustFileError, OSError) as error:
        return Outcome({"error": str(error)}, [str(error)], PROBLEMS)
    said = {"trusted": "trusted", "refused": "refused", None: "forgotten"}[decision]
    if decision is None and not changed:
        said = "no decision was stored for"
    return Outcome(
        {"path": source.key, "decision": decision},
        [f"{said}: {source.key}"],
        OK,
        remarks=[f"stored in {store.path}"],
    )


def _listed(store: TrustStore, style: Style) -> Outcome:
    stored = store.read()
    projects, servers = [], []
    for key, decision in sorted(stored.decisions.items()):
        if key.startswith(SERVER_KEY_PREFIX):
            served = len(stored.served.get(key, ()))
            servers.append({"server": key, "decision": decision, "resources": served})
        else:
            projects.append({"path": key, "decision": decision})
    lines = [f"{style(p['decision'], 'bold')}  {p['path']}" for p in projects]
    for server in servers:
        count = f" ({server['resources']} resources)" if server["decision"] == "trusted" else ""
        key = shlex.quote(str(server["server"]))  # as --forget and --refuse take it
        lines.append(f"{style(str(server['decision']), 'bold')}  {key}{count}")
    remark = [] if lines else [f"no decisions stored in {store.path}"]
    listed: dict[str, object] = {"projects": projects}
    if servers:
        listed["servers"] = servers
    return Outcome(listed, lines, OK, remarks=remark)


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``trust`` command's own arguments."""
    parser.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="a path in the project (default: the current one), or a server's mcp:KEY from --list",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--refuse",
        action="store_true",
        help="never offer the project's (or the mcp:KEY server's) skills",
    )
    what.add_argument("--forget", action="store_true", help="drop the decision: ask again")
    what.add_argument("--list", action="store_true", help="every stored decision")


def trust_of(args: argparse.Namespace, skills: Sequence[SkillCandidate]) -> TrustStates:
    """Each skill's trust state as a session at ``--cwd`` would see it (``--trust``, else
    ``$ACP_SKILLS_TRUST``); an unreadable trust file counts as no decisions."""
    mode = trust_mode(args.trust if args.trust is not None else os.environ.get("ACP_SKILLS_TRUST"))
    try:
        stored = TrustStore().read()
    except TrustFileError:
        stored = StoredTrust()
    return trust_states(skills, sources_at(args.cwd), stored, mode)


Held: TypeAlias = tuple[TrustState, TrustSource | None]


def as_a_session_sees_it(
    args: argparse.Namespace, snapshot: SkillSnapshot
) -> tuple[SkillSnapshot, dict[str, Held]]:
    """``snapshot`` as a session at ``--cwd`` would offer it (withheld winners left out, the
    admitted skill they shadowed put back), and each withheld winner's state and source by name."""
    skills = [*snapshot.skills, *(lost.skill for lost in snapshot.shadowed)]
    states = trust_of(args, skills)
    admitted = ("trusted", "session")
    withheld: dict[str, Held] = {
        s.name: (states[s], states.source(s)) for s in snapshot.skills if states[s] not in admitted
    }
    offered = [s for s in snapshot.skills if s.name not in withheld]
    for lost in snapshot.shadowed:
        name = lost.skill.name
        if name in withheld and states[lost.skill] in admitted and name not in _names(offered):
            offered.append(lost.skill)
    offered.sort(key=lambda skill: skill.name)
    seen = SkillSnapshot(skills=tuple(offered), complete=snapshot.complete)
    return seen, withheld


def withheld_lines(args: argparse.Namespace, withheld: dict[str, Held]) -> list[str]:
    """One line per withheld skill, and how to admit them."""
    if not withheld:
        return []
    lines = []
    for name, (state, source) in sorted(withheld.items()):
        where = f' (MCP server "{source.label}")' if isinstance(source, ServerSource) else ""
        said = "waiting for trust" if state == "pending" else "trust refused"
        lines.append(f"{name}: {said}{where}")
    them = "it" if len(withheld) == 1 else "them"
    sources = [source for _, source in withheld.values()]
    if any(not isinstance(source, ServerSource) for source in sources):
        project = shlex.quote(project_of(args.cwd).key)
        lines.append(f"a session does not offer {them}; `acp-skills trust {project}` admits {them}")
    for source in {s.key: s for s in sources if isinstance(s, ServerSource)}.values():
        lines.append(
            f'MCP server "{source.label}": answering its question in a session admits {them}; '
            f"`acp-skills trust --forget {shlex.quote(source.key)}` undoes a refusal"
        )
    return lines


def _names(skills: Sequence[SkillCandidate]) -> set[str]:
    return {skill.name for skill in skills}
