"""SkillRegistry: resolution, validation, caching, invalidation and concurrency (contract §4)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from acp_skills import (
    SkillDefinition,
    SkillLookupOptions,
    SkillRegistry,
)
from tests.events import Hang, cancelled_when
from tests.providers import ListProvider, candidate, definition_of, names

pytestmark = pytest.mark.anyio


def winner_providers(snapshot: Any) -> dict[str, str]:
    return {skill.name: skill.provider for skill in snapshot.skills}


# -- precedence ------------------------------------------------------------------------------


async def test_lower_rank_wins_regardless_of_registration_order() -> None:
    """A later provider with a lower rank beats an earlier one."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("user", [candidate("x", provider="user", rank=400)]))
    registry.register_provider(ListProvider("proj", [candidate("x", provider="proj", rank=100)]))
    snapshot = await registry.snapshot()
    assert winner_providers(snapshot) == {"x": "proj"}


async def test_runtime_skill_sits_between_project_and_custom_ranks() -> None:
    """Runtime skills (rank 250) lose to project skills (100, 200) and beat custom ones (300)."""
    registry = SkillRegistry()
    registry.register_provider(
        ListProvider(
            "local",
            [
                candidate("proj", provider="local", rank=200),
                candidate("custom", provider="local", rank=300),
            ],
        )
    )
    for name in ("proj", "custom"):
        registry.register(SkillDefinition(name=name, description="runtime one", content="rt"))
    assert winner_providers(await registry.snapshot()) == {"custom": "runtime", "proj": "local"}


async def test_runtime_skill_wins_a_rank_tie_against_a_provider() -> None:
    """At equal rank 250, the runtime skill wins even against an earlier provider."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", [candidate("x", provider="p", rank=250)]))
    registry.register(SkillDefinition(name="x", description="runtime", content="rt"))
    assert winner_providers(await registry.snapshot()) == {"x": "runtime"}


async def test_equal_rank_resolves_by_registration_order() -> None:
    """At equal rank, the provider registered first wins."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("first", [candidate("x", provider="first")]))
    registry.register_provider(ListProvider("second", [candidate("x", provider="second")]))
    assert winner_providers(await registry.snapshot()) == {"x": "first"}


async def test_equal_rank_in_one_provider_resolves_by_position() -> None:
    """Inside one provider, the earlier candidate of the same name and rank wins."""
    registry = SkillRegistry()
    first = candidate("x", provider="p", description="first")
    second = candidate("x", provider="p", description="second")
    registry.register_provider(ListProvider("p", [first, second]))
    snapshot = await registry.snapshot()
    assert [skill.description for skill in snapshot.skills] == ["first"]


async def test_output_is_sorted_by_code_point() -> None:
    """Winners come out sorted by name in plain code-point order."""
    registry = SkillRegistry()
    registry.register_provider(
        ListProvider("p", [candidate(n, provider="p") for n in ("b", "a-b", "a", "0", "ab")])
    )
    assert names(await registry.list()) == ["0", "a", "a-b", "ab", "b"]


async def test_shadowed_skills_are_logged() -> None:
    """Each loser of a name clash is logged with both providers and paths."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("a", [candidate("x", provider="a", rank=100)]))
    registry.register_provider(ListProvider("b", [candidate("x", provider="b", rank=500)]))
    with capture_logs() as logs:
        await registry.list()
    shadowed = [entry for entry in logs if entry["event"] == "skill_shadowed"]
    assert shadowed == [
        {
            "event": "skill_shadowed",
            "log_level": "warning",
            "skill": "x",
            "provider": "b",
            "path": "/skills/b/x.md",
            "winner_provider": "a",
            "winner_path": "/skills/a/x.md",
        }
    ]


async def test_list_hides_skills_disabled_for_the_model_but_snapshot_and_get_keep_them() -> None:
    """``disable_model_invocation`` hides a skill from list() only."""
    registry = SkillRegistry()
    hidden = candidate("hidden", provider="p", disable_model_invocation=True)
    registry.register_provider(ListProvider("p", [hidden, candidate("shown", provider="p")]))
    assert names(await registry.list()) == ["shown"]
    assert names((await registry.snapshot()).skills) == ["hidden", "shown"]
    loaded = await registry.get("hidden")
    assert loaded is not None
    assert loaded.content == "body of hidden"


# -- registration ----------------------------------------------------------------------------


async def test_runtime_provider_name_is_reserved() -> None:
    """Registering a provider called "runtime" is refused."""
    with pytest.raises(ValueError, match="reserved"):
        SkillRegistry().register_provider(ListProvider("runtime"))


async def test_duplicate_provider_name_is_refused() -> None:
    """A second provider with a registered name is refused."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p"))
    with pytest.raises(ValueError, match="already registered"):
        registry.register_provider(ListProvider("p"))


