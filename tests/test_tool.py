"""The skill tool: argument checks, loading, rendering and confined resource reads (contract §7)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from acp_skills import (
    LocalSkillProvider,
    SkillCandidate,
    SkillDefinition,
    SkillLookupOptions,
    SkillRegistry,
    SkillTool,
    ToolResult,
    UrlResource,
    render_skill_content,
)
from acp_skills.trust import Decision, ProjectSource, StoredTrust, view
from tests.events import Hang, cancelled_when
from tests.providers import (
    CWD,
    ListProvider,
    assert_matches_golden,
    candidate,
    definition_of,
    error,
    make_tool,
)

pytestmark = pytest.mark.anyio

# -- the tool's shape ------------------------------------------------------------------------


async def test_schema_golden() -> None:
    """The name, description and JSON Schema an agent advertises to its model."""
    tool = SkillTool(SkillRegistry())
    advertised = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    assert_matches_golden(
        "skill_tool_schema.json", json.dumps(advertised, indent=2, ensure_ascii=False) + "\n"
    )


async def test_schema_requires_a_string_name_and_allows_only_name_and_path() -> None:
    """name is a required string, path an optional string, nothing else is accepted."""
    parameters = SkillTool(SkillRegistry()).parameters
    assert parameters["type"] == "object"
    assert parameters["required"] == ["name"]
    assert parameters["additionalProperties"] is False
    assert {key: value["type"] for key, value in parameters["properties"].items()} == {
        "name": "string",
        "path": "string",
    }
    assert all(value["description"] for value in parameters["properties"].values())


async def test_each_tool_owns_its_schema() -> None:
    """Changing one tool's parameters dict does not change another tool's."""
    first, second = SkillTool(SkillRegistry()), SkillTool(SkillRegistry())
    first.parameters["properties"]["extra"] = {"type": "string"}
    assert "extra" not in second.parameters["properties"]


@pytest.mark.parametrize(
    "bound", [0, -1, True, 1.5, "1", None], ids=["zero", "negative", "bool", "float", "str", "none"]
)
async def test_invalid_resource_cap_is_rejected(bound: object) -> None:
    """max_resource_bytes must be a positive integer."""
    with pytest.raises(ValueError, match=r"^max_resource_bytes must be a positive integer, got "):
        SkillTool(SkillRegistry(), max_resource_bytes=bound)  # type: ignore[arg-type]


async def test_tool_result_is_frozen() -> None:
    """A ToolResult cannot be altered after the fact."""
    result = ToolResult(text="x", is_error=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "y"  # type: ignore[misc]


# -- argument checks -------------------------------------------------------------------------

NOT_VALID = (
    "is not valid: use the exact name from the skill catalog (lowercase letters and digits in "
    'hyphen-separated words, like "deploy-app")'
)
ONLY = 'the skill tool accepts only "name" and "path"'
NOT_AN_OBJECT = 'Error: the skill tool expects a JSON object with a string "name", got '
NO_NAME = (
    'Error: the skill tool needs a "name" argument: the exact name of a skill from the catalog'
)
NAME_TYPE = 'Error: argument "name" of the skill tool must be a string, got '
PATH_TYPE = 'Error: argument "path" of the skill tool must be a string, got '

ARGUMENT_ERRORS: list[tuple[str, object, str]] = [
    ("array", ["deploy"], NOT_AN_OBJECT + "an array"),
    ("string", "deploy", NOT_AN_OBJECT + "a string"),
    ("number", 3, NOT_AN_OBJECT + "a number"),
    ("boolean", True, NOT_AN_OBJECT + "a boolean"),
    ("null", None, NOT_AN_OBJECT + "null"),
    ("missing-name", {}, NO_NAME),
    ("path-without-name", {"path": "a.md"}, NO_NAME),
    ("name-number", {"name": 7}, NAME_TYPE + "a number"),
    ("name-null", {"name": None}, NO_NAME),
    ("name-array", {"name": ["deploy"]}, NAME_TYPE + "an array"),
    ("name-object", {"name": {"name": "deploy"}}, NAME_TYPE + "an object"),
    (
        "extra-argument",
        {"name": "deploy", "force": True},
        f'Error: unexpected argument "force"; {ONLY}',
    ),
    (
        "extra-arguments",
        {"name": "deploy", "b": 1, "a": 2},
        f'Error: unexpected arguments "b", "a"; {ONLY}',
    ),
    (
        "many-extra-arguments",
        {"name": "deploy", **{f"k{i}": i for i in range(7)}},
        f'Error: unexpected arguments "k0", "k1", "k2", "k3", "k4", ...; {ONLY}',
    ),
    ("path-number", {"name": "deploy", "path": 1}, PATH_TYPE + "a number"),
    ("path-array", {"name": "deploy", "path": ["a"]}, PATH_TYPE + "an array"),
    ("path-boolean", {"name": "deploy", "path": False}, PATH_TYPE + "a boolean"),
    ("invalid-name-uppercase", {"name": "Deploy"}, f'Error: skill name "Deploy" {NOT_VALID}'),
    ("invalid-name-empty", {"name": ""}, f'Error: skill name "" {NOT_VALID}'),
    ("invalid-name-newline", {"name": "deploy\n"}, f'Error: skill name "deploy\\n" {NOT_VALID}'),
    ("invalid-name-traversal", {"name": "../x"}, f'Error: skill name "../x" {NOT_VALID}'),
    ("invalid-name-double-hyphen", {"name": "a--b"}, f'Error: skill name "a--b" {NOT_VALID}'),
    (
        "invalid-name-huge",
        {"name": "X" * 100_000},
        f'Error: skill name "{"X" * 97}..." {NOT_VALID}',
    ),
]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [case[1:] for case in ARGUMENT_ERRORS],
    ids=[case[0] for case in ARGUMENT_ERRORS],
)
async def test_malformed_arguments_are_error_results(arguments: object, expected: str) -> None:
    """Wrong shapes and invalid names are answered without asking any provider."""
    tool, provider = make_tool(candidate("deploy", provider="p"))
    assert await tool.call(arguments, cwd=CWD) == error(expected)
    assert provider.list_calls == 0


async def test_null_path_means_no_path() -> None:
    """An explicit JSON null for the optional path loads the skill itself."""
    tool, _ = make_tool(candidate("deploy", provider="p"))
    result = await tool.call({"name": "deploy", "path": None}, cwd=CWD)
    assert result.is_error is False
    assert result.text.startswith('<skill_content name="deploy">')


# -- loading ---------------------------------------------------------------------------------


async def test_loads_and_renders_the_winning_skill_for_the_session_cwd() -> None:
    """Success is the rendered definition; both lookups use the session's cwd."""
    found = candidate("deploy", provider="p", resource_base=UrlResource(url="https://x.test/d"))
    tool, provider = make_tool(found)
    result = await tool.call({"name": "deploy"}, cwd=CWD)
    assert result == ToolResult(text=render_skill_content(definition_of(found)), is_error=False)
    assert [options.cwd for options in provider.seen_options] == [CWD, CWD]
    assert provider.get_calls == 1


