"""The library's loggers: structlog's once the application configured structlog; until then
only warnings and errors, to the standard library's logger, never stdout (docs/integration.md)."""

from __future__ import annotations

import logging
from functools import partialmethod
from typing import Any, Final

import structlog


class LibraryLogger:
    """A structlog logger that stays quiet below ``warning`` until structlog is configured."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._structured: Any = structlog.get_logger(name)  # reads the configuration when used

    def _emit(self, level: str, event: str, /, **fields: Any) -> None:
        # Asked at each event: the application may configure structlog after this module loads.
        if structlog.is_configured():
            getattr(self._structured, level)(event, **fields)
        elif level in ("warning", "error"):
            error = fields.pop("exc_info", None)
            words = " ".join(f"{key}={value!r}" for key, value in fields.items())
            line = f"{event} {words}".rstrip()
            getattr(logging.getLogger(self._name), level)(line, exc_info=error)

    debug = partialmethod(_emit, "debug")
    info = partialmethod(_emit, "info")
    warning = partialmethod(_emit, "warning")
    error = partialmethod(_emit, "error")


get_logger: Final = LibraryLogger  # each module's, named by its ``__name__``
