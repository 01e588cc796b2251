"""``acp-skills trust`` and what the other commands say of trust, with the trust file in a
temporary directory, through `main(argv)` in this process (`tests/cli_runner.py`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from acp_skills.cli.main import main
from tests.cli_runner import cli_env, run


def test_trust_list_with_a_path_is_a_usage_error(tmp_path: Path) -> None:
    """``--list`` lists every decision: a PATH beside it is refused, not silently ignored."""
    env = cli_env(ACP_SKILLS_TRUST_FILE=str(tmp_path / "trust.json"))
    refused = run("trust", "--list", str(tmp_path), env=env)
    assert refused.returncode == 2
    assert "--list takes no PATH" in refused.stdout


def test_trust_refuse_forget_and_list(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    env = cli_env(ACP_SKILLS_TRUST_FILE=str(tmp_path / "cfg" / "trust.json"))
    key = str(project.resolve())
    trusted = run("trust", str(project / "sub"), env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout == f"trusted: {key}\n"
    listed = run("trust", "--list", "--json", env=env)
    assert json.loads(listed.stdout) == {"projects": [{"path": key, "decision": "trusted"}]}
    assert run("trust", "--refuse", str(project), env=env).returncode == 0
    listed = run("trust", "--list", "--json", env=env)
    assert json.loads(listed.stdout)["projects"][0]["decision"] == "refused"
    assert run("trust", "--forget", str(project), env=env).returncode == 0
    assert json.loads(run("trust", "--list", "--json", env=env).stdout) == {"projects": []}


def test_a_stored_key_cannot_style_or_hide_text_on_the_terminal(tmp_path: Path) -> None:
    """``trust --list`` spells out an escape a stored path holds (concealed text, say)
    instead of sending it to the terminal."""
    path = tmp_path / "trust.json"
    hidden = "/work/a\x1b[8mhidden\x1b[0m"
    path.write_text(json.dumps({"projects": [{"path": hidden, "decision": "trusted"}]}))
    listed = run("trust", "--list", env=cli_env(ACP_SKILLS_TRUST_FILE=str(path)))
    assert listed.returncode == 0
    assert "\x1b" not in listed.stdout
    assert listed.stdout == "trusted  /work/a\\x1b[8mhidden\\x1b[0m\n"


def test_server_decisions_are_listed_refused_and_forgotten_but_never_granted(
    tmp_path: Path,
) -> None:
    """A server is trusted only by answering its question (the answer stores its digests);
    the command line lists it, refuses it and forgets it by the key it lists."""
    path = tmp_path / "trust.json"
    resources = [{"uri": "skill://deploy/SKILL.md", "digest": "sha256:" + "0" * 64}]
    server = {"server": "team=uvx team-skills", "decision": "trusted", "resources": resources}
    path.write_text(json.dumps({"projects": [], "servers": [server]}))
    env = cli_env(ACP_SKILLS_TRUST_FILE=str(path))
    key = "mcp:team=uvx team-skills"
    listed = json.loads(run("trust", "--list", "--json", env=env).stdout)
    assert listed["servers"] == [{"server": key, "decision": "trusted", "resources": 1}]
    granted = run("trust", key, env=env)
    assert granted.returncode == 2
    assert "answering its question" in granted.stdout
    assert run("trust", "--refuse", key, env=env).returncode == 0
    assert json.loads(path.read_text())["servers"] == [
        {"server": "team=uvx team-skills", "decision": "refused"}
    ]
    forgotten = run("trust", "--forget", key, env=env)
    assert forgotten.stdout == f"forgotten: {key}\n"
    assert json.loads(path.read_text()) == {"projects": []}


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    env = cli_env(ACP_SKILLS_TRUST_FILE=str(tmp_path / "trust.json"))
    result = run("trust", str(tmp_path / "nope"), env=env)
    assert result.returncode == 2
    assert "not found" in result.stdout
    assert not (tmp_path / "trust.json").exists()


def waiting_project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository with one project skill, ``deploy``, and the CLI's environment in ``ask``
    mode with a trust file of its own (nothing decided yet)."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    skill = project / ".agents" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Deploy it.\n---\nBody\n")
    env = cli_env(
        ACP_SKILLS_TRUST="ask",
        ACP_SKILLS_TRUST_FILE=str(tmp_path / "trust.json"),
        DSH_HOME=str(tmp_path / "h1"),
        DSH_AGENTS_HOME=str(tmp_path / "h2"),
    )
    return project, env


def test_list_marks_a_project_skill_that_waits_for_trust(tmp_path: Path) -> None:
    project, env = waiting_project(tmp_path)
    listed = run("list", "--cwd", str(project), "--json", env=env)
    assert [s["trust"] for s in json.loads(listed.stdout)["skills"]] == ["pending"]
    assert "(waiting for trust)" in run("list", "--cwd", str(project), env=env).stdout
    assert run("trust", str(project), env=env).returncode == 0
    listed = run("list", "--cwd", str(project), "--json", env=env)
    assert [s["trust"] for s in json.loads(listed.stdout)["skills"]] == ["trusted"]
    refused = run("list", "--cwd", str(project), "--trust", "none", "--json", env=env)
    assert [s["trust"] for s in json.loads(refused.stdout)["skills"]] == ["refused"]


def test_show_catalog_and_doctor_mark_a_skill_that_waits_for_trust(tmp_path: Path) -> None:
    """They say which skills a session would not offer, in a session's words and with its
    one way to admit them, and the catalog leaves them out."""
    project, env = waiting_project(tmp_path)
    cwd = ["--cwd", str(project)]
    how = (
        "To admit it, start a new session and answer its question, or run "
        f"`acp-skills trust {project.resolve()}`."
    )
    shown = run("show", "deploy", *cwd, env=env)
    assert shown.stderr.splitlines()[-1] == (
        "warning: `deploy` comes from project `project`, which is waiting for trust: a session "
        f"does not offer it. {how}"
    )
    catalog = run("catalog", *cwd, env=env)
    assert "Deploy it." not in catalog.stdout
    assert catalog.stderr.splitlines()[-3:] == [
        "Waiting for trust (1)",
        "- `deploy` — Deploy it. (project `project`)",
        how,
    ]
    doctor = run("doctor", *cwd, env=env)
    assert "Waiting for trust (1)\n  - `deploy` — Deploy it. (project `project`)\n  " + how in (
        doctor.stdout
    )
    assert run("trust", str(project), env=env).returncode == 0
    assert "Deploy it." in run("catalog", *cwd, env=env).stdout
    assert "waiting for trust" not in run("show", "deploy", *cwd, env=env).stderr


@pytest.fixture
def in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str]]:
    """``acp-skills ARGS`` through `main(argv)`; its exit status and what it printed."""
    for name in ("ACP_SKILLS_DIRS", "NO_COLOR", "DSH_HOME", "DSH_AGENTS_HOME"):
        monkeypatch.delenv(name, raising=False)

    def run_main(*args: str, env: dict[str, str]) -> tuple[int, str]:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        status = main(list(args))
        return status, capsys.readouterr().out

    return run_main


def test_doctor_json_carries_each_skills_trust_state_like_list_json(
    tmp_path: Path, in_process: Callable[..., tuple[int, str]]
) -> None:
    """A skill that waits for trust is in ``doctor --json`` as it is in ``list --json``, with
    its state; so is a skill of the person's own, trusted."""
    project, env = waiting_project(tmp_path)
    env = {key: env[key] for key in ("ACP_SKILLS_TRUST", "ACP_SKILLS_TRUST_FILE")} | {
        "DSH_HOME": str(tmp_path / "h1"),
        "DSH_AGENTS_HOME": str(tmp_path / "h2"),
    }
    own = tmp_path / "h2" / "skills" / "notes"
    own.mkdir(parents=True)
    (own / "SKILL.md").write_text("---\nname: notes\ndescription: Take notes.\n---\nBody\n")
    _, listed = in_process("list", "--cwd", str(project), "--json", env=env)
    _, doctor = in_process("doctor", "--cwd", str(project), "--json", env=env)
    skills = json.loads(doctor)["skills"]
    assert skills == json.loads(listed)["skills"]
    assert [(s["name"], s["source"], s["trust"]) for s in skills] == [
        ("deploy", "project-agents", "pending"),
        ("notes", "user-agents", "trusted"),
    ]


def test_doctor_s_problems_name_the_shadowed_skills_its_json_lists_while_the_winner_waits(
    tmp_path: Path,
) -> None:
    """``doctor`` shows every skill found, the project's waiting ``deploy`` among them: the
    person's own ``deploy`` it shadows is a ``skill-shadowed`` problem, as ``shadowed`` says."""
    project, env = waiting_project(tmp_path)
    own = tmp_path / "h2" / "skills" / "deploy"
    own.mkdir(parents=True)
    (own / "SKILL.md").write_text("---\nname: deploy\ndescription: Mine.\n---\nBody\n")
    report = json.loads(run("doctor", "--cwd", str(project), "--json", env=env).stdout)
    assert [(s["name"], s["trust"]) for s in report["skills"]] == [("deploy", "pending")]
    assert [lost["loser"]["path"] for lost in report["shadowed"]] == [str(own / "SKILL.md")]
    shadowed = [p["path"] for p in report["problems"] if p["code"] == "skill-shadowed"]
    assert shadowed == [str(own / "SKILL.md")]