@pytest.mark.parametrize(
    ("name", "description"),
    [("Bad Name", "fine"), ("ok", ""), ("ok", "   ")],
    ids=["bad-name", "empty-description", "blank-description"],
)
async def test_runtime_skill_is_validated(name: str, description: str) -> None:
    """A runtime skill needs a grammatical name and a non-empty description."""
    with pytest.raises(ValueError, match=r"name|description"):
        SkillRegistry().register(SkillDefinition(name=name, description=description, content=""))


async def test_second_runtime_skill_of_a_name_is_ignored_and_cannot_remove_the_first() -> None:
    """The first runtime skill wins; the loser's disposer does nothing."""
    registry = SkillRegistry()
    registry.register(SkillDefinition(name="x", description="first", content="1"))
    with capture_logs() as logs:
        dispose_loser = registry.register(
            SkillDefinition(name="x", description="second", content="2")
        )
    assert logs[0]["event"] == "runtime_skill_ignored"
    revision = registry.revision
    dispose_loser()
    assert registry.revision == revision
    loaded = await registry.get("x")
    assert loaded is not None
    assert loaded.content == "1"


async def test_runtime_skill_disposer_removes_it() -> None:
    """Disposing a runtime skill removes it from the next catalog; twice is harmless."""
    registry = SkillRegistry()
    dispose = registry.register(SkillDefinition(name="x", description="d", content="c"))
    assert names(await registry.list()) == ["x"]
    dispose()
    dispose()
    assert names(await registry.list()) == []


async def test_every_change_bumps_revision_and_notifies() -> None:
    """Register, dispose, runtime skills and invalidations each bump revision and notify."""
    registry = SkillRegistry()
    calls: list[int] = []
    registry.on_change(lambda: calls.append(registry.revision))
    handle = registry.register_provider(ListProvider("p"))
    handle.invalidate()
    dispose = registry.register(SkillDefinition(name="x", description="d", content="c"))
    dispose()
    registry.invalidate()
    handle.dispose()
    assert calls == [1, 2, 3, 4, 5, 6]
    assert registry.revision == 6


async def test_raising_listener_is_logged_and_others_still_run() -> None:
    """One failing on_change listener does not stop the others."""
    registry = SkillRegistry()
    seen: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    registry.on_change(broken)
    unsubscribe = registry.on_change(lambda: seen.append("ok"))
    with capture_logs() as logs:
        registry.invalidate()
    assert seen == ["ok"]
    assert logs[0]["event"] == "skill_change_listener_failed"
    unsubscribe()
    registry.invalidate()
    assert seen == ["ok"]


async def test_handle_is_inert_after_dispose() -> None:
    """invalidate() on a disposed handle does nothing; dispose() is idempotent."""
    registry = SkillRegistry()
    handle = registry.register_provider(ListProvider("p"))
    handle.dispose()
    revision = registry.revision
    handle.invalidate()
    handle.dispose()
    assert registry.revision == revision


async def test_handle_is_inert_after_same_named_replacement() -> None:
    """An old handle neither invalidates nor disposes the provider that replaced it."""
    registry = SkillRegistry()
    old = registry.register_provider(ListProvider("p"))
    old.dispose()
    registry.register_provider(ListProvider("p", [candidate("new", provider="p")]))
    revision = registry.revision
    old.invalidate()
    old.dispose()
    assert registry.revision == revision
    assert names(await registry.list()) == ["new"]


async def test_on_register_receives_the_handle() -> None:
    """A provider with on_register gets its live handle once."""
    registry = SkillRegistry()
    provider = ListProvider("p")
    handle = registry.register_provider(provider)
    assert provider.handle is handle


# -- get -------------------------------------------------------------------------------------