async def test_unknown_skill() -> None:
    """A name no provider offers is unknown or no longer available."""
    tool, _ = make_tool(candidate("deploy", provider="p"))
    assert await tool.call({"name": "missing"}, cwd=CWD) == error(
        'Error: skill "missing" is unknown or no longer available'
    )


async def test_huge_valid_name_is_cut_in_the_error() -> None:
    """A grammatical but enormous name is echoed back shortened."""
    tool, _ = make_tool()
    assert await tool.call({"name": "a" * 50_000}, cwd=CWD) == error(
        f'Error: skill "{"a" * 97}..." is unknown or no longer available'
    )


@pytest.mark.parametrize("path", [None, "references/guide.md"], ids=["load", "read"])
async def test_skill_disabled_for_the_model_is_refused_without_loading(path: str | None) -> None:
    """disable_model_invocation is refused before the provider's get() runs."""
    hidden = candidate("secret", provider="p", disable_model_invocation=True)
    tool, provider = make_tool(hidden)
    arguments: dict[str, object] = {"name": "secret"}
    if path is not None:
        arguments["path"] = path
    assert await tool.call(arguments, cwd=CWD) == error(
        'Error: skill "secret" is not available for model invocation'
    )
    assert provider.get_calls == 0


async def test_flag_set_after_discovery_is_rechecked_on_the_loaded_definition() -> None:
    """A definition that became disabled since the catalog was built is refused."""
    found = candidate("deploy", provider="p")
    provider = ListProvider("p")
    provider.definition_override = definition_of(found, disable_model_invocation=True)
    tool, _ = make_tool(found, provider=provider)
    assert await tool.call({"name": "deploy"}, cwd=CWD) == error(
        'Error: skill "deploy" is not available for model invocation'
    )
    assert provider.get_calls == 1


