"""The scripted demonstration (the README's main job) runs end to end and shows each step.

It starts the agent as ``python -m demo_agent`` over stdio, as a person running it does: that
process is what the demonstration shows, so it is kept.
"""

from __future__ import annotations

import io

import anyio
import pytest

from demo_agent.demo import run


@pytest.mark.anyio
async def test_demonstration_transcript_shows_catalog_tool_call_and_answers() -> None:
    """The transcript has the commands, the catalog, a model tool call, a /name load, answers."""
    out = io.StringIO()
    with anyio.fail_after(60):
        assert await run(None, [], out) == 0
    transcript = out.getvalue()
    assert "[commands] /code-review [branch or path]" in transcript
    assert "python-style         examples  (no slash command)" in transcript
    assert "release-checklist    examples  (hidden from the model)" in transcript
    assert "Load skill code-review: in_progress" in transcript
    assert "<available_skills>" in transcript
    # The catalog lists what the model may load, and nothing it may not.
    catalog = transcript[transcript.index("<available_skills>") :]
    catalog = catalog[: catalog.index("</available_skills>")]
    assert "`code-review`" in catalog
    assert "release-checklist" not in catalog
    assert "Load skill release-checklist: in_progress" in transcript
    assert "I loaded the `release-checklist` skill" in transcript
    assert "None of the available skills clearly matches your request" in transcript
    assert transcript.count("[turn ended: end_turn]") == 3
