"""The ``acp-skills`` command line, through `main(argv)` in this process with its output
captured (`tests/cli_runner.py`), over a copy of the fixture corpus
(``tests/fixtures/skills-corpus``: valid and broken skills, and skills written for Claude Code
and Codex). Three tests start processes, for what only a process shows: the console script and
``python -m acp_skills`` run this same `main`, importing the command line loads neither the ACP
SDK nor pydantic (a fresh interpreter's ``sys.modules``), and each command reads each skill file
once (counted by an audit hook, which stays for the life of its interpreter).

The corpus, as the agent sees it from ``project`` (homes in ``home``):

* project ``.agents/skills``: commit-message, deploy, release-notes (in ``renamed-dir/``),
  wordy (a 1900-character description), extra-keys (``version``, ``tags``), notes (flat);
  broken: broken-yaml, no-name, bad-flag; ``helpers/`` has no SKILL.md;
* user ``.agents/skills``: deploy (shadowed by the project's), hidden-helper (not for the
  model), model-only (no command); user ``.dsh/skills``: format-json (flat), ``.system/``;
* elsewhere: ``project/.claude/skills`` (pdf-forms with ``model:``, explain-code) and
  ``home/.codex/skills/codex-review``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_skills import (
    SkillLookupOptions,
    SkillTool,
)
from acp_skills.cli.main import main
from tests.cli_runner import (
    Corpus,
    cli_env,
    codes_by_file,
    nowhere,
    run,
    run_json,
    run_on_a_terminal,
)

SCRIPT = Path(sys.executable).parent / ("acp-skills.exe" if os.name == "nt" else "acp-skills")
ENTRY_POINTS = {
    "module": (sys.executable, "-m", "acp_skills"),
    "script": (str(SCRIPT),),
}


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    """A copy of the fixture corpus in a temporary directory (no .git above its project)."""
    return Corpus.copy_to(tmp_path)


# -- list ------------------------------------------------------------------------------------


def test_list_shows_the_resolved_skills_aligned_in_columns(corpus: Corpus) -> None:
    """The winners: name, source, rank, model/user, path; exit 0."""
    result = run("list", *corpus.roots())
    assert result.returncode == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["NAME", "SOURCE", "RANK", "MODEL", "USER", "PATH"]
    assert [row.split()[:5] for row in rows] == [
        ["commit-message", "project-agents", "200", "yes", "yes"],
        ["deploy", "project-agents", "200", "yes", "yes"],
        ["extra-keys", "project-agents", "200", "yes", "yes"],
        ["format-json", "user-dsh", "400", "yes", "yes"],
        ["hidden-helper", "user-agents", "500", "no", "yes"],
        ["model-only", "user-agents", "500", "yes", "no"],
        ["notes", "project-agents", "200", "yes", "yes"],
        ["release-notes", "project-agents", "200", "yes", "yes"],
        ["wordy", "project-agents", "200", "yes", "yes"],
    ]
    # Aligned: every path starts in the same column.
    assert len({line.index("/") for line in rows}) == 1
    assert rows[7].endswith(str(corpus.project_skills / "renamed-dir" / "SKILL.md"))
    assert "1 shadowed skill not shown (`acp-skills doctor` shows them)." in result.stderr
    assert "\x1b[" not in result.stdout


def test_list_json_has_the_stable_shape(corpus: Corpus) -> None:
    """``--json``: one object per skill with exactly the documented keys."""
    listed, status = run_json("list", *corpus.roots())
    assert status == 0
    skills = listed["skills"]
    assert list(listed) == ["skills"]
    assert {tuple(skill) for skill in skills} == {
        (
            "name",
            "description",
            "source",
            "rank",
            "provider",
            "path",
            "modelInvocable",
            "userInvocable",
            "trust",
        )
    }
    by_name = {skill["name"]: skill for skill in skills}
    assert by_name["deploy"] == {
        "name": "deploy",
        "description": "Deploy this project to staging or production.",
        "source": "project-agents",
        "rank": 200,
        "provider": "local",
        "path": str(corpus.project_skills / "deploy" / "SKILL.md"),
        "modelInvocable": True,
        "userInvocable": True,
        "trust": "trusted",
    }
    assert by_name["hidden-helper"]["modelInvocable"] is False
    assert by_name["model-only"]["userInvocable"] is False


def test_list_honours_acp_skills_dirs_like_the_agent(corpus: Corpus) -> None:
    """Without --skills-dir, ACP_SKILLS_DIRS adds directories, as it does for the demo agent."""
    env = cli_env(
        ACP_SKILLS_DIRS=os.pathsep.join([str(corpus.claude_skills), str(corpus.codex_skills)])
    )
    result = run("list", "--json", *corpus.roots(), env=env)
    names = {skill["name"]: skill["source"] for skill in json.loads(result.stdout)["skills"]}
    assert names["pdf-forms"] == names["explain-code"] == names["codex-review"] == "custom"


def test_a_missing_skills_dir_is_a_warning_on_stderr(corpus: Corpus) -> None:
    """A --skills-dir with a typo is said on stderr (also with --json), not silently ignored."""
    typo = corpus.root / "skils"
    result = run("list", "--json", *corpus.roots(), "--skills-dir", str(typo))
    assert result.returncode == 0
    assert f"warning: {typo}: skill directory does not exist or is not a directory" in (
        result.stderr
    )
    json.loads(result.stdout)  # stdout is still only the JSON


def test_list_with_no_skills_says_where_to_look(tmp_path: Path) -> None:
    """An empty world lists nothing and points at `doctor`."""
    result = run("list", *nowhere(tmp_path))
    assert result.returncode == 0
    assert result.stdout == f"No skills found for {tmp_path}.\n"
    assert "acp-skills doctor" in result.stderr


# -- show ------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["deploy", "notes", "hidden-helper", "no-such", "Bad_Name"])
async def test_show_prints_exactly_what_the_skill_tool_returns(corpus: Corpus, name: str) -> None:
    """stdout is the tool's text (and a newline); the exit status says whether it is an error."""
    expected = await SkillTool(corpus.registry()).call({"name": name}, cwd=str(corpus.project))
    result = run("show", name, *corpus.roots())
    assert result.stdout == expected.text + "\n"
    assert result.returncode == (1 if expected.is_error else 0)
    shown, status = run_json("show", name, *corpus.roots())
    assert shown == {"name": name, "text": expected.text, "isError": expected.is_error}
    assert status == result.returncode


