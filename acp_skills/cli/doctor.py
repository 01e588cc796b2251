"""``acp-skills doctor``: every root, skipped file and shadowed skill, the catalog's fit, and
the install it runs from, each problem with the command that fixes it."""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any, Final

from ..diagnostics import (
    Diagnostic,
    describe_catalog_fit,
    diagnostic,
    diagnostic_json,
    diagnostic_line,
    server_json,
    server_line,
    shadow_diagnostic,
    skipped,
    tally,
)
from ..errors import Problem
from ..model import rank_text
from ..text import terminal_safe as clean
from ..trust import TrustFileError, TrustStore, withheld_parts
from .install import extra_install_hint, installation, path_hint, version_of
from .output import BOLD, DIM, PROBLEMS, Outcome, Style, status_of, table
from .settings import Settings, move_aside, permission_fix, unwritable
from .skills import location, look, skill_json, unknown_name_warnings

AGENT_COMMAND: Final = "acp-skills-demo"
# The optional parts a person may want, and what each is for (the `dev` extra is ours).
EXTRAS: Final = {"openai": "--model openai", "mcp": "--mcp-server and editors' MCP servers"}
SDKS: Final = ("agent-client-protocol", "mcp")
_SHADOW_CODES: Final = ("skill-shadowed", "skill-duplicate")


async def doctor(args: argparse.Namespace, style: Style) -> Outcome:
    seen = look(args)
    discovery = await seen.provider.discover(seen.options)
    view = await seen.view()
    snapshot = view.found
    fit = seen.catalog(view)
    roots = discovery.roots
    # A few stats, a probe file and the package metadata: nothing here is worth a thread.
    install, install_lines, install_problems = checkup(seen.settings)
    problems = (
        *discovery.diagnostics,
        # A skipped MCP server and a listed skill left out are problems like a skipped file.
        *(await seen.mcp.diagnose(seen.options) if seen.mcp is not None else ()),
        *map(shadow_diagnostic, snapshot.shadowed),
        *_misnamed_roots([r.root.path for r in roots if not r.exists]),
        *install_problems,
    )
    left_out = skipped(problems)
    payload: dict[str, Any] = {
        "roots": [
            {"path": r.root.path, "source": r.root.source, "rank": r.root.rank}
            | {"exists": r.exists, "skills": r.skills}
            for r in roots
        ],
        "skipped": [diagnostic_json(d) for d in left_out],
        "shadowed": [
            {"name": s.skill.name, "winner": location(s.winner), "loser": location(s.skill)}
            for s in snapshot.shadowed
        ],
        "catalogCharacters": len(fit.text or ""),
        "unknownPinned": list(fit.unknown_pinned),
        "unknownHidden": list(fit.unknown_hidden),
        "problems": [diagnostic_json(d) for d in problems],
        "skills": [skill_json(skill, None, view.state(skill)) for skill in snapshot.skills],
    }
    servers = seen.mcp.states(seen.options) if seen.mcp is not None else ()
    if seen.mcp is not None:  # only with --mcp-server: the shape is kept otherwise
        payload["mcpServers"] = [server_json(state) for state in servers]
    payload["install"] = install
    lines = [f"{style('Skills for', BOLD)} {clean(args.cwd)}", ""]
    lines.append(style("Roots", BOLD) + style(" (in precedence order: the first wins)", DIM))
    rows = [["RANK", "SOURCE", "SKILLS", "PATH"]]
    for r in roots:
        count, state = (str(r.skills), "") if r.exists else ("-", "  (missing)")
        rows.append([rank_text(r.root.rank), r.root.source, count, clean(r.root.path) + state])
    missing = {row for row, r in enumerate(roots, 1) if not r.exists}
    lines.extend("  " + line for line in table(rows, frozenset({0, 2}), style, missing))
    shadowed = [d for d in problems if d.code in _SHADOW_CODES]
    other = [d for d in problems if d not in left_out and d not in shadowed]
    parts = [
        (f"{title} ({len(found)})", [diagnostic_line(d, style) for d in found])
        for title, found in (("Skipped", left_out), ("Shadowed", shadowed), ("Other", other))
        if found
    ]
    parts += [
        (f"{title} ({len(items)})", [*items, how])
        for title, items, how in withheld_parts(view.withheld.values(), style)
    ]
    parts.append(("Install", [clean(line) for line in install_lines]))
    if servers:
        parts.append((f"MCP servers ({len(servers)})", [server_line(s, style) for s in servers]))
    for title, body in parts:
        lines += ["", style(title, BOLD), *("  " + line for line in body)]
    lines.append("")
    # What `catalog` says of the same fit, in the same words.
    fitted, *omitted = describe_catalog_fit(fit).splitlines()
    heading, _, rest = fitted.partition(":")
    lines.extend([f"{style(heading, BOLD)}:{rest}", *omitted])
    lines.append(f"{style('Result', BOLD)}: {tally(problems)}")
    unknown = unknown_name_warnings(fit)
    # A name that matches nothing is a warning, and warnings make doctor exit with 1.
    status = PROBLEMS if unknown else status_of(problems)
    return Outcome(payload, lines, status, warnings=unknown)


