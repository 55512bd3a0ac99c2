"""decode_plan: the size cap, strict JSON, refusals by name, typed decode and structure."""

from __future__ import annotations

import json

import msgspec
import pytest

from glove.plan import (
    MAX_EXPOSURES,
    MAX_PLAN_BYTES,
    MAX_PLAN_DEPTH,
    REJECTED_MEMBERS,
    Plan,
    PlanError,
    PlanLimits,
    PlanProblem,
    decode_plan,
)
from glove.plan._decode import MAX_PROBLEMS

from ._helpers import PLAN, limits, plan_bytes


def refused(data: bytes) -> list[PlanProblem]:
    """The problems ``decode_plan`` refuses ``data`` with (it must refuse)."""
    with pytest.raises(PlanError) as caught:
        decode_plan(data)
    assert caught.value.problems
    return caught.value.problems


def paths(data: bytes) -> list[str]:
    """The paths of the problems ``data`` is refused with."""
    return [problem.path for problem in refused(data)]


# --- valid plans -----------------------------------------------------------------------------


def test_the_issue_example_decodes_to_frozen_typed_structs() -> None:
    """The plan of issue 9 decodes, with seconds as floats and absent optional members UNSET."""
    plan = decode_plan(plan_bytes())
    assert plan == Plan(
        version=1,
        harness="demo",
        exposures=("work",),
        limits=PlanLimits(
            wall_time_s=30.0,
            cpu_time_s=10.0,
            memory_bytes=268435456,
            pids=64,
            disk_bytes=67108864,
            output_bytes=1048576,
        ),
        network="none",
        terminal="pipes",
    )
    assert plan.rows is msgspec.UNSET
    assert plan.labels is msgspec.UNSET
    with pytest.raises(AttributeError):
        plan.harness = "other"  # type: ignore[misc]


def test_a_pty_plan_with_size_and_labels_decodes() -> None:
    """rows, cols and labels are accepted within their bounds."""
    plan = decode_plan(
        plan_bytes(terminal="pty", rows=1000, cols=1, labels={"sage.task": "t-1 caf\u00e9"})
    )
    assert (plan.rows, plan.cols) == (1000, 1)
    assert plan.labels == {"sage.task": "t-1 caf\u00e9"}


def test_decode_accepts_bytearray_and_memoryview() -> None:
    """Any bytes-like input decodes the same."""
    data = plan_bytes()
    assert decode_plan(bytearray(data)) == decode_plan(memoryview(data)) == decode_plan(data)


# --- the size cap, checked before parsing -----------------------------------------------------


def test_a_plan_of_exactly_the_cap_decodes() -> None:
    """64 KiB of plan text (padded with whitespace) is accepted."""
    data = plan_bytes()
    assert decode_plan(data + b" " * (MAX_PLAN_BYTES - len(data))) == decode_plan(data)


def test_one_byte_over_the_cap_is_refused_before_parsing() -> None:
    """Over 64 KiB is refused by size even when the text is not JSON at all."""
    problems = refused(b"\xff" * (MAX_PLAN_BYTES + 1))
    assert problems == [
        PlanProblem(path="$", message=f"65537 bytes is over the {MAX_PLAN_BYTES}-byte plan cap")
    ]


# --- strict JSON -----------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    """``depth`` nested arrays, as a label value (so only the depth is wrong)."""
    return plan_bytes(labels={"x": "y"}).replace(b'"y"', b"[" * depth + b"]" * depth)


def test_64_nested_containers_pass_the_strict_stage() -> None:
    """At 64 containers deep the refusal is the label's type, not the nesting."""
    problems = refused(nested(MAX_PLAN_DEPTH - 2))  # plus the plan and the labels object
    assert problems[0].message == "Expected `str`, got `array`"


def test_65_nested_containers_are_refused_with_the_path() -> None:
    """One container deeper is refused by the strict stage, naming where it went too deep."""
    problems = refused(nested(MAX_PLAN_DEPTH - 1))
    assert problems[0].path == "$.labels.x" + "[0]" * (MAX_PLAN_DEPTH - 2)
    assert problems[0].message == f"nested deeper than {MAX_PLAN_DEPTH} containers"