async def test_get_invalid_name_returns_none_without_discovery() -> None:
    """An ungrammatical name is answered without asking any provider."""
    registry = SkillRegistry()
    provider = ListProvider("p", [candidate("ok", provider="p")])
    registry.register_provider(provider)
    assert await registry.get("../etc/passwd") is None
    assert provider.list_calls == 0


async def test_get_hands_the_provider_the_same_candidate_and_options() -> None:
    """The provider's get() sees the very candidate and options objects of the lookup."""
    registry = SkillRegistry()
    found = candidate("ok", provider="p")
    provider = ListProvider("p", [found])
    registry.register_provider(provider)
    options = SkillLookupOptions(cwd="/work")
    definition = await registry.get("ok", options)
    assert definition is not None
    assert definition.content == "body of ok"
    assert provider.seen_candidates == [found]
    assert provider.seen_candidates[0] is found
    assert all(seen is options for seen in provider.seen_options)


async def test_get_unknown_name_returns_none() -> None:
    """A name no provider offers gives None."""
    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", [candidate("ok", provider="p")]))
    assert await registry.get("missing") is None


async def test_get_of_renamed_skill_invalidates_and_returns_none() -> None:
    """A definition whose name differs from its candidate means a stale catalog."""
    registry = SkillRegistry()
    found = candidate("old", provider="p")
    provider = ListProvider("p", [found])
    provider.definition_override = definition_of(found, name="new")
    registry.register_provider(provider)
    await registry.list()
    revision = registry.revision
    assert await registry.get("old") is None
    assert registry.revision == revision + 1


async def test_provider_get_errors_propagate() -> None:
    """An exception in a provider's get() reaches the caller."""

    class Broken(ListProvider):
        async def get(self, candidate: Any, options: Any) -> SkillDefinition | None:
            raise OSError("disk on fire")

    registry = SkillRegistry()
    registry.register_provider(Broken("p", [candidate("ok", provider="p")]))
    with pytest.raises(OSError, match="disk on fire"):
        await registry.get("ok")


# -- cache -----------------------------------------------------------------------------------


async def test_cache_hit_does_not_ask_providers_again() -> None:
    """The second lookup for the same cwd is served from the cache."""
    registry = SkillRegistry()
    provider = ListProvider("p", [candidate("ok", provider="p")])
    registry.register_provider(provider)
    options = SkillLookupOptions(cwd="/a")
    await registry.list(options)
    await registry.snapshot(SkillLookupOptions(cwd="/a"))
    await registry.get("ok", options)
    assert provider.list_calls == 1


async def test_cache_is_keyed_by_cwd_as_given() -> None:
    """Different cwd strings (even equivalent paths) are different cache entries."""
    registry = SkillRegistry()
    provider = ListProvider("p")
    registry.register_provider(provider)
    for cwd in ("/a", "/a/", None, "/a"):
        await registry.list(SkillLookupOptions(cwd=cwd))
    assert provider.list_calls == 3


async def test_cache_evicts_oldest_inserted_entry_at_the_bound() -> None:
    """With room for two, a third cwd evicts the first inserted one."""
    registry = SkillRegistry(collect_cache_max_entries=2)
    provider = ListProvider("p")
    registry.register_provider(provider)
    for cwd in ("/a", "/b", "/a", "/c"):
        await registry.list(SkillLookupOptions(cwd=cwd))
    assert provider.list_calls == 3
    await registry.list(SkillLookupOptions(cwd="/b"))  # still cached
    assert provider.list_calls == 3
    await registry.list(SkillLookupOptions(cwd="/a"))  # evicted: first in, first out
    assert provider.list_calls == 4


@pytest.mark.parametrize("bound", [0, -1, True, 1.5, "2"], ids=str)
async def test_invalid_cache_bound_is_rejected(bound: object) -> None:
    """The cache bound must be an integer >= 1."""
    with pytest.raises(ValueError, match="collect_cache_max_entries"):
        SkillRegistry(collect_cache_max_entries=bound)  # type: ignore[arg-type]


@pytest.mark.parametrize("seconds", [0, -1.5])
def test_a_provider_timeout_that_would_skip_every_provider_is_rejected(seconds: float) -> None:
    """A timeout of zero or less would time every provider out: a clear error instead."""
    with pytest.raises(ValueError, match="provider_timeout"):
        SkillRegistry(provider_timeout=seconds)


