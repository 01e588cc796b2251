"""``acp-skills trust``: store, refuse, forget or list the trust decisions of projects and MCP
servers."""

from __future__ import annotations

import argparse
import os
import shlex

from ..project import find_project
from ..text import terminal_safe
from ..trust import (
    SERVER_KEY_PREFIX,
    Decision,
    ProjectSource,
    ServerSource,
    TrustFileError,
    TrustSource,
    TrustStore,
)
from .output import BOLD, PROBLEMS, Outcome, Style


async def trust(args: argparse.Namespace, style: Style) -> Outcome:
    """Trust, ``--refuse`` or ``--forget`` PATH's project or a server's key; or ``--list``."""
    # A few small local files, each read bounded: nothing here is worth a thread.
    if args.list and args.path is not None:
        return Outcome.failed("--list takes no PATH: it lists every stored decision")
    store = TrustStore()
    decision: Decision | None = None if args.forget else ("refused" if args.refuse else "trusted")
    try:
        if args.list:
            return _listed(store, style)
        source: TrustSource
        if args.path is not None and args.path.startswith(SERVER_KEY_PREFIX):
            if decision == "trusted":
                return Outcome.failed(
                    "a server is trusted for what it lists, by answering its question in a "
                    "session; its key takes only --refuse or --forget"
                )
            # Only the key matters to a refusal or forgetting (the label is for messages).
            source = ServerSource("", args.path.removeprefix(SERVER_KEY_PREFIX))
        else:
            # Links resolved before `..`, as the project is found (`acp_skills.project`).
            path = os.path.realpath(args.path or os.getcwd())  # noqa: ASYNC240
            if not os.path.exists(path):  # noqa: ASYNC240
                return Outcome.failed(f"not found: {path}")
            source = ProjectSource(find_project(path).key)
        changed = store.decide(source, decision)
    except (TrustFileError, OSError) as error:
        return Outcome.failed(str(error), PROBLEMS)
    said = decision or ("forgotten" if changed else "no decision was stored for")
    return Outcome(
        {"path": source.key, "decision": decision},
        [f"{said}: {source.key}"],
        remarks=[f"stored in {store.path}"],
    )


def _listed(store: TrustStore, style: Style) -> Outcome:
    stored = store.read()
    listed: dict[str, list[dict[str, object]]] = {"projects": [], "servers": []}
    lines = []
    # Projects first, whatever their keys sort like.
    for key in sorted(stored.decisions, key=lambda key: (key.startswith(SERVER_KEY_PREFIX), key)):
        decision, shown = stored.decisions[key], key
        if not key.startswith(SERVER_KEY_PREFIX):
            listed["projects"].append({"path": key, "decision": decision})
        else:
            resources = len(stored.served.get(key, ()))
            listed["servers"].append({"server": key, "decision": decision, "resources": resources})
            # Quoted as --forget and --refuse take it.
            count = f" ({resources} resources)" if decision == "trusted" else ""
            shown = shlex.quote(key) + count
        lines.append(f"{style(decision, BOLD)}  {terminal_safe(shown)}")
    if not listed["servers"]:
        del listed["servers"]
    return Outcome(listed, lines, remarks=[] if lines else [f"no decisions stored in {store.path}"])