class VanishingProvider(ListProvider):
    """Lists its skills but can no longer load them (the file was deleted in between)."""

    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        await super().get(candidate, options)
        return None


async def test_skill_that_vanished_after_discovery() -> None:
    """A provider get() returning None means unknown or no longer available."""
    provider = VanishingProvider("p")
    tool, _ = make_tool(candidate("deploy", provider="p"), provider=provider)
    assert await tool.call({"name": "deploy"}, cwd=CWD) == error(
        'Error: skill "deploy" is unknown or no longer available'
    )
    assert provider.get_calls == 1


async def test_skill_renamed_after_discovery() -> None:
    """A definition whose name changed since discovery is no longer available."""
    found = candidate("deploy", provider="p")
    provider = ListProvider("p")
    provider.definition_override = definition_of(found, name="ship")
    tool, _ = make_tool(found, provider=provider)
    assert await tool.call({"name": "deploy"}, cwd=CWD) == error(
        'Error: skill "deploy" is unknown or no longer available'
    )


class BrokenProvider(ListProvider):
    async def get(
        self, candidate: SkillCandidate, options: SkillLookupOptions
    ) -> SkillDefinition | None:
        raise OSError("disk on fire")


async def test_provider_exception_becomes_an_error_result() -> None:
    """A provider's get() raising is logged and reported, never raised."""
    tool, _ = make_tool(candidate("deploy", provider="p"), provider=BrokenProvider("p"))
    with capture_logs() as logs:
        result = await tool.call({"name": "deploy"}, cwd=CWD)
    assert result == error('Error: skill "deploy" could not be loaded: OSError: disk on fire')
    assert logs == [
        {
            "event": "skill_load_failed",
            "log_level": "warning",
            "skill": "deploy",
            "error": "OSError('disk on fire')",
        }
    ]


async def test_contract_error_from_get_becomes_an_error_result() -> None:
    """A malformed definition (SkillContractError) is reported like any provider failure."""
    found = candidate("deploy", provider="p")
    provider = ListProvider("p")
    provider.definition_override = definition_of(found, content=None)
    tool, _ = make_tool(found, provider=provider)
    assert await tool.call({"name": "deploy"}, cwd=CWD) == error(
        'Error: skill "deploy" could not be loaded: SkillContractError: skill provider "p" '
        'returned skill "deploy" with a non-string content None'
    )


async def test_contract_error_from_discovery_becomes_an_error_result() -> None:
    """A malformed candidate breaks the lookup; the tool still answers with an error."""
    tool, _ = make_tool(candidate("deploy", provider="p", source=None))
    assert await tool.call({"name": "deploy"}, cwd=CWD) == error(
        'Error: skill "deploy" could not be loaded: SkillContractError: skill provider "p" '
        'returned skill "deploy" with a non-string source None'
    )


