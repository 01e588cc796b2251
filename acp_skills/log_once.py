"""Problems logged once per change: live reload re-discovers on every edit, and a broken file
that stays broken the same way must not be warned about again at each discovery."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Final

from .diagnostics import Diagnostic

# The problems remembered at most (oldest forgotten first): memory stays bounded however many
# broken files come and go.
MAX_REMEMBERED: Final = 4096


class ReportedProblems:
    """Which problems were already logged: a record is new when its path, code, message or
    line changed since it was last logged, or when it went away and came back."""

    def __init__(self) -> None:
        self._logged: dict[tuple[str | None, str, str, int | None], None] = {}

    def fresh(self, records: Iterable[Diagnostic], roots: Sequence[str]) -> list[Diagnostic]:
        """The records of one discovery of ``roots`` not logged yet (remembered from now on)."""
        keyed = [((r.path, r.code, r.message, r.line), r) for r in records]
        current = {key for key, _ in keyed}
        inside = tuple(os.path.join(root, "") for root in roots)
        # A problem of these roots that this discovery no longer meets is forgotten, so it is
        # logged again if it comes back (a file fixed, then broken the same way).
        for key in [k for k in self._logged if k not in current]:
            if (path := key[0]) is not None and (path in roots or path.startswith(inside)):
                del self._logged[key]
        fresh = []
        for key, record in keyed:
            if key not in self._logged:
                fresh.append(record)
                self._logged[key] = None
        while len(self._logged) > MAX_REMEMBERED:
            del self._logged[next(iter(self._logged))]
        return fresh