async def test_invalidation_drops_the_cache() -> None:
    """After invalidate(), the next lookup asks providers again."""
    registry = SkillRegistry()
    provider = ListProvider("p")
    registry.register_provider(provider)
    await registry.list()
    registry.invalidate()
    await registry.list()
    assert provider.list_calls == 2


async def test_failing_provider_is_skipped_and_the_result_is_not_cached() -> None:
    """A raising list() is logged and skipped; the others still answer; nothing is cached."""
    registry = SkillRegistry()

    async def explode() -> None:
        raise ConnectionError("remote down")

    broken = ListProvider("remote", [candidate("r", provider="remote")], before_list=explode)
    healthy = ListProvider("local", [candidate("l", provider="local")])
    registry.register_provider(broken)
    registry.register_provider(healthy)
    with capture_logs() as logs:
        snapshot = await registry.snapshot()
    assert names(snapshot.skills) == ["l"]
    assert snapshot.complete is False
    assert logs == [
        {
            "event": "skill_provider_skipped",
            "log_level": "warning",
            "provider": "remote",
            "reason": "list() raised ConnectionError('remote down')",
        }
    ]
    broken.before_list = None
    assert names(await registry.list()) == ["l", "r"]
    assert healthy.list_calls == 2


async def test_provider_past_its_timeout_is_skipped() -> None:
    """A list() slower than provider_timeout is skipped and the result is incomplete."""
    # The timeout also bounds the fast provider, which a loaded machine may hold up for tens
    # of milliseconds: half a second is far beyond that, and the slow one never answers.
    registry = SkillRegistry(provider_timeout=0.5)

    async def hang() -> None:
        await anyio.sleep_forever()

    registry.register_provider(ListProvider("slow", before_list=hang))
    registry.register_provider(ListProvider("fast", [candidate("f", provider="fast")]))
    with anyio.fail_after(5), capture_logs() as logs:
        snapshot = await registry.snapshot()
    assert names(snapshot.skills) == ["f"]
    assert snapshot.complete is False
    assert logs[0]["event"] == "skill_provider_skipped"
    assert logs[0]["provider"] == "slow"
    assert "longer than 0.5 s" in logs[0]["reason"]


# -- invalidation during discovery ------------------------------------------------------------


async def test_provider_disposed_during_its_list_never_reappears() -> None:
    """Skills of a provider unloaded mid-discovery never surface, now or later."""
    registry = SkillRegistry()
    started = anyio.Event()
    release = anyio.Event()

    async def wait_for_release() -> None:
        started.set()
        await release.wait()

    leaving = ListProvider(
        "leaving", [candidate("stale", provider="leaving")], before_list=wait_for_release
    )
    handle = registry.register_provider(leaving)
    registry.register_provider(ListProvider("stays", [candidate("fresh", provider="stays")]))
    results: list[Any] = []

    async def look() -> None:
        results.append(await registry.snapshot())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(look)
            await started.wait()
            handle.dispose()
            release.set()
    assert names(results[0].skills) == ["fresh"]
    assert results[0].complete is True
    assert names(await registry.list()) == ["fresh"]
    assert await registry.get("stale") is None
    assert leaving.list_calls == 1


async def test_provider_invalidating_in_every_list_gives_incomplete_uncached_snapshot() -> None:
    """If the revision moves during both attempts, the answer is incomplete and not cached."""
    registry = SkillRegistry()
    provider = ListProvider("restless", [candidate("x", provider="restless")])

    async def invalidate_self() -> None:
        assert provider.handle is not None
        provider.handle.invalidate()

    provider.before_list = invalidate_self
    registry.register_provider(provider)
    with anyio.fail_after(5):
        snapshot = await registry.snapshot()
    assert snapshot.complete is False
    assert names(snapshot.skills) == ["x"]
    assert provider.list_calls == 2
    with anyio.fail_after(5):
        await registry.snapshot()
    assert provider.list_calls == 4


async def test_one_change_during_discovery_is_retried_and_cached() -> None:
    """A single invalidation mid-discovery costs one retry; the retry's result is cached."""
    registry = SkillRegistry()
    provider = ListProvider("p", [candidate("x", provider="p")])

    async def invalidate_once() -> None:
        assert provider.handle is not None
        if provider.list_calls == 1:
            provider.handle.invalidate()

    provider.before_list = invalidate_once
    registry.register_provider(provider)
    snapshot = await registry.snapshot()
    assert snapshot.complete is True
    await registry.snapshot()
    assert provider.list_calls == 2


