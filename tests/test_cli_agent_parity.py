"""``acp-skills`` sees exactly what the demo agent sees, in one sandbox, with the same flags or
the same ``ACP_SKILLS_*`` variables; and paths with ``~`` given without a shell, as editors
give them.

Both sides run in this process: the command line through `main(argv)`
(`tests/cli_runner.py`), the agent as its entry point builds it from the same arguments and
environment, served to the SDK's client over a socketpair (`tests.acp_peer.demo_agent_peer`); its
start-up checks through its `main(argv)`. ``tests/test_cli.py`` checks that the console
script runs this same `main`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.acp_peer import demo_agent_peer
from tests.agent_client import Sandbox, text_prompt, write_skill
from tests.cli_runner import Result, install_hint, run
from tests.demo_in_process import run_agent

TEST_SECONDS = 60
LONG_DESCRIPTION = "Fills PDF forms from a data file. " + "It checks every field twice. " * 45


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A sandbox whose project is a repository with skills of ours and of Claude Code."""
    sandbox = Sandbox.create(tmp_path)
    (sandbox.project / ".git").mkdir()
    write_skill(sandbox.project / ".agents" / "skills", "lint-rules", "Apply the lint rules.")
    claude = sandbox.project / ".claude" / "skills"
    write_skill(claude, "pdf-forms", LONG_DESCRIPTION)
    write_skill(claude, "explain-code", "Explain a piece of code line by line.")
    sandbox.write_skill("team-notes", "Write the team's weekly notes.")
    return sandbox