@pytest.mark.parametrize("path", [None, "x.md"], ids=["load", "read"])
async def test_malformed_resource_base_is_an_error_result(path: str | None) -> None:
    """A malformed resource base is a provider contract violation, reported to the model."""
    malformed = "/skills/deploy"  # a path, not a `DirectoryResource`
    tool, _ = make_tool(candidate("deploy", provider="p", resource_base=malformed))
    arguments: dict[str, object] = {"name": "deploy", "path": path}
    assert await tool.call(arguments, cwd=CWD) == error(
        'Error: skill "deploy" could not be loaded: SkillContractError: skill provider "p" '
        "returned skill \"deploy\" with an invalid resource_base '/skills/deploy'"
    )


async def test_cancellation_propagates() -> None:
    """Cancelling the caller cancels the call; it is not turned into an error result."""

    hang = Hang()

    class HangingProvider(ListProvider):
        async def get(
            self, candidate: SkillCandidate, options: SkillLookupOptions
        ) -> SkillDefinition | None:
            await hang()

    tool, _ = make_tool(candidate("deploy", provider="p"), provider=HangingProvider("p"))
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await tool.call({"name": "deploy"}, cwd=CWD))

    assert await cancelled_when(hang.reached, call)
    assert results == []


@pytest.mark.parametrize(
    ("decisions", "why"),
    [({}, "is waiting for trust"), ({"/p": "refused"}, "is not trusted")],
    ids=["pending", "refused"],
)
async def test_a_skill_the_view_withholds_is_refused_by_name_with_why(
    decisions: dict[str, Decision], why: str
) -> None:
    """An agent calling the tool itself with a session's view: a withheld skill named exactly
    gets the trust error, never "unknown"; an offered one loads."""
    registry = SkillRegistry()
    skills = [candidate(name, provider="p") for name in ("review", "deploy")]
    registry.register_provider(ListProvider("p", skills))

    def source_of(skill: SkillCandidate) -> ProjectSource | None:
        return ProjectSource("/p") if skill.name == "review" else None

    found = await registry.snapshot(SkillLookupOptions(cwd=CWD))
    seen = view(found, source_of, StoredTrust(decisions), "ask")
    tool = SkillTool(registry)
    assert await tool.call({"name": "review"}, cwd=CWD, view=seen) == error(
        f'Error: skill "review" {why} in this project'
    )
    assert not (await tool.call({"name": "deploy"}, cwd=CWD, view=seen)).is_error


# -- text of a skill the model may not load never reaches it -------------------------------


def write_skill_file(path: Path, name: str, body: str, *, hidden: bool = False) -> Path:
    """Write a SKILL.md or flat .md with frontmatter; ``hidden`` sets disableModelInvocation."""
    flag = "disableModelInvocation: true\n" if hidden else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: The {name} skill\n{flag}---\n{body}\n")
    return path


def disk_tool(tmp_path: Path, *roots: Path) -> SkillTool:
    """A tool over a real LocalSkillProvider scanning ``roots`` (and no home directories),
    not watched (live reload has its own tests)."""
    registry = SkillRegistry()
    registry.register_provider(
        LocalSkillProvider(
            dsh_home=tmp_path / "no-dsh-home",
            agents_home=tmp_path / "no-agents-home",
            custom_skill_dirs=roots,
            watch=False,
        )
    )
    return SkillTool(registry)


def refused(name: str, path: str, reason: str) -> ToolResult:
    return error(f"Error: cannot read {json.dumps(path)} from skill {json.dumps(name)}: {reason}")


FLAT = (
    "it is a single-file skill, so it has no resource files of its own; its directory holds "
    "other skills"
)
HIDDEN = "it belongs to a skill that is not available for model invocation"


@pytest.fixture
def flat_root(tmp_path: Path) -> Path:
    """A skills root holding a flat skill next to hidden and visible skills of every shape."""
    root = tmp_path / "skills"
    write_skill_file(root / "notes.md", "notes", "notes body")
    write_skill_file(root / "other.md", "other", "other body")
    write_skill_file(root / "quiet.md", "quiet", "QUIET-BODY", hidden=True)
    write_skill_file(root / "secret" / "SKILL.md", "secret", "SECRET-BODY", hidden=True)
    (root / "secret" / "plan.md").write_text("SECRET-PLAN")
    return root


