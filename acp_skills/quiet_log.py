"""The library's loggers: structlog's when the application configured structlog, else quiet.

Unconfigured, structlog prints every event, debug ones included, to stdout, which belongs to
the protocol. The library must not configure structlog (process-wide state that belongs to the
application), so each of its loggers asks, event by event, whether the application did: if so
the event goes to structlog as usual; if not, only warnings and errors are passed on, to the
standard library's logger of the same name, whose last-resort handler writes them to stderr
when the application set up no logging at all (docs/integration.md, "Logs").
"""

from __future__ import annotations

import logging
from typing import Any, Final

import structlog

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class LibraryLogger:
    """A structlog logger that stays quiet below ``warning`` until structlog is configured."""

    __slots__ = ("_name", "_structured")

    def __init__(self, name: str) -> None:
        self._name = name
        # A lazy proxy: it reads structlog's configuration when an event is logged.
        self._structured: Any = structlog.get_logger(name)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit("error", event, fields)

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if structlog.is_configured():
            getattr(self._structured, level)(event, **fields)
            return
        number = _LEVELS[level]
        if number < logging.WARNING:
            return
        error = fields.pop("exc_info", None)
        words = " ".join(f"{key}={value!r}" for key, value in fields.items())
        logging.getLogger(self._name).log(number, f"{event} {words}".rstrip(), exc_info=error)


def get_logger(name: str) -> LibraryLogger:
    """The logger every library module uses (``name`` is its module's ``__name__``)."""
    return LibraryLogger(name)
