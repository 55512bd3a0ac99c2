"""The policy file: strict TOML decoding, errors that name the key path, the file adapter."""

from pathlib import Path

import pytest

from glove.errors import GloveError
from glove.policy import PolicyError, PolicyFileError, load_policy, parse_policy
from glove.policy._compile import (
    MAX_ARG_RULES_PER_TOOL,
    MAX_IN_VALUES,
    MAX_POLICY_FILE_BYTES,
    MAX_TOOL_RULES,
)

PIN = "0" * 64
TOO_MANY_VALUES = ", ".join(["1"] * (MAX_IN_VALUES + 1))


def tool(name: str = "up__t", extra: str = "", args: str = "") -> str:
    """A one-rule policy with optional extra rule keys and argument tables."""
    return f'version = 1\n[[tools]]\nname = "{name}"\n{extra}\n{args}'


def arg(body: str) -> str:
    """One ``[[tools.args]]`` table."""
    return f"[[tools.args]]\n{body}\n"


CASES = [
    # msgspec's structural errors, with their location rewritten.
    ("version = 1\nfoo = 2", "foo", "unknown key"),
    ("tools = []", "version", "missing required key"),
    (tool(extra="nam = 'x'"), "tools[0].nam", "unknown key"),
    (tool(args=arg('pointer = "/x"\nopp = "eq"')), "tools[0].args[0].opp", "unknown key"),
    (tool(args=arg('op = "eq"\nvalue = 1')), "tools[0].args[0].pointer", "missing required key"),
    (tool(args=arg('pointer = "/x"\nop = "regexp"')), "tools[0].args[0].op", "invalid value"),
    (
        tool(args=arg('pointer = "/x"\nop = "length"\nmin = true')),
        "tools[0].args[0].min",
        "expected",
    ),
    (tool(extra='effect = "maybe"'), "tools[0].effect", "invalid value"),
    (tool(args=arg('pointer = 3\nop = "eq"')), "tools[0].args[0].pointer", "expected `str`"),
    ("version = [", "", "not valid TOML"),
    # Meaning errors found by the compiler.
    ("version = 2", "version", "unsupported version"),
    (tool(name="up__a b"), "tools[0].name", "must be a tool name"),
    (tool(name="x" * 65), "tools[0].name", "must be a tool name"),
    (tool(name="up__[ab]"), "tools[0].name", "must be a tool name"),
    (tool(extra='id = "a b"'), "tools[0].id", "must be"),
    (tool(extra=f'description_sha256 = "{PIN.upper()}1"'), "tools[0].description_sha256", "hex"),
    (tool(extra='schema_sha256 = "abc"'), "tools[0].schema_sha256", "hex"),
    (tool(name="up__*", extra=f'schema_sha256 = "{PIN}"'), "tools[0].name", "pins"),
    (tool(name="up__?", extra=f'definition_sha256 = "{PIN}"'), "tools[0].name", "pins"),
    (tool(extra='definition_sha256 = "x"'), "tools[0].definition_sha256", "hex"),
    (
        tool(extra=f'effect = "deny"\ndefinition_sha256 = "{PIN}"'),
        "tools[0].definition_sha256",
        "deny rule",
    ),
    (tool(extra='effect = "deny"\nstrict_args = true'), "tools[0].strict_args", "deny rule"),
    (
        tool(extra='effect = "deny"', args=arg('pointer = "/x"\nop = "eq"\nvalue = 1')),
        "tools[0].args",
        "deny rule",
    ),
    (
        tool(extra=f'effect = "deny"\ndescription_sha256 = "{PIN}"'),
        "tools[0].description_sha256",
        "deny rule",
    ),
    (
        tool(args=arg('pointer = "x"\nop = "eq"\nvalue = 1')),
        "tools[0].args[0].pointer",
        "JSON pointer",
    ),
    (tool(args=arg('pointer = "/~2"\nop = "eq"\nvalue = 1')), "tools[0].args[0].pointer", "'~'"),
    (
        tool(args=arg('pointer = "/x"\nop = "eq"\npattern = "a"')),
        "tools[0].args[0].pattern",
        "not a key of op 'eq'",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "path"\nroots = ["/a"]\nmin = 1')),
        "tools[0].args[0].min",
        "not a key of op 'path'",
    ),
    (tool(args=arg('pointer = "/x"\nop = "eq"')), "tools[0].args[0].value", "needs 'value'"),
    (
        tool(args=arg('pointer = "/x"\nop = "eq"\nvalue = 2026-01-01')),
        "tools[0].args[0].value",
        "date",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "eq"\nvalue = nan')),
        "tools[0].args[0].value",
        "non-finite",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "in"\nvalues = [1, {a = [12:00:00]}]')),
        "tools[0].args[0].values[1].a[0]",
        "time",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "in"\nvalues = []')),
        "tools[0].args[0].values",
        "non-empty",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "prefix"\nvalue = 3')),
        "tools[0].args[0].value",
        "string",
    ),
    (tool(args=arg('pointer = "/x"\nop = "regex"')), "tools[0].args[0].pattern", "needs 'pattern'"),
    (
        tool(args=arg('pointer = "/x"\nop = "regex"\npattern = "^a"')),
        "tools[0].args[0].pattern",
        "anchor",
    ),
    (tool(args=arg('pointer = "/x"\nop = "length"')), "tools[0].args[0].min", "needs 'min', 'max'"),
    (
        tool(args=arg('pointer = "/x"\nop = "length"\nmin = 1.5')),
        "tools[0].args[0].min",
        "non-negative integer",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "length"\nmax = -1')),
        "tools[0].args[0].max",
        "non-negative integer",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "range"\nmin = 3\nmax = 2')),
        "tools[0].args[0].max",
        "below",
    ),
    (tool(args=arg('pointer = "/x"\nop = "range"\nmax = inf')), "tools[0].args[0].max", "finite"),
    (tool(args=arg('pointer = "/x"\nop = "path"')), "tools[0].args[0].roots", "at least one root"),
    (
        tool(args=arg('pointer = "/x"\nop = "path"\nroots = []')),
        "tools[0].args[0].roots",
        "at least one root",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "path"\nroots = ["/a", "rel"]')),
        "tools[0].args[0].roots[1]",
        "absolute",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "path"\nroots = ["/a/../b"]')),
        "tools[0].args[0].roots[0]",
        "..",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "path"\nroots = ["/a"]\nbase = "rel"')),
        "tools[0].args[0].base",
        "absolute",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "path"\nroots = ["/a"]\ndotdot = "allow"')),
        "tools[0].args[0].dotdot",
        "invalid value",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "type"\ntypes = []')),
        "tools[0].args[0].types",
        "non-empty",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "type"\ntypes = ["str"]')),
        "tools[0].args[0].types[0]",
        "invalid value",
    ),
    (
        tool(args=arg('pointer = "/x"\nop = "eq"\nvalue = 1\naudit = "hash"')),
        "tools[0].args[0].audit",
        "invalid value",
    ),
    (tool() + '\n[[tools]]\nname = "up__t"\n', "tools[1].name", "second rule"),
    (
        tool(extra='id = "r"') + '\n[[tools]]\nname = "up__u"\nid = "r"\n',
        "tools[1].id",
        "duplicate id",
    ),
    (tool() + '\n[[tools]]\nname = "up__u"\nid = "tools[0]"\n', "tools[1].id", "must be"),
]


