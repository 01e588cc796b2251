"""One fresh-process measurement of a peer library's discovery, run in the bench environment.

    python bench/bench_env/peers.py PEER ROOT

Prints one JSON line: the seconds discovery took (imports excluded), the number of skills, a
digest of the (name, description) catalog, and the peak resident memory of the process.
Each peer is called the way its documentation shows, through its public API.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def digest(entries: Iterable[tuple[str, str]]) -> str:
    lines = sorted(f"{name}\t{text}" for name, text in entries)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def skills_ref(root: Path) -> Callable[[], list[tuple[str, str]]]:
    # The reference library reads one skill directory at a time; finding the directories is
    # the caller's job.
    import skills_ref as ref

    def discover() -> list[tuple[str, str]]:
        catalog = []
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if entry.is_dir():
                properties = ref.read_properties(Path(entry.path))
                catalog.append((properties.name, properties.description))
        return catalog

    return discover


def agentskills(root: Path) -> Callable[[], list[tuple[str, str]]]:
    from agentskills_core import SkillRegistry
    from agentskills_fs import LocalFileSystemSkillProvider

    async def discover() -> list[tuple[str, str]]:
        registry = SkillRegistry()
        await registry.register_all(LocalFileSystemSkillProvider(root))
        catalog = []
        for skill in registry.list_skills():
            metadata = await skill.get_metadata()
            catalog.append((metadata["name"], metadata["description"]))
        return catalog

    return lambda: asyncio.run(discover())


def pydantic_ai_skills(root: Path) -> Callable[[], list[tuple[str, str]]]:
    # SkillsCapability indexes the libraries when it is built; pydantic-ai-harness's Skills,
    # which it hands discovery to, reads them at the start of each run. `Skills.load` is that
    # read, outside a run.
    from pydantic_ai.workspaces import LocalWorkspaceBackend
    from pydantic_ai_harness.skills import Skills
    from pydantic_ai_skills import SkillsCapability

    async def discover() -> list[tuple[str, str]]:
        SkillsCapability(str(root))
        catalog = await Skills([str(root)]).load(LocalWorkspaceBackend(str(root)))
        return [(skill.name, skill.description) for skill in catalog.skills]

    return lambda: asyncio.run(discover())


def fast_agent(root: Path) -> Callable[[], list[tuple[str, str]]]:
    from fast_agent.skills import SkillRegistry

    def discover() -> list[tuple[str, str]]:
        manifests = SkillRegistry(base_dir=root, directories=[root]).load_manifests()
        return [(manifest.name, manifest.description) for manifest in manifests]

    return discover


PEERS = {
    "skills-ref": skills_ref,
    "agentskills": agentskills,
    "pydantic-ai-skills": pydantic_ai_skills,
    "fast-agent": fast_agent,
}


def main() -> None:
    peer, root = sys.argv[1], Path(sys.argv[2]).resolve()
    discover = PEERS[peer](root)
    started = time.perf_counter()
    catalog = discover()
    seconds = time.perf_counter() - started
    result = {
        "seconds": seconds,
        "count": len(catalog),
        "digest": digest(catalog),
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
