"""Dynamic is not a loophole (contract §14a): a trusted server that switches a skill between a
manifest and ``"resources": "dynamic"`` has that skill wait for trust again. Through the agent,
in process, with the decision ``allow_always`` stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_skills import SkillLookupOptions, SkillRegistry
from acp_skills.mcp import McpSkillProvider
from acp_skills.mcp.provider import McpLocator
from acp_skills.trust import ServerSource, TrustStore
from tests.acp_peer import Peer, connected
from tests.mcp_scripted import scripted_server, served, skill_text, write_script

pytestmark = pytest.mark.anyio

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
    mcp = McpSkillProvider(servers=[server], timeout=30)
    registry = SkillRegistry()
    registry.register_provider(mcp)
    store = TrustStore(tmp_path / "trust.json")
    try:
        async with connected(registry, mcp=mcp, trust="ask", trust_store=store) as peer:
            assert await trust_of_deploy(peer, tmp_path) == "pending"
            # What `allow_always` stores: the server's identity with the pairs it listed.
            (skill,) = (await registry.snapshot(SkillLookupOptions(servers=(server,)))).skills
            locator = skill.locator
            assert isinstance(locator, McpLocator)
            assert locator.dynamic is (first == "dynamic")
            source = ServerSource(
                locator.server_label, locator.server_identity, locator.served, locator.skill_uri
            )
            store.decide(source, "trusted")
            assert await trust_of_deploy(peer, tmp_path) == "trusted"

            switched = skill_text(FRONTMATTER, "Do something else entirely.")
            write_script(script, [served("deploy", switched, FIELDS, dynamic=first != "dynamic")])
            assert await trust_of_deploy(peer, tmp_path) == "pending"
    finally:
        await mcp.aclose()