# -- concurrency and cancellation ------------------------------------------------------------


async def test_cancelled_caller_with_hanging_provider_returns_promptly() -> None:
    """Cancelling the caller propagates; it is not turned into a skipped-provider warning."""
    registry = SkillRegistry(provider_timeout=None)
    hang = Hang()
    registry.register_provider(ListProvider("hangs", before_list=hang))
    with capture_logs() as logs:
        assert await cancelled_when(hang.reached, registry.list)
    assert [entry["event"] for entry in logs] == []


async def test_hundred_concurrent_cold_lookups_share_one_discovery() -> None:
    """100 simultaneous misses call each provider's list() once."""
    registry = SkillRegistry()
    gate = anyio.Event()

    async def wait() -> None:
        await gate.wait()

    first = ListProvider("a", [candidate("a", provider="a")], before_list=wait)
    second = ListProvider("b", [candidate("b", provider="b")])
    registry.register_provider(first)
    registry.register_provider(second)
    results: list[list[str]] = []

    async def look() -> None:
        results.append(names(await registry.list(SkillLookupOptions(cwd="/w"))))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for _ in range(100):
                group.start_soon(look)
            await anyio.wait_all_tasks_blocked()  # every caller waits on the discovery
            gate.set()
    assert results == [["a", "b"]] * 100
    assert (first.list_calls, second.list_calls) == (1, 1)


async def test_cancelled_waiter_does_not_cancel_the_others() -> None:
    """One waiter giving up leaves the shared discovery running for the rest."""
    registry = SkillRegistry()
    started = anyio.Event()
    gate = anyio.Event()

    async def wait() -> None:
        started.set()
        await gate.wait()

    provider = ListProvider("p", [candidate("x", provider="p")], before_list=wait)
    registry.register_provider(provider)
    results: list[list[str]] = []

    async def patient() -> None:
        results.append(names(await registry.list()))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(patient)
            await started.wait()
            async with anyio.create_task_group() as impatient:
                impatient.start_soon(registry.list)
                await anyio.wait_all_tasks_blocked()  # it waits on the discovery too
                impatient.cancel_scope.cancel()
            gate.set()
    assert results == [["x"]]
    assert provider.list_calls == 1


async def test_discovery_ends_when_its_last_waiter_leaves() -> None:
    """No shared discovery outlives the callers that wanted it."""
    registry = SkillRegistry(provider_timeout=None)
    reached, cancelled = anyio.Event(), anyio.Event()

    async def hang() -> None:
        reached.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    provider = ListProvider("p", before_list=hang)
    registry.register_provider(provider)
    assert await cancelled_when(reached, registry.list)
    with anyio.fail_after(5):
        await cancelled.wait()
    # A new caller starts a fresh discovery rather than joining the cancelled one.
    provider.before_list = None
    assert names(await registry.list()) == []
    assert provider.list_calls == 2


async def test_runtime_skill_disposed_during_discovery_never_surfaces() -> None:
    """A runtime skill removed mid-discovery is absent even from an incomplete answer."""
    registry = SkillRegistry()
    dispose = registry.register(SkillDefinition(name="gone", description="d", content="c"))
    provider = ListProvider("restless", [candidate("stays", provider="restless")])

    async def churn() -> None:
        assert provider.handle is not None
        if provider.list_calls == 1:
            provider.handle.invalidate()  # forces the second pass
        else:
            dispose()  # the second pass started with "gone" still registered

    provider.before_list = churn
    registry.register_provider(provider)
    snapshot = await registry.snapshot()
    assert snapshot.complete is False
    assert names(snapshot.skills) == ["stays"]


async def test_failing_on_register_leaves_nothing_registered() -> None:
    """If on_register raises, the provider is not left half-registered."""

    class Refusing(ListProvider):
        def on_register(self, handle: Any) -> None:
            raise RuntimeError("no thanks")

    registry = SkillRegistry()
    with pytest.raises(RuntimeError, match="no thanks"):
        registry.register_provider(Refusing("p", [candidate("x", provider="p")]))
    assert names(await registry.list()) == []
    registry.register_provider(ListProvider("p"))  # the name is free again


