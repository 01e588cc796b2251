"""ACP glue: skills inside any agent built on the official ``agent-client-protocol`` SDK.

`AcpSkills` is the one object an agent mounts. It owns the ``skill`` tool, the session prefix
(with the skill catalog contributor), one `PrefixedSession` per live session instance, and
speaks ACP for them:

* a ``skill`` tool call is reported as ``tool_call`` (in progress) then ``tool_call_update``
  (completed or failed) with the same id;
* user-invocable skills are advertised as slash commands with ``available_commands_update``,
  after the ``session/new`` / ``session/load`` response, again at the session's first prompt
  turn (some editors drop the first one), and whenever the set changes;
* ``/name`` in a prompt puts that skill's full content into the turn before the model runs;
* the ``_skills/list``, ``_skills/prefix`` and ``_skills/reload`` extension methods, advertised
  in ``agentCapabilities._meta["acp-skills"]``.

The pure builders (`skill_tool_call_start`, `available_commands`, `find_invocations`, ...) are
public too, for agents that want the pieces without the facade.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog
from acp import RequestError
from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    update_available_commands,
    update_tool_call,
)
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    ToolCallProgress,
    ToolCallStart,
    UnstructuredCommandInput,
)

from .catalog import SkillCatalogContributor, shorten_description
from .model import PrefixContext, PrefixMessage, SkillLookupOptions, SkillSnapshot, SkillSummary
from .prefix import PrefixedSession, SessionPrefix
from .record import InMemorySessionStore, SessionStore
from .registry import SkillRegistry
from .tool import SkillTool, ToolResult
from .unicode import replace_lone_surrogates, replace_lone_surrogates_in_json

__all__ = [
    "EXTENSION_METHODS",
    "EXTENSION_NAME",
    "AcpClient",
    "AcpSkills",
    "InvokedSkill",
    "SkillTurn",
    "available_commands",
    "find_invocations",
    "is_absolute_cwd",
    "prompt_text",
    "skill_tool_call_end",
    "skill_tool_call_start",
]

_log = structlog.get_logger(__name__)

EXTENSION_NAME = "acp-skills"
EXTENSION_VERSION = "1"
# Wire names. The Python SDK hands `ext_method` the name without its leading underscore.
EXTENSION_METHODS = ("_skills/list", "_skills/prefix", "_skills/reload")

# `/name` at the start or after whitespace, followed by whitespace or the end: so `/a/b`, `5/8`
# and `foo/bar` are not invocations. The name grammar is checked separately.
_INVOCATION = re.compile(r"(?<!\S)/([a-z0-9]+(?:-[a-z0-9]+)*)(?!\S)")

# A description longer than this is cut for the editor's command menu.
_COMMAND_DESCRIPTION_MAX = 200


class AcpClient(Protocol):
    """The part of the SDK's client proxy (`acp.core.AgentSideConnection`) this module uses."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any: ...


# -- pure builders ---------------------------------------------------------------------------


def skill_tool_call_start(tool_call_id: str, arguments: object) -> ToolCallStart:
    """The ``tool_call`` update announcing a ``skill`` call (kind ``read``, in progress).

    Lone surrogates in the arguments (a model's JSON may carry them) are replaced by U+FFFD.
    """
    arguments = replace_lone_surrogates_in_json(arguments)
    name = arguments.get("name") if isinstance(arguments, Mapping) else None
    title = f"Load skill {name}" if isinstance(name, str) and name else "Load skill"
    raw_input = dict(arguments) if isinstance(arguments, Mapping) else {"arguments": arguments}
    return start_tool_call(
        tool_call_id, title, kind="read", status="in_progress", raw_input=raw_input
    )


def skill_tool_call_end(tool_call_id: str, result: ToolResult) -> ToolCallProgress:
    """The ``tool_call_update`` closing a ``skill`` call: completed, or failed with the error."""
    return update_tool_call(
        tool_call_id,
        status="failed" if result.is_error else "completed",
        content=[tool_content(text_block(replace_lone_surrogates(result.text)))],
    )


def available_commands(skills: Iterable[SkillSummary]) -> list[AvailableCommand]:
    """Slash commands for the user-invocable skills, in the order given.

    The description is whitespace-normalized and truncated but not XML-escaped: an editor shows
    it literally. ``argument-hint`` becomes the command's input hint.
    """
    commands = []
    for skill in skills:
        if not skill.user_invocable:
            continue
        hint = getattr(skill, "argument_hint", None)
        commands.append(
            AvailableCommand(
                name=skill.name,
                description=shorten_description(skill.description, _COMMAND_DESCRIPTION_MAX),
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint))
                if hint
                else None,
            )
        )
    return commands


