"""``list``, ``show`` and ``catalog``: what a session at ``--cwd`` sees, as the agent builds it."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from .. import LocalSkillProvider, SkillCandidate, SkillLookupOptions, SkillRegistry, SkillTool
from ..catalog import CatalogFit, fit_catalog
from ..diagnostics import describe_catalog_fit, plural, skipped
from ..model import SKILL_FILE_NAME, rank_text
from ..text import spelt as clean
from ..trust import ServedLocator, SessionView, TrustState, TrustStore, session_view
from ..trust_text import how_to_admit, why_withheld, withheld_parts
from .output import OK, PROBLEMS, Outcome, Style, table
from .settings import Settings

PROG = "acp-skills"


@dataclass(frozen=True, slots=True)
class Look:
    """What every command that looks from a session at ``--cwd`` builds, as the agent does."""

    settings: Settings
    provider: LocalSkillProvider
    registry: SkillRegistry
    options: SkillLookupOptions
    mcp: Any  # the `McpSkillProvider` of --mcp-server (made by `main`), or None

    async def view(self) -> SessionView:
        """What the session is offered under ``--trust`` and the stored decisions."""
        return await session_view(self.registry, self.options, self.settings.trust, TrustStore())

    def catalog(self, view: SessionView) -> CatalogFit:
        """The catalog the demo agent would freeze for the session, with the same settings."""
        given = self.settings
        return fit_catalog(
            view.offered.skills,
            max_length=given.catalog_max_length,
            budget=given.catalog_budget,
            pinned=given.pinned,
            hidden=given.hidden,
        )

    async def warnings(self, *, skipped_files: bool = True, named: str | None = None) -> list[str]:
        """``warning:`` lines for a missing ``--skills-dir``, the skipped files (each of the
        skill ``named``, else how many) and each problem of an MCP server."""
        found = [
            f"warning: {clean(d.path or '')}: {clean(d.message)}"
            for d in await self.provider.check_custom_dirs()
        ]
        discovery = await self.provider.discover(self.options) if skipped_files else None
        left_out = skipped(discovery.diagnostics) if discovery is not None else ()
        hers = [d for d in left_out if named is not None and _named_by_place(d.path) == named]
        found += [f"warning: {clean(d.path or '')} was skipped: {clean(d.message)}" for d in hers]
        if left_out and not hers:
            what = plural(len(left_out), "skill file") + (" was" if len(left_out) == 1 else " were")
            found.append(f"warning: {what} skipped; `{PROG} doctor` says which and why.")
        served = await self.mcp.diagnose(self.options) if self.mcp is not None else ()
        return found + [f"warning: {clean(d.message)}" for d in served]


def look(args: argparse.Namespace) -> Look:
    # One look, so nothing to watch.
    provider = args.settings.provider(
        watch=False, dsh_home=args.dsh_home, agents_home=args.agents_home
    )
    registry = SkillRegistry()
    registry.register_provider(provider)
    if (mcp := getattr(args, "mcp", None)) is not None:
        registry.register_provider(mcp)
    return Look(args.settings, provider, registry, SkillLookupOptions(cwd=args.cwd), mcp)


def _named_by_place(path: str | None) -> str | None:
    # A bundle is named by its directory, a flat file by its name without `.md`.
    head, tail = os.path.split(path or "")
    if tail == SKILL_FILE_NAME:
        return os.path.basename(head)
    return tail.removesuffix(".md") if tail.endswith(".md") else None


def unknown_name_warnings(fit: CatalogFit) -> list[str]:
    """One line per pinned or hidden name no skill has (a typo, a skill since removed)."""
    return [
        f"warning: {setting} names no skill: {clean(name)} ({variable})"
        for setting, variable, names in (
            ("--pin", "ACP_SKILLS_PIN", fit.unknown_pinned),
            ("--hide", "ACP_SKILLS_HIDE", fit.unknown_hidden),
        )
        for name in names
    ]


def served_uri(skill: SkillCandidate) -> str | None:
    """The ``skill://`` uri of a skill an MCP server serves (it has no path)."""
    locator = skill.locator
    return locator.skill_uri if isinstance(locator, ServedLocator) else None


def location(skill: SkillCandidate) -> dict[str, Any]:
    return {"source": skill.source, "path": skill.path}


def skill_json(
    skill: SkillCandidate, winner: SkillCandidate | None, state: TrustState
) -> dict[str, Any]:
    """One skill as `list --json` and `doctor --json` give it (``winner``: what shadows it)."""
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
    seen = look(args)
    view = await seen.view()
    snapshot = view.found
    # Each skill that stands, then (with --all) each it shadows, with what shadows it.
    entries: list[tuple[SkillCandidate, SkillCandidate | None]] = []
    for skill in snapshot.skills:
        entries.append((skill, None))
        lost = [s for s in snapshot.shadowed if args.all and s.skill.name == skill.name]
        entries += [(s.skill, s.winner) for s in lost]
    listed = [skill_json(skill, winner, view.state(skill)) for skill, winner in entries]
    outcome = Outcome({"skills": listed}, warnings=await seen.warnings())
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

    shadowed = {row for row, (_, winner) in enumerate(entries, 1) if winner is not None}
    outcome.text.extend(table(rows, frozenset({2}), style, shadowed))
    if not args.all and snapshot.shadowed:
        hidden = plural(len(snapshot.shadowed), "shadowed skill")
        outcome.remarks.append(f"{hidden} not shown (--all shows them).")
    return outcome


async def show(args: argparse.Namespace, style: Style) -> Outcome:
    seen = look(args)
    tool = SkillTool(seen.registry)
    if args.invoke is not None:
        # What `/NAME ARGS` alone puts into the turn: the typed text, then the skill, its
        # placeholders filled as the agent fills them (only with --compat claude).
        typed = f"/{args.name} {args.invoke}".rstrip()
        fill = args.invoke.strip() if "claude" in seen.settings.compat else None
        result = await tool.invoke_for_user(args.name, seen.options, arguments=fill)
        text = f"{typed}\n\n{result.text}" if not result.is_error else result.text
    else:
        arguments = {"name": args.name} | ({} if args.path is None else {"path": args.path})
        result = await tool.call(arguments, cwd=args.cwd)
        text = result.text
    warnings = await seen.warnings(named=args.name if result.is_error else None)
    # After the call: a uri its server confirmed is among the server's skills from then on,
    # and a skill named by its uri is told about by its name.
    view = await seen.view()
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
    seen = look(args)
    view = await seen.view()
    fit = seen.catalog(view)
    budget = dict(limit=fit.limit, used=fit.used, shortened=fit.shortened, omitted=fit.omitted)
    warnings = await seen.warnings(skipped_files=False) + unknown_name_warnings(fit)
    payload = {"text": fit.text, "characters": len(fit.text or ""), "budget": budget}
    outcome = Outcome(payload, [] if fit.text is None else [fit.text], warnings=warnings)
    outcome.remarks.extend(describe_catalog_fit(fit).splitlines())
    for title, items, how in withheld_parts(view.withheld.values(), style):
        outcome.remarks.extend((f"{title} ({len(items)})", *items, how))
    return outcome