def test_show_of_a_hidden_skill_is_the_tool_s_refusal(corpus: Corpus) -> None:
    """A skill the model may not load is refused exactly as the model would be refused."""
    result = run("show", "hidden-helper", *corpus.roots())
    assert result.stdout == 'Error: skill "hidden-helper" is not available for model invocation\n'
    assert result.returncode == 1


def test_show_path_reads_a_file_of_the_skill(corpus: Corpus) -> None:
    """--path is the tool's ``path``: one file of the bundle, confined to it."""
    options = [*corpus.roots(), "--skills-dir", str(corpus.claude_skills)]
    guide = (corpus.claude_skills / "pdf-forms" / "references" / "guide.md").read_text()
    shown = run("show", "pdf-forms", "--path", "references/guide.md", *options)
    assert (shown.stdout, shown.returncode) == (guide + "\n", 0)
    escape = run("show", "pdf-forms", "--path", "../explain-code/SKILL.md", *options)
    assert escape.returncode == 1
    assert escape.stdout.startswith("Error: ")


# -- catalog ---------------------------------------------------------------------------------


def test_catalog_prints_exactly_the_catalog_message_and_its_size(corpus: Corpus) -> None:
    """stdout is the catalog message, every description within the agent's bound; stderr its
    size in characters (that it is the agent's own: tests/test_cli_agent_parity.py)."""
    catalog, status = run_json("catalog", *corpus.roots())
    assert status == 0
    expected = catalog["text"]
    result = run("catalog", *corpus.roots())
    assert result.returncode == 0
    assert result.stdout == expected + "\n"
    # `wordy` has a 1,900-character description: the report says it was cut, and where.
    assert result.stderr == (
        f"Catalog: {len(expected):,} of 8,000 characters; 8 skills listed, 1 description cut "
        "at 1,024 characters (the longest a catalog description may be).\n"
    )
    assert "every description in full" not in result.stderr
    assert "hidden-helper" not in result.stdout
    listed = [line for line in expected.splitlines() if line.startswith("- `")]
    assert len(listed) == 8
    assert all(len(line) <= 1024 + len("- `wordy`: ") for line in listed)
    unlimited: dict[str, Any] = {
        "limit": 8000,
        "used": len(expected),
        "shortened": 0,
        "omitted": [],
    }
    assert catalog == {"text": expected, "characters": len(expected), "budget": unlimited}


