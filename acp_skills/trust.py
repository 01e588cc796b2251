"""Which skills a session may offer (contract §13, §13a; docs/trust.md): the source each skill
needs trust from, the decisions in the trust file, `view`, the one rule that makes of a snapshot,
those decisions and a session's answers what it offers, and what a person reads of the rest."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias, cast, get_args, runtime_checkable

import anyio.to_thread

from .diagnostics import Markup, plural
from .errors import ReadError
from .fs import read_local_file, replace_file
from .json_depth import MAX_NESTING_DEPTH, nests_deeper_than
from .model import SkillCandidate, SkillLookupOptions, SkillSnapshot
from .project import PROJECT_SKILL_DIRS, Project, find_project
from .quiet_log import get_logger
from .registry import SkillRegistry
from .text import one_line, shorten_description, terminal_safe

_log = get_logger(__name__)

TrustMode: TypeAlias = Literal["ask", "all", "none"]
TrustState: TypeAlias = Literal["trusted", "session", "pending", "refused"]
Decision: TypeAlias = Literal["trusted", "refused"]
TRUST_MODES: tuple[str, ...] = get_args(TrustMode)
# What a question shows of a skill, so what "Trust for this session" admits: an MCP skill's
# (uri, digest) pairs ("dynamic" for a dynamic skill's SKILL.md), a project skill's (path, name).
ShownItem: TypeAlias = tuple[str, str]
SERVER_KEY_PREFIX: Final = "mcp:"  # a server's decision is stored under it, a project's by path
# Far above any person's decisions (a thousand projects take about 100 KiB), far below memory.
MAX_TRUST_FILE_BYTES: Final = 16 * 1024 * 1024


def trust_mode(value: str | None) -> TrustMode:
    """``value`` (a flag or ``ACP_SKILLS_TRUST``) as a mode; empty or missing means ``ask``."""
    if (text := (value or "").strip().lower() or "ask") in TRUST_MODES:
        return cast(TrustMode, text)
    raise ValueError(f"trust: unknown mode {value!r} (known: {', '.join(TRUST_MODES)})")


@dataclass(frozen=True, slots=True)
class ProjectSource:
    """A project by ``key``, the real path its decision is stored under."""

    key: str

    @property
    def label(self) -> str:
        return os.path.basename(self.key) or self.key


@dataclass(frozen=True, slots=True)
class ServerSource:
    """An MCP server by its identity, with the pairs to trust it with (none to refuse it)."""

    label: str
    endpoint: str
    items: frozenset[ShownItem] = frozenset()
    uri: str = ""  # the skill's own SKILL.md, for the question

    @property
    def key(self) -> str:
        return SERVER_KEY_PREFIX + self.endpoint


TrustSource: TypeAlias = ProjectSource | ServerSource


@runtime_checkable
class ServedLocator(Protocol):
    """What a skill an MCP server serves tells trust (the MCP provider's locator, not imported:
    its SDK is optional)."""

    server_label: str
    server_identity: str
    skill_uri: str
    served: frozenset[ShownItem]


def sources_at(projects: Sequence[Project]) -> Callable[[SkillCandidate], TrustSource | None]:
    """The source each skill needs trust from (``None``: an own root): a project skill, its
    project among ``projects``; an MCP skill, its server."""

    def source_of(skill: SkillCandidate) -> TrustSource | None:
        if skill.source in PROJECT_SKILL_DIRS and projects:
            # A listing cached before the project changed (a `.git` made or removed since) may
            # hold skills of another root: they never take a project's decision.
            path = skill.path or ""
            for project in projects:
                if path.startswith(os.path.join(project.skill_root(skill.source), "")):
                    return ProjectSource(project.key)
            return ProjectSource(os.path.dirname(path) or projects[0].root)
        if skill.provider != "mcp":
            return None
        if isinstance(at := skill.locator, ServedLocator):
            return ServerSource(at.server_label, at.server_identity, at.served, at.skill_uri)
        return ServerSource(skill.source, skill.source)  # nothing to compare: fails closed

    return source_of


def shown_items(skill: SkillCandidate, source: TrustSource) -> frozenset[ShownItem]:
    """What a question shows of ``skill``, and so what a once-answer admits (`ShownItem`)."""
    if isinstance(source, ServerSource):
        return source.items
    return frozenset({(skill.path or "", skill.name)})


# -- the decisions stored ---------------------------------------------------------------------


def default_trust_file() -> str:
    """``$ACP_SKILLS_TRUST_FILE``, else ``$XDG_CONFIG_HOME/acp-skills/trust.json`` (a relative
    ``XDG_CONFIG_HOME`` counts as unset, as XDG says: ``~/.config``).

    Raises:
        ValueError: ``ACP_SKILLS_TRUST_FILE`` is relative (it would name a project's file).
    """
    if override := os.environ.get("ACP_SKILLS_TRUST_FILE", "").strip():
        if not os.path.isabs(path := os.path.expanduser(override)):
            raise ValueError(
                f"ACP_SKILLS_TRUST_FILE must be an absolute path (or start with ~), not "
                f"{override!r}: a relative one would be read from the directory the agent "
                "was started in, usually a project"
            )
        return os.path.normpath(path)
    config = os.path.expanduser(os.environ.get("XDG_CONFIG_HOME", "").strip())
    if not os.path.isabs(config):
        config = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(os.path.normpath(config), "acp-skills", "trust.json")


class TrustFileError(Exception):
    """The trust file exists but cannot be read as decisions (it is left untouched)."""


@dataclass(frozen=True, slots=True)
class StoredTrust:
    """A decision per source key, and the pairs each trusted server was trusted with."""

    decisions: Mapping[str, Decision] = field(default_factory=dict)
    served: Mapping[str, frozenset[ShownItem]] = field(default_factory=dict)

    def decided(self, source: TrustSource, decision: Decision | None) -> StoredTrust:
        """These decisions with ``decision`` for ``source`` (``None`` forgets it): a trusted
        server's pairs replace those it had for the same uris."""
        decisions = {k: v for k, v in self.decisions.items() if k != source.key}
        served = {k: v for k, v in self.served.items() if k != source.key}
        if decision is not None:
            decisions[source.key] = decision
        if decision == "trusted" and isinstance(source, ServerSource):
            uris = {uri for uri, _ in source.items}
            kept = {pair for pair in self.served.get(source.key, ()) if pair[0] not in uris}
            served[source.key] = source.items | kept
        return StoredTrust(decisions, served)


class TrustStore:
    """The decisions, one per source key, in a JSON file outside any project."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else default_trust_file()

    def read(self) -> StoredTrust:
        """Every decision (none for a missing file), read bounded: a regular file opened
        without blocking, at most `MAX_TRUST_FILE_BYTES`, nested at most `MAX_NESTING_DEPTH`.

        Raises:
            TrustFileError: the file exists but cannot be read as decisions.
        """
        cannot = f"{self.path}: cannot read trust decisions"
        content = read_local_file(self.path, MAX_TRUST_FILE_BYTES)
        if isinstance(content, ReadError):
            if content.failure in ("not_found", "broken_link"):
                return StoredTrust()
            raise TrustFileError(f"{cannot}: {content.reason}")
        deep = f"nested more than {MAX_NESTING_DEPTH} levels deep"
        try:
            data = json.loads(content.decode("utf-8"))
            if nests_deeper_than(data, MAX_NESTING_DEPTH):
                raise ValueError(deep)
            entries = [*data["projects"], *data.get("servers", [])]
        except RecursionError:  # the decoder's own limit, far below 100,000 brackets
            raise TrustFileError(f"{cannot}: {deep}") from None
        except (ValueError, LookupError, TypeError, AttributeError) as error:  # not decisions
            raise TrustFileError(f"{cannot}: {error!s}") from None
        decisions: dict[str, Decision] = {}
        served: dict[str, frozenset[ShownItem]] = {}
        for entry in (entry for entry in entries if isinstance(entry, dict)):
            if (decision := entry.get("decision")) not in ("trusted", "refused"):
                continue
            if isinstance(path := entry.get("path"), str):
                decisions[path] = decision
            elif isinstance(server := entry.get("server"), str):
                decisions[key := SERVER_KEY_PREFIX + server] = decision
                listed = entry.get("resources") if decision == "trusted" else None
                if isinstance(listed, list):  # the pairs it was trusted with, well-formed ones
                    pairs = [(r.get("uri"), r.get("digest")) for r in listed if isinstance(r, dict)]
                    served[key] = frozenset(
                        (u, d) for u, d in pairs if isinstance(u, str) and isinstance(d, str)
                    )
        return StoredTrust(decisions, served)

    def decide(self, source: TrustSource, decision: Decision | None) -> bool:
        """Store ``decision`` for ``source`` (`StoredTrust.decided`); whether anything changed.
        Under a lock beside the file (which each write replaces): no writer overwrites another."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with open(self.path + ".lock", "a") as lock:  # closing it releases the lock
            fcntl.flock(lock, fcntl.LOCK_EX)  # held per open file: threads of one process wait
            if (after := (stored := self.read()).decided(source, decision)) == stored:
                return False
            projects, servers = [], []
            for key, value in sorted(after.decisions.items()):
                if not key.startswith(SERVER_KEY_PREFIX):
                    projects.append({"path": key, "decision": value})
                    continue
                server = key.removeprefix(SERVER_KEY_PREFIX)
                entry: dict[str, object] = {"server": server, "decision": value}
                if value == "trusted":
                    pairs = sorted(after.served.get(key, ()))
                    entry["resources"] = [{"uri": uri, "digest": digest} for uri, digest in pairs]
                servers.append(entry)
            data = {"projects": projects} | ({"servers": servers} if servers else {})
            # A symbolic link at the path (a dotfiles repository's) stays: its target is rewritten.
            target = os.path.realpath(self.path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            text = json.dumps(data, indent=2) + "\n"
            replace_file(target, text.encode(), prefix=".trust-", sync=True)
            return True


# -- what a session offers --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Withheld:
    """A skill a session does not offer, and why (``change``: new or changed on its server)."""

    skill: SkillCandidate
    state: TrustState
    source: TrustSource
    change: Literal["new", "changed"] | None = None


@dataclass(frozen=True, slots=True)
class SessionView:
    """A snapshot as one session sees it: what it offers (``found`` itself when nothing is
    withheld), each winner it withholds by name, and what it was made of, to judge again."""

    found: SkillSnapshot
    offered: SkillSnapshot
    withheld: Mapping[str, Withheld]
    source_of: Callable[[SkillCandidate], TrustSource | None]
    stored: StoredTrust
    judge: Callable[[SkillCandidate], tuple[TrustState, Withheld | None]]

    @property
    def pending(self) -> tuple[Withheld, ...]:
        """The withheld skills a question asks about."""
        return tuple(held for held in self.withheld.values() if held.state == "pending")

    def state(self, skill: SkillCandidate) -> TrustState:
        """The state of ``skill``: a winner, a shadowed skill, or one named by its uri."""
        return self.judge(skill)[0]

    def judged(self, skill: SkillCandidate) -> Withheld | None:
        """Whether ``skill`` is withheld, and why."""
        return self.judge(skill)[1]


def view(
    found: SkillSnapshot,
    source_of: Callable[[SkillCandidate], TrustSource | None],
    stored: StoredTrust,
    mode: TrustMode,
    grants: Mapping[str, frozenset[ShownItem]] | None = None,
    previous: SessionView | None = None,
) -> SessionView:
    """What a session offers of ``found``, as a pure function. ``grants``: what its
    once-answers admitted, by source key; a skill is ``session`` while all it shows now is among
    them, a trusted server's skill trusted while all its pairs are ones the server was trusted
    with. An offer equal to ``previous``'s is that very snapshot (what is cached by it stays)."""

    def judge(skill: SkillCandidate) -> tuple[TrustState, Withheld | None]:
        if mode == "all" or (source := source_of(skill)) is None:
            return "trusted", None
        if mode == "none" or (decision := stored.decisions.get(source.key)) == "refused":
            return "refused", Withheld(skill, "refused", source)
        shown, served = shown_items(skill, source), stored.served.get(source.key)
        if decision == "trusted" and (isinstance(source, ProjectSource) or _covered(shown, served)):
            return "trusted", None  # a project, or a server for the pairs it was trusted with
        if _covered(shown, (grants or {}).get(source.key)):
            return "session", None
        change: Literal["new", "changed"] | None = None
        if decision == "trusted":  # a skill of a trusted server, new or changed since
            known = {uri for uri, _ in served or ()}
            change = "changed" if any(uri in known for uri, _ in shown) else "new"
        return "pending", Withheld(skill, "pending", source, change)

    withheld = {s.name: held for s in found.skills if (held := judge(s)[1]) is not None}
    offered = found
    if withheld:
        kept = {skill.name: skill for skill in found.skills if skill.name not in withheld}
        for lost in found.shadowed:  # in resolution order: the first admitted one stands
            if lost.skill.name in withheld and judge(lost.skill)[1] is None:
                kept.setdefault(lost.skill.name, lost.skill)
        offered = SkillSnapshot(
            skills=tuple(sorted(kept.values(), key=lambda skill: skill.name)),
            complete=found.complete,
            shadowed=tuple(s for s in found.shadowed if kept.get(s.skill.name) is not s.skill),
        )
        if previous is not None and previous.offered == offered:
            offered = previous.offered
    return SessionView(found, offered, withheld, source_of, stored, judge)


def _covered(items: frozenset[ShownItem], admitted: frozenset[ShownItem] | None) -> bool:
    # Nothing to compare (a server skill listed without pairs) is never covered: fail closed.
    return bool(items) and admitted is not None and items <= admitted


def lasting_sources(pending: Sequence[Withheld]) -> dict[str, TrustSource]:
    """What a lasting answer about ``pending`` decides, one source per key: a server's with the
    pairs of every one of its skills the question named."""
    sources: dict[str, TrustSource] = {}
    for withheld in pending:
        source = withheld.source
        if isinstance(known := sources.get(source.key), ServerSource):
            more = shown_items(withheld.skill, source)
            source = ServerSource(known.label, known.endpoint, known.items | more)
        sources[source.key] = source
    return sources


async def session_view(
    registry: SkillRegistry,
    options: SkillLookupOptions,
    mode: TrustMode,
    store: TrustStore,
    grants: Mapping[str, frozenset[ShownItem]] | None = None,
    previous: SessionView | None = None,
) -> SessionView:
    """`view` of the registry's snapshot for ``options``, the projects found and the decisions
    read in worker threads. A trust file that cannot be read grants nothing."""
    found, projects, stored = await registry.snapshot(options), list[Project](), StoredTrust()
    if mode != "all" and options.cwd:
        places = (options.cwd, *options.additional_directories)
        projects = await anyio.to_thread.run_sync(lambda: [find_project(p) for p in places])
    if mode == "ask":
        try:
            stored = await anyio.to_thread.run_sync(store.read)
        except TrustFileError as error:  # left for the person to fix
            _log.warning("trust_file_unreadable", path=store.path, error=str(error))
    return view(found, sources_at(projects), stored, mode, grants, previous)


# -- what a person reads ----------------------------------------------------------------------

# The four answers, by option id (the id is the kind); WHOM: "this project", "this server"...
OPTIONS: Final = (
    ("allow_once", "Trust for this session"),
    ("allow_always", "Trust {whom}"),
    ("reject_once", "Not now"),
    ("reject_always", "Never for {whom}"),
)
_WAITS: Final[Mapping[TrustState, str]] = {
    "pending": "is waiting for trust",
    "refused": "is not trusted",
}


def whom_asked(pending: Sequence[Withheld]) -> str:
    """The labels of the projects and servers a question about ``pending`` names."""
    return ", ".join(sorted({one_line(w.source.label) for w in pending}))


def question_title(pending: Sequence[Withheld]) -> str:
    """``Trust N skills from PROJECT?`` (the project's directory name or the server labels)."""
    return f"Trust {plural(len(pending), 'skill')} from {whom_asked(pending)}?"


def question_text(pending: Sequence[Withheld]) -> str:
    """A line per pending skill, every value `one_line` so that none can forge another: its
    name, description and path, or server and uri, and what changed or is unverified."""
    lines = []
    for withheld in sorted(pending, key=lambda w: w.skill.name):
        skill, source, notes = withheld.skill, withheld.source, _changed(withheld)
        where = one_line(skill.path or "")
        if isinstance(source, ServerSource):
            where = f"MCP server {one_line(source.label)}, {one_line(source.uri)}"
        if getattr(skill.locator, "dynamic", False) is True:  # `"resources": "dynamic"`
            notes += " — its files are not listed, so they are unverified"
        said = shorten_description(skill.description, 200)
        lines.append(f"- {one_line(skill.name)}: {said} ({where}){notes}")
    return "\n".join(lines)


def _changed(withheld: Withheld) -> str:
    return f" — {withheld.change} on the server since you trusted it" if withheld.change else ""


def question_options(pending: Sequence[Withheld]) -> list[tuple[str, str]]:
    """The four answers (option id, label), the lasting ones naming what they are about."""
    servers = {w.source.key for w in pending if isinstance(w.source, ServerSource)}
    counts = ((len({w.source.key for w in pending} - servers), "project"), (len(servers), "server"))
    whom = [f"these {n} {noun}s" if n > 1 else f"this {noun}" for n, noun in counts if n]
    return [(kind, label.format(whom=" and ".join(whom))) for kind, label in OPTIONS]


def how_to_admit(withheld: Sequence[Withheld]) -> str:
    """How to admit the ``withheld`` skills: a new session's question, or ``acp-skills trust
    PATH`` for a project (a server is trusted for what it lists, which only its question
    shows); for a refusal, the command that undoes it."""
    said = []
    if pending := [w for w in withheld if w.state == "pending"]:
        run = _commands([w.source for w in pending if isinstance(w.source, ProjectSource)])
        how = f"To admit {'them' if pending[1:] else 'it'}, start a new session and answer its"
        said.append(f"{how} question, or run {run}." if run else f"{how} question.")
    if refused := [w.source for w in withheld if w.state == "refused"]:
        said.append(f"To undo a refusal, run {_commands(refused)}.")
    return " ".join(said)


def _commands(sources: Sequence[TrustSource]) -> str:
    # A project is trusted by path, a server's refusal forgotten by its key. Quoted first:
    # cleaning after keeps every space of the path.
    commands = set()
    for source in sources:
        forget = "--forget " if isinstance(source, ServerSource) else ""
        commands.add(f"`acp-skills trust {forget}{terminal_safe(shlex.quote(source.key))}`")
    return " and ".join(sorted(commands))


def _from(source: TrustSource) -> str:
    if isinstance(source, ServerSource):
        return f'MCP server "{one_line(source.label)}"'
    return f"project `{one_line(source.label)}`"


def why_withheld(name: str, withheld: Withheld) -> str:
    """```NAME` comes from PLACE, which is waiting for trust`` (or ``is not trusted``)."""
    return f"`{one_line(name)}` comes from {_from(withheld.source)}, which {_WAITS[withheld.state]}"


def trust_error(name: str, withheld: Withheld) -> str:
    """The `skill` tool's answer for a withheld skill, by exact name."""
    if isinstance(source := withheld.source, ServerSource):
        return f'Error: skill "{one_line(name)}" from {_from(source)} {_WAITS[withheld.state]}'
    return f'Error: skill "{one_line(name)}" {_WAITS[withheld.state]} in this project'


def command_note(name: str, withheld: Withheld) -> str:
    """The line a person gets for a `/NAME` of a withheld skill: after the session's one
    question (or instead of it), so it never says "when asked"."""
    again = ", and this session will not ask again" if withheld.state == "pending" else ""
    how = how_to_admit([withheld])
    return f"{why_withheld('/' + name, withheld)}: it was not run{again}. {how}"


def waiting_note(pending: Sequence[Withheld]) -> str | None:
    """How many of a session's skills wait, from where, and how to admit them, once its question
    was put; ``None`` when nothing waits."""
    if not pending:
        return None
    places = ", ".join(sorted({_from(w.source) for w in pending}))
    waits = f"{plural(len(pending), 'skill')} from {places} {'wait' if pending[1:] else 'waits'}"
    return f"{waits} for trust, and this session will not ask again. {how_to_admit(pending)}"


def withheld_parts(
    withheld: Collection[Withheld], markup: Markup
) -> list[tuple[str, list[str], str]]:
    """The "Waiting for trust" and "Refused" parts of a report (``/skills``, ``doctor``,
    ``catalog``): each title, a line per skill (name, description as ``markup`` shows free
    text, place), and how to admit them."""
    parts = []
    for state, title in (("pending", "Waiting for trust"), ("refused", "Refused")):
        if group := sorted((w for w in withheld if w.state == state), key=lambda w: w.skill.name):
            lines = [
                f"- `{one_line(w.skill.name)}` — "
                f"{markup.text(shorten_description(w.skill.description, 120))} "
                f"({_from(w.source)}){_changed(w)}"
                for w in group
            ]
            parts.append((title, lines, how_to_admit(group)))
    return parts
