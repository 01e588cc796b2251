"""Trust of MCP skills through the ACP layer, in process, the servers too (contract §13, §14,
§14a): what ``allow_always`` stores for a server, and which of its skills wait again when it
changes; dynamic is not a loophole: a trusted server that switches a skill between a manifest
and ``"resources": "dynamic"`` has that skill wait for trust again."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_skills import SkillLookupOptions, SkillRegistry
from acp_skills.mcp import McpServer, McpSkillProvider
from acp_skills.trust import ServerSource, TrustStore, Withheld, sources_at
from acp_skills.trust_text import question_text
from tests.acp_peer import Peer, connected
from tests.mcp_http import SERVER, write_served_skill
from tests.mcp_memory import InProcess, session_with
from tests.mcp_scripted import scripted_server, served, skill_text, write_script

pytestmark = [pytest.mark.anyio, pytest.mark.sdk]

FIELDS = {"name": "deploy", "description": "Deploy it."}
FRONTMATTER = "name: deploy\ndescription: Deploy it."


async def trust_of_deploy(peer: Peer, cwd: Path) -> str:
    listing = await peer.ext("skills/list", {"cwd": str(cwd)})
    (deploy,) = [skill for skill in listing["skills"] if skill["name"] == "deploy"]
    return str(deploy["trust"])


@pytest.mark.parametrize("first", ["manifest", "dynamic"])
async def test_a_switch_between_a_manifest_and_dynamic_waits_for_trust_again(
    tmp_path: Path, first: str
) -> None:
    """Same frontmatter, a new body: the server trusted with the one listing is not trusted
    with the other, whichever way it switches."""
    script = tmp_path / "s.json"
    write_script(
        script, [served("deploy", skill_text(FRONTMATTER), FIELDS, dynamic=first == "dynamic")]
    )
    server = scripted_server(script)
    mcp = McpSkillProvider(servers=[server], timeout=30, transport=InProcess())
    registry = SkillRegistry()
    registry.register_provider(mcp)
    store = TrustStore(tmp_path / "trust.json")
    try:
        async with connected(registry, mcp=mcp, trust="ask", trust_store=store) as peer:
            assert await trust_of_deploy(peer, tmp_path) == "pending"
            # What `allow_always` stores: the server's identity with the pairs it listed.
            (skill,) = (await registry.snapshot(SkillLookupOptions(servers=(server,)))).skills
            source = sources_at(())(skill)
            assert isinstance(source, ServerSource)
            # The question tells a dynamic skill by the pairs its source carries.
            question = question_text([Withheld(skill, "pending", source)])
            assert ("so they are unverified" in question) is (first == "dynamic")
            store.decide(source, "trusted")
            assert await trust_of_deploy(peer, tmp_path) == "trusted"

            switched = skill_text(FRONTMATTER, "Do something else entirely.")
            write_script(script, [served("deploy", switched, FIELDS, dynamic=first != "dynamic")])
            assert await trust_of_deploy(peer, tmp_path) == "pending"
    finally:
        await mcp.aclose()


def serve_skill(root: Path, name: str, body: str = "Do the thing.") -> None:
    write_served_skill(root, name, f"Skill {name} from the server.", body)


def trust_updates(peer: Peer, session_id: str, kind: str) -> list[dict[str, Any]]:
    """The trust question's tool call (``tool_call``) or its end (``tool_call_update``)."""
    return [
        update
        for update in peer.wire.updates(session_id, kind)
        if update["toolCallId"].startswith("trust-")
    ]


async def trust_of_all(peer: Peer, session_id: str) -> dict[str, str]:
    listing = await peer.ext("skills/list", {"sessionId": session_id})
    return {skill["name"]: skill["trust"] for skill in listing["skills"]}


async def test_a_trusted_server_is_asked_again_for_just_the_skills_it_added_or_changed(
    tmp_path: Path,
) -> None:
    """allow_always stores the server with its {uri, digest} pairs; after the server changes
    one skill and adds another, only those two wait, and the question says what changed."""
    root = tmp_path / "served"
    for name in ("alpha-skill", "beta-skill"):
        serve_skill(root, name)
    server = McpServer(label="team", command=sys.executable, args=(SERVER, str(root)))
    store = TrustStore(tmp_path / "trust.json")
    async with session_with(server, store, "allow_always") as peer:
        sid = await peer.new_session(tmp_path)
        assert await trust_of_all(peer, sid) == {"alpha-skill": "pending", "beta-skill": "pending"}
        assert (await peer.prompt(sid, "hi")).stop_reason == "end_turn"
        assert await trust_of_all(peer, sid) == {"alpha-skill": "trusted", "beta-skill": "trusted"}
    (start,) = trust_updates(peer, sid, "tool_call")
    assert start["title"] == "Trust 2 skills from team?"
    (stored,) = json.loads((tmp_path / "trust.json").read_text())["servers"]
    assert stored["server"] == f"team={sys.executable} {SERVER} {root}"
    assert stored["decision"] == "trusted"
    uris = {entry["uri"] for entry in stored["resources"]}
    assert {"skill://alpha-skill/SKILL.md", "skill://beta-skill/SKILL.md"} <= uris

    serve_skill(root, "beta-skill", body="Do another thing now.")
    serve_skill(root, "gamma-skill")
    async with session_with(server, store, "reject_once") as peer:
        sid = await peer.new_session(tmp_path)
        assert await trust_of_all(peer, sid) == {
            "alpha-skill": "trusted",
            "beta-skill": "pending",
            "gamma-skill": "pending",
        }
        assert (await peer.prompt(sid, "hi")).stop_reason == "end_turn"
    (start,) = trust_updates(peer, sid, "tool_call")
    assert start["title"] == "Trust 2 skills from team?"
    (shown,) = peer.question_text(sid)
    assert "alpha-skill" not in shown
    assert (
        "- beta-skill: Skill beta-skill from the server. (MCP server team, "
        "skill://beta-skill/SKILL.md) — changed on the server since you trusted it"
    ) in shown
    assert "gamma-skill" in shown
    assert "— new on the server since you trusted it" in shown
    assert [end["status"] for end in trust_updates(peer, sid, "tool_call_update")] == ["failed"]