@pytest.mark.parametrize(
    "path",
    ["secret/SKILL.md", "secret/plan.md", "quiet.md", "other.md", "notes.md", "."],
    ids=["hidden-bundle", "hidden-resource", "hidden-flat", "visible-flat", "itself", "root"],
)
async def test_a_flat_skill_has_no_readable_resources(
    tmp_path: Path, flat_root: Path, path: str
) -> None:
    """Any path with a flat skill is refused: its directory is a root full of other skills."""
    tool = disk_tool(tmp_path, flat_root)
    assert await tool.call({"name": "notes", "path": path}, cwd=CWD) == refused("notes", path, FLAT)


async def test_a_flat_skill_is_not_told_to_read_files(tmp_path: Path, flat_root: Path) -> None:
    """The loaded flat skill names its base directory but offers no ``path`` reads."""
    result = await disk_tool(tmp_path, flat_root).call({"name": "notes"}, cwd=CWD)
    assert not result.is_error
    assert f"Base directory: {flat_root}\n" in result.text
    assert "`path`" not in result.text
    assert "Relative paths" not in result.text
    assert "Load a resource" not in result.text
    assert "no resource paths are offered" in result.text


@pytest.fixture
def nested_roots(tmp_path: Path) -> tuple[Path, Path]:
    """A visible bundle ``pub`` whose directory also holds a second skills root, ``pub/nested``,
    with a hidden bundle, a hidden flat skill and a visible flat skill; plus a link and a hard
    link inside ``pub`` to the hidden bundle."""
    outer = tmp_path / "outer"
    pub = outer / "pub"
    write_skill_file(pub / "SKILL.md", "pub", "pub body")
    nested = pub / "nested"
    write_skill_file(nested / "secret" / "SKILL.md", "secret", "SECRET-BODY", hidden=True)
    (nested / "secret" / "plan.md").write_text("SECRET-PLAN")
    write_skill_file(nested / "quiet.md", "quiet", "QUIET-BODY", hidden=True)
    write_skill_file(nested / "loud.md", "loud", "LOUD-BODY")
    (pub / "alias").symlink_to(nested / "secret", target_is_directory=True)
    os.link(nested / "secret" / "SKILL.md", pub / "copy.md")
    return outer, nested


@pytest.mark.parametrize(
    "path",
    [
        "nested/secret/SKILL.md",
        "nested/secret/plan.md",
        "nested/quiet.md",
        "alias/SKILL.md",
        "alias/plan.md",
        "copy.md",
    ],
    ids=["skill-file", "resource", "flat-file", "symlink", "symlink-resource", "hard-link"],
)
async def test_a_bundle_never_serves_a_hidden_skill_inside_it(
    tmp_path: Path, nested_roots: tuple[Path, Path], path: str
) -> None:
    """Whatever name reaches them, a hidden skill's file and bundle are refused by identity."""
    tool = disk_tool(tmp_path, *nested_roots)
    assert await tool.call({"name": "pub", "path": path}, cwd=CWD) == refused("pub", path, HIDDEN)


async def test_a_bundle_still_serves_its_own_and_model_visible_files(
    tmp_path: Path, nested_roots: tuple[Path, Path]
) -> None:
    """Only hidden skills are guarded: a visible skill's text may be read (it may be loaded)."""
    tool = disk_tool(tmp_path, *nested_roots)
    own = await tool.call({"name": "pub", "path": "SKILL.md"}, cwd=CWD)
    assert (own.is_error, "pub body" in own.text) == (False, True)
    loud = await tool.call({"name": "pub", "path": "nested/loud.md"}, cwd=CWD)
    assert (loud.is_error, "LOUD-BODY" in loud.text) == (False, True)