def cli_env(sandbox: Sandbox, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the agent gets from `Sandbox.env`, with a plain PATH and locale."""
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", **sandbox.env()}
    env.update(extra or {})
    return env


def cli(sandbox: Sandbox, *args: str, env: Mapping[str, str] | None = None) -> Result:
    """``acp-skills ARGS`` from the sandbox's root, with the agent's environment."""
    return run(*args, env=cli_env(sandbox, env), cwd=sandbox.root)


async def first_catalog(
    sandbox: Sandbox, args: list[str], env: Mapping[str, str]
) -> tuple[str, dict[str, Any], str]:
    """The agent's first catalog (``_skills/prefix``), its budget, and its `/skills` reply."""
    state = ["--state-dir", str(sandbox.state_dir)]
    with anyio.fail_after(TEST_SECONDS):
        async with demo_agent_peer(*state, *args, env=sandbox.env(env)) as agent:
            created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
            session_id = created.session_id
            await agent.conn.prompt(session_id=session_id, prompt=text_prompt("hello"))
            prefix = await agent.conn.ext_method("skills/prefix", {"sessionId": session_id})
            since = len(agent.client.session_updates(session_id))
            await agent.conn.prompt(session_id=session_id, prompt=text_prompt("/skills"))
            report = agent.client.agent_text(session_id, since)
    [message] = prefix["messages"]
    return message["text"], prefix["budget"], report


SAME_SETTINGS = [
    pytest.param(["--compat", "claude", "--examples"], {}, [], id="flags"),
    pytest.param(
        ["--examples"],
        {"ACP_SKILLS_COMPAT": "claude", "ACP_SKILLS_HIDE": "lint-rules"},
        [],
        id="variables",
    ),
    pytest.param(
        ["--compat", "claude", "--examples", "--pin", "explain-code"],
        {"ACP_SKILLS_CATALOG_BUDGET": "1400"},
        [],
        id="budget-from-env",
    ),
    pytest.param(["--compat", "claude", "--examples", "--catalog-budget", "none"], {}, ["none"]),
]


@pytest.mark.sdk
@pytest.mark.anyio
@pytest.mark.parametrize(("args", "env", "unlimited"), SAME_SETTINGS)
async def test_catalog_is_byte_identical_to_the_agent_s_first_catalog(
    sandbox: Sandbox, args: list[str], env: dict[str, str], unlimited: list[str]
) -> None:
    """Same directory, same flags or variables: `catalog` prints the agent's first catalog."""
    skills = ["--skills-dir", str(sandbox.skills_dir)]
    expected, budget, _ = await first_catalog(sandbox, [*skills, *args], env)
    cli_args = [a if a != "--catalog-budget" else "--budget" for a in args]
    result = cli(sandbox, "catalog", "--cwd", str(sandbox.project), *skills, *cli_args, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected + "\n"
    assert "`pdf-forms`" in expected  # Claude Code's skills are there, and the examples too
    assert "`code-review`" in expected
    catalog = json.loads(
        cli(
            sandbox, "catalog", "--cwd", str(sandbox.project), *skills, *cli_args, "--json", env=env
        ).stdout
    )
    assert catalog["text"] == expected
    assert catalog["budget"] == budget
    where = ["--cwd", str(sandbox.project), *skills, *cli_args, "--json"]
    report = json.loads(cli(sandbox, "doctor", *where, env=env).stdout)
    assert report["catalogCharacters"] == len(expected)
    assert {"source": "examples", "rank": 300} in [
        {"source": r["source"], "rank": r["rank"]} for r in report["roots"]
    ]
    assert (budget["limit"] is None) == bool(unlimited)


@pytest.mark.sdk
@pytest.mark.anyio
async def test_reports_say_how_many_descriptions_were_cut_and_where(sandbox: Sandbox) -> None:
    """A description over 1,024 characters is cut there, and `catalog` and `/skills` say so;
    the bundled examples are labelled as such in `/skills`."""
    args = ["--skills-dir", str(sandbox.skills_dir), "--compat", "claude", "--examples"]
    text, budget, report = await first_catalog(sandbox, args, {})
    [line] = [entry for entry in text.splitlines() if entry.startswith("- `pdf-forms`")]
    assert len(line) == len("- `pdf-forms`: ") + 1024
    assert budget["shortened"] == 0
    said = "1 description cut at 1,024 characters (the longest a catalog description may be)"
    assert said in report
    assert "every description in full" not in report
    [example] = [entry for entry in report.splitlines() if "`/code-review`" in entry]
    assert example.endswith("(examples)")
    assert "(custom)" in next(e for e in report.splitlines() if "`/team-notes`" in e)
    result = cli(sandbox, "catalog", "--cwd", str(sandbox.project), *args)
    assert said in result.stderr
    assert "every description in full" not in result.stderr
    listed = json.loads(cli(sandbox, "list", "--cwd", str(sandbox.project), *args, "--json").stdout)
    sources = {skill["name"]: skill["source"] for skill in listed["skills"]}
    assert (sources["code-review"], sources["team-notes"]) == ("examples", "custom")


def test_list_and_show_say_when_files_were_skipped(sandbox: Sandbox) -> None:
    """One stderr line pointing to `doctor`, from `list` and `show` alike."""
    broken = sandbox.skills_dir / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_text("---\nname: broken\ndescription: [unclosed\n---\nbody\n", encoding="utf-8")
    where = ["--cwd", str(sandbox.project), "--skills-dir", str(sandbox.skills_dir)]
    pointer = "warning: 1 skill file was skipped; `acp-skills doctor` says which and why.\n"
    listed = cli(sandbox, "list", *where)
    assert listed.returncode == 0
    assert pointer in listed.stderr
    assert "broken" not in listed.stdout
    assert pointer in cli(sandbox, "list", *where, "--json").stderr
    assert cli(sandbox, "show", "team-notes", *where).stderr == pointer
    missing = cli(sandbox, "show", "broken", *where)
    assert (missing.returncode, missing.stderr) == (1, pointer)


@pytest.mark.sdk
@pytest.mark.anyio
async def test_tilde_paths_from_args_and_env_without_a_shell(sandbox: Sandbox) -> None:
    """`~/...` in --state-dir, ACP_SKILLS_STATE_DIR, --skills-dir and ACP_SKILLS_DIRS (no shell
    to expand them): records land in the home, never in a `~` directory of the project."""
    mine = sandbox.home / "my-skills"
    write_skill(mine, "home-made", "A skill kept in the home directory.")
    for args, env, records in (
        (["--state-dir", "~/records-a", "--skills-dir", "~/my-skills"], {}, "records-a"),
        (
            [],
            {"ACP_SKILLS_STATE_DIR": "~/records-b", "ACP_SKILLS_DIRS": "~/my-skills"},
            "records-b",
        ),
    ):
        with anyio.fail_after(TEST_SECONDS):
            async with demo_agent_peer(*args, env=sandbox.env(env), cwd=sandbox.project) as agent:
                created = await agent.conn.new_session(cwd=str(sandbox.project), mcp_servers=[])
                session_id = created.session_id
                prompt = text_prompt("use home-made")
                await agent.conn.prompt(session_id=session_id, prompt=prompt)
                reply = agent.client.agent_text(session_id)
        assert "home-made" in reply
        assert list((sandbox.home / records / "sessions").glob("*.jsonl"))
        assert not (sandbox.project / "~").exists()
    for args, env in (
        (["--skills-dir", "~/my-skills", "--cwd", "~"], {}),
        ([], {"ACP_SKILLS_DIRS": "~/my-skills"}),
    ):
        listed = cli(sandbox, "list", "--json", *args, env=env)
        assert listed.returncode == 0, listed.stderr
        paths = [skill["path"] for skill in json.loads(listed.stdout)["skills"]]
        assert str(mine / "home-made" / "SKILL.md") in paths
    checked = cli(sandbox, "validate", "~/my-skills")
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stdout


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--state-dir", "records"], {}, "--state-dir"),
        ([], {"ACP_SKILLS_STATE_DIR": "records"}, "ACP_SKILLS_STATE_DIR"),
    ],
    ids=["flag", "variable"],
)
def test_a_relative_state_directory_is_refused_in_one_line(
    sandbox: Sandbox, args: list[str], env: dict[str, str], named: str
) -> None:
    """Records never land inside whatever directory the editor started the agent in."""
    result = run_agent(*args, env={**cli_env(sandbox), **env}, cwd=sandbox.project)
    assert result.returncode == 2
    assert result.stderr == (
        f"acp-skills-demo: {named} must be an absolute path (or start with ~), not 'records': "
        "a relative one would put conversation records inside the editor's working directory\n"
    )
    assert not (sandbox.project / "records").exists()


