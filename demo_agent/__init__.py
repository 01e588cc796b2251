"""A demonstration ACP agent over stdio, wired only through acp_skills' public API."""

from acp_skills.cli.settings import EXAMPLE_SKILLS

__all__ = ["EXAMPLE_SKILLS", "__version__"]

__version__ = "0.1.0"
