"""Waiting on what the code under test does, never on the clock.

A test waits for the thing it needs: a change of a registry (`registry_changes`), a call that
has reached the point where it hangs (`Hang`, `cancelled_when`), another process's end
(`process_ends`), a line through a named pipe from another process (`read_pipe`,
`write_pipe`). Each wait re-checks its condition when something happens, and `WAIT_SECONDS`
only bounds a wait that would never end: a loaded machine may take seconds per step, and no
test asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, NoReturn

import anyio
import anyio.to_thread

from acp_skills import SkillRegistry

# A safety net only: every wait ends on an event.
WAIT_SECONDS = 30.0


class Changes:
    """Wakes whoever waits for a condition whenever something it may depend on changed."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    def next(self) -> asyncio.Event:
        """The event the next change sets: take it before looking, then wait on it."""
        return self._event

    def notifier(self) -> Callable[[], None]:
        """`notify` for any thread (a watcher's, a logging call's), while this loop runs."""
        loop = asyncio.get_running_loop()

        def notify() -> None:
            with suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self.notify)

        return notify

    async def until(
        self, predicate: Callable[[], Awaitable[bool] | bool], within: float = WAIT_SECONDS
    ) -> None:
        """Return once ``predicate()`` holds (it may be a coroutine function), re-checking
        after every change.

        Raises:
            TimeoutError: it did not hold within ``within`` seconds.
        """
        with anyio.fail_after(within):
            while True:
                changed = self.next()  # before looking: a change while looking still wakes us
                outcome = predicate()
                if outcome if isinstance(outcome, bool) else await outcome:
                    return
                await changed.wait()


def registry_changes(registry: SkillRegistry) -> Changes:
    """`Changes` woken by each invalidation of ``registry`` (its ``on_change`` notice, from
    whichever thread invalidates it: a file watcher's own)."""
    changes = Changes()
    registry.on_change(changes.notifier())
    return changes


class Hang:
    """A stand-in for a call that never returns; ``reached`` is set once something awaits it."""

    def __init__(self) -> None:
        self.reached = anyio.Event()

    async def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self.reached.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def cancelled_when(reached: anyio.Event, work: Callable[[], Awaitable[object]]) -> bool:
    """Run ``work()`` and cancel it once ``reached`` is set; whether the cancellation ended it
    (as ``move_on_after``'s ``cancelled_caught``, with an event in place of a clock)."""
    with anyio.fail_after(WAIT_SECONDS), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:

            async def cancel_once_reached() -> None:
                await reached.wait()
                scope.cancel()

            group.start_soon(cancel_once_reached)
            await work()
            group.cancel_scope.cancel()  # it returned on its own
    return scope.cancelled_caught


async def process_ends(pid: int) -> None:
    """Return once the process ``pid`` has ended (exited, reaped or not, even if it is no
    child of ours): the kernel says so through a process file descriptor."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(descriptor)
    finally:
        os.close(descriptor)


def process_gone(pid: int) -> bool:
    """No such process, or only its zombie (exited, not reaped yet by whoever adopted it)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "zombie" in status.read_text()
    except FileNotFoundError:
        return True


def named_pipe(path: Path) -> Path:
    """A named pipe at ``path``: another process's signal to this one, or back."""
    os.mkfifo(path)
    return path


async def read_pipe(path: Path) -> str:
    """What a writer puts into the named pipe ``path``, once it closes it (no thread: the wait
    ends with the writer, or with the caller's cancellation)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    try:
        while True:
            await anyio.wait_readable(descriptor)
            try:
                chunk = os.read(descriptor, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks).decode("utf-8")
            chunks.append(chunk)
    finally:
        os.close(descriptor)


async def write_pipe(path: Path, text: str = "") -> None:
    """Write ``text`` into the named pipe ``path`` and close it, once a reader has opened it
    (opening for writing waits for a reader, in a worker thread)."""
    await anyio.to_thread.run_sync(
        lambda: path.write_text(text, encoding="utf-8"), abandon_on_cancel=True
    )