def test_catalog_with_a_budget_says_what_it_did(corpus: Corpus) -> None:
    """``--budget N`` (with ``--hide``): a catalog within the budget, and its outcome reported
    (the agent's own: tests/test_cli_agent_parity.py)."""
    options = [*corpus.roots(), "--budget", "800", "--hide", "format-json"]
    catalog, status = run_json("catalog", *options)
    assert status == 0
    text = catalog["text"]
    budget = catalog["budget"]
    assert (budget["limit"], budget["used"]) == (800, len(text))
    assert budget["used"] <= 800
    assert budget["omitted"], "800 characters cannot hold every skill of the corpus"
    assert "format-json" not in budget["omitted"]
    assert "`format-json`" not in text
    assert all(f"`{name}`" not in text for name in budget["omitted"])
    result = run("catalog", *options)
    assert result.stdout == text + "\n"
    assert "of 800 characters" in result.stderr
    assert "not listed (the skill tool's query finds them)" in result.stderr
    assert run("catalog", *corpus.roots(), "--budget", "0").returncode == 2
    assert run("catalog", *corpus.roots(), "--pin", "Not A Name").returncode == 2


def test_catalog_without_skills_is_null_and_zero(tmp_path: Path) -> None:
    """No model-visible skill: no catalog message at all, 0 characters, still exit 0."""
    options = nowhere(tmp_path)
    empty: dict[str, Any] = {"limit": 8000, "used": 0, "shortened": 0, "omitted": []}
    assert run_json("catalog", *options) == (
        {"text": None, "characters": 0, "budget": empty},
        0,
    )
    result = run("catalog", *options)
    assert (result.stdout, result.returncode) == ("", 0)
    assert "0 characters" in result.stderr


# -- doctor ----------------------------------------------------------------------------------


