"""A demonstration ACP agent over stdio, wired only through acp_skills' public API."""

__version__ = "0.1.0"
