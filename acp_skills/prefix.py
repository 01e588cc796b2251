"""`SessionPrefix`: the contributors whose messages go ahead of every session's history.

Waterfall order, written here because contributors depend on it: contributors run in
registration order, each one wrapping the rest. The first registered is outermost; its
``next()`` runs the second, and so on; the last one's ``next()`` returns ``()``. A contributor
that returns ``[mine, *await next()]`` therefore puts the contributions on the wire in
registration order (a contributor that appends after ``next()`` lands after the later ones, and
one that never calls ``next()`` drops them).

Composing once per session instance and freezing the result is `PrefixedSession`'s job
(``session.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .model import PrefixContext, PrefixContributor, PrefixMessage, PrefixNext

__all__ = ["PrefixContributor", "PrefixNext", "SessionPrefix"]


class _Registration:
    """One ``add`` call. Identity matters: a remover only removes its own registration."""

    __slots__ = ("contributor",)

    def __init__(self, contributor: PrefixContributor) -> None:
        self.contributor = contributor


class SessionPrefix:
    """The registry of session-prefix contributors. An instance, never a global.

    Contributors run as a waterfall in registration order (see the module docstring).
    """

    def __init__(self) -> None:
        self._chain: list[_Registration] = []

    def add(self, contributor: PrefixContributor) -> Callable[[], None]:
        """Register ``contributor`` after every contributor registered before it.

        The same callable may be added more than once; each registration runs separately.

        Returns:
            A remover that takes this registration out (idempotent). Sessions that already
            composed their prefix keep it.

        Raises:
            TypeError: if ``contributor`` is not callable.
        """
        if not callable(contributor):
            raise TypeError(f"a session-prefix contributor must be callable, got {contributor!r}")
        registration = _Registration(contributor)
        self._chain.append(registration)

        def remove() -> None:
            if registration in self._chain:
                self._chain.remove(registration)

        return remove

    async def compose(self, context: PrefixContext) -> tuple[PrefixMessage, ...]:
        """Run the contributors for ``context`` and return their messages.

        The result is a new tuple: lists the contributors returned can change afterwards without
        touching it (the messages themselves are frozen values).

        Raises:
            TypeError: a contributor returned something other than a sequence of
                `PrefixMessage` with string ``role`` and ``text``.
            RuntimeError: a contributor called ``next()`` twice.
            Exception: whatever a contributor raised propagates, and so does cancellation.
        """
        # The chain as it is now: a contributor added or removed while this composition is
        # running affects the next session, not this one.
        return await _run_chain(tuple(self._chain), 0, context)


async def _run_chain(
    chain: tuple[_Registration, ...], index: int, context: PrefixContext
) -> tuple[PrefixMessage, ...]:
    if index == len(chain):
        return ()
    contributor = chain[index].contributor
    called = False

    async def next_messages() -> tuple[PrefixMessage, ...]:
        nonlocal called
        # Running the rest of the chain twice would query every later contributor (and the
        # registry behind them) twice and make the result depend on which answer was kept.
        if called:
            raise RuntimeError(
                f"session-prefix contributor {_describe(contributor)} called next() twice"
            )
        called = True
        return await _run_chain(chain, index + 1, context)

    return _checked_messages(await contributor(context, next_messages), contributor)


def _checked_messages(result: object, contributor: object) -> tuple[PrefixMessage, ...]:
    who = f"session-prefix contributor {_describe(contributor)}"
    # A str is a Sequence too, and iterating it would yield characters, not messages.
    if isinstance(result, str | bytes) or not isinstance(result, Sequence):
        raise TypeError(
            f"{who} returned a {type(result).__name__}, not a sequence of PrefixMessage"
        )
    messages = tuple(result)
    for position, message in enumerate(messages):
        # PrefixMessage validates its own fields; only the type is left to check.
        if not isinstance(message, PrefixMessage):
            raise TypeError(
                f"{who} returned {message!r} at position {position}, not a PrefixMessage"
            )
    return messages


def _describe(contributor: object) -> str:
    name = getattr(contributor, "__qualname__", None) or type(contributor).__qualname__
    return repr(name)
