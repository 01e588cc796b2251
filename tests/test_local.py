"""LocalSkillProvider on real directories: roots, ranks, scanning order, warnings, re-reads."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from acp_skills import (
    DirectoryResource,
    LocalFileSystem,
    LocalSkillProvider,
    SkillCandidate,
    SkillLookupOptions,
    SkillProvider,
    SkillRegistry,
)
from acp_skills.errors import ReadError
from acp_skills.fs import DirEntry
from acp_skills.local import RootReport, SkillRoot
from tests.hypothesis_profiles import examples

pytestmark = pytest.mark.anyio

needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX symlinks")


def skill_text(
    name: str, *, description: str | None = None, body: str = "", extra: str = ""
) -> str:
    description = description or f"The {name} skill."
    return (
        f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body or f'Body of {name}.'}\n"
    )


def write_skill(path: Path, name: str, **fields: str) -> Path:
    """Write a skill file at ``path`` (a SKILL.md or a flat .md), creating directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(skill_text(name, **fields), encoding="utf-8")
    return path


@dataclass
class Layout:
    """A git project plus separate dsh and agents homes, all under one temporary directory."""

    base: Path
    project: Path
    dsh_home: Path
    agents_home: Path

    @property
    def project_dsh(self) -> Path:
        return self.project / ".dsh" / "skills"

    @property
    def project_agents(self) -> Path:
        return self.project / ".agents" / "skills"

    @property
    def user_dsh(self) -> Path:
        return self.dsh_home / "skills"

    @property
    def user_agents(self) -> Path:
        return self.agents_home / "skills"

    def provider(self, **options: Any) -> LocalSkillProvider:
        return LocalSkillProvider(
            dsh_home=str(self.dsh_home), agents_home=str(self.agents_home), **options
        )


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    return Layout(
        base=tmp_path,
        project=project,
        dsh_home=tmp_path / "home" / ".dsh",
        agents_home=tmp_path / "home" / ".agents",
    )


def at(cwd: Path | str | None) -> SkillLookupOptions:
    return SkillLookupOptions(cwd=None if cwd is None else str(cwd))


async def names(provider: LocalSkillProvider, cwd: Path | str | None) -> list[str]:
    return [candidate.name for candidate in await provider.list(at(cwd))]