def test_nesting_deep_enough_to_exhaust_the_parser_is_refused() -> None:
    """60,000 open brackets are refused, not a RecursionError."""
    assert refused(b"[" * 60000)[0].message == "not JSON: nested deeper than 64"


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (b'{"version":1,"version":1}', "$.version"),
        (b'{"harness":"demo","h\\u0061rness":"demo"}', "$.harness"),
        (b'{"\\u0061":1,"a":2}', "$.a"),
        (plan_bytes().replace(b'"pids": 64', b'"pids": 64, "p\\u0069ds": 64'), "$.limits.pids"),
        (
            plan_bytes(labels={"k": "1"}).replace(b'"k": "1"', b'"k":"1","\\u006b":"2"'),
            "$.labels.k",
        ),
        (b'{"labels":{"a b":1,"a\\u0020b":2}}', '$.labels["a b"]'),
        (b'[{"x":{"y":1,"y":2}}]', "$[0].x.y"),
    ],
)
def test_duplicate_keys_are_refused_at_every_level_even_when_escaped(
    text: bytes, path: str
) -> None:
    """A key twice in one object, compared after unescaping, is refused at its own path."""
    problems = refused(text)
    assert problems[0].path == path
    assert problems[0].message.startswith("duplicate key ")


def test_the_same_key_in_different_objects_is_not_a_duplicate() -> None:
    """``pids`` in limits and in labels are two objects' members."""
    decode_plan(plan_bytes(labels={"pids": "3"}))


@pytest.mark.parametrize(
    ("old", "new", "path", "message"),
    [
        (b"30,", b"NaN,", "$.limits.wall_time_s", "NaN is not JSON"),
        (b"30,", b"Infinity,", "$.limits.wall_time_s", "Infinity is not JSON"),
        (b"30,", b"-Infinity,", "$.limits.wall_time_s", "-Infinity is not JSON"),
        (b"30,", b"1e400,", "$.limits.wall_time_s", "number 1e400 is out of range"),
        (b"64,", b"9" * 5000 + b",", "$.limits.pids", "an integer of 5000 digits is out of range"),
        (b'"demo"', b'"\\ud800"', "$.harness", "a lone surrogate \\ud800 is not Unicode text"),
        (b'"work"', b'"\\udfff"', "$.exposures[0]", "a lone surrogate \\udfff is not Unicode text"),
        (
            b'"network"',
            b'"\\udc00network"',
            '$["\\udc00network"]',
            "a key holds a lone surrogate \\udc00",
        ),
    ],
)
def test_non_json_scalars_are_refused_with_their_path(
    old: bytes, new: bytes, path: str, message: str
) -> None:
    """NaN, the infinities, overflowing numbers and lone surrogates name where they are."""
    assert refused(plan_bytes().replace(old, new, 1)) == [PlanProblem(path=path, message=message)]


def test_a_surrogate_pair_is_one_character_and_accepted() -> None:
    """An escaped pair (U+1F600) is valid Unicode, unlike either half alone."""
    plan = decode_plan(plan_bytes(labels={"x": "y"}).replace(b'"y"', b'"\\ud83d\\ude00"'))
    assert plan.labels == {"x": "\U0001f600"}


@pytest.mark.parametrize(
    "data",
    [
        plan_bytes().replace(b"demo", b"de\xffmo"),
        plan_bytes().replace(b"demo", b"de\xc0\xafmo"),  # overlong "/"
        plan_bytes().replace(b"demo", b"de\xed\xa0\x80mo"),  # a UTF-8-encoded surrogate
    ],
)
def test_invalid_utf8_is_refused(data: bytes) -> None:
    """Bytes that are not UTF-8 are refused before any JSON is read."""
    problems = refused(data)
    assert problems[0].path == "$"
    assert problems[0].message.startswith("not UTF-8: ")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        plan_bytes()[:-1],
        plan_bytes()[:40],
        plan_bytes() + b"{}",
        b"\xef\xbb\xbf" + plan_bytes(),
    ],
)
def test_truncated_or_trailing_text_is_refused_at_the_root(data: bytes) -> None:
    """Text that is not one JSON value is refused at ``$`` with where parsing stopped."""
    problems = refused(data)
    assert problems[0].path == "$"
    assert problems[0].message.startswith("not JSON: ")
    assert " line 1 column " in problems[0].message


# --- refused by name, before the generic unknown-field refusal ---------------------------------


