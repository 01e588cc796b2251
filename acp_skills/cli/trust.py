"""``acp-skills trust``: store, refuse, forget or list the trust decisions of projects (§13)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from ..model import SkillCandidate, SkillSnapshot
from ..trust import (
    PROJECT_SOURCES,
    Decision,
    TrustFileError,
    TrustState,
    TrustStates,
    TrustStore,
    project_of,
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
            decisions = store.decisions()
            projects = [{"path": k, "decision": v} for k, v in sorted(decisions.items())]
            lines = [f"{style(p['decision'], 'bold')}  {p['path']}" for p in projects]
            remark = [] if projects else [f"no decisions stored in {store.path}"]
            return Outcome({"projects": projects}, lines, OK, remarks=remark)
        path = os.path.abspath(args.path if args.path is not None else os.getcwd())
        if not os.path.exists(path):
            message = f"not found: {path}"
            return Outcome({"error": message}, [message], USAGE)
        project = project_of(path)
        decision: Decision | None = (
            None if args.forget else ("refused" if args.refuse else "trusted")
        )
        store.decide(project, decision)
    except (TrustFileError, OSError) as error:
        return Outcome({"error": str(error)}, [str(error)], PROBLEMS)
    said = {"trusted": "trusted", "refused": "refused", None: "forgotten"}[decision]
    return Outcome(
        {"path": project.key, "decision": decision},
        [f"{said}: {project.key}"],
        OK,
        remarks=[f"stored in {store.path}"],
    )


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``trust`` command's own arguments."""
    parser.add_argument(
        "path", nargs="?", metavar="PATH", help="a path in the project (default: the current one)"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--refuse", action="store_true", help="never offer the project's skills")
    what.add_argument("--forget", action="store_true", help="drop the decision: ask again")
    what.add_argument("--list", action="store_true", help="every stored decision")


def trust_of(args: argparse.Namespace, skills: Sequence[SkillCandidate]) -> TrustStates:
    """Each skill's trust state as a session at ``--cwd`` would see it (``--trust``, else
    ``$ACP_SKILLS_TRUST``); an unreadable trust file counts as no decisions."""
    mode = trust_mode(args.trust if args.trust is not None else os.environ.get("ACP_SKILLS_TRUST"))
    try:
        decisions = TrustStore().decisions()
    except TrustFileError:
        decisions = {}
    project = project_of(args.cwd)
    return trust_states(skills, dict.fromkeys(PROJECT_SOURCES, project), decisions, mode)


def as_a_session_sees_it(
    args: argparse.Namespace, snapshot: SkillSnapshot
) -> tuple[SkillSnapshot, dict[str, TrustState]]:
    """``snapshot`` as a session at ``--cwd`` would offer it (withheld winners left out, the
    admitted skill they shadowed put back), and the state of each withheld winner by name."""
    skills = [*snapshot.skills, *(lost.skill for lost in snapshot.shadowed)]
    states = trust_of(args, skills)
    admitted = ("trusted", "session")
    withheld = {s.name: states[s] for s in snapshot.skills if states[s] not in admitted}
    offered = [s for s in snapshot.skills if s.name not in withheld]
    for lost in snapshot.shadowed:
        name = lost.skill.name
        if name in withheld and states[lost.skill] in admitted and name not in _names(offered):
            offered.append(lost.skill)
    offered.sort(key=lambda skill: skill.name)
    seen = SkillSnapshot(skills=tuple(offered), complete=snapshot.complete)
    return seen, withheld


def withheld_lines(args: argparse.Namespace, withheld: dict[str, TrustState]) -> list[str]:
    """One line per withheld skill, and how to admit them."""
    if not withheld:
        return []
    lines = [
        f"{name}: {'waiting for trust' if state == 'pending' else 'trust refused'}"
        for name, state in sorted(withheld.items())
    ]
    project = project_of(args.cwd).key
    return [*lines, f"a session does not offer these; `acp-skills trust {project}` admits them"]


def _names(skills: Sequence[SkillCandidate]) -> set[str]:
    return {skill.name for skill in skills}
