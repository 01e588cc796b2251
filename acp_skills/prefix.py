"""`SessionPrefix`: the contributors whose messages go ahead of every session's history. Each
wraps the later ones (the last one's ``next()`` returns ``()``): ``[mine, *await next()]`` puts
contributions in registration order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .model import PrefixContext, PrefixContributor, PrefixMessage


class SessionPrefix:
    """The registry of session-prefix contributors. An instance, never a global."""

    def __init__(self) -> None:
        # One token per `add`: a remover only removes its own registration.
        self._chain: dict[object, PrefixContributor] = {}

    def add(self, contributor: PrefixContributor) -> Callable[[], None]:
        """Register ``contributor`` last; returns an idempotent remover (``TypeError`` if it is
        not callable). Sessions that already composed keep their prefix."""
        if not callable(contributor):
            raise TypeError(f"a session-prefix contributor must be callable, got {contributor!r}")
        token = object()
        self._chain[token] = contributor

        def remove() -> None:
            self._chain.pop(token, None)

        return remove

    async def compose(self, context: PrefixContext) -> tuple[PrefixMessage, ...]:
        """Run the contributors for ``context``: ``TypeError`` if one returns anything but a
        sequence of `PrefixMessage`, ``RuntimeError`` if one calls ``next()`` twice."""
        # The chain as it is now: a change while composing affects the next session only.
        return await _run_chain(tuple(self._chain.values()), 0, context)


async def _run_chain(
    chain: tuple[PrefixContributor, ...], index: int, context: PrefixContext
) -> tuple[PrefixMessage, ...]:
    if index == len(chain):
        return ()
    contributor = chain[index]
    name = getattr(contributor, "__qualname__", None) or type(contributor).__qualname__
    who = f"session-prefix contributor {name!r}"
    called = False

    async def next_messages() -> tuple[PrefixMessage, ...]:
        nonlocal called
        # Twice would query every later contributor twice and make the answer depend on which.
        if called:
            raise RuntimeError(f"{who} called next() twice")
        called = True
        return await _run_chain(chain, index + 1, context)

    result = await contributor(context, next_messages)
    # A str is a Sequence too, and iterating it would yield characters, not messages.
    if isinstance(result, str | bytes) or not isinstance(result, Sequence):
        raise TypeError(
            f"{who} returned a {type(result).__name__}, not a sequence of PrefixMessage"
        )
    messages = tuple(result)
    for position, message in enumerate(messages):
        if not isinstance(message, PrefixMessage):  # which validates its own fields
            raise TypeError(
                f"{who} returned {message!r} at position {position}, not a PrefixMessage"
            )
    return messages
