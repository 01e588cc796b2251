"""``list``, ``show`` and ``catalog``: the skills a session at ``--cwd`` sees, built from the
demo agent's own settings (`acp_skills.cli.settings`), and what the model would get of them."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import LocalSkillProvider, SkillCandidate, SkillLookupOptions, SkillRegistry, SkillTool
from ..catalog import CatalogFit, fit_catalog
from ..diagnostics import Diagnostic, skipped
from ..model import SKILL_FILE_NAME, SkillSnapshot, rank_text
from ..report import describe_catalog_fit, plural
from ..text import spelt as clean
from ..trust import ServedLocator, SessionView, TrustState, TrustStore, session_view
from ..trust_text import how_to_admit, why_withheld, withheld_parts
from . import settings
from .output import BOLD, DIM, OK, PROBLEMS, Outcome, Style, mcp_warnings, table

PROG = "acp-skills"
_Skills = tuple[LocalSkillProvider, SkillRegistry, SkillLookupOptions]


def skills_from(args: argparse.Namespace) -> _Skills:
    # The demo agent's own settings build the provider; one look, so nothing to watch.
    provider = settings.build_provider(
        args, watch=False, dsh_home=args.dsh_home, agents_home=args.agents_home
    )
    registry = SkillRegistry()
    registry.register_provider(provider)
    if (mcp := getattr(args, "mcp", None)) is not None:  # --mcp-server, made by `main`
        registry.register_provider(mcp)
    return provider, registry, SkillLookupOptions(cwd=args.cwd)


async def as_a_session_sees_it(
    args: argparse.Namespace, registry: SkillRegistry, options: SkillLookupOptions
) -> SessionView:
    """What a session at ``--cwd`` is offered under ``--trust`` and the stored decisions: the
    view a turn of the agent computes (`acp_skills.trust.session_view`), without its answers."""
    return await session_view(registry, options, args.trust, TrustStore())


def agent_catalog(args: argparse.Namespace, snapshot: SkillSnapshot) -> CatalogFit:
    """The catalog the demo agent would freeze for a session, with the same settings."""
    return fit_catalog(
        snapshot.skills,
        settings.CATALOG_MAX_LENGTH,
        budget=args.catalog_budget,
        pinned=args.pin,
        hidden=args.hide,
    )


def unknown_name_warnings(fit: CatalogFit) -> list[str]:
    """One line per pinned or hidden name no skill has (a typo, a skill since removed)."""
    return [
        f"warning: {setting} names no skill: {clean(name)} ({env})"
        for setting, env, names in (
            ("--pin", "ACP_SKILLS_PIN", fit.unknown_pinned),
            ("--hide", "ACP_SKILLS_HIDE", fit.unknown_hidden),
        )
        for name in names
    ]


async def skipped_warnings(
    provider: LocalSkillProvider, options: SkillLookupOptions, *, named: str | None = None
) -> list[str]:
    """Each skipped file of the skill ``named`` with its reason, else how many were skipped."""
    left_out = skipped((await provider.discover(options)).diagnostics)
    if hers := [d for d in left_out if named is not None and _named_by_place(d) == named]:
        return [f"warning: {clean(d.path or '')} was skipped: {clean(d.message)}" for d in hers]
    if not left_out:
        return []
    what = plural(len(left_out), "skill file") + (" was" if len(left_out) == 1 else " were")
    return [f"warning: {what} skipped; `{PROG} doctor` says which and why."]


def _named_by_place(diagnostic: Diagnostic) -> str | None:
    # A bundle is named by its directory, a flat file by its name without `.md`.
    if diagnostic.path is None:
        return None
    head, tail = os.path.split(diagnostic.path)
    if tail == SKILL_FILE_NAME:
        return os.path.basename(head)
    return tail[:-3] if tail.endswith(".md") else None


async def custom_dir_warnings(provider: LocalSkillProvider) -> list[str]:
    return [
        f"warning: {clean(problem.path or '')}: {clean(problem.message)}"
        for problem in await provider.check_custom_dirs()
    ]


def location(skill: SkillCandidate) -> dict[str, Any]:
    return {"source": skill.source, "path": skill.path}


def served_uri(skill: SkillCandidate) -> str | None:
    """The ``skill://`` uri of a skill an MCP server serves (it has no path)."""
    locator = skill.locator
    return locator.skill_uri if isinstance(locator, ServedLocator) else None


def skill_json(
    skill: SkillCandidate, winner: SkillCandidate | None, state: TrustState
) -> dict[str, Any]:
    """One skill as `list --json` and `doctor --json` give it (``winner``: what shadows it);
    a skill an MCP server serves also has its ``uri``."""
    served = {"uri": uri} if (uri := served_uri(skill)) is not None else {}
    return {
        "name": skill.name,
        "description": skill.description,
        "source": skill.source,
        "rank": skill.rank,
        "provider": skill.provider,
        "path": skill.path,
        **served,
        "modelInvocable": not skill.disable_model_invocation,
        "userInvocable": skill.user_invocable,
        "shadowedBy": location(winner) if winner is not None else None,
        "trust": state,
    }


