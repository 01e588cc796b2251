"""``acp-skills doctor``: every root, skipped file and shadowed skill, a mistyped root, the
catalog's fit and the install itself, with what fixes each problem."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .. import LocalFileSystem
from ..diagnostics import Diagnostic, root_misnamed, shadow_diagnostic, skipped
from ..model import rank_text
from ..report import (
    describe_catalog_fit,
    diagnostic_json,
    diagnostic_line,
    server_json,
    server_line,
    tally,
)
from ..text import spelt as clean
from ..trust_text import withheld_parts
from .checkup import checkup
from .output import BOLD, DIM, PROBLEMS, Outcome, Style, status_of, table
from .skills import (
    agent_catalog,
    as_a_session_sees_it,
    location,
    skill_json,
    skills_from,
    unknown_name_warnings,
)


async def doctor(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = skills_from(args)
    discovery = await provider.discover(options)
    view = await as_a_session_sees_it(args, registry, options)
    snapshot = view.found
    fit = agent_catalog(args, view.offered)
    characters = len(fit.text or "")
    # A skipped MCP server and a listed skill left out are problems like a skipped file.
    mcp = getattr(args, "mcp", None)
    served = await mcp.diagnose(options) if mcp is not None else ()
    roots = discovery.roots
    # A few stats, a probe file and the package metadata: nothing here is worth a thread.
    install = checkup()
    problems = (
        *discovery.diagnostics,
        *served,
        *map(shadow_diagnostic, snapshot.shadowed),
        *await _misnamed_roots([r.root.path for r in roots if not r.exists]),
        *install.problems,
    )
    left_out = skipped(problems)
    payload = {
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
        "catalogCharacters": characters,
        "unknownPinned": list(fit.unknown_pinned),
        "unknownHidden": list(fit.unknown_hidden),
        # Beyond the skipped and the shadowed: every record, as `_skills/list` has them.
        "problems": [diagnostic_json(d) for d in problems],
        # Every skill that stands, as `list --json` has them: those a session withholds too.
        "skills": [skill_json(skill, None, view.state(skill)) for skill in snapshot.skills],
    }
    servers = mcp.states(options) if mcp is not None else ()
    if mcp is not None:  # only with --mcp-server: the shape is kept otherwise
        payload["mcpServers"] = [server_json(state) for state in servers]
    payload["install"] = install.to_json()
    lines = [f"{style('Skills for', BOLD)} {clean(args.cwd)}", ""]
    lines.append(
        style("Roots", BOLD) + style(" (in precedence order: the first of a name wins)", DIM)
    )
    rows = [["RANK", "SOURCE", "SKILLS", "PATH"]]
    for r in roots:
        count, state = (str(r.skills), "") if r.exists else ("-", "  (missing)")
        rows.append([rank_text(r.root.rank), r.root.source, count, clean(r.root.path) + state])

    def paint(row: int, column: int, cell: str) -> str:
        if row == 0:
            return style(cell, BOLD)
        return cell if roots[row - 1].exists else style(cell, DIM)

    lines.extend("  " + line for line in table(rows, frozenset({0, 2}), paint))
    shadow_codes = {"skill-shadowed", "skill-duplicate"}
    sections = (
        ("Skipped", left_out),
        ("Shadowed", [d for d in problems if d.code in shadow_codes]),
        ("Other", [d for d in problems if d not in left_out and d.code not in shadow_codes]),
    )
    for title, found in sections:
        if found:
            lines += ["", style(f"{title} ({len(found)})", BOLD)]
            lines.extend(f"  {diagnostic_line(d, style)}" for d in found)
    for title, items, how in withheld_parts(view.withheld.values(), style):
        heading = style(f"{title} ({len(items)})", BOLD)
        lines += ["", heading, *("  " + line for line in (*items, how))]
    lines += ["", style("Install", BOLD)]
    lines.extend("  " + clean(line) for line in install.lines())
    lines.append("")
    if servers:
        lines.append(style(f"MCP servers ({len(servers)})", BOLD))
        lines.extend([*(f"  {server_line(state, style)}" for state in servers), ""])
    # What `catalog` says of the same fit, in the same words.
    fitted, *omitted = describe_catalog_fit(fit).splitlines()
    heading, _, rest = fitted.partition(":")
    lines.extend([f"{style(heading, BOLD)}:{rest}", *omitted])
    lines.append(f"{style('Result', BOLD)}: {tally(problems)}")
    unknown = unknown_name_warnings(fit)
    # A name that matches nothing is a warning, and warnings make doctor exit with 1.
    status = PROBLEMS if unknown else status_of(problems)
    return Outcome(payload, lines, status, warnings=unknown)


async def _misnamed_roots(missing: Sequence[str]) -> list[Diagnostic]:
    """A directory beside a missing root whose name is the root's but for case or a final
    ``s`` (``.agents/skill``): skills a person put where the agent never looks."""
    fs, found = LocalFileSystem(), []
    for root in missing:
        parent, name = os.path.split(root)
        try:
            entries = await fs.list_dir(parent)
        except OSError:
            continue  # an unreadable parent hides nothing a person could fix here
        for entry in entries or ():
            if (
                entry.kind == "dir"
                and entry.name != name
                and entry.name.casefold()
                in (
                    name.casefold(),
                    name.casefold().removesuffix("s"),
                )
            ):
                found.append(root_misnamed(os.path.join(parent, entry.name), root))
    return found