@pytest.mark.parametrize(("text", "key_path", "problem"), CASES)
def test_invalid_policies_name_the_key_path(text: str, key_path: str, problem: str) -> None:
    """Each invalid policy fails with a PolicyFileError naming the key path and the problem."""
    with pytest.raises(PolicyFileError) as caught:
        parse_policy(text, source="test.toml")
    error = caught.value
    assert error.key_path == key_path, str(error)
    assert problem in error.problem, str(error)
    assert str(error).startswith(f"test.toml: {key_path}: " if key_path else "test.toml: ")
    assert error.source == "test.toml"


def test_error_hierarchy_roots_at_glove_error() -> None:
    """PolicyFileError is a PolicyError is a GloveError."""
    with pytest.raises(PolicyFileError) as caught:
        parse_policy("version = 2")
    assert isinstance(caught.value, PolicyError)
    assert isinstance(caught.value, GloveError)


def test_non_utf8_text_is_refused() -> None:
    """A policy that is not UTF-8 is a file error, not a crash."""
    with pytest.raises(PolicyFileError, match=r"UTF-8|TOML"):
        parse_policy(b"version = 1\n# \xff\xfe\n")


@pytest.mark.parametrize(
    ("text", "key_path"),
    [
        ("version = 1\n" + '[[tools]]\nname = "up__t*"\n' * (MAX_TOOL_RULES + 1), "tools"),
        (
            tool(args=arg('pointer = "/x"\nop = "eq"\nvalue = 1') * (MAX_ARG_RULES_PER_TOOL + 1)),
            "tools[0].args",
        ),
        (
            tool(args=arg(f'pointer = "/x"\nop = "in"\nvalues = [{TOO_MANY_VALUES}]')),
            "tools[0].args[0].values",
        ),
        (tool(args=arg('pointer = "/x"\nop = "eq"\nvalue = ' + "[" * 40 + "]" * 40)), None),
    ],
)
def test_bounds_on_rule_counts_are_enforced(text: str, key_path: str | None) -> None:
    """More rules, argument rules, ``in`` values or nesting than the bounds is a file error."""
    with pytest.raises(PolicyFileError) as caught:
        parse_policy(text)
    if key_path is not None:
        assert caught.value.key_path == key_path
    else:
        assert "nested deeper" in caught.value.problem