@pytest.mark.parametrize("name", sorted(REJECTED_MEMBERS))
def test_every_member_the_spec_rejects_is_refused_by_name(name: str) -> None:
    """``argv``, ``env``, ``cwd``, ``prompt_ref`` and the rest name themselves and the reason."""
    problems = refused(plan_bytes(**{name: ["x"]}))
    assert problems == [
        PlanProblem(path=f"$.{name}", message=f"`{name}` is refused: {REJECTED_MEMBERS[name]}")
    ]


def test_the_rejected_names_and_reasons_are_the_specs() -> None:
    """The list holds exactly the names of the spec, each with the reason a person needs."""
    assert set(REJECTED_MEMBERS) == {
        "prompt_ref",
        *("argv", "command", "cmd", "args"),
        *("env", "environment"),
        *("cwd", "path", "paths", "workspace", "binds", "mounts", "host_path"),
        *("bundles", "library"),
    }
    assert "prompt directories is not implemented" in REJECTED_MEMBERS["prompt_ref"]
    assert "gloved.toml" in REJECTED_MEMBERS["argv"]
    assert "no environment" in REJECTED_MEMBERS["env"]
    assert "raw paths never appear" in REJECTED_MEMBERS["host_path"]
    assert "projections" in REJECTED_MEMBERS["bundles"]


def test_named_refusals_come_first_and_all_are_collected() -> None:
    """Every named member and every unknown one is listed; the named ones first."""
    data = plan_bytes(foo=1, argv=["sh"], env={}, prompt_ref="p", limits=limits(cwd="/"))
    assert paths(data) == ["$.argv", "$.env", "$.prompt_ref", "$.limits.cwd", "$.foo"]


def test_unknown_members_are_refused_where_they_are() -> None:
    """An unknown member at the top or in limits is refused at its own path."""
    problems = refused(plan_bytes(limits=limits(gpus=1), extra=True))
    assert [problem.path for problem in problems] == ["$.extra", "$.limits.gpus"]
    assert problems[0].message.startswith(
        "unknown field `extra` (plan v1 has cols, evaluation, exposures"
    )


def test_a_hostile_key_cannot_break_the_one_line_error() -> None:
    """Control characters in a key are escaped in the path, the message and str(error)."""
    with pytest.raises(PlanError) as caught:
        decode_plan(b'{"a\\n\\u0000\\u2028b": 1}')
    problem = caught.value.problems[0]
    assert problem.path == '$["a\\n\\u0000\\u2028b"]'
    assert "\n" not in str(caught.value)
    assert str(caught.value).isprintable()


def test_a_flood_of_unknown_members_is_capped() -> None:
    """A 64 KiB plan of junk keys lists MAX_PROBLEMS problems, the last one a count."""
    problems = refused(json.dumps({f"k{i}": 0 for i in range(500)}).encode())
    assert len(problems) == MAX_PROBLEMS
    assert problems[-1] == PlanProblem(path="$", message="437 more problems not listed")


def test_the_network_object_is_for_proxy_mode_only() -> None:
    """``{"mode": "none"}`` and an object without its mode are refused by name (the mode is
    never filled in: the canonical form is the plan as sent)."""
    other = refused(plan_bytes(network={"mode": "none"}))[0]
    assert other.path == "$.network"
    assert 'network mode "none" is the string "none"' in other.message
    untagged = refused(plan_bytes(network={"allow": ["example.org"]}))[0]
    assert untagged.path == "$.network.mode"
    assert "required field `mode` is missing" in untagged.message


def test_a_string_network_mode_other_than_none_is_refused() -> None:
    """``"network": "proxy"`` (no allowlist) is not a v1 mode."""
    assert refused(plan_bytes(network="proxy"))[0].path == "$.network"


def test_another_version_is_refused_before_anything_else() -> None:
    """Version 2's members may mean something else: only the version is reported."""
    assert refused(plan_bytes(version=2, argv=["sh"], extra=1)) == [
        PlanProblem(
            path="$.version", message="unsupported plan version 2: this Glove reads version 1"
        )
    ]


