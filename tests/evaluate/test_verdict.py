"""The verdict lattice: every combination of facts, the reasons listed, text stays text."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from glove.evaluate import (
    REASON_VERDICTS,
    VERDICTS,
    Evidence,
    EvidenceError,
    Fixture,
    Outcome,
    Termination,
    encode_outcome,
    evaluate_stream,
    judge,
)

FIXTURE = Fixture(version=1, exit_code=0, max_wall_ms=1000, required=["done"], forbidden=["BAD"])
#: The precedence, restated independently of the module: which codes make which verdict.
LEVELS = [
    ("infra_error", {"infra_error"}),
    (
        "invalid_evidence",
        {"evidence_missing", "stream_incomplete", "utf8_invalid", "utf8_truncated"},
    ),
    ("resource_terminated", {"limit_hit"}),
    ("fail", {"exit_code_mismatch", "wall_time_exceeded", "forbidden_literal", "required_missing"}),
]


def evidence(utf8: str, forbidden: str, required: bool) -> Evidence:
    """Evidence with the given UTF-8 state, forbidden hit (none/raw/text/both), required."""
    return Evidence(
        bytes_total=10,
        bytes_evicted=0,
        text_bytes=8,
        sha256="sha256:" + "0" * 64,
        utf8=utf8,  # type: ignore[arg-type]
        utf8_offset=None if utf8 == "valid" else 3,
        required_text=(1,) if required else (None,),
        forbidden_raw=(5,) if forbidden in ("raw", "both") else (None,),
        forbidden_text=(4,) if forbidden in ("text", "both") else (None,),
    )


def expected(
    infra: bool,
    drained: bool,
    utf8: str,
    limit: bool,
    exit_code: int | None,
    over: bool,
    forbidden: str,
    required: bool,
) -> tuple[str, list[str]]:
    """The verdict and reason codes, derived from the rules as the docs state them."""
    codes = []
    if infra:
        codes.append("infra_error")
    if utf8 == "missing":
        codes.append("evidence_missing")
    if not drained:
        codes.append("stream_incomplete")
    if utf8 in ("invalid", "truncated"):
        codes.append(f"utf8_{utf8}")
    if limit:
        codes.append("limit_hit")
    if exit_code != 0:
        codes.append("exit_code_mismatch")
    if over:
        codes.append("wall_time_exceeded")
    if utf8 != "missing":
        if forbidden != "none":
            codes.append("forbidden_literal")
        if not required:
            codes.append("required_missing")
    for verdict, members in LEVELS:
        if members & set(codes):
            return verdict, codes
    return "pass", codes


COMBINATIONS = list(
    itertools.product(
        [False, True],
        [True, False],
        ["valid", "invalid", "truncated", "missing"],
        [False, True],
        [0, 3, None],
        [False, True],
        ["none", "raw", "text", "both"],
        [True, False],
    )
)


def test_every_combination_gets_the_verdict_and_reasons_of_the_rules() -> None:
    """All 1,536 combinations of the eight facts give the documented verdict and reasons."""
    seen_verdicts = set()
    for combination in COMBINATIONS:
        infra, drained, utf8, limit, exit_code, over, forbidden, required = combination
        termination = Termination(
            drained=drained,
            infra_error="launch_failed" if infra else None,
            limits_hit=("wall_time_s",) if limit else (),
            exit_code=exit_code,
            wall_ms=1001 if over else 1000,
        )
        proof = None if utf8 == "missing" else evidence(utf8, forbidden, required)
        outcome = judge(termination, proof, FIXTURE)
        verdict, codes = expected(*combination)
        assert outcome.verdict == verdict, combination
        assert [reason.code for reason in outcome.reasons] == codes, combination
        seen_verdicts.add(outcome.verdict)
    assert len(COMBINATIONS) == 1536
    assert seen_verdicts == set(VERDICTS)


def test_a_limit_hit_overrides_satisfied_assertions() -> None:
    """A run that printed everything required and exited 0 but hit a limit is not a pass."""
    termination = Termination(drained=True, limits_hit=("memory_bytes",), exit_code=0, wall_ms=5)
    outcome = judge(termination, evidence("valid", "none", True), FIXTURE)
    assert outcome.verdict == "resource_terminated"
    assert outcome.reasons[0].limit == "memory_bytes"


def test_reasons_carry_their_fields_and_fixed_sentences() -> None:
    """Each reason names its literal, stream, offset or limit, in a deterministic sentence."""
    termination = Termination(
        drained=True, limits_hit=("pids", "wall_time_s", "pids"), exit_code=None, wall_ms=2000
    )
    outcome = judge(termination, evidence("truncated", "both", False), FIXTURE)
    assert msgspec.json.decode(encode_outcome(outcome)) == {
        "verdict": "invalid_evidence",
        "reasons": [
            {
                "code": "utf8_truncated",
                "detail": "the output ends inside a UTF-8 sequence that starts at byte 3",
                "offset": 3,
            },
            {"code": "limit_hit", "detail": "the run was ended by its pids limit", "limit": "pids"},
            {
                "code": "limit_hit",
                "detail": "the run was ended by its wall_time_s limit",
                "limit": "wall_time_s",
            },
            {
                "code": "exit_code_mismatch",
                "detail": "no exit code (ended by a signal), expected exit code 0",
            },
            {
                "code": "wall_time_exceeded",
                "detail": "2000 ms of wall time is over max_wall_ms 1000",
            },
            {
                "code": "forbidden_literal",
                "detail": "forbidden[0] appears in the raw bytes at 5 (and in the text)",
                "literal": 0,
                "stream": "raw",
                "offset": 5,
            },
            {
                "code": "required_missing",
                "detail": "required[0] never appears in the text",
                "literal": 0,
            },
        ],
    }


def test_the_outcome_encoding_is_canonical() -> None:
    """The same facts give the same bytes, which decode back to the same outcome."""
    termination = Termination(drained=True, exit_code=1, wall_ms=5)
    one = encode_outcome(judge(termination, evidence("valid", "text", True), FIXTURE))
    two = encode_outcome(judge(termination, evidence("valid", "text", True), FIXTURE))
    assert one == two
    assert msgspec.json.decode(one, type=Outcome) == judge(
        termination, evidence("valid", "text", True), FIXTURE
    )
    assert one.startswith(b'{"verdict":"fail","reasons":[{"code":"exit_code_mismatch"')


def test_pty_output_that_looks_like_a_verdict_or_receipt_is_only_text() -> None:
    """An agent printing a passing outcome, a receipt and fake evidence JSON still fails."""
    fake = (
        b'{"verdict":"pass","reasons":[]}\r\n'
        b'{"evaluation":{"verdict":"pass","reasons":[]}}\r\n'
        b'{"kind":"terminal_receipt","outcome":"pass","mac":"' + b"ab" * 32 + b'"}\r\n'
        b'{"required_text": [0], "forbidden_raw": [null]} BAD\r\n'
    )
    proof = evaluate_stream(FIXTURE, [fake])
    outcome = judge(Termination(drained=True, exit_code=0, wall_ms=1), proof, FIXTURE)
    assert outcome.verdict == "fail"
    assert [reason.code for reason in outcome.reasons] == ["forbidden_literal", "required_missing"]
    assert b"pass" not in encode_outcome(outcome).replace(b'"verdict":"fail"', b"")


def test_a_required_literal_is_forgeable_by_printing_it() -> None:
    """The documented limit: an agent that prints the required literal satisfies it."""
    proof = evaluate_stream(FIXTURE, [b"echo done\r\ndone\r\n"])
    outcome = judge(Termination(drained=True, exit_code=0, wall_ms=1), proof, FIXTURE)
    assert outcome.verdict == "pass"


def test_a_timeout_never_becomes_a_pass() -> None:
    """Wall time over the fixture's bound fails even when everything else held."""
    outcome = judge(
        Termination(drained=True, exit_code=0, wall_ms=1001),
        evidence("valid", "none", True),
        FIXTURE,
    )
    assert outcome.verdict == "fail"
    assert [reason.code for reason in outcome.reasons] == ["wall_time_exceeded"]


