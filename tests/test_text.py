"""Text hygiene (`acp_skills.text`): characters that never reach a model or an editor (contract
§6), in the cleaning functions, the catalog and slash commands built from runtime skills whatever
their descriptions hold, and the real demo agent's frames for random descriptions on disk; and
lone surrogates made well-formed."""

from __future__ import annotations

import html
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acp_skills import SkillDefinition, SkillLookupOptions, SkillRegistry, render_catalog
from acp_skills.text import (
    escape_unsafe_characters,
    normalize_description,
    remove_unsafe_characters,
    replace_lone_surrogates,
    replace_lone_surrogates_in_json,
    shorten_description,
    terminal_safe,
)
from tests.agent_client import AGENT_COMMAND, Sandbox
from tests.strategies import (
    BIDI_OVERRIDES_AND_ISOLATES,
    SPECIAL_CHARACTERS,
    descriptions,
    forbidden_in,
    is_forbidden,
)

# -- the cleaning functions ------------------------------------------------------------------

REMOVE_CASES: list[tuple[str, str, str]] = [
    ("plain", "Deploy the app", "Deploy the app"),
    ("c0", "a\x00b\x07c\x1bd", "abcd"),
    ("information-separators", "a\x1cb\x1fc", "abc"),
    ("whitespace-kept", "a\tb\nc\x0bd\x0ce\rf", "a\tb\nc\x0bd\x0ce\rf"),
    ("next-line-becomes-a-line-feed", "a\x85b", "a\nb"),
    ("del", "a\x7fb", "ab"),
    ("c1", "a\x80b\x9bc\x9fd", "abcd"),
    ("bidi-overrides", "a\u202ab\u202bc\u202cd\u202de\u202ef", "abcdef"),
    ("bidi-isolates", "a\u2066b\u2067c\u2068d\u2069e", "abcde"),
    ("bidi-marks-kept", "a\u200eb\u200fc\u061cd", "a\u200eb\u200fc\u061cd"),
    ("lone-surrogates", "a\ud800b\udfffc", "a\ufffdb\ufffdc"),
    (
        "astral-kept",
        "\U0001f600 \U0001f469\u200d\U0001f4bb",
        "\U0001f600 \U0001f469\u200d\U0001f4bb",
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [case[1:] for case in REMOVE_CASES],
    ids=[case[0] for case in REMOVE_CASES],
)
def test_remove_unsafe_characters(text: str, expected: str) -> None:
    """Non-whitespace controls and bidi overrides go; lone surrogates become U+FFFD."""
    assert remove_unsafe_characters(text) == expected


def test_escape_unsafe_characters_spells_them_out() -> None:
    """Escaping keeps every character visible as ``\\uXXXX`` and leaves the rest alone."""
    assert escape_unsafe_characters("a\x07b\u202ec\ud800d\te\u200ef") == (
        "a\\u0007b\\u202ec\\ud800d\te\u200ef"
    )


NORMALIZE_CASES: list[tuple[str, str, int, str]] = [
    ("c0-removed-not-spaced", "Deploy\x00 the\x1b[31m app", 500, "Deploy the[31m app"),
    ("del-and-c1", "a\x7fb\x9bc", 500, "abc"),
    ("nel-is-a-line-break", "line one\x85line two", 500, "line one line two"),
    ("bidi-trojan", "safe \u202eevil\u202c text \u2066x\u2069", 500, "safe evil text x"),
    ("lone-surrogate", "broken \ud83d emoji", 500, "broken \ufffd emoji"),
    ("controls-do-not-count-toward-the-bound", "\x00" * 20 + "abc<", 4, "abc<"),
    ("only-controls", "\x00\x1b\u202e", 500, ""),
]


@pytest.mark.parametrize(
    ("text", "max_length", "expected"),
    [case[1:] for case in NORMALIZE_CASES],
    ids=[case[0] for case in NORMALIZE_CASES],
)
def test_normalize_and_shorten_remove_unsafe_characters_first(
    text: str, max_length: int, expected: str
) -> None:
    """Catalog and command descriptions lose the unsafe characters before anything else."""
    assert shorten_description(text, max_length) == expected
    assert normalize_description(text, max_length) == html.escape(expected, quote=False)


# -- properties ------------------------------------------------------------------------------


def expected_catalog_description(text: str, limit: int) -> str:
    """§6 spelled out: remove, collapse whitespace (and U+FEFF), truncate, escape."""
    kept = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    kept = kept.replace("\x85", "\n")
    kept = "".join(c for c in kept if not is_forbidden(c))
    collapsed = " ".join(kept.replace("\ufeff", " ").split())
    if len(collapsed) > limit:
        collapsed = collapsed[: limit - 3] + "..."
    return html.escape(collapsed, quote=False)


@settings(max_examples=300, deadline=None)
@given(descriptions, st.integers(3, 60))
def test_normalize_description_matches_the_contract(text: str, limit: int) -> None:
    """Whatever the text, the result is §6's, forbidden-free, and encodable as UTF-8."""
    normalized = normalize_description(text, limit)
    assert normalized == expected_catalog_description(text, limit)
    assert forbidden_in(normalized) == []
    normalized.encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(st.lists(descriptions, min_size=1, max_size=5))
def test_runtime_skills_render_a_clean_catalog(texts: list[str]) -> None:
    """Runtime skills (where lone surrogates can enter) give a catalog that is free of
    forbidden characters and encodes as JSON and UTF-8 (their commands: tests/test_wire.py)."""

    async def render() -> None:
        registry = SkillRegistry()
        for index, text in enumerate(texts):
            # "d " keeps every description non-empty, as registration requires.
            registry.register(
                SkillDefinition(name=f"skill-{index}", description=f"d {text}", content="body")
            )
        options = SkillLookupOptions(cwd="/work")
        catalog = render_catalog(await registry.list(options))
        assert catalog is not None
        for index, text in enumerate(texts):
            line = f"- `skill-{index}`: {expected_catalog_description('d ' + text, 500)}"
            assert line in catalog.split("\n")
        assert forbidden_in(catalog) == []
        json.dumps({"catalog": catalog}, ensure_ascii=False).encode("utf-8")

    anyio.run(render)


# -- through the demo agent, over stdio ------------------------------------------------------


def parse_frame(line: bytes) -> dict[str, Any]:
    """One stdout line as a well-formed frame: strict UTF-8, a JSON object, Unicode strings."""
    message = json.loads(line.decode("utf-8"))
    assert isinstance(message, dict), line
    # A `\ud800` escape is valid JSON but not Unicode: re-encoding strictly catches it.
    json.dumps(message, ensure_ascii=False).encode("utf-8")
    return message


class LineAgent:
    """The demo agent spoken to in raw JSON lines, synchronously, so that one process can serve
    every example of a property test (starting one per example would take minutes)."""

    def __init__(self, sandbox: Sandbox, stderr: IO[bytes]) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ACP_SKILLS_")}
        self.proc = subprocess.Popen(
            [*AGENT_COMMAND, *sandbox.args()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**environment, **sandbox.env()},
        )
        self.frames: list[dict[str, Any]] = []
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read_lines)
        self._reader.start()
        self._next_id = 0

    def _read_lines(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request; return its result (failing on a JSON-RPC error)."""
        assert self.proc.stdin is not None
        self._next_id += 1
        request = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self._lines.get(timeout=30)
            assert line, f"the agent closed stdout (exit code {self.proc.poll()})"
            message = parse_frame(line)
            self.frames.append(message)
            if message.get("id") == self._next_id and "method" not in message:
                assert "error" not in message, message
                return message["result"]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code


@pytest.fixture
def line_agent(tmp_path: Path) -> Iterator[tuple[LineAgent, Sandbox]]:
    """One demo agent (offline model) for a whole test, with its sandbox."""
    sandbox = Sandbox.create(tmp_path)
    with (tmp_path / "agent.stderr").open("wb") as stderr:
        agent = LineAgent(sandbox, stderr)
        try:
            agent.call(
                "initialize",
                {
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                },
            )
            yield agent, sandbox
        finally:
            assert agent.close() == 0


def yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: any character survives through an escape."""
    escaped = [
        "\\" + c if c in '"\\' else c if " " <= c <= "~" else f"\\U{ord(c):08x}" for c in text
    ]
    return '"' + "".join(escaped) + '"'


def expected_in_list(text: str) -> str:
    """What ``_skills/list`` shows: the description without forbidden characters, NEL as a line
    feed, all other whitespace kept."""
    return "".join(c for c in text.replace("\x85", "\n") if not is_forbidden(c))


# Text a UTF-8 file can hold (st.characters() draws no surrogates), special characters often.
disk_descriptions = st.lists(
    st.one_of(st.characters(), st.sampled_from(SPECIAL_CHARACTERS)),
    max_size=80,
).map("".join)


# The agent is shared by every example on purpose (see `LineAgent`); each example writes its own
# skills and reloads, and every frame is checked as it is read.
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(disk_descriptions, min_size=1, max_size=4))
@example(texts=["Run\x1b[2J \u202eexe.evil\u202c now\x00\x85then\x9b\u2066x\u2069"])
def test_descriptions_on_disk_reach_the_model_and_editor_clean(
    line_agent: tuple[LineAgent, Sandbox], texts: list[str]
) -> None:
    """Random descriptions in SKILL.md files: every frame the real agent writes is well-formed,
    and the catalog, the slash commands and ``_skills/list`` hold no forbidden character."""
    agent, sandbox = line_agent
    shutil.rmtree(sandbox.skills_dir)
    descriptions = {f"skill-{i}": f"d {text}" for i, text in enumerate(texts)}
    for name, description in descriptions.items():
        (sandbox.skills_dir / name).mkdir(parents=True)
        (sandbox.skills_dir / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {yaml_quoted(description)}\n---\nBody.\n",
            encoding="utf-8",
        )
    agent.call("_skills/reload", {})
    session_id = agent.call("session/new", {"cwd": str(sandbox.project), "mcpServers": []})[
        "sessionId"
    ]
    prompt = [{"type": "text", "text": "hello"}]
    agent.call("session/prompt", {"sessionId": session_id, "prompt": prompt})
    [catalog] = agent.call("_skills/prefix", {"sessionId": session_id})["messages"]
    listed = agent.call("_skills/list", {"sessionId": session_id})["skills"]
    commands = next(
        frame["params"]["update"]["availableCommands"]
        for frame in reversed(agent.frames)
        if frame.get("method") == "session/update"
        and frame["params"]["sessionId"] == session_id
        and frame["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )

    catalog_lines = catalog["text"].split("\n")
    for name, description in descriptions.items():
        assert f"- `{name}`: {expected_catalog_description(description, 500)}" in catalog_lines
    assert forbidden_in(catalog["text"]) == []
    assert {s["name"]: s["description"] for s in listed} == {
        name: expected_in_list(description) for name, description in descriptions.items()
    }
    # Every skill is a command, then the library's built-in `/skills`.
    assert sorted(c["name"] for c in commands) == sorted([*descriptions, "skills"])
    for command in commands:
        assert forbidden_in(command["description"]) == []
        assert command["description"] == " ".join(command["description"].split())


# -- well-formed text: lone surrogates become U+FFFD, everything else is left alone ------

# Any code point, surrogates included (st.characters() alone leaves them out).
ANY_CHARACTER = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("plain ascii", "plain ascii"),
        ("日本語 🎉 \x00\x1b\u202e", "日本語 🎉 \x00\x1b\u202e"),
        ("a\ud800b", "a\ufffdb"),
        ("\udfff", "\ufffd"),
        ("\udcff\udc80", "\ufffd\ufffd"),
        ("\ud83d\ude00", "😀"),
        ("<\ude00\ud83d>", "<\ufffd\ufffd>"),
        ("\ud800\ud800\udc00", "\ufffd\U00010000"),
    ],
    ids=[
        "empty",
        "ascii",
        "astral-and-controls-kept",
        "high-alone",
        "low-alone",
        "surrogate-escapes",
        "split-pair-joined",
        "reversed-pair",
        "high-then-pair",
    ],
)
def test_lone_surrogates_become_replacement_characters(text: str, expected: str) -> None:
    """Each lone surrogate is one U+FFFD; a high-low pair is the character it stands for."""
    assert replace_lone_surrogates(text) == expected