async def test_a_hidden_bundle_linked_from_a_root_is_guarded_where_it_really_lives(
    tmp_path: Path,
) -> None:
    """A hidden skill found through a symlinked directory is refused under its real path too."""
    root = tmp_path / "skills"
    write_skill_file(root / "pub" / "SKILL.md", "pub", "pub body")
    write_skill_file(root / "pub" / "vault" / "SKILL.md", "vault", "VAULT-BODY", hidden=True)
    (root / "vault").symlink_to(root / "pub" / "vault", target_is_directory=True)
    tool = disk_tool(tmp_path, root)
    result = await tool.call({"name": "pub", "path": "vault/SKILL.md"}, cwd=CWD)
    assert result == refused("pub", "vault/SKILL.md", HIDDEN)


async def test_a_person_invoked_hidden_skill_offers_no_file_reads(tmp_path: Path) -> None:
    """``/name`` may load a hidden skill, but its text does not invite the model to read files."""
    root = tmp_path / "skills"
    write_skill_file(root / "secret" / "SKILL.md", "secret", "SECRET-BODY", hidden=True)
    (root / "secret" / "plan.md").write_text("SECRET-PLAN")
    tool = disk_tool(tmp_path, root)
    invoked = await tool.invoke_for_user("secret", SkillLookupOptions(cwd=CWD))
    assert (invoked.is_error, "SECRET-BODY" in invoked.text) == (False, True)
    assert "`path`" not in invoked.text
    assert await tool.call({"name": "secret", "path": "plan.md"}, cwd=CWD) == error(
        'Error: skill "secret" is not available for model invocation'
    )


# -- what error texts echo -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("de\u202eploy", "de\\u202eploy"),
        ("a\u2066b", "a\\u2066b"),
        ("bell\x07", "bell\\u0007"),
        ("del\x7f", "del\\u007f"),
        ("c1\x9b", "c1\\u009b"),
        ("lone\ud800", "lone\\ud800"),
    ],
    ids=["bidi-override", "bidi-isolate", "c0", "del", "c1", "lone-surrogate"],
)
async def test_error_texts_escape_control_characters_of_the_model(name: str, shown: str) -> None:
    """A model's odd name is quoted back with its control characters spelled as escapes."""
    tool, _ = make_tool()
    result = await tool.call({"name": name}, cwd=CWD)
    assert result == error(f'Error: skill name "{shown}" {NOT_VALID}')
    result.text.encode("utf-8")  # well-formed: it can go into a frame


# -- search: a session whose catalog left skills out (contract §12) --------------------------

SEARCH_SKILLS = (
    candidate("deploy-app", provider="p", description="Ship the service to production."),
    candidate("review-code", provider="p", description="Review a diff for bugs & style."),
    candidate("write-tests", provider="p", description="Write unit tests for a module."),
    candidate("rotate-keys", provider="p", description="Rotate leaked API keys."),
    candidate(
        "internal-deploy",
        provider="p",
        description="Deploy the internal service to production.",
        disable_model_invocation=True,
    ),
)
MATCHES_HEADER = (
    "Skills matching the query, best first. Load one by calling the `skill` tool with its "
    "exact name:"
)


async def test_search_schema_golden() -> None:
    """The schema of a session whose catalog omits skills: name or query, path with name."""
    tool = SkillTool(SkillRegistry())
    advertised = {
        "name": tool.name,
        "description": tool.description_for(searchable=True),
        "parameters": tool.parameters_for(searchable=True),
    }
    assert_matches_golden(
        "skill_tool_schema_search.json",
        json.dumps(advertised, indent=2, ensure_ascii=False) + "\n",
    )
    parameters = advertised["parameters"]
    assert isinstance(parameters, dict)
    assert "required" not in parameters
    assert set(parameters["properties"]) == {"name", "path", "query"}


async def test_plain_schema_is_unchanged_for_sessions_that_list_everything() -> None:
    """Without omission the tool keeps its plain schema and description."""
    tool = SkillTool(SkillRegistry())
    assert tool.parameters_for(searchable=False) == tool.parameters
    assert tool.description_for(searchable=False) == tool.description
    assert "query" not in tool.parameters["properties"]


