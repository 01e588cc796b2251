"""Automatic garbage collection is paused while a discovery batch runs, and restored after."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_skills import LocalFileSystem, LocalSkillProvider, SkillLookupOptions
from acp_skills._collector import collection_paused


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    """Start from an enabled collector and leave it as the test found it."""
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def write_skills(root: Path, count: int) -> None:
    for index in range(count):
        bundle = root / f"skill-{index}"
        bundle.mkdir(parents=True)
        (bundle / "SKILL.md").write_text(
            f"---\nname: skill-{index}\ndescription: Skill {index}.\n---\nBody.\n"
        )


@pytest.mark.usefixtures("collector_enabled")
def test_collection_is_off_inside_and_back_on_after() -> None:
    """The block runs without automatic collection, which comes back when it ends."""
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_enabled")
def test_collection_comes_back_even_when_the_block_raises() -> None:
    """An exception inside the block does not leave the collector off."""
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_application_disabled_stays_disabled() -> None:
    """Leaving the pause never turns on a collector that was off before it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.usefixtures("collector_enabled")
def test_overlapping_pauses_restore_collection_only_when_the_last_ends() -> None:
    """Two batches on different threads share the pause; the first to end does not undo it."""
    first_inside = threading.Event()
    first_may_leave = threading.Event()
    seen_after_first: list[bool] = []

    def first_batch() -> None:
        with collection_paused():
            first_inside.set()
            first_may_leave.wait(timeout=30)

    worker = threading.Thread(target=first_batch)
    worker.start()
    assert first_inside.wait(timeout=30)
    with collection_paused():
        first_may_leave.set()
        worker.join(timeout=30)
        seen_after_first.append(gc.isenabled())
    assert seen_after_first == [False]
    assert gc.isenabled()


@pytest.mark.anyio
@pytest.mark.usefixtures("collector_enabled")
async def test_digest_batches_run_with_collection_paused(tmp_path: Path) -> None:
    """Every file of a local digest batch is digested with automatic collection off."""
    write_skills(tmp_path, 3)
    states: list[bool] = []

    def digest(data: bytes) -> int:
        states.append(gc.isenabled())
        return len(data)

    paths = [str(tmp_path / f"skill-{index}" / "SKILL.md") for index in range(3)]
    results = await LocalFileSystem().digest_files(paths, 1_000_000, digest)
    assert all(isinstance(result, int) for result in results)
    assert states == [False, False, False]
    assert gc.isenabled()


@pytest.mark.anyio
@pytest.mark.usefixtures("collector_enabled")
async def test_discovery_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    """After a local discovery, collection is enabled again, and the skills are all there."""
    write_skills(tmp_path / "skills", 50)
    provider = LocalSkillProvider(
        dsh_home=tmp_path / "dsh",
        agents_home=tmp_path / "agents",
        custom_skill_dirs=[tmp_path / "skills"],
    )
    candidates = await provider.list(SkillLookupOptions(cwd=None))
    assert len(candidates) == 50
    assert gc.isenabled()