def find_invocations(text: str, names: Iterable[str]) -> list[str]:
    """The skills invoked as ``/name`` in ``text``, each once, in order of first appearance.

    Only names in ``names`` count (pass the user-invocable ones); anything else stays text.
    """
    allowed = set(names)
    found: list[str] = []
    for match in _INVOCATION.finditer(text):
        name = match.group(1)
        if name in allowed and name not in found:
            found.append(name)
    return found


def prompt_text(prompt: Sequence[object]) -> str:
    """The text of a prompt's text blocks, joined with newlines (other blocks are skipped).

    Lone surrogates (valid in the JSON of a request) are replaced by U+FFFD.
    """
    parts = []
    for block in prompt:
        text = block.get("text") if isinstance(block, Mapping) else getattr(block, "text", None)
        kind = block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)
        if kind == "text" and isinstance(text, str):
            parts.append(text)
    return replace_lone_surrogates("\n".join(parts))


def _commands_key(commands: Sequence[AvailableCommand]) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (c.name, c.description, c.input.root.hint if c.input is not None else "") for c in commands
    )


# -- the facade ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InvokedSkill:
    """A skill the user invoked as ``/name``: ``text`` is its rendered content, or an error."""

    name: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillTurn:
    """What a prompt turn starts with: the frozen prefix and the skills invoked by ``/name``."""

    prefix: tuple[PrefixMessage, ...]
    invoked: tuple[InvokedSkill, ...]


@dataclass(slots=True, kw_only=True)
class _LiveSession:
    session: PrefixedSession
    # Whether a prompt turn has re-sent the commands (the first one always does).
    announced_in_turn: bool = False
    commands_sent: tuple[tuple[str, str, str], ...] | None = None


@dataclass(slots=True)
class _Tasks:
    """Background sends owned by `AcpSkills`: referenced until done, cancelled by ``aclose``."""

    running: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.running.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("skills_background_send_failed", error=repr(task.exception()))


