"""`SessionPrefix`: the contributors whose messages go ahead of every session's history."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .model import PrefixContext, PrefixContributor, PrefixMessage


class SessionPrefix:
    """The registry of session-prefix contributors, run as a waterfall in registration order."""

    def __init__(self) -> None:
        # One token per `add`: a remover only removes its own registration.
        self._chain: dict[object, PrefixContributor] = {}

    def add(self, contributor: PrefixContributor) -> Callable[[], None]:
        """Register ``contributor`` last; returns an idempotent remover."""
        if not callable(contributor):
            raise TypeError(f"a session-prefix contributor must be callable, got {contributor!r}")
        token = object()
        self._chain[token] = contributor

        def remove() -> None:
            self._chain.pop(token, None)

        return remove

    async def compose(self, context: PrefixContext) -> tuple[PrefixMessage, ...]:
        """Run the contributors for ``context``: `TypeError` if one returns anything but a
        sequence of `PrefixMessage`."""
        chain = tuple(self._chain.values())  # a change while composing affects the next session

        async def run(index: int) -> tuple[PrefixMessage, ...]:
            if index == len(chain):
                return ()
            result = await chain[index](context, lambda: run(index + 1))
            # A str is a Sequence too, and iterating it would yield characters, not messages.
            sequence = isinstance(result, Sequence) and not isinstance(result, str | bytes)
            if not sequence or not all(isinstance(item, PrefixMessage) for item in result):
                name = getattr(chain[index], "__qualname__", type(chain[index]).__qualname__)
                who = f"session-prefix contributor {name!r}"
                raise TypeError(f"{who} returned {result!r}, not a sequence of PrefixMessage")
            return tuple(result)

        return await run(0)
