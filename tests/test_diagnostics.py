"""Diagnostics: one record per problem, produced by discovery and read by logs, CLI and agent.

The parser's reasons are mapped to codes against the real parser; discovery's records come from
real directories; the registry gathers them from real providers.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import structlog
from structlog.testing import capture_logs

from acp_skills import LocalSkillProvider, SkillLookupOptions, SkillRegistry
from acp_skills.diagnostics import (
    CODES,
    Diagnostic,
    file_diagnostics,
    log_diagnostic,
    shadow_diagnostic,
)
from acp_skills.errors import Problem, ReadError
from acp_skills.frontmatter import (
    ParsedSkill,
    parse_skill_bytes,
    parse_skill_file,
)
from acp_skills.model import ShadowedSkill
from tests.providers import ListProvider, candidate

pytestmark = pytest.mark.anyio

_FLAG_YES = b"---\nname: x\ndescription: y\ndisableModelInvocation: yes\n---\n"

# (file bytes, code, line): every kind of file the parser refuses, through the real parser.
_REFUSED = [
    ("latin-1", b"---\nname: caf\xe9\ndescription: y\n---\n", "not-utf8", None),
    ("no-frontmatter", b"# Just markdown\n", "frontmatter-missing", None),
    ("unterminated", b"---\nname: x\ndescription: y\n", "frontmatter-missing", None),
    ("empty-frontmatter", b"---\n---\nbody\n", "frontmatter-missing", None),
    ("list", b"---\n- a\n---\n", "frontmatter-missing", None),
    ("too-large", b"---\nd: " + b"x" * 70_000 + b"\n---\n", "frontmatter-too-large", None),
    ("bad-yaml", b"---\nname: x\ndescription: [\n---\n", "yaml-invalid", 4),
    ("bad-indent", b"---\nname: x\n  description: y\n---\n", "yaml-invalid", 3),
    ("duplicate", b"---\nname: x\nname: y\n---\n", "yaml-invalid", 3),
    ("no-name", b"---\ndescription: y\n---\n", "name-invalid", None),
    ("bad-name", b"---\nname: A_B\ndescription: y\n---\n", "name-invalid", None),
    ("number-name", b"---\nname: 404\ndescription: y\n---\n", "name-invalid", None),
    ("no-description", b"---\nname: x\n---\n", "description-invalid", None),
    ("blank-description", b"---\nname: x\ndescription: ''\n---\n", "description-invalid", None),
    ("bad-flag", _FLAG_YES, "flag-invalid", None),
    (
        "bad-user-flag",
        b"---\nname: x\ndescription: y\nuser-invocable: 0\n---\n",
        "flag-invalid",
        None,
    ),
    (
        "both-spellings",
        b"---\nname: x\ndescription: y\nwhenToUse: a\nwhen_to_use: b\n---\n",
        "field-conflict",
        None,
    ),
]


def parse(data: bytes) -> ParsedSkill | Problem:
    parsed = parse_skill_bytes(data, with_body=True)
    assert not isinstance(parsed, ReadError)
    return parsed


@pytest.mark.parametrize(
    ("data", "code", "line"),
    [(data, code, line) for _, data, code, line in _REFUSED],
    ids=[stem for stem, *_ in _REFUSED],
)
def test_each_refused_file_has_its_own_code_and_the_parser_s_reason(
    data: bytes, code: str, line: int | None
) -> None:
    """The parser's problem carries a stable code, the message and the line when known."""
    outcome = parse(data)
    assert isinstance(outcome, Problem)
    assert (outcome.code, outcome.line) == (code, line)
    [diagnostic] = file_diagnostics("/r/x/SKILL.md", outcome)
    assert (diagnostic.code, diagnostic.severity, diagnostic.line) == (code, "error", line)
    assert diagnostic.message == outcome.message
    assert diagnostic.path == "/r/x/SKILL.md"
    assert CODES[code].skipped


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ReadError(failure="broken_link"), "broken-link"),
        (ReadError(failure="too_large", size=900, limit=200), "file-too-large"),
        (ReadError(failure="unreadable", detail="permission denied"), "file-unreadable"),
        (
            ReadError(failure="unreadable", detail="file is 900 bytes, over the 200-byte limit"),
            "file-unreadable",
        ),
    ],
    ids=["broken-link", "too-large", "permission", "code-not-read-from-text"],
)
def test_unreadable_files_are_errors_by_kind(error: ReadError, code: str) -> None:
    """The code the filesystem gave is the record's (never guessed from the reason, which is
    the message)."""
    [diagnostic] = file_diagnostics("/r/x.md", error)
    assert (diagnostic.code, diagnostic.severity, diagnostic.message) == (
        code,
        "error",
        error.reason,
    )