class HookedProvider(ListProvider):
    """A provider with the optional ``on_dispose`` and ``cacheable`` hooks."""

    def __init__(self, name: str, vouch: bool | Exception = True) -> None:
        super().__init__(name, [candidate("x", provider=name)])
        self.vouch = vouch
        self.disposed: list[Any] = []

    def on_dispose(self, handle: Any) -> None:
        self.disposed.append(handle)
        if isinstance(self.vouch, Exception):
            raise self.vouch

    def cacheable(self, options: SkillLookupOptions) -> bool:
        if isinstance(self.vouch, Exception):
            raise self.vouch
        return self.vouch


async def test_on_dispose_is_told_once_when_the_registration_is_disposed() -> None:
    """A provider's on_dispose gets its own handle once, however often it is disposed."""
    registry = SkillRegistry()
    provider = HookedProvider("p")
    handle = registry.register_provider(provider)
    handle.dispose()
    handle.dispose()
    assert provider.disposed == [handle]


async def test_on_dispose_is_not_called_when_on_register_fails() -> None:
    """A registration undone because on_register raised was never the provider's to release."""

    class Refusing(HookedProvider):
        def on_register(self, handle: Any) -> None:
            raise RuntimeError("no thanks")

    provider = Refusing("p")
    with pytest.raises(RuntimeError, match="no thanks"):
        SkillRegistry().register_provider(provider)
    assert provider.disposed == []


async def test_an_on_dispose_that_raises_is_logged_and_the_disposal_stands() -> None:
    """The provider is gone even if its on_dispose fails; the failure is a warning."""
    registry = SkillRegistry()
    handle = registry.register_provider(HookedProvider("p", vouch=RuntimeError("stuck")))
    with capture_logs() as logs:
        handle.dispose()
    assert names(await registry.list()) == []
    assert [entry["event"] for entry in logs] == ["skill_provider_dispose_failed"]
    assert logs[0]["provider"] == "p"


@pytest.mark.parametrize(("vouch", "lists"), [(True, 1), (False, 3)], ids=["vouches", "cannot"])
async def test_answers_a_provider_cannot_vouch_for_are_complete_but_not_cached(
    vouch: bool, lists: int
) -> None:
    """cacheable(options) False keeps the catalog out of the cache, not out of the answer."""
    registry = SkillRegistry()
    provider = HookedProvider("p", vouch=vouch)
    registry.register_provider(provider)
    for _ in range(3):
        snapshot = await registry.snapshot(SkillLookupOptions(cwd="/w"))
        assert [skill.name for skill in snapshot.skills] == ["x"]
        assert snapshot.complete is True
    assert provider.list_calls == lists


async def test_a_cacheable_hook_that_raises_is_logged_and_nothing_is_cached() -> None:
    """Not caching is always correct: a cacheable() that raises means not cached."""
    registry = SkillRegistry()
    provider = HookedProvider("p", vouch=ValueError("confused"))
    registry.register_provider(provider)
    with capture_logs() as logs:
        assert names(await registry.list()) == ["x"]
        assert names(await registry.list()) == ["x"]
    assert provider.list_calls == 2
    assert [entry["event"] for entry in logs] == ["skill_provider_cacheable_failed"] * 2


async def test_load_takes_a_snapshot_candidate_without_discovering_again() -> None:
    """load() reuses the snapshot's candidate even when discovery is incomplete (uncached)."""
    registry = SkillRegistry()

    async def explode() -> None:
        raise ConnectionError("down")

    registry.register_provider(ListProvider("remote", before_list=explode))
    local = ListProvider("local", [candidate("x", provider="local")])
    registry.register_provider(local)
    snapshot = await registry.snapshot()
    assert snapshot.complete is False
    definition = await registry.load(snapshot.skills[0])
    assert definition is not None
    assert definition.content == "body of x"
    assert local.list_calls == 1


async def test_load_of_a_removed_provider_or_runtime_skill_returns_none() -> None:
    """A candidate whose provider or runtime skill is gone no longer loads."""
    registry = SkillRegistry()
    handle = registry.register_provider(ListProvider("p", [candidate("x", provider="p")]))
    dispose = registry.register(SkillDefinition(name="rt", description="d", content="c"))
    skills = {skill.name: skill for skill in (await registry.snapshot()).skills}
    handle.dispose()
    dispose()
    assert await registry.load(skills["x"]) is None
    assert await registry.load(skills["rt"]) is None
