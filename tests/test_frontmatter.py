"""The skill-file parser: frontmatter delimiting, YAML 1.2 core-schema values, fields, body."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_skills.errors import Problem
from acp_skills.frontmatter import (
    _CLOSING_LINE,
    MAX_FRONTMATTER_BYTES,
    ParsedSkill,
    parse_skill_bytes,
    parse_skill_file,
)
from tests.hypothesis_profiles import examples
from tests.strategies import SKILL_NAMES

MINIMAL = "name: demo\ndescription: Does demo things.\n"


def skill(frontmatter: str, body: str = "Body.\n") -> str:
    """A skill file with the given frontmatter lines between the delimiters."""
    return f"---\n{frontmatter}---\n{body}"


def parsed(text: str) -> ParsedSkill:
    result = parse_skill_file(text)
    assert isinstance(result, ParsedSkill), result
    return result


def problem(text: str) -> str:
    result = parse_skill_file(text)
    assert isinstance(result, Problem), result
    return result.message


def metadata_value(yaml_value: str) -> object:
    """The Python value a YAML scalar (or flow collection) becomes inside ``metadata``."""
    result = parsed(skill(MINIMAL + f"metadata:\n  value: {yaml_value}\n"))
    assert result.metadata is not None
    return result.metadata["value"]


# --- delimiting -----------------------------------------------------------------------------


def test_minimal_skill_file_gives_its_fields_and_body() -> None:
    """A well-formed file yields name, description, defaults and the stripped body."""
    result = parsed(skill(MINIMAL, "\n\n# Demo\n\nDo the thing.\n\n"))
    assert result == ParsedSkill(
        name="demo",
        description="Does demo things.",
        when_to_use=None,
        disable_model_invocation=False,
        user_invocable=True,
        argument_hint=None,
        metadata=None,
        body="# Demo\n\nDo the thing.",
        notes=(),
    )


def test_leading_byte_order_mark_is_ignored() -> None:
    """A UTF-8 BOM before the opening delimiter does not hide the frontmatter."""
    assert parsed("\ufeff" + skill(MINIMAL)).name == "demo"


def test_crlf_line_endings_work() -> None:
    """Windows line endings are accepted on the delimiters and inside the YAML."""
    text = "---\r\nname: demo\r\ndescription: Does demo things.\r\n---\r\n\r\nLine one\r\nTwo\r\n"
    result = parsed(text)
    assert (result.name, result.description) == ("demo", "Does demo things.")
    assert result.body == "Line one\r\nTwo"


@pytest.mark.parametrize(
    ("frontmatter", "expected_description"),
    [
        ('description: "a --- b"\n', "a --- b"),
        ("description: ---\n", "---"),
        ('description: "first\n  ---\n  second"\n', "first --- second"),
        ("description: |\n  ---\n  ----\n", "---\n----\n"),
        ("description: '---'\n", "---"),
    ],
    ids=["inline-quoted", "plain", "multiline-quoted", "block-scalar", "single-quoted"],
)
def test_dashes_inside_yaml_values_are_not_delimiters(
    frontmatter: str, expected_description: str
) -> None:
    """Only a whole line that is exactly `---` closes the frontmatter."""
    result = parsed(skill("name: demo\n" + frontmatter, "Body"))
    assert result.description == expected_description
    assert result.body == "Body"


@pytest.mark.parametrize(
    "closing",
    ["----", "--- ", " ---", "---x", "--- # comment"],
    ids=["four-dashes", "trailing-space", "leading-space", "trailing-text", "trailing-comment"],
)
def test_near_miss_closing_lines_leave_the_frontmatter_unterminated(closing: str) -> None:
    """`----`, `--- ` and friends are not delimiters."""
    assert problem(f"---\n{MINIMAL}{closing}\nBody\n") == (
        "unterminated frontmatter: no closing '---' line"
    )


def test_four_dashes_do_not_close_and_a_later_delimiter_does() -> None:
    """A `----` line inside a block scalar is content; the later `---` line closes."""
    result = parsed("---\nname: demo\ndescription: |\n  x\n  ----\n---\nBody")
    assert result.description == "x\n----\n"
    assert result.body == "Body"


@pytest.mark.parametrize(
    "text",
    ["---\nname: demo\ndescription: x\n", "---", "---\n", "---\r\n", "---\nname: demo"],
    ids=["no-closing-line", "only-opening", "opening-newline", "opening-crlf", "no-newline"],
)
def test_unterminated_frontmatter_is_a_problem(text: str) -> None:
    """Without a closing `---` line there is no frontmatter."""
    assert problem(text) == "unterminated frontmatter: no closing '---' line"


@pytest.mark.parametrize(
    "text",
    ["", "# Just markdown\n", "name: demo\n---\n", " ---\nname: demo\n---\n", "----\n---\n"],
    ids=["empty-file", "markdown-only", "no-opening", "indented-opening", "four-dash-opening"],
)
def test_file_without_an_opening_delimiter_is_missing_frontmatter(text: str) -> None:
    """The first line must be exactly `---`."""
    assert problem(text) == "missing frontmatter: the first line must be '---'"


def frontmatter_of_size(size: int) -> str:
    """Valid frontmatter (closing newline included) of exactly ``size`` UTF-8 bytes."""
    start = "name: demo\ndescription: x\n# "
    # "é" is two bytes: the limit counts bytes, not characters.
    padding = "é" * ((size - len(start) - 1) // 2)
    text = start + padding + "a" * ((size - len(start) - 1) % 2) + "\n"
    assert len(text.encode("utf-8")) == size
    return text


def test_frontmatter_at_the_size_limit_is_parsed() -> None:
    """Frontmatter of exactly `MAX_FRONTMATTER_BYTES` UTF-8 bytes is read as usual."""
    parsed = parse_skill_file(f"---\n{frontmatter_of_size(MAX_FRONTMATTER_BYTES)}---\nBody\n")
    assert isinstance(parsed, ParsedSkill), parsed
    assert (parsed.name, parsed.body) == ("demo", "Body")


def test_frontmatter_over_the_size_limit_is_a_problem() -> None:
    """One byte more is refused with the size and the limit, before YAML reads it."""
    size = MAX_FRONTMATTER_BYTES + 1
    assert problem(f"---\n{frontmatter_of_size(size)}---\n") == (
        f"frontmatter too large: {size} bytes, over the {MAX_FRONTMATTER_BYTES}-byte limit"
    )


def test_deeply_nested_flow_frontmatter_is_refused_as_too_large() -> None:
    """900 KB of ``[`` is refused for its size, not after YAML has worked through it."""
    reason = problem("---\nname: demo\ndescription: " + "[" * 900_000 + "\n---\n")
    assert reason.startswith("frontmatter too large: ")


def test_closing_delimiter_with_crlf_at_end_of_file() -> None:
    """`---\\r` as the very last line still closes, giving an empty body."""
    assert parsed(f"---\r\n{MINIMAL}---\r").body == ""


def test_empty_body_is_valid() -> None:
    """A skill may consist of frontmatter alone."""
    assert parsed(f"---\n{MINIMAL}---").body == ""
    assert parsed(skill(MINIMAL, "\n  \n")).body == ""


def test_body_keeps_later_delimiter_lines() -> None:
    """Only the first closing line matters; a `---` rule in the body stays in the body."""
    assert parsed(skill(MINIMAL, "Intro\n---\nMore\n")).body == "Intro\n---\nMore"


# --- the shape of the frontmatter -----------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "expected"),
    [
        ("", "missing frontmatter: the frontmatter block is empty"),
        ("\n  \n", "missing frontmatter: the frontmatter block is empty"),
        ("# only a comment\n", "missing frontmatter: the frontmatter block is empty"),
        ("- name\n- demo\n", "missing frontmatter: expected a mapping of fields, got a list"),
        ("just text\n", "missing frontmatter: expected a mapping of fields, got a single value"),
        ("42\n", "missing frontmatter: expected a mapping of fields, got a single value"),
    ],
    ids=["empty", "blank", "comment-only", "list", "string", "number"],
)
def test_empty_or_non_mapping_frontmatter_counts_as_missing(
    frontmatter: str, expected: str
) -> None:
    """The frontmatter must be a mapping of fields."""
    assert problem(skill(frontmatter)) == expected


@pytest.mark.parametrize(
    "frontmatter",
    [
        "name: demo\ndescription: [unclosed\n",
        "name: demo\n  description: bad indent\n",
        "name: demo\ndescription: x\n\t- tab\n",
        "name: *undefined\ndescription: x\n",
        "name: demo\ndescription: x\n...\nother: doc\n",
    ],
    ids=["unclosed-flow", "bad-indent", "tab", "undefined-alias", "two-documents"],
)
def test_invalid_yaml_is_a_problem_with_a_line_number(frontmatter: str) -> None:
    """Malformed YAML gives a short reason that says where."""
    reason = problem(skill(frontmatter))
    assert reason.startswith("invalid YAML: ")
    assert re.search(r"\(line \d+(, column \d+)?\)$", reason), reason


def test_yaml_error_line_numbers_count_from_the_top_of_the_file() -> None:
    """Line numbers refer to the file, not to the frontmatter block."""
    # Line 1 is `---`, line 2 `name`, line 3 the broken `description`.
    reason = problem(skill("name: demo\ndescription: x: y\nother: 1\n"))
    assert reason == (
        "invalid YAML: mapping values are not allowed in this context; a value holding ': ' "
        'must be quoted (description: "Use it: always") (line 3, column 15)'
    )


@pytest.mark.parametrize(
    ("frontmatter", "key", "line"),
    [
        ("name: demo\ndescription: a\nname: other\n", "name", 4),
        ("name: demo\ndescription: a\ndescription: b\n", "description", 4),
        ("name: demo\ndescription: a\nmetadata:\n  x: 1\n  x: 2\n", "x", 6),
        ("name: demo\ndescription: a\nmetadata: {k: 1, k: 2}\n", "k", 4),
    ],
    ids=["name", "description", "nested-block", "nested-flow"],
)
def test_duplicate_keys_are_an_error_naming_the_key(frontmatter: str, key: str, line: int) -> None:
    """A repeated key never silently overwrites the earlier value."""
    assert problem(skill(frontmatter)).startswith(
        f"invalid YAML: duplicate key {key!r} (line {line}, column "
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("whenToUse: a", "when_to_use: b"),
        ("disableModelInvocation: true", "disable-model-invocation: true"),
        ("user-invocable: false", "userInvocable: false"),
        ("argument-hint: a", "argumentHint: b"),
    ],
    ids=["when-to-use", "disable-model-invocation", "user-invocable", "argument-hint"],
)
def test_both_spellings_of_a_field_are_a_duplicate(first: str, second: str) -> None:
    """Two spellings of one field are one field given twice."""
    reason = problem(skill(f"{MINIMAL}{second}\n{first}\n"))
    first_key, second_key = first.split(":")[0], second.split(":")[0]
    assert reason == f"fields {first_key!r} and {second_key!r} are the same field; give only one"


# --- YAML 1.2 core-schema values ------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_value", "expected"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("n", "n"),
        ("Yes", "Yes"),
        ("2024-01-31", "2024-01-31"),
        ("2024-01-31 10:00:00", "2024-01-31 10:00:00"),
        ("12:30:00", "12:30:00"),
        ("<<", "<<"),
        ("=", "="),
        ("1_000", "1_000"),
        ("0b101", "0b101"),
        ("1:30", "1:30"),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("tRuE", True),
        ("false", False),
        ("FaLsE", False),
        ("~", None),
        ("null", None),
        ("NULL", None),
        ("", None),
        ("0", 0),
        ("-17", -17),
        ("+5", 5),
        ("012", 12),
        ("0o17", 15),
        ("0x1F", 31),
        ("1.5", 1.5),
        ("-1e3", -1000.0),
        (".5", 0.5),
        ("1.", 1.0),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ('"true"', "true"),
        ("'12'", "12"),
        ("!!str 12", "12"),
        ("!!int '12'", 12),
        ("!!bool 'TRUE'", True),
        ("[yes, 1, true]", ("yes", 1, True)),
    ],
    ids=lambda value: repr(value),
)
def test_scalars_follow_the_yaml_1_2_core_schema(yaml_value: str, expected: object) -> None:
    """Only true/false are booleans and dates stay strings, unlike PyYAML's YAML 1.1."""
    value = metadata_value(yaml_value)
    assert value == expected
    assert type(value) is type(expected)


def test_nan_is_a_float() -> None:
    """`.nan` (and its capitalised forms) is a float NaN."""
    for spelling in (".nan", ".NaN", ".NAN"):
        value = metadata_value(spelling)
        assert isinstance(value, float)
        assert math.isnan(value)


def test_merge_key_is_an_ordinary_key() -> None:
    """`<<` does not merge mappings; it is just a key."""
    frontmatter = MINIMAL + "metadata:\n  base: &b {x: 1}\n  <<: *b\n"
    metadata = parsed(skill(frontmatter)).metadata
    assert metadata is not None
    assert dict(metadata) == {"base": {"x": 1}, "<<": {"x": 1}}
    assert "x" not in metadata


@pytest.mark.parametrize(
    ("yaml_value", "tag"),
    [
        ("!!timestamp 2024-01-31", "!!timestamp"),
        ("!!binary aGVsbG8=", "!!binary"),
        ("!foo bar", "!foo"),
        ("!!python/object:os.system x", "!!python/object:os.system"),
        ("!!set {a, b}", "!!set"),
        ("!!omap [a: 1]", "!!omap"),
    ],
    ids=["timestamp", "binary", "local", "python", "set", "omap"],
)
def test_unsupported_tags_are_a_problem(yaml_value: str, tag: str) -> None:
    """Explicit tags beyond the core schema are refused, not interpreted."""
    reason = problem(skill(MINIMAL + f"metadata:\n  value: {yaml_value}\n"))
    assert reason == f"invalid YAML: unsupported YAML tag {tag} (line 5, column 10)"


@pytest.mark.parametrize(
    "yaml_value",
    ["!!bool yes", "!!int 1_000", "!!int abc", "!!float x", "!!null nothing"],
    ids=["bool", "int-underscore", "int-text", "float", "null"],
)
def test_explicitly_tagged_value_that_does_not_fit_its_tag_is_a_problem(yaml_value: str) -> None:
    """`!!bool yes` is not quietly read as a boolean."""
    reason = problem(skill(MINIMAL + f"metadata:\n  value: {yaml_value}\n"))
    assert reason.startswith("invalid YAML: ")
    assert "is not a valid !!" in reason


def test_integer_too_long_for_python_is_a_problem_not_a_crash() -> None:
    """Python caps int() at 4300 digits; that becomes a problem."""
    assert problem(skill(MINIMAL + f"metadata: {{n: {'9' * 5000}}}\n")) == (
        "invalid YAML: integer too long (line 4, column 15)"
    )


def test_aliases_are_resolved() -> None:
    """An anchored value can be reused."""
    frontmatter = MINIMAL + "metadata:\n  a: &shared [1, 2]\n  b: *shared\n"
    metadata = parsed(skill(frontmatter)).metadata
    assert metadata == {"a": (1, 2), "b": (1, 2)}


@pytest.mark.parametrize(
    "metadata",
    ["&a [*a]", "&a {x: *a}", "&a [[[*a]]]"],
    ids=["list-in-itself", "mapping-in-itself", "deeper"],
)
def test_alias_cycle_is_a_problem(metadata: str) -> None:
    """A collection that contains itself cannot become a value: it nests without end."""
    reason = problem(skill(MINIMAL + f"metadata: {metadata}\n"))
    assert reason == "invalid YAML: nested more than 100 levels deep"


def test_alias_explosion_is_a_problem() -> None:
    """A few lines of nested aliases cannot stand for a billion values."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    frontmatter = MINIMAL + "metadata:\n" + "".join(f"  {line}\n" for line in lines)
    assert "aliases expand to more than" in problem(skill(frontmatter))


@pytest.mark.parametrize("depth", [150, 5000], ids=["past-our-limit", "past-libyaml-limit"])
def test_deep_nesting_is_a_problem_not_a_crash(depth: int) -> None:
    """Deeply nested YAML becomes a problem, never a RecursionError."""
    reason = problem(skill(MINIMAL + "metadata: " + "[" * depth + "]" * depth + "\n"))
    assert reason.startswith("invalid YAML: ")


@pytest.mark.parametrize(
    "key",
    ["[1, 2]", "{a: 1}"],
    ids=["sequence", "mapping"],
)
def test_collection_keys_are_a_problem(key: str) -> None:
    """Mapping keys must be single values."""
    assert "a mapping key must be a single value" in problem(
        skill(MINIMAL + f"metadata: {{{key}: x}}\n")
    )


def test_unpaired_surrogate_in_text_is_a_problem() -> None:
    """A str that cannot be UTF-8 encoded is reported, not raised."""
    assert problem(skill("name: demo\ndescription: \ud800\n")).startswith("invalid YAML: ")


# --- required fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "expected"),
    [
        ("description: x\n", "missing required field 'name'"),
        ("name:\ndescription: x\n", "field 'name' is empty"),
        ("name: ''\ndescription: x\n", "field 'name' is empty"),
        ("name: '  '\ndescription: x\n", "field 'name' is empty"),
        ("name: 12\ndescription: x\n", "field 'name' must be a string, got a number (quote it)"),
        ("name: true\ndescription: x\n", "field 'name' must be a string, got a boolean (quote it)"),
        ("name: [a]\ndescription: x\n", "field 'name' must be a string, got a list"),
        ("name: demo\n", "missing required field 'description'"),
        ("name: demo\ndescription:\n", "field 'description' is empty"),
        ("name: demo\ndescription: ' \t '\n", "field 'description' is empty"),
        ("name: demo\ndescription: '\n\n'\n", "field 'description' is empty"),
        (
            "name: demo\ndescription: {a: 1}\n",
            "field 'description' must be a string, got a mapping",
        ),
        (
            "name: demo\ndescription: 3.5\n",
            "field 'description' must be a string, got a number (quote it)",
        ),
    ],
    ids=[
        "name-missing",
        "name-null",
        "name-empty",
        "name-blank",
        "name-number",
        "name-bool",
        "name-list",
        "description-missing",
        "description-null",
        "description-blank",
        "description-newlines",
        "description-mapping",
        "description-number",
    ],
)
def test_missing_or_mistyped_required_fields_are_problems(frontmatter: str, expected: str) -> None:
    """`name` and `description` must be non-blank strings; the problem names the field."""
    assert problem(skill(frontmatter)) == expected


@pytest.mark.parametrize(
    "name",
    ["Demo", "demo_tool", "-demo", "demo-", "de--mo", "démo", "demo tool", "'demo\n'"],
    ids=["upper", "underscore", "leading-hyphen", "trailing-hyphen", "double-hyphen",
         "non-ascii", "space", "trailing-newline"],
)  # fmt: skip
def test_name_outside_the_grammar_is_a_problem(name: str) -> None:
    """The name must be lowercase kebab-case ASCII."""
    reason = problem(skill(f"name: {name}\ndescription: x\n"))
    assert reason.startswith("field 'name' is not a valid skill name: ")


def test_description_keeps_what_the_author_wrote() -> None:
    """The description is not normalized here (the catalog does that)."""
    result = parsed(skill("name: demo\ndescription: |\n  Line one.\n  Line two.\n"))
    assert result.description == "Line one.\nLine two.\n"


def test_a_date_like_description_stays_a_string() -> None:
    """`description: 2024-01-31` is a string, so the skill is valid."""
    assert parsed(skill("name: demo\ndescription: 2024-01-31\n")).description == "2024-01-31"


# --- optional fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ("whenToUse: When asked.", "when_to_use", "When asked."),
        ("when_to_use: When asked.", "when_to_use", "When asked."),
        ("disableModelInvocation: true", "disable_model_invocation", True),
        ("disable-model-invocation: TRUE", "disable_model_invocation", True),
        ("disableModelInvocation: false", "disable_model_invocation", False),
        ("user-invocable: false", "user_invocable", False),
        ("userInvocable: False", "user_invocable", False),
        ("user-invocable: true", "user_invocable", True),
        ("argument-hint: <file>", "argument_hint", "<file>"),
        ("argumentHint: '[path]'", "argument_hint", "[path]"),
    ],
    ids=lambda value: str(value),
)
def test_optional_fields_accept_both_spellings(line: str, field: str, expected: object) -> None:
    """Each optional field is read from either of its spellings."""
    result = parsed(skill(f"{MINIMAL}{line}\n"))
    assert getattr(result, field) == expected
    assert result.notes == ()


@pytest.mark.parametrize(
    "key", ["disableModelInvocation", "disable-model-invocation", "user-invocable", "userInvocable"]
)
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("yes", "a string: 'yes'"),
        ("no", "a string: 'no'"),
        ("'true'", "a string: 'true'"),
        ("1", "a number: 1"),
        ("0", "a number: 0"),
        ("", "null"),
        ("[true]", "a list"),
        ("{a: true}", "a mapping"),
    ],
    ids=["yes", "no", "quoted-true", "one", "zero", "null", "list", "mapping"],
)
def test_invocation_flag_that_is_not_a_boolean_drops_the_whole_skill(
    key: str, value: str, shown: str
) -> None:
    """Fail closed: a mistyped flag makes the file a problem naming the key."""
    reason = problem(skill(f"{MINIMAL}{key}: {value}\n"))
    assert reason == f"field {key!r} must be true or false, got {shown}"


@pytest.mark.parametrize(
    ("line", "field", "note"),
    [
        ("whenToUse: [a]", "when_to_use", "'whenToUse' ignored: expected a string, got a list"),
        ("when_to_use: 3", "when_to_use", "'when_to_use' ignored: expected a string, got a number"),
        ("argument-hint: {a: 1}", "argument_hint",
         "'argument-hint' ignored: expected a string, got a mapping"),
        ("argumentHint: true", "argument_hint",
         "'argumentHint' ignored: expected a string, got a boolean"),
        ("metadata: [a]", "metadata", "'metadata' ignored: expected a mapping, got a list"),
        ("metadata: text", "metadata", "'metadata' ignored: expected a mapping, got a string"),
        ("metadata: {1: a}", "metadata", "'metadata' ignored: its keys must be strings"),
    ],
    ids=["when-list", "when-number", "hint-mapping", "hint-bool", "metadata-list",
         "metadata-string", "metadata-int-key"],
)  # fmt: skip
def test_mistyped_optional_fields_are_dropped_with_a_note(line: str, field: str, note: str) -> None:
    """A mistyped `when_to_use`, `argument-hint` or `metadata` is dropped; the skill stays."""
    result = parsed(skill(f"{MINIMAL}{line}\n"))
    assert getattr(result, field) is None
    assert result.notes == (Problem("field-ignored", f"field {note}"),)


@pytest.mark.parametrize(
    "line",
    ["whenToUse:", "whenToUse: '  '", "argument-hint: ''", "metadata:", "metadata: ~"],
    ids=["when-null", "when-blank", "hint-empty", "metadata-empty", "metadata-null"],
)
def test_empty_optional_fields_are_absent_without_a_note(line: str) -> None:
    """An empty optional field is treated as not given."""
    result = parsed(skill(f"{MINIMAL}{line}\n"))
    assert (result.when_to_use, result.argument_hint, result.metadata, result.notes) == (
        None,
        None,
        None,
        (),
    )


def test_metadata_is_deeply_read_only() -> None:
    """Metadata mappings are MappingProxyType and its lists are tuples."""
    frontmatter = MINIMAL + "metadata:\n  version: 1.2.0\n  tags: [pdf, forms]\n  nested: {k: v}\n"
    metadata = parsed(skill(frontmatter)).metadata
    assert isinstance(metadata, MappingProxyType)
    assert metadata == {"version": "1.2.0", "tags": ("pdf", "forms"), "nested": {"k": "v"}}
    assert isinstance(metadata["nested"], MappingProxyType)
    with pytest.raises(TypeError):
        metadata["version"] = "2"  # type: ignore[index]


def test_unknown_fields_are_ignored() -> None:
    """Fields the runtime does not know (e.g. `license`) neither fail nor appear."""
    result = parsed(skill(MINIMAL + "license: MIT\nallowed-tools: [Read]\n"))
    assert result.name == "demo"
    assert result.notes == ()


# --- decoding -------------------------------------------------------------------------------


def test_skill_bytes_decode_as_utf8_and_the_bom_is_ignored() -> None:
    """Valid UTF-8 decodes, with its byte order mark ignored by the parser."""
    data = "\ufeff---\nname: demo\ndescription: Démo.\n---\n".encode()
    assert parse_skill_bytes(data) == ParsedSkill(name="demo", description="Démo.", body="")


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b"\xff---\n", 0),
        (b"---\nname: caf\xe9\n", 13),
        ("---\n".encode("utf-16"), 0),
        (b"---\n\xed\xa0\x80", 4),
    ],
    ids=["bad-first-byte", "latin-1", "utf-16", "encoded-surrogate"],
)
def test_undecodable_skill_bytes_name_the_first_bad_byte(data: bytes, offset: int) -> None:
    """Undecodable bytes are a problem that says where."""
    assert parse_skill_bytes(data) == Problem("not-utf8", f"not valid UTF-8 text (byte {offset})")


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=examples(300))
@given(st.text())
def test_parse_never_raises_on_arbitrary_text(text: str) -> None:
    """Any text gives a ParsedSkill or a Problem, never an exception."""
    assert isinstance(parse_skill_file(text), ParsedSkill | Problem)


_YAML_ISH = st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!'\"#|>~?,. \n\t\r0\ufeff")))


@settings(max_examples=examples(300))
@given(st.one_of(_YAML_ISH, st.text()), st.text())
def test_parse_never_raises_on_arbitrary_frontmatter(frontmatter: str, body: str) -> None:
    """Whatever sits between the delimiters, parsing returns a value."""
    result = parse_skill_file(f"---\n{frontmatter}\n---\n{body}")
    assert isinstance(result, ParsedSkill | Problem)


@settings(max_examples=examples(200))
@given(st.binary())
def test_parsing_bytes_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    """The provider's path from bytes to a skill never raises."""
    assert isinstance(parse_skill_bytes(data), ParsedSkill | Problem)


# Characters a description may contain without YAML quoting rules getting in the way once the
# value is written as a single-quoted scalar (where only `'` needs doubling).
_DESCRIPTIONS = st.text(
    alphabet=st.characters(categories=["L", "N", "P", "S", "Zs"]), min_size=1
).filter(lambda text: text.strip() == text and text != "")


@settings(max_examples=examples(200))
@given(SKILL_NAMES, _DESCRIPTIONS, st.text())
def test_well_formed_files_round_trip(name: str, description: str, body: str) -> None:
    """A file built from a valid name, description and body parses back to them."""
    # Quoted, because a name like `12` or `true` would otherwise be read as a number or boolean.
    quoted = "'" + description.replace("'", "''") + "'"
    result = parse_skill_file(f"---\nname: '{name}'\ndescription: {quoted}\n---\n{body}")
    assert isinstance(result, ParsedSkill), result
    assert (result.name, result.description, result.body) == (name, description, body.strip())


def test_parsed_skill_metadata_is_a_mapping_type() -> None:
    """The public type promises a Mapping."""
    metadata = parsed(skill(MINIMAL + "metadata: {a: 1}\n")).metadata
    assert isinstance(metadata, Mapping)


_WHOLE_DELIMITER_LINE = re.compile(r"^---\r?$", re.MULTILINE)


@settings(max_examples=examples(500))
@given(st.text(alphabet=st.sampled_from(list("-\r\n a")), max_size=40))
def test_closing_line_is_the_first_whole_delimiter_line(rest: str) -> None:
    """The frontmatter ends where a whole-line `---` (optionally `---\\r`) first appears."""
    text = "---\n" + rest
    expected = _WHOLE_DELIMITER_LINE.search(text, 4)
    found = _CLOSING_LINE.search(text, 3)  # from the first line's end: its `\n` starts a match
    assert (None if found is None else found.start() + 1) == (
        None if expected is None else expected.start()
    )


def test_a_duplicate_key_carries_its_line_and_an_unquoted_colon_a_hint_to_quote() -> None:
    """The two mistakes people make most in frontmatter, each with where and what to do."""
    duplicate = parse_skill_file("---\nname: a\ndescription: x\nname: b\n---\n")
    assert isinstance(duplicate, Problem)
    assert (duplicate.code, duplicate.line) == ("yaml-invalid", 4)
    assert "duplicate key 'name'" in duplicate.message
    colon = parse_skill_file("---\nname: a\ndescription: Use it: always\n---\n")
    assert isinstance(colon, Problem)
    assert (colon.code, colon.line) == ("yaml-invalid", 3)
    assert "must be quoted" in colon.message