class AcpSkills:
    """Skills for one ACP connection: the tool, per-session prefixes, commands, extensions.

    Args:
        registry: where skills come from (register providers on it before or after).
        store: the durable per-session record; in memory unless given.
        catalog_max_length: the catalog's description bound.
        max_resource_bytes: the ``skill`` tool's cap on resource reads.
    """

    def __init__(
        self,
        registry: SkillRegistry,
        *,
        store: SessionStore | None = None,
        catalog_max_length: int = 500,
        max_resource_bytes: int = 1_048_576,
    ) -> None:
        self.registry = registry
        self.tool = SkillTool(registry, max_resource_bytes=max_resource_bytes)
        self.prefix = SessionPrefix()
        self.prefix.add(SkillCatalogContributor(registry, max_length=catalog_max_length))
        self.store: SessionStore = store if store is not None else InMemorySessionStore()
        self._client: AcpClient | None = None
        self._client_reads_files = False
        self._sessions: dict[str, _LiveSession] = {}
        self._tasks = _Tasks()
        self._refresh_pending = False
        self._unsubscribe = registry.on_change(self._registry_changed)

    # -- connection ----------------------------------------------------------------------------

    def attach(self, client: AcpClient) -> None:
        """Give the client proxy (call from the agent's ``on_connect``)."""
        self._client = client

    def initialize(self, client_capabilities: object) -> dict[str, Any]:
        """Note what the client can do; return the ``agentCapabilities._meta`` entries to add."""
        fs = _field(client_capabilities, "fs", "fs")
        self._client_reads_files = _field(fs, "read_text_file", "readTextFile") is True
        return self.capability_meta()

    @staticmethod
    def capability_meta() -> dict[str, Any]:
        """``{"acp-skills": {"version", "methods"}}`` for ``agentCapabilities._meta``."""
        return {EXTENSION_NAME: {"version": EXTENSION_VERSION, "methods": list(EXTENSION_METHODS)}}

    async def aclose(self) -> None:
        """Stop background sends and stop following the registry."""
        self._unsubscribe()
        for task in tuple(self._tasks.running):
            task.cancel()
        # gather(return_exceptions=True) waits for the cancelled tasks without swallowing a
        # cancellation of aclose itself.
        await asyncio.gather(*self._tasks.running, return_exceptions=True)

    # -- sessions ------------------------------------------------------------------------------

    async def open_session(
        self,
        session_id: str,
        cwd: str,
        *,
        tool_names: Iterable[str] = ("skill",),
        announce: bool = True,
    ) -> PrefixedSession:
        """Start a session instance (``session/new``, or ``session/load`` of a stored one).

        With ``announce``, the slash commands are scheduled to go out right after the calling
        handler's response; pass ``False`` when the handler still has updates to send (a
        ``session/load`` replay) and call `announce_commands` when it is about to return.

        Raises:
            acp.RequestError: internal error (-32603) when the store cannot read the session's
                record (an `OSError`, such as a record path that is not a regular file).
        """
        context = PrefixContext(session_id=session_id, cwd=cwd, tool_names=frozenset(tool_names))
        try:
            record = await self.store.open(session_id)
            session = await PrefixedSession.open(self.prefix, context, record)
        except OSError as error:
            # Told to the client, not thrown at it: no traceback, and a message a person can
            # act on (the record's path and what is wrong with it).
            problem = f"{error.strerror}: {error.filename}" if error.filename else str(error)
            _log.warning("session_record_unreadable", session_id=session_id, error=problem)
            raise RequestError.internal_error(
                {"sessionId": session_id, "reason": f"the session record cannot be read: {problem}"}
            ) from None
        self._sessions[session_id] = _LiveSession(session=session)
        if announce:
            self.announce_commands(session_id)
        return session

    def announce_commands(self, session_id: str) -> None:
        """Send the session's slash commands once the current handler's response is out.

        An editor ignores updates for a session it has not heard of yet, so this must not go
        out before the ``session/new`` / ``session/load`` response.
        """
        self._tasks.start(self._announce_after_response(session_id))

    async def _announce_after_response(self, session_id: str) -> None:
        # Two loop turns: the handler returns, then the SDK queues its response.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await self.send_commands(session_id, force=True)

    def session(self, session_id: str) -> PrefixedSession:
        """The live session instance.

        Raises:
            acp.RequestError: invalid params (-32602) for an unknown session id.
        """
        return self._live(session_id).session

    def _live(self, session_id: str) -> _LiveSession:
        live = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if live is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        return live

    def has_session(self, session_id: str) -> bool:
        """Whether ``session_id`` is a live session instance of this connection."""
        return session_id in self._sessions

    def close_session(self, session_id: str) -> None:
        """Forget a session instance (its record stays in the store)."""
        self._sessions.pop(session_id, None)

    async def begin_turn(self, session_id: str, prompt: Sequence[object]) -> SkillTurn:
        """Start a prompt turn: compose the prefix (once per instance), re-advertise the
        commands (always on the first turn, later when they changed), and load the skills the
        prompt invokes as ``/name``.

        Raises:
            acp.RequestError: for an unknown session id.
        """
        live = self._live(session_id)
        session = live.session
        options = SkillLookupOptions(cwd=session.context.cwd)
        # Started together, the snapshot and the prefix's catalog share one discovery, so a
        # slow provider is waited for once rather than twice.
        snapshot_lookup = asyncio.ensure_future(self.registry.snapshot(options))
        try:
            prefix = await session.prefix()
            snapshot = await snapshot_lookup
        finally:
            await _settle(snapshot_lookup)
        await self._send_commands(session_id, live, snapshot, force=not live.announced_in_turn)
        live.announced_in_turn = True
        invoked = await self._invoke(session_id, session.context.cwd, prompt, snapshot)
        return SkillTurn(prefix=prefix, invoked=tuple(invoked))

    async def _invoke(
        self, session_id: str, cwd: str, prompt: Sequence[object], snapshot: SkillSnapshot
    ) -> list[InvokedSkill]:
        names = [skill.name for skill in snapshot.skills if skill.user_invocable]
        invoked = []
        for name in find_invocations(prompt_text(prompt), names):
            # ACP wants tool call ids unique within the session, across turns and instances.
            call_id = f"slash-{name}-{uuid.uuid4().hex}"
            await self._send(session_id, skill_tool_call_start(call_id, {"name": name}))
            result = _well_formed(await self.tool.invoke_for_user(name, cwd=cwd, snapshot=snapshot))
            await self._send(session_id, skill_tool_call_end(call_id, result))
            invoked.append(InvokedSkill(name=name, text=result.text, is_error=result.is_error))
        return invoked

    async def call_tool(self, session_id: str, tool_call_id: str, arguments: object) -> ToolResult:
        """Run the ``skill`` tool for the model, reporting it to the client as a tool call.

        Resource reads go through the client's ``fs/read_text_file`` when it advertised it. Lone
        surrogates in the arguments, in the client's file text and in the result are replaced
        by U+FFFD, so neither the client nor the model ever gets text it cannot encode.

        Raises:
            acp.RequestError: for an unknown session id.
        """
        session = self.session(session_id)
        await self._send(session_id, skill_tool_call_start(tool_call_id, arguments))
        read_text = None
        if self._client_reads_files and self._client is not None:
            client = self._client

            async def read_text(path: str) -> str:
                response = await client.read_text_file(session_id=session_id, path=path)
                return replace_lone_surrogates(str(response.content))

        result = _well_formed(
            await self.tool.call(
                replace_lone_surrogates_in_json(arguments),
                cwd=session.context.cwd,
                read_text=read_text,
            )
        )
        await self._send(session_id, skill_tool_call_end(tool_call_id, result))
        return result

    # -- slash commands ------------------------------------------------------------------------

    async def send_commands(self, session_id: str, *, force: bool = False) -> None:
        """Send ``available_commands_update`` if the set changed since the last one (or always,
        with ``force``). Does nothing for a session that is not live."""
        live = self._sessions.get(session_id)
        if live is None:
            return
        options = SkillLookupOptions(cwd=live.session.context.cwd)
        await self._send_commands(
            session_id, live, await self.registry.snapshot(options), force=force
        )

    async def _send_commands(
        self, session_id: str, live: _LiveSession, snapshot: SkillSnapshot, *, force: bool
    ) -> None:
        commands = available_commands(snapshot.skills)
        key = _commands_key(commands)
        if not force and key == live.commands_sent:
            return
        live.commands_sent = key
        update: AvailableCommandsUpdate = update_available_commands(commands)
        await self._send(session_id, update)

    def _registry_changed(self) -> None:
        # Called synchronously from the registry; the refresh needs discovery, so it runs as a
        # task, and bursts of changes collapse into one refresh.
        if self._refresh_pending or not self._sessions:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._refresh_pending = True
        self._tasks.start(self._refresh_commands())

    async def _refresh_commands(self) -> None:
        await asyncio.sleep(0)
        self._refresh_pending = False
        # Catalogs are cached per cwd, so this costs one discovery per distinct working
        # directory, however many sessions share it.
        for session_id in tuple(self._sessions):
            await self.send_commands(session_id)

    async def _send(self, session_id: str, update: Any) -> None:
        if self._client is None:
            return
        await self._client.session_update(session_id=session_id, update=update)

    # -- extension methods ---------------------------------------------------------------------

    def handles(self, method: str) -> bool:
        """Whether ``method`` (as the SDK passes it to ``ext_method``, without ``_``) is ours."""
        return f"_{method}" in EXTENSION_METHODS or method in EXTENSION_METHODS

    async def ext_method(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer ``_skills/list``, ``_skills/prefix`` or ``_skills/reload``.

        Raises:
            acp.RequestError: method not found for other methods; invalid params for a missing
                or unknown session id or a relative ``cwd``.
        """
        name = method.removeprefix("_")
        params = params if isinstance(params, Mapping) else {}
        if name == "skills/list":
            return await self._list_skills(params)
        if name == "skills/prefix":
            return self._describe_prefix(params)
        if name == "skills/reload":
            self.registry.invalidate()
            return {"revision": self.registry.revision}
        raise RequestError.method_not_found(f"_{name}")

    async def _list_skills(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if "sessionId" in params:
            cwd: str | None = self.session(params["sessionId"]).context.cwd
        elif "cwd" in params:
            cwd = params["cwd"]
            if not is_absolute_cwd(cwd):
                raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd must be absolute"})
        else:
            raise RequestError.invalid_params({"reason": "pass sessionId or cwd"})
        snapshot = await self.registry.snapshot(SkillLookupOptions(cwd=cwd))
        return {
            "skills": [
                {
                    "name": skill.name,
                    "description": skill.description,
                    "source": skill.source,
                    "provider": skill.provider,
                    "userInvocable": skill.user_invocable,
                    "disableModelInvocation": skill.disable_model_invocation,
                }
                for skill in snapshot.skills
            ]
        }

    def _describe_prefix(self, params: Mapping[str, Any]) -> dict[str, Any]:
        session = self.session(params.get("sessionId"))  # type: ignore[arg-type]
        header = session.last_header
        return {
            "composed": session.composed,
            "messages": [{"role": m.role, "text": m.text} for m in session.messages],
            "header": header.to_json() if header is not None else None,
        }


def _well_formed(result: ToolResult) -> ToolResult:
    # A result may quote what came in (a path the model asked for) or what the disk holds (a
    # directory whose undecodable name Python spells with lone surrogates).
    return replace(result, text=replace_lone_surrogates(result.text))


async def _settle(task: asyncio.Task[Any]) -> None:
    """Make sure a helper task is finished and its outcome retrieved (never left dangling)."""
    if not task.done():
        task.cancel()
        await asyncio.wait([task])
    if not task.cancelled():
        task.exception()


def _field(value: object, attribute: str, key: str) -> object:
    # The SDK's lenient parsing can leave a raw dict where a model was expected.
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, attribute, None)


def is_absolute_cwd(cwd: object) -> bool:
    """Whether ``cwd`` is an absolute path, as ACP requires of a session's working directory."""
    return isinstance(cwd, str) and os.path.isabs(cwd) and "\0" not in cwd