# --- typed decode (msgspec's first error, with its path) ---------------------------------------


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        (b"[1]", "$", "Expected `object`, got `array`"),
        (plan_bytes(harness=None), "$.harness", "required field `harness` is missing"),
        (plan_bytes(exposures=None), "$.exposures", "required field `exposures` is missing"),
        (plan_bytes(limits=None), "$.limits", "required field `limits` is missing"),
        (plan_bytes(version="1"), "$.version", "Expected `int`, got `str`"),
        (plan_bytes(limits=limits(pids=True)), "$.limits.pids", "Expected `int`, got `bool`"),
        (
            plan_bytes(limits=limits() | {"pids": None}),
            "$.limits.pids",
            "Expected `int`, got `null`",
        ),
        (
            plan_bytes(limits=limits(memory_bytes=268435456.0)),
            "$.limits.memory_bytes",
            "Expected `int`, got `float`",
        ),
        (
            plan_bytes(limits=limits(memory_bytes=1024)),
            "$.limits.memory_bytes",
            "Expected `int` >= 4194304",
        ),
        (plan_bytes(limits=limits(pids=1)), "$.limits.pids", "Expected `int` >= 2"),
        (
            plan_bytes(limits=limits(disk_bytes=4096)),
            "$.limits.disk_bytes",
            "Expected `int` >= 65536",
        ),
        (
            plan_bytes(limits=limits(output_bytes=-1)),
            "$.limits.output_bytes",
            "Expected `int` >= 0",
        ),
        (
            plan_bytes(limits=limits(output_bytes=2**53)),
            "$.limits.output_bytes",
            "Expected `int` <= 9007199254740991",
        ),
        (
            plan_bytes(limits=limits(wall_time_s=0)),
            "$.limits.wall_time_s",
            "Expected `float` > 0.0",
        ),
        (
            plan_bytes(limits=limits(cpu_time_s=1e9)),
            "$.limits.cpu_time_s",
            "Expected `float` <= 31622400.0",
        ),
        (
            plan_bytes(limits=limits(wall_time_s="30s")),
            "$.limits.wall_time_s",
            "Expected `float`, got `str`",
        ),
        (plan_bytes(terminal="tty"), "$.terminal", "Invalid enum value 'tty'"),
        (plan_bytes(exposures="work"), "$.exposures", "Expected `array`, got `str`"),
        (plan_bytes(exposures=["work", 3]), "$.exposures[1]", "Expected `str`, got `int`"),
        (plan_bytes(terminal="pty", rows=0, cols=80), "$.rows", "Expected `int` >= 1"),
        (plan_bytes(terminal="pty", rows=24, cols=1001), "$.cols", "Expected `int` <= 1000"),
        (plan_bytes(labels={"a": 1}), "$.labels[...]", "Expected `str`, got `int`"),
        (plan_bytes(labels=["a"]), "$.labels", "Expected `object`, got `array`"),
    ],
)
def test_type_and_bound_errors_carry_msgspecs_path(data: bytes, path: str, message: str) -> None:
    """A wrong type or an out-of-bounds value is refused at its field's path."""
    assert refused(data) == [PlanProblem(path=path, message=message)]


# --- structure -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["/home/x", "../x", "..", ".", "~", "~/x", "a\\b", "./work"])
def test_a_raw_path_for_an_alias_or_harness_is_refused_as_a_raw_path(value: str) -> None:
    """Anything path-like where an identifier belongs says raw paths are not accepted."""
    problems = refused(plan_bytes(harness=value, exposures=["work", value]))
    assert [problem.path for problem in problems] == ["$.harness", "$.exposures[1]"]
    assert all(problem.message.startswith("raw paths are not accepted: ") for problem in problems)


@pytest.mark.parametrize("value", ["", "Work", "-a", "_a", "a b", "a" * 65, "caf\u00e9", "a\n"])
def test_a_non_identifier_is_refused_with_the_rule(value: str) -> None:
    """An alias outside [a-z0-9][a-z0-9_-]{0,63} is refused, quoting the rule."""
    problems = refused(plan_bytes(exposures=[value]))
    assert problems[0].path == "$.exposures[0]"
    assert "is not an identifier (1-64 of a-z, 0-9, _ and -" in problems[0].message


def test_identifiers_at_the_bounds_are_accepted() -> None:
    """One character, 64 characters, digits first, _ and - inside: all identifiers."""
    decode_plan(plan_bytes(harness="a" * 64, exposures=["0", "a_b-c", "9" * 64]))


