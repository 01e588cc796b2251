"""The ``acp-skills`` command line (``python -m acp_skills``): `main` and `validate`."""
