"""The demo agent's logging: one renderer for everything it logs, on stderr or in a file.

The library and the agent log through structlog; the ACP SDK, asyncio and the HTTP client log
through the standard library's `logging`. Both end in one `logging` handler whose
`structlog.stdlib.ProcessorFormatter` renders every record the same way, so a person (or a log
shipper reading JSON) never meets a second format, and a traceback is part of its record
(a ``exception`` field, structured in JSON) rather than raw lines after it.

Nothing here touches stdout: it belongs to the protocol.
"""

from __future__ import annotations

import logging
import sys
from typing import Final, TextIO

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

from acp_skills.text import terminal_safe

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "configure_logging"]

LOG_LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("console", "json")


def configure_logging(
    level: str, *, log_format: str = "console", stream: TextIO | None = None
) -> None:
    """Send structlog events and stdlib log records through one renderer to ``stream``.

    Args:
        level: the lowest level written, one of `LOG_LEVELS`.
        log_format: ``console`` (one readable line per event) or ``json`` (one JSON object per
            line, from structlog's `JSONRenderer`).
        stream: where records go; stderr by default.

    Raises:
        ValueError: an unknown level or format.
    """
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    number = logging.getLevelNamesMapping()[level.upper()]
    # What every record gets before rendering, whether it came from structlog or not.
    common: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    renderer: list[Processor]
    if log_format == "json":
        renderer = [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        renderer = [
            _terminal_safe_values,
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*common, structlog.stdlib.ExtraAdder()],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(number)
    # watchfiles' debug lines report every raw file event, even one the watcher filters out:
    # with the log file in a watched directory (beside a root that does not exist yet), each
    # such line would be an event about itself, without end.
    logging.getLogger("watchfiles").setLevel(max(number, logging.INFO))
    # Python's own warnings become log records too, rendered like the rest.
    logging.captureWarnings(True)
    structlog.configure(
        processors=[*common, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        # Events below the level are dropped before any processor runs: a debug call on a hot
        # path costs one method call when debug is off.
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )


def _terminal_safe_values(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
    """Each text value spelt safe for a terminal: a skill's name or path with a newline, a
    carriage return or an escape sequence in it cannot forge a log line or drive the terminal."""
    # JSON lines need no such step: the encoder escapes every control already.
    return {key: terminal_safe(v) if isinstance(v, str) else v for key, v in event.items()}
