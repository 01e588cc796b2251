"""``acp-skills trust``: store, refuse, forget or list the trust decisions of projects and MCP
servers."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from ..diagnostics import plural
from ..model import SkillLookupOptions
from ..project import find_project
from ..registry import SkillRegistry
from ..text import terminal_safe
from ..trust import (
    SERVER_KEY_PREFIX,
    Decision,
    ProjectSource,
    ServerSource,
    TrustFileError,
    TrustSource,
    TrustStore,
    lasting_sources,
    question_options,
    question_text,
    question_title,
    sources_at,
    view,
)
from .output import BOLD, PROBLEMS, Outcome, Style


async def trust(args: argparse.Namespace, style: Style) -> Outcome:
    """Trust, ``--refuse`` or ``--forget`` PATH's project or the servers, or ``--list``."""
    # A few small local files, each read bounded: nothing here is worth a thread.
    mcp = getattr(args, "mcp", None)  # --mcp-server, made by `main`
    if [mcp is not None, args.path is not None, args.list].count(True) > 1:
        return Outcome.failed("PATH, --mcp-server and --list go one at a time")
    store = TrustStore()
    decision: Decision | None = None if args.forget else ("refused" if args.refuse else "trusted")
    try:
        if args.list:
            return _listed(store, style)
        if mcp is not None and decision == "trusted":
            return await _trust_servers(args, mcp, store)
        sources: list[TrustSource]
        if mcp is not None:
            # Only a server's identity matters to a refusal or forgetting: none is started.
            servers = [state.server for state in mcp.states(SkillLookupOptions())]
            sources = [ServerSource(server.label, server.identity) for server in servers]
        elif args.path is not None and args.path.startswith(SERVER_KEY_PREFIX):
            if decision == "trusted":
                return Outcome.failed(
                    "a server is trusted for what it lists, by answering its question in a "
                    "session or with --mcp-server LABEL=COMMAND or LABEL=URL, which asks; its "
                    "key takes only --refuse or --forget"
                )
            # Only the key matters to a refusal or forgetting (the label is for messages).
            sources = [ServerSource("", args.path.removeprefix(SERVER_KEY_PREFIX))]
        else:
            # Links resolved before `..`, as the project is found (`acp_skills.project`).
            path = os.path.realpath(args.path or os.getcwd())  # noqa: ASYNC240
            if not os.path.exists(path):  # noqa: ASYNC240
                return Outcome.failed(f"not found: {path}")
            sources = [ProjectSource(find_project(path).key)]
        lines = []
        for source in sources:
            changed = store.decide(source, decision)
            said = decision or ("forgotten" if changed else "no decision was stored for")
            lines.append(f"{said}: {source.key}")
    except (TrustFileError, OSError) as error:
        return Outcome.failed(str(error), PROBLEMS)
    payload: dict[str, Any] = {"path": sources[0].key, "decision": decision}
    if mcp is not None:
        payload = {"servers": [{"server": s.key, "decision": decision} for s in sources]}
    return Outcome(payload, lines, remarks=[f"stored in {store.path}"])


async def _trust_servers(args: argparse.Namespace, mcp: Any, store: TrustStore) -> Outcome:
    """Trust each server for the skills it lists now, asked once (the card's question, on the
    terminal) unless ``--yes``, storing exactly what the card's "Trust this server" stores."""
    if not args.yes and not sys.stdin.isatty():
        # Said before any server starts: nothing is trusted unseen.
        return Outcome.failed(
            "trust --mcp-server asks on a terminal before it stores anything, and this is not "
            "one: pass --yes to trust the skills the server lists now"
        )
    options = SkillLookupOptions()
    registry = SkillRegistry()
    registry.register_provider(mcp)
    snapshot = await registry.snapshot(options)
    told = [f"warning: {terminal_safe(d.message)}" for d in await mcp.diagnose(options)]
    await mcp.aclose()  # all is listed: no server process waits on the person's answer
    if failed := [state for state in mcp.states(options) if state.failure is not None]:
        reasons = [f"MCP server {s.server.label!r} skipped: {s.failure}" for s in failed]
        return Outcome({"error": reasons[0]}, [*reasons, "nothing stored"], PROBLEMS)
    if not snapshot.skills:
        none = "no skills are listed: nothing stored"
        return Outcome({"error": none}, [none], PROBLEMS, warnings=told)
    # What a session's card asks about: each listed skill not trusted as it is listed now.
    pending = list(view(snapshot, sources_at(()), store.read(), "ask").withheld.values())
    if not pending:
        states = mcp.states(options)
        keys = [ServerSource(s.server.label, s.server.identity).key for s in states]
        payload = {"servers": [{"server": key, "decision": "trusted"} for key in keys]}
        return Outcome(payload, [f"already trusted: {key}" for key in keys], warnings=told)
    question = [question_title(pending), *question_text(pending).splitlines()]
    trust_it = dict(question_options(pending))["allow_always"]  # "Trust this server"
    if not args.yes:
        # Asked on stderr: stdout is the command's output.
        for line in [*told, *question]:
            print(terminal_safe(line), file=sys.stderr)
        print(f"{trust_it}? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            return Outcome({"servers": []}, ["not trusted: nothing stored"], PROBLEMS)
    # With --yes, what was trusted is the command's output; asked, it was just shown.
    lines = question if args.yes else []
    decided: list[dict[str, object]] = []
    for key, lasting in lasting_sources(pending).items():
        store.decide(lasting, "trusted")
        count = sum(1 for withheld in pending if withheld.source.key == key)
        lines.append(f"trusted: {key} ({plural(count, 'skill')})")
        decided.append({"server": key, "decision": "trusted", "skills": count})
    remarks = [f"stored in {store.path}"]
    return Outcome({"servers": decided}, lines, warnings=told if args.yes else [], remarks=remarks)


def _listed(store: TrustStore, style: Style) -> Outcome:
    stored = store.read()
    projects: list[dict[str, object]] = []
    servers: list[dict[str, object]] = []
    lines = []
    # Projects first, whatever their keys sort like.
    for key in sorted(stored.decisions, key=lambda key: (key.startswith(SERVER_KEY_PREFIX), key)):
        decision = stored.decisions[key]
        if not key.startswith(SERVER_KEY_PREFIX):
            projects.append({"path": key, "decision": decision})
            lines.append(f"{style(decision, BOLD)}  {terminal_safe(key)}")
            continue
        resources = len(stored.served.get(key, ()))
        servers.append({"server": key, "decision": decision, "resources": resources})
        count = f" ({resources} resources)" if decision == "trusted" else ""
        # Quoted as --forget and --refuse take it.
        lines.append(f"{style(decision, BOLD)}  {terminal_safe(shlex.quote(key))}{count}")
    listed = {"projects": projects} | ({"servers": servers} if servers else {})
    return Outcome(listed, lines, remarks=[] if lines else [f"no decisions stored in {store.path}"])
