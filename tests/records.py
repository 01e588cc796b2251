"""Record entries and odd record paths shared by the record, store and agent tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from acp_skills import PrefixMessage
from acp_skills.record import HeaderEntry, HistoryEntry


def header(reason: Any = "initial", **fields: Any) -> HeaderEntry:
    """A well-formed request header; ``fields`` override any of its values."""
    values: dict[str, Any] = {
        "config": {"model": "m1", "temperature": 0.5},
        "system": "You are helpful.",
        "tools": ({"name": "skill", "parameters": {"type": "object"}},),
        "message_prefix": (PrefixMessage(role="user", text="<catalog/>"),),
    }
    values.update(fields)
    return HeaderEntry(reason=reason, **values)


def said(text: str, role: str = "user") -> HistoryEntry:
    """One conversation message."""
    return HistoryEntry(message={"role": role, "content": text})


def make_fifo(path: Path) -> None:
    """A named pipe where a record file should be."""
    os.mkfifo(path)


def make_directory(path: Path) -> None:
    """A directory where a record file should be."""
    path.mkdir()