def test_doctor_json_reports_roots_skipped_shadowed_and_catalog_size(corpus: Corpus) -> None:
    """Every root with existence and count, each skipped file, each shadowed pair, the size."""
    typo = corpus.root / "typo"
    report, status = run_json("doctor", *corpus.roots(), "--skills-dir", str(typo))
    assert status == 1
    assert list(report) == [
        "roots",
        "skipped",
        "shadowed",
        "catalogCharacters",
        "unknownPinned",
        "unknownHidden",
        "problems",
        "skills",
    ]
    assert report["roots"] == [
        {
            "path": str(corpus.project / ".dsh" / "skills"),
            "source": "project-dsh",
            "rank": 100,
            "exists": False,
            "skills": 0,
        },
        {
            "path": str(corpus.project_skills),
            "source": "project-agents",
            "rank": 200,
            "exists": True,
            "skills": 6,
        },
        {"path": str(typo), "source": "custom", "rank": 300, "exists": False, "skills": 0},
        {
            "path": str(corpus.home / ".dsh" / "skills"),
            "source": "user-dsh",
            "rank": 400,
            "exists": True,
            "skills": 1,
        },
        {
            "path": str(corpus.home / ".agents" / "skills"),
            "source": "user-agents",
            "rank": 500,
            "exists": True,
            "skills": 3,
        },
    ]
    assert codes_by_file(report["skipped"], corpus.project_skills) == [
        ("flag-invalid", "bad-flag/SKILL.md"),
        ("yaml-invalid", "broken-yaml/SKILL.md"),
        ("name-invalid", "no-name/SKILL.md"),
    ]
    assert report["shadowed"] == [
        {
            "name": "deploy",
            "winner": {
                "source": "project-agents",
                "path": str(corpus.project_skills / "deploy" / "SKILL.md"),
            },
            "loser": {
                "source": "user-agents",
                "path": str(corpus.home / ".agents" / "skills" / "deploy" / "SKILL.md"),
            },
        }
    ]
    catalog, _ = run_json("catalog", *corpus.roots(), "--skills-dir", str(typo))
    assert report["catalogCharacters"] == len(catalog["text"])
    assert [d["code"] for d in report["problems"]] == [
        "root-missing",
        "flag-invalid",
        "yaml-invalid",
        "unknown-key",
        "unknown-key",
        "skill-file-absent",
        "name-invalid",
        "name-mismatch",
        "skill-shadowed",
    ]


def test_doctor_text_explains_each_section(corpus: Corpus) -> None:
    """Roots (missing ones marked), the problems (most severe first), catalog, result."""
    result = run("doctor", *corpus.roots())
    assert result.returncode == 1
    out = result.stdout
    assert out.startswith(f"Skills for {corpus.project}\n")
    assert f"{corpus.project / '.dsh' / 'skills'}  (missing)" in out
    problems = out.split("\nProblems (8)\n", 1)[1].splitlines()[:8]
    assert [line.split(": ", 1)[1].split()[0] for line in problems] == [
        *["error"] * 3,
        "warning",
        *["note"] * 4,
    ]
    assert "\nCatalog: " in out
    assert out.endswith("Result: 3 errors, 1 warning, 4 notes\n")


def test_doctor_is_happy_with_a_clean_setup(corpus: Corpus, tmp_path: Path) -> None:
    """Only well-formed skills and nothing shadowed: exit 0, no problems."""
    result = run(
        "doctor",
        *nowhere(tmp_path),
        "--skills-dir",
        str(corpus.codex_skills),
    )
    assert result.returncode == 0
    assert result.stdout.endswith("Result: no problems\n")


@pytest.mark.parametrize("command", ["validate", "doctor"])
def test_json_output_holds_no_control_or_bidi_override(command: str, tmp_path: Path) -> None:
    """A problem naming a directory with ESC and U+202E in its name: the JSON printed carries
    neither, in its text or in any value it decodes to (a program may print what it reads)."""
    root = tmp_path / "skills"
    odd = root / "odd\x1b[2J\u202eskill"
    odd.mkdir(parents=True)
    (odd / "SKILL.md").write_text("---\nname: odd\n---\n", encoding="utf-8")
    options = [*nowhere(tmp_path), "--skills-dir", str(root)]
    where = [str(root)] if command == "validate" else options
    result = run(command, "--json", *where)
    assert result.returncode == 1
    assert "\u202e" not in result.stdout
    printed = json.loads(result.stdout)
    problems = printed["diagnostics" if command == "validate" else "problems"]
    [found] = [d for d in problems if d["code"] == "description-invalid"]
    assert found["path"] == str(root / "odd[2Jskill" / "SKILL.md")
    assert not any("\x1b" in text or "\u202e" in text for text in _strings(printed))


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys too."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *_strings(item)]]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