def warnings_in(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [entry for entry in logs if entry["log_level"] == "warning"]


def assert_no_git_above(path: Path) -> None:
    """Tests about "no .git anywhere" rely on the temporary directory not being in a repo."""
    for directory in (path, *path.parents):
        if (directory / ".git").exists():
            pytest.skip(f"{directory} contains .git, so the test cannot set up 'no project'")


# --- construction ---------------------------------------------------------------------------


def test_provider_satisfies_the_protocol(layout: Layout) -> None:
    """LocalSkillProvider is a SkillProvider, named "local" unless told otherwise."""
    provider: SkillProvider = layout.provider()
    assert isinstance(provider, SkillProvider)
    assert provider.name == "local"
    assert layout.provider(name="disk").name == "disk"


@pytest.mark.parametrize(
    "value",
    [0, -1, True, 1.5, "10", None],
    ids=["zero", "negative", "bool", "float", "str", "none"],
)
def test_max_file_bytes_must_be_a_positive_integer(value: Any) -> None:
    """A non-positive or non-integer cap is refused at construction."""
    with pytest.raises(ValueError, match="max_file_bytes must be a positive integer"):
        LocalSkillProvider(max_file_bytes=value)


def test_custom_skill_dirs_must_not_be_a_single_path(tmp_path: Path) -> None:
    """A bare string would otherwise be read one character at a time."""
    with pytest.raises(TypeError, match="sequence of paths"):
        # A str is an iterable of str, so only a runtime check can catch this.
        LocalSkillProvider(custom_skill_dirs=str(tmp_path))


@pytest.mark.parametrize(
    "options",
    [{"dsh_home": ""}, {"agents_home": "  "}, {"custom_skill_dirs": [""]}],
    ids=["dsh-home", "agents-home", "custom-dir"],
)
def test_explicit_empty_strings_are_refused(options: dict[str, Any]) -> None:
    """An explicitly empty directory is a mistake, not "the current directory" (an empty name
    is refused where every provider's is, at registration: tests/test_registry.py)."""
    with pytest.raises(ValueError, match="empty"):
        LocalSkillProvider(**options)


@pytest.mark.parametrize(
    ("dsh_value", "agents_value"),
    [("", ""), ("   ", "\t"), (None, None)],
    ids=["empty", "whitespace", "unset"],
)
def test_homes_default_to_home_directory_when_variables_are_unset_or_blank(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dsh_value: str | None, agents_value: str | None
) -> None:
    """`~/.dsh` and `~/.agents` are used when the variables are missing or blank."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for variable, value in (("DSH_HOME", dsh_value), ("DSH_AGENTS_HOME", agents_value)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    provider = LocalSkillProvider()
    assert (provider.dsh_home, provider.agents_home) == (
        str(tmp_path / ".dsh"),
        str(tmp_path / ".agents"),
    )


async def test_homes_come_from_environment_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`$DSH_HOME` and `$DSH_AGENTS_HOME` locate the user roots."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    monkeypatch.setenv("DSH_AGENTS_HOME", str(tmp_path / "agents"))
    write_skill(tmp_path / "dsh" / "skills" / "one.md", "one")
    write_skill(tmp_path / "agents" / "skills" / "two" / "SKILL.md", "two")
    provider = LocalSkillProvider()
    candidates = await provider.list(at(None))
    assert [(c.name, c.source, c.rank) for c in candidates] == [
        ("one", "user-dsh", 400),
        ("two", "user-agents", 500),
    ]


def test_environment_paths_are_expanded_and_made_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`~` is expanded and relative paths are taken from the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_HOME", "~/custom-dsh")
    monkeypatch.setenv("DSH_AGENTS_HOME", "relative/agents")
    provider = LocalSkillProvider(custom_skill_dirs=["more-skills", "~/extra"])
    assert provider.dsh_home == str(tmp_path / "home" / "custom-dsh")
    assert provider.agents_home == str(tmp_path / "relative" / "agents")
    assert provider.custom_skill_dirs == (
        str(tmp_path / "more-skills"),
        str(tmp_path / "home" / "extra"),
    )


def test_environment_is_read_at_construction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Changing the variables later does not move an existing provider."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "before"))
    provider = LocalSkillProvider()
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "after"))
    assert provider.dsh_home == str(tmp_path / "before")


@needs_posix
def test_symlinked_home_is_not_resolved(tmp_path: Path) -> None:
    """Paths are made absolute, not canonical: a symlinked home keeps its own path."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert LocalSkillProvider(dsh_home=str(tmp_path / "link")).dsh_home == str(tmp_path / "link")


# --- roots, ranks and sources ---------------------------------------------------------------


async def test_every_root_has_its_rank_and_source(layout: Layout) -> None:
    """Five kinds of root, scanned in rank order, each candidate fully described."""
    custom_a, custom_b = layout.base / "custom-a", layout.base / "custom-b"
    files = [
        write_skill(layout.project_dsh / "p-dsh" / "SKILL.md", "p-dsh"),
        write_skill(layout.project_agents / "p-agents.md", "p-agents"),
        write_skill(custom_a / "c-a" / "SKILL.md", "c-a"),
        write_skill(custom_b / "c-b.md", "c-b"),
        write_skill(layout.user_dsh / "u-dsh" / "SKILL.md", "u-dsh"),
        write_skill(layout.user_agents / "u-agents.md", "u-agents"),
    ]
    provider = layout.provider(custom_skill_dirs=[custom_a, custom_b])

    candidates = await provider.list(at(layout.project))

    assert [(c.name, c.source, c.rank, c.path) for c in candidates] == [
        ("p-dsh", "project-dsh", 100, str(files[0])),
        ("p-agents", "project-agents", 200, str(files[1])),
        ("c-a", "custom", 300, str(files[2])),
        ("c-b", "custom", 300, str(files[3])),
        ("u-dsh", "user-dsh", 400, str(files[4])),
        ("u-agents", "user-agents", 500, str(files[5])),
    ]
    assert [c.resource_base for c in candidates] == [
        DirectoryResource(path=str(layout.project_dsh / "p-dsh")),
        DirectoryResource(path=str(layout.project_agents)),
        DirectoryResource(path=str(custom_a / "c-a")),
        DirectoryResource(path=str(custom_b)),
        DirectoryResource(path=str(layout.user_dsh / "u-dsh")),
        DirectoryResource(path=str(layout.user_agents)),
    ]
    assert {c.provider for c in candidates} == {"local"}


async def test_roots_lists_the_scanned_directories(layout: Layout) -> None:
    """`roots()` tells a watcher or a CLI exactly which directories are scanned."""
    custom = layout.base / "custom"
    provider = layout.provider(custom_skill_dirs=[custom])
    assert await provider.roots(at(layout.project / "src")) == (
        SkillRoot(path=str(layout.project_dsh), source="project-dsh", rank=100),
        SkillRoot(path=str(layout.project_agents), source="project-agents", rank=200),
        SkillRoot(path=str(custom), source="custom", rank=300),
        SkillRoot(path=str(layout.user_dsh), source="user-dsh", rank=400),
        SkillRoot(path=str(layout.user_agents), source="user-agents", rank=500),
    )


async def test_a_directory_reachable_as_two_roots_is_scanned_once_as_the_persons_own(
    layout: Layout,
) -> None:
    """When the project root is the agents home's parent ($HOME as a project, a dotfiles
    repository), its skills are listed once, from the user root: never gated by trust."""
    write_skill(layout.project_agents / "shared.md", "shared")
    provider = LocalSkillProvider(
        dsh_home=str(layout.dsh_home), agents_home=layout.project / ".agents"
    )
    candidates = await provider.list(at(layout.project))
    assert [(c.name, c.source, c.rank) for c in candidates] == [("shared", "user-agents", 500)]


async def test_missing_roots_are_empty_without_warnings(layout: Layout) -> None:
    """No directories at all means no skills and nothing logged above debug."""
    provider = layout.provider(custom_skill_dirs=[layout.base / "absent"])
    with capture_logs() as logs:
        assert await provider.list(at(layout.project)) == []
    assert warnings_in(logs) == []


async def test_a_root_that_is_a_file_counts_as_missing(layout: Layout) -> None:
    """A file where a root directory should be is treated like no root."""
    layout.user_dsh.parent.mkdir(parents=True)
    layout.user_dsh.write_text("not a directory")
    with capture_logs() as logs:
        assert await layout.provider().list(at(None)) == []
    assert warnings_in(logs) == []


# --- the project root -----------------------------------------------------------------------


async def test_project_root_is_the_nearest_ancestor_with_git(layout: Layout) -> None:
    """From a subdirectory, project skills come from the repository root."""
    write_skill(layout.project_dsh / "proj.md", "proj")
    deep = layout.project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert await names(layout.provider(), deep) == ["proj"]


async def test_nested_repository_wins_over_the_outer_one(layout: Layout) -> None:
    """The nearest `.git` decides, not the outermost."""
    write_skill(layout.project_dsh / "outer.md", "outer")
    inner = layout.project / "vendor" / "inner"
    (inner / ".git").mkdir(parents=True)
    write_skill(inner / ".dsh" / "skills" / "inner.md", "inner")
    assert await names(layout.provider(), inner / "src") == ["inner"]


async def test_git_file_marks_a_worktree_root(layout: Layout) -> None:
    """`.git` may be a file (a git worktree)."""
    worktree = layout.base / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: ../project/.git/worktrees/wt\n")
    write_skill(worktree / ".agents" / "skills" / "wt.md", "wt")
    (worktree / "sub").mkdir()
    assert await names(layout.provider(), worktree / "sub") == ["wt"]


async def test_without_git_anywhere_cwd_is_the_project_root(layout: Layout) -> None:
    """Outside a repository, the cwd itself is the project root (and not its parents)."""
    assert_no_git_above(layout.base)
    plain = layout.base / "plain"
    write_skill(plain / ".dsh" / "skills" / "here.md", "here")
    write_skill(plain / "sub" / ".dsh" / "skills" / "below.md", "below")
    provider = layout.provider()
    assert await names(provider, plain) == ["here"]
    assert await names(provider, plain / "sub") == ["below"]


async def test_without_cwd_there_are_no_project_roots(layout: Layout) -> None:
    """`cwd=None` lists only custom and user skills."""
    write_skill(layout.project_dsh / "proj.md", "proj")
    write_skill(layout.user_agents / "user.md", "user")
    provider = layout.provider()
    assert await names(provider, None) == ["user"]
    assert [root.source for root in await provider.roots(at(None))] == ["user-dsh", "user-agents"]


async def test_relative_cwd_is_made_absolute(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative cwd is taken from the process's working directory."""
    write_skill(layout.project_dsh / "proj.md", "proj")
    (layout.project / "src").mkdir()
    monkeypatch.chdir(layout.base)
    candidates = await layout.provider().list(at("project/src"))
    assert [(c.name, c.path) for c in candidates] == [("proj", str(layout.project_dsh / "proj.md"))]


# --- scanning a root ------------------------------------------------------------------------


async def test_entries_are_taken_in_code_point_order(layout: Layout) -> None:
    """Within a root, bundles and flat files interleave by name, code point by code point."""
    root = layout.user_dsh
    write_skill(root / "b.md", "from-b-flat")
    write_skill(root / "a" / "SKILL.md", "from-a-bundle")
    write_skill(root / "a.md", "from-a-flat")
    write_skill(root / "B.md", "from-upper-b")
    write_skill(root / "a-z" / "SKILL.md", "from-a-z-bundle")
    assert await names(layout.provider(), None) == [
        "from-upper-b",
        "from-a-bundle",
        "from-a-z-bundle",
        "from-a-flat",
        "from-b-flat",
    ]


async def test_bundle_comes_before_flat_file_of_the_same_name(layout: Layout) -> None:
    """`foo/` precedes `foo.md` in one root, so the bundle wins the registry's tie-break."""
    bundle = write_skill(layout.user_agents / "foo" / "SKILL.md", "foo", body="bundle body")
    flat = write_skill(layout.user_agents / "foo.md", "foo", body="flat body")
    candidates = await layout.provider().list(at(None))
    assert [c.path for c in candidates] == [str(bundle), str(flat)]

    registry = SkillRegistry()
    registry.register_provider(layout.provider(watch=False))
    definition = await registry.get("foo", at(None))
    assert definition is not None
    assert definition.content == "bundle body"


async def test_identity_comes_from_frontmatter_not_file_names(layout: Layout) -> None:
    """A file or directory name says nothing about the skill's name."""
    write_skill(layout.user_dsh / "Some Folder" / "SKILL.md", "real-name")
    write_skill(layout.user_dsh / "whatever.md", "other-name")
    assert await names(layout.provider(), None) == ["real-name", "other-name"]


async def test_non_markdown_entries_are_ignored_quietly(layout: Layout) -> None:
    """Only `*.md` files and directories are considered; nothing else is warned about."""
    root = layout.user_dsh
    write_skill(root / "kept.md", "kept")
    for name in ("notes.txt", "README", "skill.markdown", "UPPER.MD", "kept.md.bak"):
        (root / name).write_text(skill_text("ignored"))
    with capture_logs() as logs:
        assert await names(layout.provider(), None) == ["kept"]
    assert warnings_in(logs) == []


async def test_directory_without_skill_md_is_ignored_without_a_warning(layout: Layout) -> None:
    """A helper directory in a root is normal; it is only mentioned at debug level."""
    (layout.user_dsh / "shared-scripts").mkdir(parents=True)
    write_skill(layout.user_dsh / "shared-scripts" / "README.md", "not-a-bundle")
    with capture_logs() as logs:
        assert await names(layout.provider(), None) == []
    assert warnings_in(logs) == []
    absent = [entry for entry in logs if entry["event"] == "skill_file_absent"]
    assert [(entry["log_level"], entry["path"]) for entry in absent] == [
        ("debug", str(layout.user_dsh / "shared-scripts" / "SKILL.md"))
    ]


async def test_discovery_is_one_level_deep(layout: Layout) -> None:
    """Nested SKILL.md files below a bundle are not skills of their own."""
    write_skill(layout.user_dsh / "outer" / "SKILL.md", "outer")
    write_skill(layout.user_dsh / "outer" / "inner" / "SKILL.md", "inner")
    write_skill(layout.user_dsh / "group" / "nested" / "SKILL.md", "nested")
    assert await names(layout.provider(), None) == ["outer"]


@pytest.mark.parametrize(
    ("root_source", "discovered"),
    [
        ("project-dsh", True),
        ("project-agents", True),
        ("custom", True),
        ("user-dsh", False),
        ("user-agents", True),
    ],
    ids=["project-dsh", "project-agents", "custom", "user-dsh", "user-agents"],
)
async def test_system_directory_is_skipped_only_under_the_user_dsh_root(
    layout: Layout, root_source: str, discovered: bool
) -> None:
    """`.system` is reserved in `<dsh_home>/skills` and ordinary everywhere else."""
    custom = layout.base / "custom"
    root = {
        "project-dsh": layout.project_dsh,
        "project-agents": layout.project_agents,
        "custom": custom,
        "user-dsh": layout.user_dsh,
        "user-agents": layout.user_agents,
    }[root_source]
    write_skill(root / ".system" / "SKILL.md", "system-skill")
    write_skill(root / "regular.md", "regular")
    provider = layout.provider(custom_skill_dirs=[custom])
    expected = ["system-skill", "regular"] if discovered else ["regular"]
    assert await names(provider, layout.project) == expected


@needs_posix
async def test_symlinked_bundle_flat_file_and_root_are_followed(layout: Layout) -> None:
    """Links are followed, and paths keep the link's location (not the target's)."""
    elsewhere = layout.base / "elsewhere"
    write_skill(elsewhere / "real-bundle" / "SKILL.md", "linked-bundle")
    write_skill(elsewhere / "real-flat.md", "linked-flat")
    write_skill(elsewhere / "root" / "in-linked-root.md", "in-linked-root")
    layout.user_dsh.mkdir(parents=True)
    (layout.user_dsh / "bundle").symlink_to(elsewhere / "real-bundle")
    (layout.user_dsh / "flat.md").symlink_to(elsewhere / "real-flat.md")
    layout.agents_home.mkdir(parents=True)
    layout.user_agents.symlink_to(elsewhere / "root")

    candidates = await layout.provider().list(at(None))

    assert [(c.name, c.path, c.resource_base) for c in candidates] == [
        (
            "linked-bundle",
            str(layout.user_dsh / "bundle" / "SKILL.md"),
            DirectoryResource(path=str(layout.user_dsh / "bundle")),
        ),
        (
            "linked-flat",
            str(layout.user_dsh / "flat.md"),
            DirectoryResource(path=str(layout.user_dsh)),
        ),
        (
            "in-linked-root",
            str(layout.user_agents / "in-linked-root.md"),
            DirectoryResource(path=str(layout.user_agents)),
        ),
    ]


# --- warn and skip --------------------------------------------------------------------------

_FLAG_YES = b"---\nname: x\ndescription: y\ndisableModelInvocation: yes\n---\n"
_FLAG_ZERO = b"---\nname: x\ndescription: y\nuser-invocable: 0\n---\n"
_BAD_FILES = [
    ("no-frontmatter", b"# Just markdown\n", "missing frontmatter: the first line must be"),
    ("empty", b"", "missing frontmatter: the first line must be '---'"),
    ("unterminated", b"---\nname: x\ndescription: y\n", "unterminated frontmatter"),
    ("empty-frontmatter", b"---\n---\nbody\n", "missing frontmatter: the frontmatter block"),
    ("list", b"---\n- a\n---\n", "missing frontmatter: expected a mapping of fields, got a"),
    ("bad-yaml", b"---\nname: x\ndescription: [\n---\n", "invalid YAML: "),
    ("duplicate", b"---\nname: x\nname: y\n---\n", "invalid YAML: duplicate key 'name' (line 3, "),
    ("no-name", b"---\ndescription: y\n---\n", "missing required field 'name'"),
    ("bad-name", b"---\nname: A_B\ndescription: y\n---\n", "field 'name' is not a valid skill"),
    ("no-description", b"---\nname: x\n---\n", "missing required field 'description'"),
    ("blank-description", b"---\nname: x\ndescription: ''\n---\n", "field 'description' is"),
    ("bad-flag", _FLAG_YES, "field 'disableModelInvocation' must be true or false, got a str"),
    ("bad-user-flag", _FLAG_ZERO, "field 'user-invocable' must be true or false, got a number: 0"),
    ("latin-1", b"---\nname: caf\xe9\ndescription: y\n---\n", "not valid UTF-8 text (byte 13)"),
]


@pytest.mark.parametrize(
    ("stem", "content", "reason"), _BAD_FILES, ids=[stem for stem, _, _ in _BAD_FILES]
)
async def test_bad_file_is_skipped_with_a_warning_naming_path_and_reason(
    layout: Layout, stem: str, content: bytes, reason: str
) -> None:
    """One bad file is logged and left out; its neighbours are still discovered."""
    write_skill(layout.user_dsh / "good.md", "good")
    bad = layout.user_dsh / f"{stem}.md"
    bad.write_bytes(content)

    with capture_logs() as logs:
        assert await names(layout.provider(), None) == ["good"]

    [warning] = warnings_in(logs)
    assert warning["event"] == "skill_file_skipped"
    assert warning["path"] == str(bad)
    assert warning["provider"] == "local"
    assert warning["reason"].startswith(reason)


async def test_bad_skill_md_in_a_bundle_is_reported_by_its_own_path(layout: Layout) -> None:
    """The warning names the SKILL.md, not only its directory."""
    bad = layout.project_agents / "broken" / "SKILL.md"
    bad.parent.mkdir(parents=True)
    bad.write_text("no frontmatter here\n")
    with capture_logs() as logs:
        assert await names(layout.provider(), layout.project) == []
    assert [(w["event"], w["path"]) for w in warnings_in(logs)] == [
        ("skill_file_skipped", str(bad))
    ]


async def test_file_over_the_size_cap_is_skipped(layout: Layout) -> None:
    """A file larger than `max_file_bytes` is reported with its size and the cap."""
    big = write_skill(layout.user_dsh / "big.md", "big", body="x" * 500)
    small = write_skill(layout.user_dsh / "small.md", "small")
    assert small.stat().st_size <= 200 < big.stat().st_size
    with capture_logs() as logs:
        assert await names(layout.provider(max_file_bytes=200), None) == ["small"]
    [warning] = warnings_in(logs)
    assert (warning["event"], warning["path"]) == ("skill_file_skipped", str(big))
    assert warning["reason"] == f"file is {big.stat().st_size} bytes, over the 200-byte limit"


async def test_oversized_frontmatter_is_skipped_before_yaml_parses_it(layout: Layout) -> None:
    """900 KB of nested flow brackets is skipped as too large, not reported as bad YAML."""
    hostile = layout.user_dsh / "hostile.md"
    hostile.parent.mkdir(parents=True)
    frontmatter = "name: hostile\ndescription: " + "[" * 900_000 + "\n"
    hostile.write_text(f"---\n{frontmatter}---\nbody\n", encoding="utf-8")
    write_skill(layout.user_dsh / "good.md", "good")
    with capture_logs() as logs:
        assert await names(layout.provider(), None) == ["good"]
    [warning] = warnings_in(logs)
    assert (warning["event"], warning["path"]) == ("skill_file_skipped", str(hostile))
    assert warning["reason"] == (
        f"frontmatter too large: {len(frontmatter)} bytes, over the 65536-byte limit"
    )


@needs_posix
async def test_broken_symlink_is_skipped_with_a_warning(layout: Layout) -> None:
    """A dangling link in a root is reported and skipped."""
    write_skill(layout.user_dsh / "good.md", "good")
    (layout.user_dsh / "gone.md").symlink_to(layout.base / "nowhere.md")
    (layout.user_dsh / "gone-bundle").symlink_to(layout.base / "nowhere")
    with capture_logs() as logs:
        assert await names(layout.provider(), None) == ["good"]
    assert [(w["event"], w["path"], w["reason"]) for w in warnings_in(logs)] == [
        ("skill_file_skipped", str(layout.user_dsh / "gone-bundle"), "broken symbolic link"),
        ("skill_file_skipped", str(layout.user_dsh / "gone.md"), "broken symbolic link"),
    ]


@needs_posix
async def test_broken_skill_md_link_inside_a_bundle_is_a_warning(layout: Layout) -> None:
    """A bundle whose SKILL.md is a dangling link is not "a directory without SKILL.md"."""
    bundle = layout.user_dsh / "bundle"
    bundle.mkdir(parents=True)
    (bundle / "SKILL.md").symlink_to(layout.base / "nowhere.md")
    with capture_logs() as logs:
        assert await names(layout.provider(), None) == []
    assert [(w["path"], w["reason"]) for w in warnings_in(logs)] == [
        (str(bundle / "SKILL.md"), "broken symbolic link")
    ]


@needs_posix
async def test_unreadable_root_is_skipped_with_a_warning(layout: Layout) -> None:
    """A root that exists but cannot be listed is reported; other roots still count."""
    loop = layout.base / "loop"
    loop.symlink_to(loop)
    write_skill(layout.user_dsh / "good.md", "good")
    with capture_logs() as logs:
        assert await names(layout.provider(custom_skill_dirs=[loop]), None) == ["good"]
    [warning] = warnings_in(logs)
    assert (warning["event"], warning["path"]) == ("skill_file_skipped", str(loop))
    assert warning["reason"].startswith("cannot read directory: ")


async def test_mistyped_optional_field_is_dropped_with_a_warning(layout: Layout) -> None:
    """The skill stays; the author hears that the field was ignored."""
    path = write_skill(layout.user_dsh / "odd.md", "odd", extra="whenToUse: [a, b]\nmetadata: 3\n")
    with capture_logs() as logs:
        [candidate] = await layout.provider().list(at(None))
    assert (candidate.when_to_use, candidate.metadata) == (None, None)
    warnings = warnings_in(logs)
    assert {(w["event"], w["skill"], w["path"]) for w in warnings} == {
        ("skill_field_ignored", "odd", str(path))
    }
    assert [w["reason"] for w in warnings] == [
        "field 'whenToUse' ignored: expected a string, got a list",
        "field 'metadata' ignored: expected a mapping, got a number",
    ]


# --- discover and scan: what a report shows ---------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "dsh", tmp_path / "agents"


def provider_for(homes: tuple[Path, Path], *custom: Path) -> LocalSkillProvider:
    dsh, agents = homes
    return LocalSkillProvider(dsh_home=dsh, agents_home=agents, custom_skill_dirs=custom)


async def test_discover_reports_every_root_with_its_skills_and_every_problem(
    tmp_path: Path, homes: tuple[Path, Path]
) -> None:
    """Roots in rank order, whether they exist, how many skills; problems in scanning order."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    skills = project / ".agents" / "skills"
    write(skills / "good" / "SKILL.md", "---\nname: good\ndescription: d\n---\n")
    write(skills / "moved" / "SKILL.md", "---\nname: other\ndescription: d\n---\n")
    bad = write(skills / "bad" / "SKILL.md", "---\nname: bad\ndescription: [\n---\n")
    missing = tmp_path / "nowhere"
    provider = provider_for(homes, missing)
    discovery = await provider.discover(SkillLookupOptions(cwd=str(project)))
    assert [(r.root.source, r.exists, r.skills) for r in discovery.roots] == [
        ("project-dsh", False, 0),
        ("project-agents", True, 2),
        ("custom", False, 0),
        ("user-dsh", False, 0),
        ("user-agents", False, 0),
    ]
    assert isinstance(discovery.roots[0], RootReport)
    assert [c.name for c in discovery.candidates] == ["good", "other"]
    assert [(d.code, d.path) for d in discovery.diagnostics] == [
        ("root-missing", str(missing)),
        ("yaml-invalid", str(bad)),
        ("name-mismatch", str(skills / "moved" / "SKILL.md")),
    ]


async def test_a_missing_custom_directory_is_a_warning_at_start_up_only(
    tmp_path: Path, homes: tuple[Path, Path]
) -> None:
    """check_custom_dirs warns; discovery keeps the record but logs it at debug level."""
    missing = tmp_path / "typo"
    provider = provider_for(homes, missing)
    with capture_logs() as logs:
        [problem] = await provider.check_custom_dirs()
        await provider.list(SkillLookupOptions())
    assert (problem.code, problem.path) == ("root-missing", str(missing))
    assert [(e["event"], e["log_level"], e.get("path")) for e in logs] == [
        ("skill_root_missing", "warning", str(missing)),
        ("skill_root_missing", "debug", str(missing)),
        ("skills_discovered", "debug", None),
    ]


async def test_an_existing_custom_directory_checks_clean(
    tmp_path: Path, homes: tuple[Path, Path]
) -> None:
    """Nothing to say about a custom directory that is there (even if empty)."""
    (tmp_path / "skills").mkdir()
    assert await provider_for(homes, tmp_path / "skills").check_custom_dirs() == ()


async def test_scan_reads_any_roots_given(tmp_path: Path, homes: tuple[Path, Path]) -> None:
    """scan() takes roots directly (what `acp-skills validate` does with a directory)."""
    write(tmp_path / "a" / "x.md", "---\nname: x\ndescription: d\n---\n")
    root = SkillRoot(path=str(tmp_path / "a"), source="custom", rank=300)
    discovery = await provider_for(homes).scan([root])
    assert [c.name for c in discovery.candidates] == ["x"]
    assert discovery.roots == (RootReport(root=root, exists=True, skills=1),)


# --- candidate fields -----------------------------------------------------------------------


async def test_candidate_carries_every_optional_field(layout: Layout) -> None:
    """Flags, hint, guidance and metadata reach the candidate."""
    path = write_skill(
        layout.user_dsh / "full" / "SKILL.md",
        "full",
        extra=(
            "whenToUse: When forms need filling.\n"
            "disable-model-invocation: true\n"
            "userInvocable: false\n"
            "argument-hint: <file>\n"
            "metadata: {version: 1.2.0, tags: [pdf]}\n"
        ),
    )
    [candidate] = await layout.provider().list(at(None))
    assert candidate == SkillCandidate(
        name="full",
        description="The full skill.",
        when_to_use="When forms need filling.",
        disable_model_invocation=True,
        user_invocable=False,
        source="user-dsh",
        provider="local",
        resource_base=DirectoryResource(path=str(path.parent)),
        rank=400,
        locator=str(path),
        path=str(path),
        argument_hint="<file>",
    )
    assert candidate.metadata == {"version": "1.2.0", "tags": ("pdf",)}


# --- get ------------------------------------------------------------------------------------


async def test_get_returns_the_definition_with_the_body(layout: Layout) -> None:
    """The definition is the candidate plus the body as content."""
    path = write_skill(layout.project_dsh / "demo" / "SKILL.md", "demo", body="# Demo\n\nSteps.")
    provider = layout.provider()
    options = at(layout.project)
    [candidate] = await provider.list(options)
    definition = await provider.get(candidate, options)
    assert definition is not None
    assert (definition.name, definition.content, definition.path) == (
        "demo",
        "# Demo\n\nSteps.",
        str(path),
    )
    assert (definition.source, definition.provider, definition.resource_base) == (
        "project-dsh",
        "local",
        DirectoryResource(path=str(path.parent)),
    )


async def test_get_rereads_an_edited_file(layout: Layout) -> None:
    """Edits to the body (and description) show up without any invalidation."""
    path = write_skill(layout.user_dsh / "live.md", "live", body="old body")
    provider = layout.provider()
    [candidate] = await provider.list(at(None))
    path.write_text(skill_text("live", description="New description.", body="new body"))
    definition = await provider.get(candidate, at(None))
    assert definition is not None
    assert (definition.content, definition.description) == ("new body", "New description.")


async def test_get_of_a_vanished_file_is_none_and_logged(layout: Layout) -> None:
    """A file deleted after listing can no longer be loaded."""
    path = write_skill(layout.user_dsh / "gone.md", "gone")
    provider = layout.provider()
    [candidate] = await provider.list(at(None))
    path.unlink()
    with capture_logs() as logs:
        assert await provider.get(candidate, at(None)) is None
    [warning] = warnings_in(logs)
    assert (warning["event"], warning["skill"], warning["path"], warning["reason"]) == (
        "skill_load_failed",
        "gone",
        str(path),
        "file not found",
    )


async def test_get_of_a_file_that_no_longer_parses_is_none_and_logged(layout: Layout) -> None:
    """A file broken after listing gives None with the reason."""
    path = write_skill(layout.user_dsh / "fragile.md", "fragile")
    provider = layout.provider()
    [candidate] = await provider.list(at(None))
    path.write_text("---\nname: fragile\ndescription: x\ndisableModelInvocation: maybe\n---\n")
    with capture_logs() as logs:
        assert await provider.get(candidate, at(None)) is None
    [warning] = warnings_in(logs)
    assert warning["event"] == "skill_load_failed"
    assert (
        warning["reason"]
        == "field 'disableModelInvocation' must be true or false, got a string: 'maybe'"
    )


async def test_get_returns_the_current_name_even_if_it_changed(layout: Layout) -> None:
    """The registry detects renames, so `get` reports what the file says now."""
    path = write_skill(layout.user_dsh / "file.md", "before")
    provider = layout.provider()
    [candidate] = await provider.list(at(None))
    path.write_text(skill_text("after"))
    definition = await provider.get(candidate, at(None))
    assert definition is not None
    assert definition.name == "after"


# --- the filesystem seam --------------------------------------------------------------------


T = TypeVar("T")


class CountingFileSystem:
    """The local disk, counting how often each operation is used (a real seam, not a mock)."""

    def __init__(self) -> None:
        self.disk = LocalFileSystem()
        self.calls: Counter[str] = Counter()
        self.read_batches: list[int] = []

    async def exists(self, path: str) -> bool:
        self.calls["exists"] += 1
        return await self.disk.exists(path)

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        self.calls["list_dir"] += 1
        return await self.disk.list_dir(path)

    async def read_files(self, paths: Sequence[str], max_bytes: int) -> Sequence[bytes | ReadError]:
        self.calls["read_files"] += 1
        self.read_batches.append(len(paths))
        return await self.disk.read_files(paths, max_bytes)


async def test_discovery_leaves_process_wide_state_alone(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery never pauses, freezes or runs the garbage collector: that is the application's."""

    def refuse(*args: object) -> None:
        raise AssertionError("the library touched the garbage collector")

    for name in ("disable", "enable", "freeze", "collect"):
        monkeypatch.setattr(gc, name, refuse)
    for index in range(20):
        write_skill(layout.user_dsh / f"u{index}" / "SKILL.md", f"u{index}")
    registry = SkillRegistry()
    registry.register_provider(layout.provider(fs=CountingFileSystem()))
    assert len(await registry.list(at(layout.project))) == 20


async def test_discovery_costs_a_constant_number_of_filesystem_calls(layout: Layout) -> None:
    """Listing 60 skills takes one listing per root and a single read batch (the project is
    found on the local disk, not through the seam)."""
    for index in range(20):
        write_skill(layout.project_dsh / f"p{index}" / "SKILL.md", f"p{index}")
        write_skill(layout.user_dsh / f"u{index}.md", f"u{index}")
        write_skill(layout.user_agents / f"a{index}" / "SKILL.md", f"a{index}")
    fs = CountingFileSystem()
    provider = layout.provider(fs=fs)

    candidates = await provider.list(at(layout.project))

    assert len(candidates) == 60
    assert fs.calls == Counter(list_dir=4, read_files=1)
    assert fs.read_batches == [60]


async def test_the_registry_s_problems_are_those_of_the_discovery_its_snapshot_was_made_of(
    layout: Layout,
) -> None:
    """``/skills`` and ``doctor`` take the registry's snapshot, then its providers' problems:
    of the one discovery the snapshot was made of, not of another; after an invalidation
    (``_skills/reload``, without watching), of a new discovery, which sees what changed."""
    write_skill(layout.user_dsh / "good" / "SKILL.md", "good")
    (layout.user_dsh / "broken.md").write_text("no frontmatter\n")
    fs = CountingFileSystem()
    registry = SkillRegistry()
    registry.register_provider(layout.provider(fs=fs))
    options = at(layout.project)
    await registry.snapshot(options)
    assert [d.code for d in await registry.diagnose(options)] == ["frontmatter-missing"]
    assert fs.read_batches == [2]
    (layout.user_dsh / "broken.md").unlink()
    assert len(await registry.diagnose(options)) == 1  # what the snapshot still shows
    registry.invalidate()
    assert await registry.diagnose(options) == ()
    assert fs.read_batches == [2, 1]


class HeldFileSystem(CountingFileSystem):
    """The local disk; its first listing of ``held`` is made, then handed back only once
    ``release`` is set (a slow discovery, overtaken)."""

    def __init__(self, held: Path) -> None:
        super().__init__()
        self.held, self.listed, self.release = str(held), anyio.Event(), anyio.Event()

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        entries = await super().list_dir(path)
        if path == self.held and not self.listed.is_set():
            self.listed.set()
            await self.release.wait()
        return entries


async def test_a_discovery_overtaken_by_a_newer_one_is_not_the_one_kept(layout: Layout) -> None:
    """A discovery that read a root before an edit and ends after a newer one saw the edit
    (``/skills`` while the registry lists anew) does not replace it: the problems shown are
    the newer discovery's, not the older's until the next change."""
    write_skill(layout.user_dsh / "good" / "SKILL.md", "good")
    fs = HeldFileSystem(layout.user_dsh)
    provider = layout.provider(fs=fs)
    options = at(layout.project)
    async with anyio.create_task_group() as group:
        group.start_soon(provider.diagnose, options)  # reads the root, then waits
        await fs.listed.wait()
        (layout.user_dsh / "broken.md").write_text("no frontmatter\n")
        await provider.list(options)  # the registry's discovery after the edit
        fs.release.set()
    assert [d.code for d in await provider.diagnose(options)] == ["frontmatter-missing"]


async def test_the_local_disk_and_a_custom_filesystem_discover_alike(layout: Layout) -> None:
    """The local disk's reads in the parsing hop give what the seam's read batch gives: the same
    skills and problems, but for the local disk's look at a bundle without SKILL.md."""
    write_skill(layout.user_dsh / "good" / "SKILL.md", "good")
    write_skill(layout.user_dsh / "flat.md", "flat")
    (layout.user_dsh / "broken.md").write_text("no frontmatter\n")
    (layout.user_dsh / "README.md").write_text("# Skills\n")
    (layout.user_dsh / "gone.md").symlink_to(layout.base / "missing.md")
    (layout.user_dsh / "big.md").write_text("---\n" + "x" * 5000)
    write_skill(layout.user_dsh / "lower" / "skill.md", "lower")
    local = await layout.provider(max_file_bytes=4096).discover(at(layout.project))
    seam = await layout.provider(max_file_bytes=4096, fs=CountingFileSystem()).discover(
        at(layout.project)
    )
    assert [c.name for c in local.candidates] == ["flat", "good"]
    assert seam.candidates == local.candidates
    assert seam.roots == local.roots
    # Where the seam says only that a bundle has no SKILL.md, the local disk says why.
    told = {"skill-file-lowercase": "skill-file-absent"}
    assert [(told.get(d.code, d.code), d.path) for d in local.diagnostics] == [
        (d.code, d.path) for d in seam.diagnostics
    ]
    assert {d.code for d in local.diagnostics} >= {"skill-file-lowercase", "broken-link"}


async def test_a_custom_filesystem_reads_the_roots_of_the_project_on_the_local_disk(
    layout: Layout,
) -> None:
    """Trust judges the project found on the local disk, so the provider scans that project's
    roots, whatever a custom filesystem says about ``.git``."""

    class ClaimsEveryGit(CountingFileSystem):
        async def exists(self, path: str) -> bool:
            return os.path.basename(path) == ".git" or await super().exists(path)

    write_skill(layout.project_agents / "proj.md", "proj")
    sub = layout.project / "sub"
    write_skill(sub / ".agents" / "skills" / "sub.md", "sub")
    provider = layout.provider(fs=ClaimsEveryGit())
    assert await names(provider, sub) == ["proj"]


async def test_get_reads_through_the_seam(layout: Layout) -> None:
    """`get` uses the provider's filesystem too: one read, no listing."""
    write_skill(layout.user_dsh / "one.md", "one")
    fs = CountingFileSystem()
    provider = layout.provider(fs=fs)
    [candidate] = await provider.list(at(None))
    fs.calls.clear()
    assert await provider.get(candidate, at(None)) is not None
    assert fs.calls == Counter(read_files=1)


class FailingFileSystem(CountingFileSystem):
    """A seam whose listing fails with something other than OSError (a bug, not a bad disk)."""

    async def list_dir(self, path: str) -> Sequence[DirEntry] | None:
        raise RuntimeError(f"cannot list {path}")


async def test_a_broken_filesystem_error_propagates_as_itself(layout: Layout) -> None:
    """Not an OSError, so not a skipped file: the registry sees the seam's own exception."""
    custom = layout.base / "custom"
    provider = layout.provider(fs=FailingFileSystem(), custom_skill_dirs=[custom])
    with pytest.raises(RuntimeError) as raised:
        await provider.list(at(None))
    # Every root fails; the first root's failure is the one reported.
    assert str(raised.value) == f"cannot list {custom}"


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(lambda text: ("---\n" + text).encode("utf-8", "replace")),
    )
)
def test_arbitrary_file_contents_never_make_discovery_raise(data: bytes) -> None:
    """Whatever bytes a SKILL.md or flat file holds, `list` and `get` return normally."""
    with tempfile.TemporaryDirectory() as home:
        skills = Path(home) / "skills"
        (skills / "bundle").mkdir(parents=True)
        (skills / "bundle" / "SKILL.md").write_bytes(data)
        (skills / "flat.md").write_bytes(data)
        provider = LocalSkillProvider(dsh_home=home, agents_home=os.path.join(home, "agents"))

        async def discover_and_load() -> None:
            with capture_logs():
                candidates = await provider.list(at(None))
                assert len(candidates) in (0, 2)
                for candidate in candidates:
                    definition = await provider.get(candidate, at(None))
                    assert definition is not None
                    assert definition.name == candidate.name

        anyio.run(discover_and_load)