def _misnamed_roots(missing: list[str]) -> list[Diagnostic]:
    """A directory beside a missing root named as it but for case or a final ``s``."""
    found = []
    for root in missing:
        parent, name = os.path.split(root)
        near = (name.casefold(), name.casefold().removesuffix("s"))
        misnamed = Problem(
            "root-misnamed", f"not read: the skills directory is {name!r}, at {root}"
        )
        try:
            with os.scandir(parent) as entries:
                found += [
                    diagnostic(misnamed, entry.path)
                    for entry in entries
                    if entry.is_dir() and entry.name != name and entry.name.casefold() in near
                ]
        except OSError:
            continue  # an unreadable or absent parent hides nothing a person could fix here
    return found


def checkup(settings: Settings) -> tuple[dict[str, Any], list[str], list[Diagnostic]]:
    """The install this command runs from: as JSON, as lines, and its problems."""
    installed = installation()
    problems: list[Diagnostic] = []
    lines = [f"installed with {installed.kind} in {installed.prefix}"]
    for extra, use in EXTRAS.items():
        if extra in installed.extras:
            lines.append(f"extra {extra}: installed ({use})")
        else:
            hint = extra_install_hint(extra, installed)
            lines.append(f"extra {extra}: not installed, needed for {use}; to add it, {hint}")
    agent = shutil.which(AGENT_COMMAND)
    lines.append(f"{AGENT_COMMAND}: {agent or 'not on PATH'}")
    if agent is None:
        message = f"{AGENT_COMMAND} is not on PATH: editors cannot start it by name; "
        not_found = Problem("command-not-on-path", message + path_hint(installed))
        problems.append(diagnostic(not_found, None))
    sdks = {name: version_of(name) for name in SDKS}
    lines += [f"{name}: {version or 'not installed'}" for name, version in sdks.items()]
    trust_file, state_dir = settings.trust_file, str(settings.state_dir)
    places = []
    for what, path, trouble in (
        ("trust file", trust_file, _trust_file_problem(trust_file)),
        ("state directory", state_dir, settings.unusable_state_dir(create=False)),
    ):
        problem, fix = trouble or ("", "")
        places.append(
            {"what": what, "path": path, "usable": not problem, "problem": problem or None}
        )
        lines.append(f"{what}: {path} ({problem or 'readable and writable'})")
        if problem:
            problems.append(
                diagnostic(Problem("place-unusable", f"{what}: {problem}; {fix}"), path)
            )
    found = {
        "installer": installed.kind,
        "extras": sorted(set(EXTRAS) & installed.extras),
        "agentCommand": agent,
        "sdks": sdks,
        "places": places,
    }
    return found, lines, problems


def _trust_file_problem(path: str) -> tuple[str, str] | None:
    try:
        # Decisions that do not parse grant nothing: every session would ask again.
        TrustStore(path).read()
    except TrustFileError as error:
        return str(error).removeprefix(f"{path}: "), move_aside(path)
    # The file is replaced by a write beside it (beside its target, when it is a link).
    if (failure := unwritable(os.path.dirname(os.path.realpath(path)))) is not None:
        return f"cannot write in {failure[0]}: {failure[1]}", permission_fix(failure[0])
    return None
