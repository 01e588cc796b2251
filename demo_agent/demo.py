"""The scripted demonstration: the demo agent driven over stdio by the official SDK client.

    python -m demo_agent.demo [--skills DIR] [agent arguments ...]

It starts ``python -m demo_agent`` as a subprocess, opens a session in a scratch project with
the example skills shipped inside the package (``--examples``; or the skills in ``DIR``),
sends a few prompts and prints a readable transcript: the slash
commands the editor would show, the skill catalog the model sees, each tool call and its
result, and the agent's answers. Everything runs offline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import anyio
from acp.schema import (
    AgentMessageChunk,
    AvailableCommandsUpdate,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
)
from acp.stdio import spawn_agent_process

PROMPTS = (
    "Please review my branch before I merge it.",
    "/release-checklist 1.4.0",
    "Can you help me bake bread?",
)

_RULE = "-" * 78


class TranscriptClient:
    """An ACP client that prints what an editor would show."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._in_message = False

    def _print(self, text: str = "") -> None:
        if self._in_message:
            print(file=self._out)
            self._in_message = False
        print(text, file=self._out)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            text = getattr(update.content, "text", "")
            if not self._in_message:
                print("agent > ", end="", file=self._out)
                self._in_message = True
            print(text.replace("\n", "\n        "), end="", file=self._out)
        elif isinstance(update, AvailableCommandsUpdate):
            names = ", ".join(
                f"/{command.name}"
                + (f" {command.input.root.hint}" if command.input is not None else "")
                for command in update.available_commands
            )
            self._print(f"[commands] {names}")
        elif isinstance(update, ToolCallStart):
            self._print(f"[tool call {update.tool_call_id}] {update.title}: {update.status}")
        elif isinstance(update, ToolCallProgress):
            text = ""
            for item in update.content or ():
                text = getattr(getattr(item, "content", None), "text", "") or text
            self._print(f"[tool call {update.tool_call_id}] {update.status}")
            self._print(_quote(_clip(text, 14)))

    async def request_permission(self, **kwargs: Any) -> Any:
        raise NotImplementedError("the demo agent never asks for permission")

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        text = await anyio.to_thread.run_sync(Path(path).read_text, "utf-8")
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, **kwargs: Any) -> None:
        raise NotImplementedError("the demo agent never writes files")

    def finish_message(self) -> None:
        self._print()


def _quote(text: str) -> str:
    return textwrap.indent(text, "    | ", lambda _line: True)


def _clip(text: str, lines: int) -> str:
    kept = text.splitlines()
    if len(kept) <= lines:
        return text
    return "\n".join([*kept[:lines], f"... ({len(kept) - lines} more lines)"])


async def run(skills_dir: Path | None, agent_args: Sequence[str], out: Any) -> int:
    """Run the demonstration, printing the transcript to ``out``; return the exit status.

    Args:
        skills_dir: the skills to show; ``None`` for the examples shipped with the package.
        agent_args: extra command-line arguments for the demo agent.
        out: a text stream.
    """
    with tempfile.TemporaryDirectory(prefix="acp-skills-demo-") as scratch:
        root = Path(scratch)
        project = root / "project"
        (project / ".git").mkdir(parents=True)
        env = {
            # Keep the person's own ~/.dsh and ~/.agents skills out of the demonstration.
            "DSH_HOME": str(root / "dsh-home"),
            "DSH_AGENTS_HOME": str(root / "agents-home"),
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        skills = ["--examples"] if skills_dir is None else ["--skills-dir", str(skills_dir)]
        command = [
            "-m",
            "demo_agent",
            *skills,
            "--state-dir",
            str(root / "state"),
            *agent_args,
        ]
        client = TranscriptClient(out)
        print(_RULE, file=out)
        print("acp-skills demonstration: the demo agent over stdio, offline model", file=out)
        print(_RULE, file=out)
        # The transcript client implements only what the demo agent uses, so it is not a full
        # `acp.Client` to the type checker.
        async with spawn_agent_process(
            cast(Any, client), sys.executable, *command, env=env, transport_kwargs={"stderr": None}
        ) as (conn, _process):
            init = await conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=False)
                ),
                client_info=Implementation(name="acp-skills-demo-client", version="1"),
            )
            info = init.agent_info
            capabilities = init.agent_capabilities
            meta = ((capabilities.field_meta if capabilities else None) or {}).get("acp-skills", {})
            print(
                f"agent: {info.name if info else '?'} {info.version if info else ''}, "
                f"protocol {init.protocol_version}, skills extension {meta.get('methods')}",
                file=out,
            )
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            print(f"session {session.session_id} in {project}", file=out)
            listed = await conn.ext_method("skills/list", {"sessionId": session.session_id})
            print("\nskills as the registry resolves them (_skills/list):", file=out)
            for skill in listed["skills"]:
                flags = []
                if skill["disableModelInvocation"]:
                    flags.append("hidden from the model")
                if not skill["userInvocable"]:
                    flags.append("no slash command")
                suffix = f"  ({', '.join(flags)})" if flags else ""
                print(f"  {skill['name']:<20} {skill['source']:<8}{suffix}", file=out)
            for index, text in enumerate(PROMPTS):
                print(f"\n{_RULE}\nuser  > {text}", file=out)
                response = await conn.prompt(
                    session_id=session.session_id, prompt=[TextContentBlock(type="text", text=text)]
                )
                client.finish_message()
                print(f"[turn ended: {response.stop_reason}]", file=out)
                if index == 0:
                    prefix = await conn.ext_method(
                        "skills/prefix", {"sessionId": session.session_id}
                    )
                    print(
                        "\nthe catalog the model saw (session prefix, frozen for this session):",
                        file=out,
                    )
                    for message in prefix["messages"]:
                        print(_quote(message["text"]), file=out)
        print(_RULE, file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the scripted acp-skills demonstration.")
    parser.add_argument(
        "--skills",
        type=Path,
        default=None,
        help="a skills directory to show instead of the examples shipped with the package",
    )
    parser.add_argument(
        "agent_args", nargs=argparse.REMAINDER, help="extra arguments for the demo agent"
    )
    args = parser.parse_args(argv)
    skills_dir = args.skills.resolve() if args.skills is not None else None
    return asyncio.run(run(skills_dir, args.agent_args, sys.stdout))


if __name__ == "__main__":
    sys.exit(main())
