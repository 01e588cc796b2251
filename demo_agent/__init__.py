"""A demonstration ACP agent over stdio, wired only through acp_skills' public API."""

from pathlib import Path

__version__ = "0.1.0"

EXAMPLE_SKILLS = Path(__file__).resolve().parent / "example_skills"
"""The example skills shipped with the package (package data): ``--examples`` offers them."""