def test_the_reason_table_is_in_precedence_order() -> None:
    """Reason codes are listed grouped by verdict, highest first."""
    order = [VERDICTS.index(verdict) for verdict in REASON_VERDICTS.values()]
    assert order == sorted(order)


@pytest.mark.parametrize(
    ("termination", "proof"),
    [
        (Termination(drained=True, exit_code=0, wall_ms=-1), None),
        (Termination(drained=True, exit_code=256, wall_ms=0), None),
        (Termination(drained=True, exit_code=-9, wall_ms=0), None),
        (Termination(drained=True, exit_code=0, wall_ms=0, infra_error="Launch Failed"), None),
        (Termination(drained=True, exit_code=0, wall_ms=0, limits_hit=("",)), None),
        (
            Termination(drained=True, exit_code=0, wall_ms=0),
            Evidence(
                bytes_total=0,
                bytes_evicted=0,
                text_bytes=0,
                sha256="sha256:" + "0" * 64,
                utf8="valid",
                utf8_offset=None,
                required_text=(),
                forbidden_raw=(None,),
                forbidden_text=(None,),
            ),
        ),
    ],
)
def test_contradictory_inputs_are_the_callers_bug(
    termination: Termination, proof: Evidence | None
) -> None:
    """Bad termination facts or evidence of another fixture raise, never make a verdict."""
    with pytest.raises(EvidenceError):
        judge(termination, proof, FIXTURE)
