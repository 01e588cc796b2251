"""The library's loggers: structlog's once the application configured structlog, else quiet.

Unconfigured, structlog prints every event, debug ones included, to stdout, which belongs to the
protocol, and configuring it is the application's business. So each event asks whether the
application did: if not, only warnings and errors go on, to the standard library's logger of the
same name, whose last-resort handler writes them to stderr (docs/integration.md, "Logs").
"""

from __future__ import annotations

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
        elif level in ("warning", "error"):
            error = fields.pop("exc_info", None)
            words = " ".join(f"{key}={value!r}" for key, value in fields.items())
            line = f"{event} {words}".rstrip()
            getattr(logging.getLogger(self._name), level)(line, exc_info=error)


def get_logger(name: str) -> LibraryLogger:
    """The logger every library module uses (``name`` is its module's ``__name__``)."""
    return LibraryLogger(name)
