"""The library's loggers: structlog's when the application configured structlog, else quiet.

Unconfigured, structlog prints every event, debug ones included, to stdout, which belongs to
the protocol. The library must not configure structlog (process-wide state that belongs to the
application), so each of its loggers asks, event by event, whether the application did: if so
the event goes to structlog as usual; if not, only warnings and errors are passed on, to the
standard library's logger of the same name, whose last-resort handler writes them to stderr
when the application set up no logging at all (docs/integration.md, "Logs").
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import structlog


class LibraryLogger:
    """A structlog logger that stays quiet below ``warning`` until structlog is configured."""

    __slots__ = ("_name", "_structured")

    def __init__(self, name: str) -> None:
        self._name = name
        # A lazy proxy: it reads structlog's configuration when an event is logged.
        self._structured: Any = structlog.get_logger(name)

    def _emit(self, level: str, event: str, **fields: Any) -> None:
        if structlog.is_configured():
            getattr(self._structured, level)(event, **fields)
        elif (number := logging.getLevelNamesMapping()[level.upper()]) >= logging.WARNING:
            error = fields.pop("exc_info", None)
            words = " ".join(f"{key}={value!r}" for key, value in fields.items())
            logging.getLogger(self._name).log(number, f"{event} {words}".rstrip(), exc_info=error)

    debug = functools.partialmethod(_emit, "debug")
    info = functools.partialmethod(_emit, "info")
    warning = functools.partialmethod(_emit, "warning")
    error = functools.partialmethod(_emit, "error")


def get_logger(name: str) -> LibraryLogger:
    """The logger every library module uses (``name`` is its module's ``__name__``)."""
    return LibraryLogger(name)