def test_a_bad_variable_names_itself_in_the_command_line_too(sandbox: Sandbox) -> None:
    """The CLI reads the agent's variables and reports a bad one as the agent does."""
    result = cli(sandbox, "catalog", env={"ACP_SKILLS_PIN": "Not-A-Name"})
    assert result.returncode == 2
    assert result.stderr == (
        "acp-skills: ACP_SKILLS_PIN: not a skill name: 'Not-A-Name' (lowercase letters and "
        "digits in hyphen-separated words)\n"
    )


def test_a_bad_trust_mode_is_one_line_from_both_command_lines(sandbox: Sandbox) -> None:
    """``ACP_SKILLS_TRUST`` that is no mode: the same line from the agent and the CLI, no
    traceback (the CLI once raised from inside a command)."""
    env = {**cli_env(sandbox), "ACP_SKILLS_TRUST": "maybe"}
    line = "ACP_SKILLS_TRUST: must be one of ask, all, none, not 'maybe'\n"
    assert (agent := run_agent(env=env)).returncode == 2
    assert agent.stderr == f"acp-skills-demo: {line}"
    listed = cli(sandbox, "list", env={"ACP_SKILLS_TRUST": "maybe"})
    assert (listed.returncode, listed.stderr) == (2, f"acp-skills: {line}")


def test_a_missing_openai_package_is_said_at_start_up_before_the_key(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model openai` without the package: one line with the install hint, before the key
    file is even read."""
    # `sys.modules["openai"] = None` is how Python spells "not installed" to `find_spec`.
    monkeypatch.setitem(sys.modules, "openai", None)
    args = ("--model", "openai", "--api-key-file", "~/no-such-key")
    result = run_agent(*args, env=cli_env(sandbox))
    assert result.returncode == 2
    said = "acp-skills-demo: the openai model needs the `openai` package: "
    assert re.fullmatch(re.escape(said) + install_hint("openai") + "\n", result.stderr)
