"""``python -m acp_skills``: the ``acp-skills`` command line (`acp_skills.cli`)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