def test_a_directory_without_skill_md_is_an_info_not_an_error() -> None:
    """A helper directory in a root is worth a note (a skill nested too deep looks like it)."""
    [diagnostic] = file_diagnostics("/r/helpers/SKILL.md", ReadError(failure="not_found"))
    assert (diagnostic.code, diagnostic.severity) == ("skill-file-absent", "info")
    assert not CODES["skill-file-absent"].skipped


def parsed(frontmatter: str) -> ParsedSkill:
    outcome = parse_skill_file(f"---\n{frontmatter}---\nbody\n")
    assert isinstance(outcome, ParsedSkill)
    return outcome


def test_a_clean_skill_has_no_diagnostics() -> None:
    """Known keys only, name equal to its directory: nothing to say."""
    skill = parsed(
        "name: pdf\ndescription: d\nlicense: MIT\nallowed-tools: Read\nargument-hint: x\n"
        "compatibility: any\nmetadata: {a: b}\nwhen_to_use: w\nuserInvocable: true\n"
    )
    assert file_diagnostics("/r/pdf/SKILL.md", skill, expected_name="pdf") == ()


@pytest.mark.parametrize(
    ("path", "expected", "where"),
    [
        ("/r/renamed/SKILL.md", "renamed", "its directory 'renamed'"),
        ("/r/renamed.md", "renamed", "its file name 'renamed.md'"),
    ],
    ids=["bundle", "flat"],
)
def test_a_name_that_differs_from_its_location_is_a_warning(
    path: str, expected: str, where: str
) -> None:
    """The skill still works under its frontmatter name; the author hears about the mismatch."""
    [diagnostic] = file_diagnostics(
        path, parsed("name: pdf\ndescription: d\n"), expected_name=expected
    )
    assert (diagnostic.code, diagnostic.severity, diagnostic.skill) == (
        "name-mismatch",
        "warning",
        "pdf",
    )
    assert where in diagnostic.message


def test_unknown_keys_and_ignored_fields_are_reported_once_each() -> None:
    """Ignored fields are warnings (in the parser's words); unknown keys are infos, in order."""
    skill = parsed("name: x\ndescription: d\nmodel: opus\nwhenToUse: [a]\ncontext: fork\n")
    found = file_diagnostics("/r/x/SKILL.md", skill, expected_name="x")
    assert [(d.code, d.severity, d.message) for d in found] == [
        ("field-ignored", "warning", "field 'whenToUse' ignored: expected a string, got a list"),
        ("unknown-key", "info", "unknown frontmatter key 'model' (ignored by this runtime)"),
        ("unknown-key", "info", "unknown frontmatter key 'context' (ignored by this runtime)"),
    ]


@pytest.mark.parametrize(
    ("loser_rank", "code", "severity"),
    [(500, "skill-shadowed", "info"), (100, "skill-duplicate", "warning")],
    ids=["other-rank", "same-rank"],
)
def test_shadowing_by_precedence_is_an_info_and_by_order_a_warning(
    loser_rank: int, code: str, severity: str
) -> None:
    """An override by rank is how precedence works; a tie decided by order is a likely mistake."""
    winner = candidate("deploy", provider="local", rank=100, path="/p/deploy/SKILL.md")
    loser = candidate("deploy", provider="local", rank=loser_rank, path="/u/deploy/SKILL.md")
    record = shadow_diagnostic(ShadowedSkill(skill=loser, winner=winner))
    assert (record.code, record.severity, record.path) == (code, severity, "/u/deploy/SKILL.md")
    assert "/p/deploy/SKILL.md" in record.message