async def test_query_returns_name_and_description_lines() -> None:
    """A query answers with the best matches as "name: description" lines."""
    tool, _ = make_tool(*SEARCH_SKILLS)
    result = await tool.call({"query": "review my diff"}, cwd=CWD, searchable=True)
    assert result == ToolResult(
        text=f"{MATCHES_HEADER}\nreview-code: Review a diff for bugs &amp; style.",
        is_error=False,
    )


async def test_query_never_finds_skills_hidden_from_the_model_or_by_a_person() -> None:
    """disable_model_invocation skills and hidden_skills are never search results."""
    tool, _ = make_tool(*SEARCH_SKILLS, hidden_skills=["deploy-app"])
    result = await tool.call({"query": "deploy service production"}, cwd=CWD, searchable=True)
    assert result.is_error is False
    assert result.text.startswith("No skill matches the query.")
    # A hidden skill still loads by its exact name.
    loaded = await tool.call({"name": "deploy-app"}, cwd=CWD, searchable=True)
    assert loaded.is_error is False
    assert '<skill_content name="deploy-app">' in loaded.text


async def test_query_sees_the_registry_as_it_is_now() -> None:
    """A skill added after a search is found by the next one (the index follows revisions)."""
    tool, provider = make_tool(*SEARCH_SKILLS)
    before = await tool.call({"query": "translate documentation"}, cwd=CWD, searchable=True)
    provider.candidates.append(
        candidate("translate-docs", provider="p", description="Translate documentation.")
    )
    assert provider.handle is not None
    provider.handle.invalidate()
    after = await tool.call({"query": "translate documentation"}, cwd=CWD, searchable=True)
    assert before.text.startswith("No skill matches")
    assert after.text == f"{MATCHES_HEADER}\ntranslate-docs: Translate documentation."


async def test_queries_over_one_snapshot_share_an_index_and_answer_as_a_fresh_one(
    threads_started: Callable[[], int],
) -> None:
    """The index is built once per snapshot, on a worker thread (docs/architecture.md, the
    query figure): the first query over a snapshot takes a thread and the next ones none; a
    query through the kept index answers exactly as one through a newly built index."""
    tool, _ = make_tool(*SEARCH_SKILLS)
    queries = ["review my diff", "deploy service production", "review my diff"]
    kept, threads_each = [], []
    for query in queries:
        before = threads_started()
        kept.append(await tool.call({"query": query}, cwd=CWD, searchable=True))
        threads_each.append(threads_started() - before)
    assert threads_each == [1, 0, 0]
    for query, answer in zip(queries, kept, strict=True):
        fresh, _ = make_tool(*SEARCH_SKILLS)
        assert await fresh.call({"query": query}, cwd=CWD, searchable=True) == answer


async def test_query_over_no_skills_finds_nothing() -> None:
    """An empty registry (or one whose only provider failed) answers "no match"."""

    async def fail() -> None:
        raise RuntimeError("remote catalog is down")

    registry = SkillRegistry()
    registry.register_provider(ListProvider("p", before_list=fail))
    result = await SkillTool(registry).call({"query": "deploy"}, cwd=CWD, searchable=True)
    assert result == ToolResult(
        text="No skill matches the query. Try other words for the task (what it works on, the "
        "tool or kind of file involved), or load a skill from the catalog by its exact name.",
        is_error=False,
    )


async def test_query_when_the_registry_fails_is_an_error_result() -> None:
    """A provider breaking its contract during a search gives an Error: result."""
    tool, _ = make_tool(candidate("a", provider="someone-else"))
    result = await tool.call({"query": "deploy"}, cwd=CWD, searchable=True)
    assert result.is_error
    assert result.text.startswith(
        'Error: the skill search failed: SkillContractError: skill provider "p" returned'
    )