def test_well_formed_text_is_returned_as_it_is() -> None:
    """No copy is made of text that needs no repair."""
    text = "nothing to repair here " * 100
    assert replace_lone_surrogates(text) is text


@given(st.text(alphabet=ANY_CHARACTER))
def test_the_result_is_always_encodable_and_otherwise_unchanged(text: str) -> None:
    """The result encodes as strict UTF-8; text without surrogates comes back equal."""
    repaired = replace_lone_surrogates(text)
    repaired.encode("utf-8")
    assert len(repaired) <= len(text)
    if all(not 0xD800 <= ord(char) <= 0xDFFF for char in text):
        assert repaired == text


def test_json_values_are_copied_with_keys_and_strings_repaired() -> None:
    """Objects and arrays are copied; keys and strings are repaired; other values are kept."""
    value = {"na\ud800me": ["x\udfff", 1, 2.5, None, True, ("t\ud800",)], "ok": {"k": "v"}}
    assert replace_lone_surrogates_in_json(value) == {
        "na\ufffdme": ["x\ufffd", 1, 2.5, None, True, ["t\ufffd"]],
        "ok": {"k": "v"},
    }
    assert list(replace_lone_surrogates_in_json({"b": 1, "a": 2})) == ["b", "a"]


def test_json_values_nested_beyond_the_recursion_limit_are_copied() -> None:
    """The walk needs no recursion, so a 100 000-deep value is no problem."""
    deep: object = "bottom \ud800"
    for _ in range(100_000):
        deep = [deep]
    copied = replace_lone_surrogates_in_json(deep)
    for _ in range(100_000):
        assert isinstance(copied, list)
        copied = copied[0]
    assert copied == "bottom \ufffd"


def test_terminal_safe_spells_out_every_control_but_tab() -> None:
    """C0 (but tab), DEL, C1 and the bidi overrides are spelt out; line feeds only on request."""
    spelt = {chr(c) for c in [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0)]}
    spelt |= {chr(c) for c in BIDI_OVERRIDES_AND_ISOLATES}
    text = "".join(sorted(spelt)) + "\tplain é"
    safe = terminal_safe(text)
    assert not spelt & set(safe)
    assert safe.endswith("\tplain é")
    assert terminal_safe("\x1b]0;title\x07\u202e") == "\\x1b]0;title\\x07\\u202e"
    assert terminal_safe("a\r\nb", keep_newlines=True) == "a\\x0d\nb"
    assert terminal_safe("\ud800") == "\ufffd"