def test_oversized_text_is_refused_before_decoding() -> None:
    """Text above the file size bound is refused whole."""
    with pytest.raises(PolicyFileError, match="larger than"):
        parse_policy("version = 1\n" + "#" * MAX_POLICY_FILE_BYTES)


def test_empty_policy_is_valid_and_denies_everything() -> None:
    """A policy with no rules parses and denies by default."""
    policy = parse_policy("version = 1")
    assert not policy.check_tool("up__t").allowed


def test_load_policy_reads_a_file(tmp_path: Path) -> None:
    """load_policy reads the file, names it as the source and digests its bytes."""
    path = tmp_path / "policy.toml"
    path.write_text(tool())
    policy = load_policy(path)
    assert policy.source == str(path)
    assert policy.digest == parse_policy(tool()).digest
    assert policy.digest.startswith("sha256:")
    assert policy.check_tool("up__t").allowed
    assert str(path) in repr(policy)


def test_load_policy_reports_errors_with_the_path(tmp_path: Path) -> None:
    """A bad file's error starts with the file's path and names the key."""
    path = tmp_path / "policy.toml"
    path.write_text(tool(args=arg('pointer = "/x"\nopp = "eq"')))
    with pytest.raises(
        PolicyFileError, match=r"policy\.toml: tools\[0\]\.args\[0\]\.opp: unknown key"
    ):
        load_policy(path)


def test_load_policy_translates_os_errors(tmp_path: Path) -> None:
    """A missing file or a directory is a PolicyFileError, chained to the OSError."""
    with pytest.raises(PolicyFileError, match="cannot read") as caught:
        load_policy(tmp_path / "absent.toml")
    assert isinstance(caught.value.__cause__, OSError)
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(tmp_path)


def test_load_policy_refuses_oversized_files(tmp_path: Path) -> None:
    """A file above the size bound is refused after reading at most one byte past it."""
    path = tmp_path / "big.toml"
    path.write_bytes(b"version = 1\n" + b"#" * (2 * MAX_POLICY_FILE_BYTES))
    with pytest.raises(PolicyFileError, match="larger than"):
        load_policy(path)