async def list_skills(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = skills_from(args)
    view = await as_a_session_sees_it(args, registry, options)
    snapshot = view.found
    # Each skill that stands, then (with --all) each it shadows, with what shadows it.
    lost_by_name: dict[str, list[tuple[SkillCandidate, SkillCandidate | None]]] = {}
    for lost in snapshot.shadowed if args.all else ():
        lost_by_name.setdefault(lost.skill.name, []).append((lost.skill, lost.winner))
    entries: list[tuple[SkillCandidate, SkillCandidate | None]] = []
    for skill in snapshot.skills:
        entries += [(skill, None), *lost_by_name.get(skill.name, ())]
    listed = [skill_json(skill, winner, view.state(skill)) for skill, winner in entries]
    warnings = await custom_dir_warnings(provider) + await skipped_warnings(provider, options)
    warnings += await mcp_warnings(getattr(args, "mcp", None), options)
    outcome = Outcome({"skills": listed}, warnings=warnings)
    if not entries:
        outcome.text.append(f"No skills found for {clean(args.cwd)}.")
        outcome.remarks.append(f"`{PROG} doctor` shows where skills were looked for.")
        return outcome
    rows = [["NAME", "SOURCE", "RANK", "MODEL", "USER", "PATH"]]
    for skill, winner in entries:
        path = clean(skill.path or served_uri(skill) or f"({skill.provider})")
        if winner is not None:
            path += f"  (shadowed by {clean(winner.source)} {clean(winner.path or '')})"
        if (state := view.state(skill)) in ("pending", "refused"):
            path += "  (waiting for trust)" if state == "pending" else "  (trust refused)"
        model = "no" if skill.disable_model_invocation else "yes"
        user = "yes" if skill.user_invocable else "no"
        rows.append(
            [clean(skill.name), clean(skill.source), rank_text(skill.rank), model, user, path]
        )

    def paint(row: int, column: int, text: str) -> str:
        if row == 0 or (column == 0 and entries[row - 1][1] is None):
            return style(text, BOLD)
        return text if entries[row - 1][1] is None else style(text, DIM)

    outcome.text.extend(table(rows, frozenset({2}), paint))
    if not args.all and snapshot.shadowed:
        hidden = plural(len(snapshot.shadowed), "shadowed skill")
        outcome.remarks.append(f"{hidden} not shown (--all shows them).")
    return outcome


async def show(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = skills_from(args)
    tool = SkillTool(registry)
    if args.invoke is not None:
        # What `/NAME ARGS` alone puts into the turn: the typed text, then the skill, its
        # placeholders filled as the agent fills them (only with --compat claude).
        typed = f"/{args.name} {args.invoke}".rstrip()
        fill = args.invoke.strip() if "claude" in args.compat else None
        result = await tool.invoke_for_user(args.name, cwd=args.cwd, arguments=fill)
        text = f"{typed}\n\n{result.text}" if not result.is_error else result.text
    else:
        arguments = {"name": args.name} | ({} if args.path is None else {"path": args.path})
        result = await tool.call(arguments, cwd=args.cwd)
        text = result.text
    warnings = await custom_dir_warnings(provider)
    named = args.name if result.is_error else None
    warnings += await skipped_warnings(provider, options, named=named)
    warnings += await mcp_warnings(getattr(args, "mcp", None), options)
    view = await as_a_session_sees_it(args, registry, options)
    # A skill named by its uri is told about by its name (a uri its server confirmed is among
    # the server's skills from then on).
    found = view.found.skills
    name = next((s.name for s in found if served_uri(s) == args.name), args.name)
    if (held := view.withheld.get(name)) is not None:
        said = f"{why_withheld(name, held)}: a session does not offer it."
        warnings.append(f"warning: {said} {how_to_admit([held])}")
    return Outcome(
        {"name": args.name, "text": text, "isError": result.is_error},
        [text],
        PROBLEMS if result.is_error else OK,
        warnings=warnings,
    )


async def catalog(args: argparse.Namespace, style: Style) -> Outcome:
    provider, registry, options = skills_from(args)
    view = await as_a_session_sees_it(args, registry, options)
    fit = agent_catalog(args, view.offered)
    characters = len(fit.text or "")
    budget = dict(limit=fit.limit, used=fit.used, shortened=fit.shortened, omitted=fit.omitted)
    warnings = await custom_dir_warnings(provider) + unknown_name_warnings(fit)
    warnings += await mcp_warnings(getattr(args, "mcp", None), options)
    outcome = Outcome(
        {"text": fit.text, "characters": characters, "budget": budget}, warnings=warnings
    )
    if fit.text is None:
        outcome.remarks.append(
            f"No catalog: no skill the model may load for {clean(args.cwd)} (0 characters)."
        )
    else:
        outcome.text.append(fit.text)
        outcome.remarks.extend(describe_catalog_fit(fit).splitlines())
    for title, items, how in withheld_parts(view.withheld.values(), style):
        outcome.remarks.extend((f"{title} ({len(items)})", *items, how))
    return outcome
