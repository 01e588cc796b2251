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
from .output import BOLD, OK, PROBLEMS, USAGE, Outcome, Style

Held: TypeAlias = tuple[TrustState, TrustSource | None]


async def trust(args: argparse.Namespace, style: Style) -> Outcome:
    """Trust (or ``--refuse``, ``--forget``) the project PATH belongs to, or ``--list`` them."""
    # A few small local files, each read bounded: nothing here is worth a thread.
    return _trust(args, style)


def _failed(message: str, status: int = USAGE) -> Outcome:
    return Outcome({"error": message}, [message], status)


def _trust(args: argparse.Namespace, style: Style) -> Outcome:
    store = TrustStore()
    try:
        if args.list:
            return _listed(store, style) if args.path is None else _failed("--list takes no PATH")
        decision: Decision | None = (
            None if args.forget else ("refused" if args.refuse else "trusted")
        )
        source: TrustSource
        if args.path is not None and args.path.startswith(SERVER_KEY_PREFIX):
            if decision == "trusted":
                return _failed(
                    "an MCP server is trusted by answering its question in a session (the answer "
                    "stores the digests it lists); here it can only be --refuse'd or --forget'd"
                )
            # Only the key matters to a refusal or forgetting (the label is for messages).
            source = ServerSource("", args.path.removeprefix(SERVER_KEY_PREFIX))
        else:
            # Links resolved before `..`, as the project is found (`acp_skills.project`).
            path = os.path.realpath(args.path if args.path is not None else os.getcwd())
            if not os.path.exists(path):
                return _failed(f"not found: {path}")
            source = project_of(path)
        changed = store.decide(source, decision)
    except (TrustFileError, OSError) as error:
        return _failed(str(error), PROBLEMS)
    said = decision or ("forgotten" if changed else "no decision was stored for")
    return Outcome(
        {"path": source.key, "decision": decision},
        [f"{said}: {source.key}"],
        remarks=[f"stored in {store.path}"],
    )


def _listed(store: TrustStore, style: Style) -> Outcome:
    stored = store.read()
    projects: list[dict[str, object]] = []
    servers: list[dict[str, object]] = []
    project_lines, server_lines = [], []  # projects first, whatever their keys sort like
    for key, decision in sorted(stored.decisions.items()):
        if not key.startswith(SERVER_KEY_PREFIX):
            projects.append({"path": key, "decision": decision})
            project_lines.append(f"{style(decision, BOLD)}  {key}")
            continue
        resources = len(stored.served.get(key, ()))
        servers.append({"server": key, "decision": decision, "resources": resources})
        count = f" ({resources} resources)" if decision == "trusted" else ""
        # Quoted as --forget and --refuse take it.
        server_lines.append(f"{style(decision, BOLD)}  {shlex.quote(key)}{count}")
    lines = project_lines + server_lines
    remark = [] if lines else [f"no decisions stored in {store.path}"]
    listed: dict[str, object] = {"projects": projects}
    if servers:
        listed["servers"] = servers
    return Outcome(listed, lines, OK, remarks=remark)


def trust_of(args: argparse.Namespace, skills: Sequence[SkillCandidate]) -> TrustStates:
    """Each skill's trust state as a session at ``--cwd`` would see it (``--trust``, else
    ``$ACP_SKILLS_TRUST``); an unreadable trust file counts as no decisions."""
    mode = trust_mode(args.trust if args.trust is not None else os.environ.get("ACP_SKILLS_TRUST"))
    try:
        stored = TrustStore().read()
    except TrustFileError:
        stored = StoredTrust()
    return trust_states(skills, sources_at(args.cwd), stored, mode)


def as_a_session_sees_it(
    args: argparse.Namespace, snapshot: SkillSnapshot, states: TrustStates | None = None
) -> tuple[SkillSnapshot, dict[str, Held]]:
    """``snapshot`` as a session at ``--cwd`` would offer it (withheld winners left out, the
    admitted skill they shadowed put back), and each withheld winner's state and source by name.
    ``states``: `trust_of` every skill of ``snapshot``, shadowed ones too (else looked up here)."""
    if states is None:
        states = trust_of(args, [*snapshot.skills, *(lost.skill for lost in snapshot.shadowed)])
    admitted = ("trusted", "session")
    withheld: dict[str, Held] = {
        s.name: (states[s], states.source(s)) for s in snapshot.skills if states[s] not in admitted
    }
    offered = {s.name: s for s in snapshot.skills if s.name not in withheld}
    for lost in snapshot.shadowed:
        if lost.skill.name in withheld and states[lost.skill] in admitted:
            offered.setdefault(lost.skill.name, lost.skill)
    skills = tuple(sorted(offered.values(), key=lambda skill: skill.name))
    return SkillSnapshot(skills=skills, complete=snapshot.complete), withheld


def withheld_lines(withheld: dict[str, Held]) -> list[str]:
    """One line per withheld skill, and how to admit them (as a session's ``/name`` says it)."""
    lines = []
    for name, (state, source) in sorted(withheld.items()):
        where = f' (MCP server "{source.label}")' if isinstance(source, ServerSource) else ""
        lines.append(
            f"{name}: {'waiting for trust' if state == 'pending' else 'trust refused'}{where}"
        )
    them = "it" if len(withheld) == 1 else "them"
    sources: dict[str, tuple[TrustSource, set[TrustState]]] = {}
    for state, source in withheld.values():
        if source is not None:
            sources.setdefault(source.key, (source, set()))[1].add(state)
    # The project first; a server is trusted only by answering its question (the answer stores
    # the digests it lists), so the command line can only forget its refusal.
    for source, states in sorted(
        sources.values(), key=lambda held: isinstance(held[0], ServerSource)
    ):
        key = shlex.quote(source.key)
        if not isinstance(source, ServerSource):
            lines.append(f"a session does not offer {them}; `acp-skills trust {key}` admits {them}")
            continue
        label = f'MCP server "{source.label}"'
        if "pending" in states:
            lines.append(f"{label}: answering its question in a new session admits {them}")
        if "refused" in states:
            lines.append(f"{label}: refused; `acp-skills trust --forget {key}` undoes the refusal")
    return lines