def test_every_code_is_documented() -> None:
    """docs/diagnostics.md has a row for each code, and no row for a code that does not exist."""
    table = (Path(__file__).parent.parent / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    documented = {
        line.split("|")[1].strip().strip("`")
        for line in table.splitlines()
        if line.startswith("| `")
    }
    assert documented == set(CODES)


def test_log_events_carry_the_record() -> None:
    """A record becomes its code's event, with path, reason, code, skill and line."""
    record = Diagnostic(
        code="name-mismatch", severity="warning", path="/p", line=2, message="m", skill="x"
    )
    with capture_logs() as logs:
        log_diagnostic(structlog.get_logger("t"), record, provider="local")
    assert logs == [
        {
            "event": "skill_name_mismatch",
            "log_level": "warning",
            "provider": "local",
            "path": "/p",
            "skill": "x",
            "reason": "m",
            "code": "name-mismatch",
            "line": 2,
        }
    ]


# -- discovery ---------------------------------------------------------------------------------


async def test_list_logs_the_records_discover_returns(tmp_path: Path) -> None:
    """The warnings in the log are the same records: one event per record, and besides them
    only the one debug summary of the discovery."""
    root = tmp_path / "custom"
    (root / "moved").mkdir(parents=True)
    (root / "moved" / "SKILL.md").write_text("---\nname: other\ndescription: d\nextra: 1\n---\n")
    (root / "bad.md").write_text("no frontmatter\n")
    provider = LocalSkillProvider(
        dsh_home=tmp_path / "dsh", agents_home=tmp_path / "agents", custom_skill_dirs=[root]
    )
    discovery = await provider.discover(SkillLookupOptions())
    with capture_logs() as captured:
        await provider.list(SkillLookupOptions())
    logs = [e for e in captured if e["event"] != "skills_discovered"]
    assert [e["event"] for e in captured if e not in logs] == ["skills_discovered"]
    assert [(e["event"], e["code"], e["path"], e["reason"]) for e in logs] == [
        (CODES[d.code].event, d.code, d.path, d.message) for d in discovery.diagnostics
    ]
    assert [e["log_level"] for e in logs] == ["warning", "warning", "info"]


# -- the registry --------------------------------------------------------------------------------


class DiagnosingProvider(ListProvider):
    """A provider with a ``diagnose`` of its own (it may fail or hang)."""

    def __init__(self, name: str, answer: object) -> None:
        super().__init__(name, [candidate("x", provider=name, rank=100)])
        self.answer = answer

    async def diagnose(self, options: SkillLookupOptions) -> tuple[Diagnostic, ...]:
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer == "hang":
            await anyio.sleep_forever()
        assert isinstance(self.answer, tuple)
        return self.answer


async def test_registry_gathers_providers_diagnostics_then_shadowed_skills() -> None:
    """Each provider's own records in registration order, then one per shadowed skill."""
    mine = Diagnostic(code="yaml-invalid", severity="error", path="/a", message="m")
    registry = SkillRegistry()
    registry.register_provider(DiagnosingProvider("a", (mine,)))
    registry.register_provider(ListProvider("b", [candidate("x", provider="b", rank=500)]))
    found = await registry.diagnose()
    assert [d.code for d in found] == ["yaml-invalid", "skill-shadowed"]
    assert found[0] is mine
    assert (await registry.snapshot()).shadowed[0].skill.provider == "b"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [(RuntimeError("boom"), "RuntimeError('boom')"), ("hang", "took longer than 0.2 s")],
    ids=["raises", "hangs"],
)
async def test_a_provider_whose_diagnose_fails_is_itself_a_problem(
    answer: object, reason: str
) -> None:
    """A failing or hanging ``diagnose`` becomes a provider-failed record, never an exception."""
    registry = SkillRegistry(provider_timeout=0.2)
    registry.register_provider(DiagnosingProvider("flaky", answer))
    [record] = await registry.diagnose()
    assert (record.code, record.severity, record.path) == ("provider-failed", "error", None)
    assert "'flaky'" in record.message
    assert reason in record.message