# -- usage, terminals, imports ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "the following arguments are required: COMMAND"),
        (("nonsense",), "invalid choice: 'nonsense'"),
        (("show",), "the following arguments are required: NAME"),
        (("list", "--cwd", "/no/such/dir"), "list: error: argument --cwd: not a directory: /no"),
        (("list", "--frobnicate"), "unrecognized arguments: --frobnicate"),
    ],
    ids=["no-command", "unknown-command", "no-name", "bad-cwd", "bad-flag"],
)
def test_usage_errors_exit_2_with_a_message(args: tuple[str, ...], message: str) -> None:
    """A usage error says what is wrong on stderr, prints nothing on stdout, exits 2."""
    result = run(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


def test_help_lists_every_command_and_the_exit_statuses() -> None:
    """--help is the map: five commands, what the exit statuses mean."""
    result = run("--help")
    assert result.returncode == 0
    for command in ("list", "show", "catalog", "validate", "doctor"):
        assert command in result.stdout
    assert "Exit status: 0 fine, 1 problems found, 2 usage error." in " ".join(
        result.stdout.split()
    )


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize(
    ("no_color", "coloured"), [("", True), ("1", False)], ids=["tty", "no-color"]
)
def test_colour_only_on_a_terminal_without_no_color(
    corpus: Corpus, no_color: str, coloured: bool
) -> None:
    """On a terminal the output is coloured, unless NO_COLOR is set (piped: see the tests above)."""
    env = cli_env(NO_COLOR=no_color, TERM="xterm")
    output = run_on_a_terminal("doctor", *corpus.roots(), env=env).stdout
    assert ("\x1b[" in output) is coloured
    assert "Problems (8)" in output


def test_both_entry_points_run_the_command_line(corpus: Corpus) -> None:
    """The installed ``acp-skills`` script and ``python -m acp_skills`` are this `main`: the same
    output and exit status as a run in this process."""
    assert SCRIPT.exists(), "the acp-skills console script is installed with the project"
    args = ("list", *corpus.roots())
    expected = run(*args)
    for command in ENTRY_POINTS.values():
        started = subprocess.run(
            [*command, *args],
            env=cli_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        assert (started.returncode, started.stdout, started.stderr) == (
            expected.returncode,
            expected.stdout,
            expected.stderr,
        )
    assert expected.returncode == 0
    assert "deploy" in expected.stdout


def test_the_command_line_does_not_load_the_acp_sdk() -> None:
    """`acp_skills.cli` runs on the core alone: neither the ACP SDK nor pydantic is imported."""
    probe = (
        "import sys, acp_skills.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('acp', 'pydantic')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


# Every file the command line opens, counted per command by an audit hook: a hook stays for the
# life of its interpreter, so it runs in a process of its own.
OPENS_PER_COMMAND = """
import collections, contextlib, io, json, os, sys
from acp_skills.cli.main import main
out, roots, commands = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
opened = collections.Counter()
def count(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(roots):
        opened[args[0]] += 1
sys.addaudithook(count)
counts = []
for command in commands:
    opened.clear()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(command)
    counts.append(dict(opened))
with open(out, "w") as file:
    json.dump(counts, file)
"""


def test_each_command_reads_each_skill_file_once(corpus: Corpus, tmp_path: Path) -> None:
    """One command is one look: its listing, its warnings, doctor's roots and problems are of
    one discovery, so each skill file is read once (``show`` reads its skill once more, to
    load it)."""
    commands = [[name, *corpus.roots()] for name in ("list", "catalog", "doctor")]
    commands.append(["show", "deploy", *corpus.roots()])
    out = tmp_path / "opened.json"
    subprocess.run(
        [sys.executable, "-c", OPENS_PER_COMMAND, str(out), str(corpus.root), json.dumps(commands)],
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=True,
    )
    counts = json.loads(out.read_text())
    deploy = str(corpus.project_skills / "deploy" / "SKILL.md")
    notes = str(corpus.project_skills / "notes.md")
    for command, opened in zip(commands, counts, strict=True):
        assert opened[notes] == 1, command
        assert opened.pop(deploy) == (2 if command[0] == "show" else 1), command
        assert set(opened.values()) == {1}, (command, opened)


@pytest.mark.anyio
async def test_the_command_line_sees_what_the_library_sees(corpus: Corpus) -> None:
    """`list --json` names exactly the registry's snapshot for that cwd, in the same order."""
    snapshot = await corpus.registry().snapshot(SkillLookupOptions(cwd=str(corpus.project)))
    listed, _ = run_json("list", *corpus.roots())
    assert [(s["name"], s["path"]) for s in listed["skills"]] == [
        (skill.name, skill.path) for skill in snapshot.skills
    ]


def test_catalog_and_doctor_warn_of_a_pinned_or_hidden_name_no_skill_has(tmp_path: Path) -> None:
    """One stderr line per unknown name, naming it; doctor then exits 1, as for any warning."""
    skills = tmp_path / "skills"
    (skills / "deploy").mkdir(parents=True)
    (skills / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it.\n---\n")
    where = [*nowhere(tmp_path), "--skills-dir", str(skills)]
    assert run("doctor", *where).returncode == 0
    env = cli_env(ACP_SKILLS_HIDE="no-such-hidden")
    catalog = run("catalog", *where, "--pin", "no-such-pinned", "--pin", "deploy", env=env)
    assert catalog.returncode == 0
    assert "- `deploy`: Ship it." in catalog.stdout
    unknown = [line for line in catalog.stderr.splitlines() if "names no skill" in line]
    assert unknown == [
        "warning: --pin names no skill: no-such-pinned (ACP_SKILLS_PIN)",
        "warning: --hide names no skill: no-such-hidden (ACP_SKILLS_HIDE)",
    ]
    doctor = run("doctor", *where, "--pin", "no-such-pinned", "--json", env=env)
    assert doctor.returncode == 1
    assert "warning: --pin names no skill: no-such-pinned" in doctor.stderr
    payload = json.loads(doctor.stdout)
    assert (payload["unknownPinned"], payload["unknownHidden"]) == (
        ["no-such-pinned"],
        ["no-such-hidden"],
    )


@pytest.mark.parametrize(
    ("others", "pins", "over"),
    [
        (1, (), "Over budget: no shorter catalog can be made."),
        (10, (), "Over budget: the catalog's own text takes more room."),
        (10, ("--pin", "deploy"), "the catalog's own text and the pinned skills take more room"),
    ],
    ids=["all-listed-briefly", "all-left-out", "all-but-the-pinned-left-out"],
)
def test_an_over_budget_catalog_blames_what_it_could_not_leave_out(
    tmp_path: Path, others: int, pins: tuple[str, ...], over: str
) -> None:
    """Under a budget no catalog meets, the catalog says why in words true of what it holds:
    the pinned skills only when the others were left out for them; none when listing every
    skill briefly is shorter than leaving them out."""
    skills = tmp_path / "skills"
    named = [("deploy", "Ship it.")] + [(f"review-{n}", "Review it. " * 40) for n in range(others)]
    for name, words in named:
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {words}\n---\n")
    where = [*nowhere(tmp_path), "--skills-dir", str(skills), "--budget", "100", *pins]
    catalog = run("catalog", *where)
    (said,) = [line for line in catalog.stderr.splitlines() if line.startswith("Catalog: ")]
    assert over in said


def test_doctor_says_of_the_catalog_what_catalog_says(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same fit, in the same words: descriptions cut at 1,024, numbers with separators."""
    for variable in ("ACP_SKILLS_DIRS", "NO_COLOR", "DSH_HOME", "DSH_AGENTS_HOME"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["catalog", *corpus.roots()]) == 0
    catalog_says = capsys.readouterr().err.strip()
    main(["doctor", *corpus.roots()])
    doctor_says = capsys.readouterr().out
    assert catalog_says.startswith("Catalog: ")
    assert "1 description cut at 1,024 characters" in catalog_says
    assert f"\n{catalog_says}\n" in doctor_says