SEARCH_REFUSALS: list[tuple[str, object, str]] = [
    (
        "neither",
        {},
        'Error: the skill tool needs either "name" (the exact name of a skill to load) or '
        '"query" (a few words describing the task, to search for skills), not both',
    ),
    (
        "both-null",
        {"name": None, "query": None},
        'Error: the skill tool needs either "name" (the exact name of a skill to load) or '
        '"query" (a few words describing the task, to search for skills), not both',
    ),
    (
        "both",
        {"name": "deploy-app", "query": "deploy"},
        'Error: the skill tool needs either "name" (the exact name of a skill to load) or '
        '"query" (a few words describing the task, to search for skills), not both',
    ),
    (
        "query-not-a-string",
        {"query": ["deploy"]},
        'Error: argument "query" of the skill tool must be a string, got an array',
    ),
    (
        "empty-query",
        {"query": "  \n "},
        'Error: argument "query" of the skill tool must describe the task in a few words (at '
        "most 1000 characters)",
    ),
    (
        "long-query",
        {"query": "deploy " * 200},
        'Error: argument "query" of the skill tool must describe the task in a few words (at '
        "most 1000 characters)",
    ),
    (
        "path-with-query",
        {"query": "deploy", "path": "a.md"},
        'Error: argument "path" of the skill tool goes with "name" only',
    ),
    (
        "unknown-argument",
        {"query": "deploy", "limit": 3},
        'Error: unexpected argument "limit"; the skill tool accepts only "name", "path" and '
        '"query"',
    ),
    (
        "not-an-object",
        "deploy",
        'Error: the skill tool expects a JSON object with either a string "name" or a string '
        '"query", got a string',
    ),
]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [case[1:] for case in SEARCH_REFUSALS],
    ids=[case[0] for case in SEARCH_REFUSALS],
)
async def test_search_arguments_need_exactly_one_of_name_and_query(
    arguments: object, expected: str
) -> None:
    """With search enabled, exactly one of name and query, each well formed, else Error:."""
    tool, provider = make_tool(*SEARCH_SKILLS)
    assert await tool.call(arguments, cwd=CWD, searchable=True) == error(expected)
    assert provider.get_calls == 0


async def test_name_with_a_null_query_loads_the_skill() -> None:
    """ "query": null counts as not given: the name loads as usual."""
    tool, _ = make_tool(*SEARCH_SKILLS)
    result = await tool.call({"name": "write-tests", "query": None}, cwd=CWD, searchable=True)
    assert result.is_error is False
    assert "body of write-tests" in result.text


async def test_query_is_refused_where_the_catalog_lists_everything() -> None:
    """Without search, "query" is an unexpected argument, like any other."""
    tool, _ = make_tool(*SEARCH_SKILLS)
    result = await tool.call({"name": "deploy-app", "query": "x"}, cwd=CWD)
    assert result == error(f'Error: unexpected argument "query"; {ONLY}')
    assert await tool.call({"query": "deploy"}, cwd=CWD) == error(
        f'Error: unexpected argument "query"; {ONLY}'
    )


@pytest.mark.parametrize("searchable", [False, True], ids=["without-query", "with-query"])
async def test_the_checker_accepts_exactly_the_schema_of_its_session(searchable: bool) -> None:
    """One argument table: every property of the session's schema is accepted, a key outside
    it is refused naming exactly those properties, and a non-string value is refused."""
    tool, _ = make_tool(*SEARCH_SKILLS)
    properties = sorted(tool.parameters_for(searchable=searchable)["properties"])
    names = " and ".join(", ".join(f'"{key}"' for key in properties).rsplit(", ", 1))
    refused = await tool.call({"name": "deploy-app", "bogus": 1}, cwd=CWD, searchable=searchable)
    assert refused.is_error
    assert refused.text.endswith(f"the skill tool accepts only {names}")
    for key in properties:
        arguments = {key: 7} if key != "path" else {"name": "deploy-app", "path": 7}
        typed = await tool.call(arguments, cwd=CWD, searchable=searchable)
        assert typed.is_error
        assert f'argument "{key}"' in typed.text
        assert "must be a string, got a number" in typed.text
