"""``acp-skills validate``: paths checked as the runtime reads them, or (``--strict``) against
the Agent Skills specification's rules, beyond the runtime's; through `main(argv)` in this
process (`tests/cli_runner.py`). The corpus is described in ``tests/test_cli.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_skills import Diagnostic
from acp_skills.cli.main import main
from acp_skills.cli.validate import strict_diagnostics, under_strict_rules
from acp_skills.diagnostics import Severity
from acp_skills.frontmatter import ParsedSkill, parse_skill_file
from tests.cli_runner import Corpus, codes_by_file, run, run_json


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    """A copy of the fixture corpus in a temporary directory (no .git above its project)."""
    return Corpus.copy_to(tmp_path)


def parsed(frontmatter: str) -> ParsedSkill:
    outcome = parse_skill_file(f"---\n{frontmatter}---\nbody\n")
    assert isinstance(outcome, ParsedSkill)
    return outcome


_LONG_NAME = "a" * 65
_RULES = [
    ("name-65", f"name: {_LONG_NAME}\ndescription: d\n", ["name-too-long"]),
    ("name-64", f"name: {'a' * 64}\ndescription: d\n", []),
    ("description-1025", f"name: x\ndescription: {'d' * 1025}\n", ["description-too-long"]),
    ("description-1024", f"name: x\ndescription: {'d' * 1024}\n", []),
    (
        "compatibility-501",
        f"name: x\ndescription: d\ncompatibility: {'c' * 501}\n",
        ["compatibility-invalid"],
    ),
    ("compatibility-500", f"name: x\ndescription: d\ncompatibility: {'c' * 500}\n", []),
    (
        "compatibility-number",
        "name: x\ndescription: d\ncompatibility: 3\n",
        ["compatibility-invalid"],
    ),
    (
        "compatibility-empty",
        "name: x\ndescription: d\ncompatibility: ''\n",
        ["compatibility-invalid"],
    ),
    (
        "metadata-number",
        "name: x\ndescription: d\nmetadata: {version: 1.0}\n",
        ["metadata-invalid"],
    ),
    ("metadata-nested", "name: x\ndescription: d\nmetadata: {a: {b: c}}\n", ["metadata-invalid"]),
    ("metadata-strings", "name: x\ndescription: d\nmetadata: {version: '1.0'}\n", []),
    # Not a mapping at all: the runtime already says `field-ignored` (an error when strict).
    ("metadata-list", "name: x\ndescription: d\nmetadata: [a]\n", []),
    ("tools-string", "name: x\ndescription: d\nallowed-tools: Read Bash(git:*)\n", []),
    ("tools-list", "name: x\ndescription: d\nallowed-tools: [Read, Grep]\n", []),
    ("tools-number", "name: x\ndescription: d\nallowed-tools: 3\n", ["allowed-tools-invalid"]),
    (
        "tools-mixed",
        "name: x\ndescription: d\nallowed-tools: [Read, 3]\n",
        ["allowed-tools-invalid"],
    ),
]


@pytest.mark.parametrize(
    ("frontmatter", "codes"),
    [(frontmatter, codes) for _, frontmatter, codes in _RULES],
    ids=[case for case, *_ in _RULES],
)
def test_specification_limits(frontmatter: str, codes: list[str]) -> None:
    """Each limit of the specification, at the limit and one past it."""
    found = strict_diagnostics("/r/x/SKILL.md", parsed(frontmatter))
    assert [d.code for d in found] == codes
    assert all(d.severity == "error" for d in found)


def test_a_flat_skill_is_a_note_under_the_specification() -> None:
    """A flat file is this runtime's own format: a note, never an error, saying where to move
    the file for other tools."""
    [found] = strict_diagnostics("/r/notes.md", parsed("name: notes\ndescription: d\n"))
    assert (found.code, found.severity) == ("flat-skill", "info")
    assert "notes/SKILL.md" in found.message


def test_validate_without_a_path_checks_the_roots_of_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As doctor does: every skills root a session there reads, project and user alike."""
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    (project / ".agents" / "skills" / "ok").mkdir(parents=True)
    (project / ".agents" / "skills" / "ok" / "SKILL.md").write_text(
        "---\nname: ok\ndescription: d\n---\nbody\n"
    )
    (project / ".agents" / "skills" / "flat.md").write_text(
        "---\nname: flat\ndescription: d\n---\nbody\n"
    )
    (home / ".agents" / "skills" / "broken").mkdir(parents=True)
    (home / ".agents" / "skills" / "broken" / "SKILL.md").write_text("no frontmatter\n")
    monkeypatch.setenv("HOME", str(home))
    for variable in ("DSH_HOME", "DSH_AGENTS_HOME", "ACP_SKILLS_DIRS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(project)
    assert main(["validate", "--strict", "--json"]) == 1
    records = json.loads(capsys.readouterr().out)["diagnostics"]
    assert [(d["code"], d["severity"], Path(d["path"]).name) for d in records] == [
        ("flat-skill", "info", "flat.md"),
        ("frontmatter-missing", "error", "SKILL.md"),
    ]
    monkeypatch.setenv("HOME", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    assert main(["validate"]) == 1
    assert "no-skills: no skills roots here" in capsys.readouterr().out


def test_strict_rules_turn_the_runtime_s_notes_into_errors() -> None:
    """A name mismatch, an unknown key or an ignored field is an error; other records stay."""
    kinds: list[tuple[str, Severity]] = [
        ("name-mismatch", "warning"),
        ("unknown-key", "info"),
        ("field-ignored", "warning"),
        ("skill-file-absent", "info"),
        ("skill-shadowed", "info"),
    ]
    records = [
        Diagnostic(code=code, severity=severity, path="/p", message="m") for code, severity in kinds
    ]
    assert [d.severity for d in under_strict_rules(records)] == [
        "error",
        "error",
        "error",
        "info",
        "info",
    ]


# -- validate --------------------------------------------------------------------------------


def test_validate_a_root_reports_what_the_runtime_meets(corpus: Corpus) -> None:
    """Lenient: the runtime's records for each file, in entry order; errors mean exit 1."""
    found, status = run_json("validate", str(corpus.project_skills))
    assert status == 1
    assert list(found) == ["diagnostics"]
    assert {tuple(d) for d in found["diagnostics"]} == {
        ("code", "severity", "path", "line", "message")
    }
    assert codes_by_file(found["diagnostics"], corpus.project_skills) == [
        ("flag-invalid", "bad-flag/SKILL.md"),
        ("yaml-invalid", "broken-yaml/SKILL.md"),
        ("unknown-key", "extra-keys/SKILL.md"),
        ("unknown-key", "extra-keys/SKILL.md"),
        ("skill-file-absent", "helpers/SKILL.md"),
        ("name-invalid", "no-name/SKILL.md"),
        ("name-mismatch", "renamed-dir/SKILL.md"),
    ]
    [yaml] = [d for d in found["diagnostics"] if d["code"] == "yaml-invalid"]
    assert (yaml["severity"], yaml["line"]) == ("error", 4)
    assert yaml["message"].startswith("invalid YAML: ")


def test_validate_text_is_one_line_per_problem_and_a_summary(corpus: Corpus) -> None:
    """``path:line: severity code: message`` lines, then how many files and problems."""
    result = run("validate", str(corpus.project_skills))
    *lines, summary = result.stdout.splitlines()
    assert lines[1].startswith(
        f"{corpus.project_skills / 'broken-yaml' / 'SKILL.md'}:4: error yaml-invalid: "
    )
    assert lines[2] == (
        f"{corpus.project_skills / 'extra-keys' / 'SKILL.md'}: note unknown-key: "
        "unknown frontmatter key 'version' (ignored by this runtime)"
    )
    assert (
        summary == "9 skill files checked as the runtime reads them: 3 errors, 1 warning, 3 notes."
    )


@pytest.mark.parametrize(
    ("layout", "strict", "expected", "status"),
    [
        ("claude", False, [("unknown-key", "info", "pdf-forms/SKILL.md")], 0),
        ("claude", True, [("unknown-key", "error", "pdf-forms/SKILL.md")], 1),
        ("codex", False, [], 0),
        ("codex", True, [], 0),
    ],
    ids=["claude-lenient", "claude-strict", "codex-lenient", "codex-strict"],
)
def test_validate_skills_written_for_other_tools(
    corpus: Corpus, layout: str, strict: bool, expected: list[tuple[str, str, str]], status: int
) -> None:
    """Claude Code's allowed-tools/argument-hint and Codex's metadata are known; `model` is not."""
    root = corpus.claude_skills if layout == "claude" else corpus.codex_skills
    found, code = run_json("validate", *(["--strict"] if strict else []), str(root))
    assert [
        (d["code"], d["severity"], str(Path(d["path"]).relative_to(root)))
        for d in found["diagnostics"]
    ] == expected
    assert code == status


def test_validate_strict_applies_the_specification(corpus: Corpus) -> None:
    """--strict: long description, flat skill, name mismatch and unknown keys are errors."""
    found, status = run_json("validate", "--strict", str(corpus.project_skills))
    assert status == 1
    assert [
        (code, path)
        for code, path in codes_by_file(found["diagnostics"], corpus.project_skills)
        if code not in ("flag-invalid", "yaml-invalid", "name-invalid")
    ] == [
        ("unknown-key", "extra-keys/SKILL.md"),
        ("unknown-key", "extra-keys/SKILL.md"),
        ("skill-file-absent", "helpers/SKILL.md"),
        ("name-mismatch", "renamed-dir/SKILL.md"),
        ("flat-skill", "notes.md"),
        ("description-too-long", "wordy/SKILL.md"),
    ]
    severities = {d["code"]: d["severity"] for d in found["diagnostics"]}
    assert severities["name-mismatch"] == severities["unknown-key"] == "error"
    assert severities["skill-file-absent"] == severities["flat-skill"] == "info"


@pytest.mark.parametrize(
    ("target", "expected", "status"),
    [
        ("project/.agents/skills/renamed-dir", [("name-mismatch", "warning")], 1),
        ("project/.agents/skills/renamed-dir/SKILL.md", [("name-mismatch", "warning")], 1),
        ("project/.agents/skills/commit-message", [], 0),
        ("project/.agents/skills/notes.md", [], 0),
        ("project/.agents/skills/wordy", [], 0),
        ("project/.agents/skills/broken-yaml/SKILL.md", [("yaml-invalid", "error")], 1),
        ("project/.agents/skills/helpers/README.txt", [("not-a-skill", "error")], 1),
        ("project/.agents/skills/helpers", [("no-skills", "warning")], 1),
        ("project/nowhere", [("not-found", "error")], 1),
    ],
    ids=[
        "bundle-dir",
        "skill-file",
        "clean-bundle",
        "clean-flat",
        "long-description-lenient",
        "broken-file",
        "not-a-skill",
        "no-skills",
        "missing",
    ],
)
def test_validate_takes_a_skill_directory_a_skill_file_or_a_root(
    corpus: Corpus, target: str, expected: list[tuple[str, str]], status: int
) -> None:
    """Each kind of PATH is understood; nothing found is a problem too."""
    found, code = run_json("validate", str(corpus.root / target))
    assert [(d["code"], d["severity"]) for d in found["diagnostics"]] == expected
    assert code == status


def test_validate_several_paths_in_order(corpus: Corpus) -> None:
    """Records come in the order of the paths given; relative paths are taken from the cwd."""
    result = run(
        "validate",
        "--json",
        "project/nowhere",
        "project/.agents/skills/renamed-dir",
        cwd=corpus.root,
    )
    found = json.loads(result.stdout)["diagnostics"]
    assert [d["code"] for d in found] == ["not-found", "name-mismatch"]
    assert found[0]["path"] == str(corpus.root / "project" / "nowhere")


def test_documentation_markdown_is_a_note_and_a_lowercase_skill_file_a_warning(
    tmp_path: Path,
) -> None:
    """README.md and LICENSE.md beside skills are notes, not errors; ``skill.md`` is a warning
    to rename it, from ``validate`` of the root, of the bundle, and from ``doctor`` alike."""
    root = tmp_path / "skills"
    (root / "good").mkdir(parents=True)
    (root / "good" / "SKILL.md").write_text("---\nname: good\ndescription: Fine.\n---\n")
    (root / "README.md").write_text("# My skills\n")
    (root / "LICENSE.md").write_text("MIT\n")
    (root / "lower").mkdir()
    (root / "lower" / "skill.md").write_text("---\nname: lower\ndescription: Lost.\n---\n")
    expected = [
        ("LICENSE.md", "markdown-ignored", "info"),
        ("README.md", "markdown-ignored", "info"),
        ("lower/SKILL.md", "skill-file-lowercase", "warning"),
    ]

    def seen(diagnostics: list[dict[str, str]]) -> list[tuple[str, str, str]]:
        found = [(d["path"], d["code"], d["severity"]) for d in diagnostics]
        return sorted((str(Path(p).relative_to(root)), c, s) for p, c, s in found)

    found, status = run_json("validate", str(root))
    assert (seen(found["diagnostics"]), status) == (expected, 1)
    bundle, status = run_json("validate", str(root / "lower"))
    assert (seen(bundle["diagnostics"]), status) == (expected[2:], 1)
    assert "rename it to SKILL.md" in bundle["diagnostics"][0]["message"]
    assert "1 skill file checked" in run("validate", str(root / "lower")).stdout
    homes = ["--dsh-home", str(tmp_path / "d"), "--agents-home", str(tmp_path / "a")]
    report, status = run_json("doctor", "--cwd", str(tmp_path), *homes, "--skills-dir", str(root))
    assert seen(report["problems"]) == expected


@pytest.mark.parametrize("beside", [False, True], ids=["only-nested", "beside-a-skill"])
def test_a_skill_nested_one_level_too_deep_is_a_warning_from_validate_and_doctor(
    tmp_path: Path, beside: bool
) -> None:
    """root/group/bundle/SKILL.md is not loaded: ``validate root`` never says "no problems"
    for it, and ``doctor`` over the same root reports the same record."""
    root = tmp_path / "skills"
    for place in ["group/bundle", "group/other", "helpers"] + (["good"] if beside else []):
        (root / place).mkdir(parents=True)
    for bundle in ["group/bundle", "group/other"] + (["good"] if beside else []):
        name = bundle.rsplit("/", 1)[-1]
        (root / bundle / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A.\n---\n")

    def seen(diagnostics: list[dict[str, str]]) -> list[tuple[str, str, str]]:
        found = [(d["path"], d["code"], d["severity"]) for d in diagnostics]
        return sorted((str(Path(p).relative_to(root)), c, s) for p, c, s in found)

    nested = [
        ("group/SKILL.md", "skill-nested-too-deep", "warning"),
        ("helpers/SKILL.md", "skill-file-absent", "info"),
    ]
    found, status = run_json("validate", str(root))
    no_skills = [] if beside else [(".", "no-skills", "warning")]
    assert (seen(found["diagnostics"]), status) == (sorted(no_skills + nested), 1)
    [warning] = [d for d in found["diagnostics"] if d["code"] == "skill-nested-too-deep"]
    assert "bundle/SKILL.md, other/SKILL.md one level further down" in warning["message"]
    text = run("validate", str(root))
    assert "no problems" not in text.stdout
    assert text.returncode == 1
    homes = ["--dsh-home", str(tmp_path / "d"), "--agents-home", str(tmp_path / "a")]
    report, status = run_json("doctor", "--cwd", str(tmp_path), *homes, "--skills-dir", str(root))
    assert (seen(report["problems"]), status) == (nested, 1)
