"""SessionPrefix: contributors run as a waterfall (contract §8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from acp_skills import PrefixMessage
from acp_skills.model import PrefixContext, PrefixNext
from acp_skills.prefix import SessionPrefix
from tests.prefixes import (
    Prepend,
    user,
)

pytestmark = pytest.mark.anyio


# -- composition -----------------------------------------------------------------------------


async def test_prepending_contributors_appear_in_registration_order(
    context: PrefixContext,
) -> None:
    """Two contributors that prepend put their messages on the wire in registration order."""
    prefix = SessionPrefix()
    prefix.add(Prepend("first"))
    prefix.add(Prepend("second"))
    assert await prefix.compose(context) == (user("first"), user("second"))


async def test_a_contributor_appending_after_next_lands_after_the_later_ones(
    context: PrefixContext,
) -> None:
    """The first registered is outermost: what it adds after ``next()`` comes last."""

    async def append_last(context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        return [*await next(), user("outer, last")]

    prefix = SessionPrefix()
    prefix.add(append_last)
    prefix.add(Prepend("inner"))
    assert await prefix.compose(context) == (user("inner"), user("outer, last"))


async def test_the_last_contributors_next_returns_an_empty_tuple(context: PrefixContext) -> None:
    """At the end of the chain ``next()`` gives ``()``."""
    received: list[Sequence[PrefixMessage]] = []

    async def spy(context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        received.append(await next())
        return []

    prefix = SessionPrefix()
    prefix.add(spy)
    assert await prefix.compose(context) == ()
    assert received == [()]


async def test_an_empty_registry_composes_nothing(context: PrefixContext) -> None:
    """Without contributors the prefix is empty."""
    assert await SessionPrefix().compose(context) == ()


async def test_contributors_receive_the_session_context(context: PrefixContext) -> None:
    """Every contributor sees the session id, cwd and tool names."""
    contributor = Prepend("x")
    prefix = SessionPrefix()
    prefix.add(contributor)
    await prefix.compose(context)
    assert contributor.seen == [context]


async def test_a_contributor_that_skips_next_drops_the_later_ones(context: PrefixContext) -> None:
    """Not calling ``next()`` means the later contributors do not run."""

    async def only_me(context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        return [user("only me")]

    later = Prepend("later")
    prefix = SessionPrefix()
    prefix.add(only_me)
    prefix.add(later)
    assert await prefix.compose(context) == (user("only me"),)
    assert later.calls == 0


async def test_remover_takes_out_only_its_own_registration(context: PrefixContext) -> None:
    """A remover removes its registration, once, even if the same callable is added twice."""
    contributor = Prepend("twice")
    prefix = SessionPrefix()
    remove_first = prefix.add(contributor)
    prefix.add(contributor)
    prefix.add(Prepend("other"))
    assert await prefix.compose(context) == (user("twice"), user("twice"), user("other"))
    remove_first()
    remove_first()
    assert await prefix.compose(context) == (user("twice"), user("other"))


async def test_add_refuses_a_non_callable() -> None:
    """A contributor has to be callable."""
    with pytest.raises(TypeError, match="callable"):
        SessionPrefix().add("not a contributor")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "result",
    [
        None,
        "user text",
        user("not wrapped in a sequence"),
        [{"role": "user", "text": "a dict"}],
        (message for message in [user("a generator")]),
    ],
    ids=["none", "string", "bare-message", "dict", "generator"],
)
async def test_a_contributor_returning_something_else_is_a_type_error(
    context: PrefixContext, result: object
) -> None:
    """A contributor must return a sequence of PrefixMessage; anything else is named."""

    async def wrong(context: PrefixContext, next: PrefixNext) -> Any:
        return result

    prefix = SessionPrefix()
    prefix.add(wrong)
    with pytest.raises(TypeError, match=r"session-prefix contributor '.*wrong' returned"):
        await prefix.compose(context)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"role": None, "text": "x"}, "non-empty string role, got None"),
        ({"role": "", "text": "x"}, "non-empty string role, got ''"),
        ({"role": "user", "text": None}, "text must be a string, got None"),
    ],
)
async def test_a_malformed_prefix_message_fails_compose(
    context: PrefixContext, fields: dict[str, Any], message: str
) -> None:
    """A contributor's message without a string role or text is a TypeError, never frozen."""

    async def malformed(context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        return [*await next(), PrefixMessage(**fields)]

    prefix = SessionPrefix()
    prefix.add(malformed)
    with pytest.raises(TypeError, match=message):
        await prefix.compose(context)


async def test_compose_returns_a_copy_of_what_contributors_returned(
    context: PrefixContext,
) -> None:
    """Changing the list a contributor returned afterwards does not change the composition."""
    returned: list[PrefixMessage] = []

    async def keeper(context: PrefixContext, next: PrefixNext) -> Sequence[PrefixMessage]:
        returned.extend([user("kept"), *await next()])
        return returned

    prefix = SessionPrefix()
    prefix.add(keeper)
    composed = await prefix.compose(context)
    returned.append(user("sneaked in"))
    assert composed == (user("kept"),)
    assert isinstance(composed, tuple)