def test_a_repeated_alias_is_refused_at_the_repeat() -> None:
    """Each alias appears once; the repeat names where the first one is."""
    assert refused(plan_bytes(exposures=["work", "ref", "work"])) == [
        PlanProblem(
            path="$.exposures[2]",
            message="exposure 'work' is named twice (first at $.exposures[0])",
        )
    ]


def test_at_most_32_exposures() -> None:
    """32 aliases decode; 33 are refused at the list."""
    decode_plan(plan_bytes(exposures=[f"e{i}" for i in range(MAX_EXPOSURES)]))
    problems = refused(plan_bytes(exposures=[f"e{i}" for i in range(MAX_EXPOSURES + 1)]))
    assert problems == [PlanProblem(path="$.exposures", message="at most 32 exposures, got 33")]


def test_rows_and_cols_only_with_a_pty_and_together() -> None:
    """A size with pipes is refused; with a pty, one without the other is refused."""
    assert paths(plan_bytes(rows=24, cols=80)) == ["$.rows", "$.cols"]
    assert paths(plan_bytes(cols=80)) == ["$.cols"]
    assert refused(plan_bytes(terminal="pty", rows=24)) == [
        PlanProblem(path="$.cols", message="rows and cols come together (a terminal size)")
    ]
    assert paths(plan_bytes(terminal="pty", cols=24)) == ["$.rows"]
    decode_plan(plan_bytes(terminal="pty"))


def test_labels_are_bounded_and_hold_no_paths() -> None:
    """At most 16 pairs; keys are short names; values are short printable text without / or \\."""
    decode_plan(plan_bytes(labels={f"k{i}": "v" * 128 for i in range(16)}))
    assert refused(plan_bytes(labels={f"k{i}": "v" for i in range(17)}))[0] == PlanProblem(
        path="$.labels", message="at most 16 labels, got 17"
    )
    problems = refused(
        plan_bytes(
            labels={
                "a/b": "x",
                "k" * 65: "x",
                ".x": "x",
                "long": "v" * 129,
                "ctl": "a\u0007",
                "sep": "a\u2028b",
                "p": "/etc/passwd",
                "w": "C:\\x",
            }
        )
    )
    assert [problem.path for problem in problems] == [
        '$.labels["a/b"]',
        "$.labels." + "k" * 65,
        '$.labels[".x"]',
        "$.labels.long",
        "$.labels.ctl",
        "$.labels.sep",
        "$.labels.p",
        "$.labels.w",
    ]
    assert problems[0].message.endswith("(no paths)")
    assert problems[3].message == "a label value is at most 128 characters, got 129"
    assert problems[6].message == "a label value holds no path (no / or \\)"


def test_all_structural_problems_are_collected() -> None:
    """A bad harness, a path alias, a repeat, a stray size and a bad label: five problems."""
    data = plan_bytes(
        harness="/bin/sh", exposures=["../x", "work", "work"], rows=3, labels={"a": "/x"}
    )
    assert paths(data) == [
        "$.harness",
        "$.exposures[0]",
        "$.exposures[2]",
        "$.rows",
        "$.labels.a",
    ]


def test_str_of_the_error_is_one_line_naming_the_first_problem() -> None:
    """``str(error)`` says where the first problem is, what it is, and how many follow."""
    with pytest.raises(PlanError) as caught:
        decode_plan(plan_bytes(harness="/bin/sh", exposures=["../x", "work", "work"]))
    assert str(caught.value) == (
        "plan refused at $.harness: raw paths are not accepted: name a harness id from "
        "gloved.toml (and 2 more problems)"
    )
    with pytest.raises(PlanError) as single:
        decode_plan(b"[]")
    assert str(single.value) == "plan refused at $: Expected `object`, got `array`"
    assert single.value.code == "invalid_plan"


def test_the_example_in_the_docs_is_the_example_in_the_issue() -> None:
    """The helper's plan is the issue's example, member for member."""
    assert PLAN["limits"]["memory_bytes"] == 268435456
    assert decode_plan(plan_bytes()).limits.output_bytes == 1048576


@pytest.mark.parametrize(
    ("target", "doc"),
    [(Plan, {**PLAN, "extra": 1}), (PlanLimits, {"pids": 64, "gpus": 1})],
)
def test_the_structs_themselves_forbid_unknown_fields(target: type, doc: dict[str, object]) -> None:
    """The named pre-check is not the only guard: the typed decode refuses unknown fields too."""
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        msgspec.convert(doc, target)
