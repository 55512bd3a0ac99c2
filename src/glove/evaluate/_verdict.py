"""The verdict: termination facts, evidence and fixture in, one outcome out (pure).

Precedence is fixed, highest first; the verdict is that of the highest reason found, and
*every* reason that applies is listed, in this order::

    infra_error          infra_error
    invalid_evidence     evidence_missing, stream_incomplete, utf8_invalid, utf8_truncated
    resource_terminated  limit_hit (one per limit)
    fail                 exit_code_mismatch, wall_time_exceeded,
                         forbidden_literal (one per literal), required_missing (one per literal)
    pass                 (no reason)

So a run that hit a limit is ``resource_terminated`` even when every assertion held, and
a run whose stream could not be fully evaluated is never a pass. The codes are stable
(``docs/evaluation.md``); a reason's ``detail`` is a fixed sentence built from its fields,
so the same inputs always give the same bytes. Nothing from the agent's output reaches an
outcome except offsets: PTY text that looks like a verdict or a receipt is just text.
"""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

import msgspec

from glove.evaluate._evaluator import Evidence
from glove.evaluate._fixture import MAX_EXIT_CODE, Fixture
from glove.evaluate.errors import EvidenceError

Verdict = Literal["pass", "fail", "resource_terminated", "invalid_evidence", "infra_error"]
ReasonCode = Literal[
    "infra_error",
    "evidence_missing",
    "stream_incomplete",
    "utf8_invalid",
    "utf8_truncated",
    "limit_hit",
    "exit_code_mismatch",
    "wall_time_exceeded",
    "forbidden_literal",
    "required_missing",
]

#: The verdicts, highest precedence first.
VERDICTS: Final[tuple[Verdict, ...]] = (
    "infra_error",
    "invalid_evidence",
    "resource_terminated",
    "fail",
    "pass",
)
#: Every reason code, in the order reasons are listed, with the verdict it implies.
REASON_VERDICTS: Final[dict[ReasonCode, Verdict]] = {
    "infra_error": "infra_error",
    "evidence_missing": "invalid_evidence",
    "stream_incomplete": "invalid_evidence",
    "utf8_invalid": "invalid_evidence",
    "utf8_truncated": "invalid_evidence",
    "limit_hit": "resource_terminated",
    "exit_code_mismatch": "fail",
    "wall_time_exceeded": "fail",
    "forbidden_literal": "fail",
    "required_missing": "fail",
}
assert tuple(REASON_VERDICTS) == get_args(ReasonCode)

#: What an infrastructure error code or a limit name may be: a short snake_case word.
NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)


class Termination(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How the run ended, as Glove's own supervisor saw it (never the agent's account).

    Attributes:
        drained: the PTY drain read the stream to its end and fed every byte to the
            evaluator (False: a drain failure, or the stream cut before its end).
        infra_error: a code naming a failure of Glove's infrastructure (launch, journal,
            the evaluator itself), or None.
        limits_hit: the plan limits that ended the run (``wall_time_s``, ``memory_bytes``,
            ``pids`` ...), empty when none did.
        exit_code: the exit status, 0..255, or None when there is none (ended by a
            signal, or never reaped).
        wall_ms: wall time from exec to reap, in milliseconds (CLOCK_MONOTONIC).
    """

    drained: bool
    infra_error: str | None = None
    limits_hit: tuple[str, ...] = ()
    exit_code: int | None
    wall_ms: int


class Reason(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, kw_only=True
):
    """One reason for an outcome; only the fields that apply are present.

    Attributes:
        code: the stable reason code (module docstring).
        detail: a fixed sentence saying what was found (the same inputs give the same text).
        literal: the index of the literal in ``required`` or ``forbidden``.
        stream: ``raw`` or ``text``: where a forbidden literal was first found (the raw
            bytes win when it is in both).
        offset: the byte offset of the fault (in that stream, or in the raw stream).
        limit: the limit that ended the run.
        infra_error: the infrastructure error's code.
    """

    code: ReasonCode
    detail: str
    literal: int | None = None
    stream: Literal["raw", "text"] | None = None
    offset: int | None = None
    limit: str | None = None
    infra_error: str | None = None


class Outcome(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"verdict": ..., "reasons": [...]}``: the canonical outcome of one run."""

    verdict: Verdict
    reasons: tuple[Reason, ...]


def judge(termination: Termination, evidence: Evidence | None, fixture: Fixture) -> Outcome:
    """The outcome of one run (module docstring). ``evidence`` is None when no evaluator
    ran (then the outcome is at best ``invalid_evidence``).

    Raises:
        EvidenceError: the inputs contradict each other or their types' bounds (evidence
            of another fixture, a negative wall time, an exit code out of 0..255, a
            malformed infrastructure code or limit name): the caller's bug, not a verdict.
    """
    _check(termination, evidence, fixture)
    reasons: list[Reason] = []
    if termination.infra_error is not None:
        reasons.append(
            Reason(
                code="infra_error",
                detail=f"Glove's infrastructure failed ({termination.infra_error}): this "
                "run says nothing about the agent",
                infra_error=termination.infra_error,
            )
        )
    reasons.extend(_evidence_reasons(termination, evidence))
    reasons.extend(
        Reason(code="limit_hit", detail=f"the run was ended by its {name} limit", limit=name)
        for name in sorted(set(termination.limits_hit))
    )
    reasons.extend(_assertion_reasons(termination, evidence, fixture))
    verdict: Verdict = REASON_VERDICTS[reasons[0].code] if reasons else "pass"
    return Outcome(verdict=verdict, reasons=tuple(reasons))


def encode_outcome(outcome: Outcome) -> bytes:
    """The canonical JSON of an outcome (compact, fields in order, absent fields omitted)."""
    return msgspec.json.encode(outcome)


def _check(termination: Termination, evidence: Evidence | None, fixture: Fixture) -> None:
    if termination.wall_ms < 0:
        raise EvidenceError(f"a wall time of {termination.wall_ms} ms")
    code = termination.exit_code
    if code is not None and not 0 <= code <= MAX_EXIT_CODE:
        raise EvidenceError(f"exit code {code} is not in 0..{MAX_EXIT_CODE} (None: a signal)")
    names = [*termination.limits_hit]
    if termination.infra_error is not None:
        names.append(termination.infra_error)
    for name in names:
        if not NAME_RE.fullmatch(name):
            raise EvidenceError(f"{name[:80]!r} is not a snake_case code or limit name")
    if evidence is None:
        return
    if len(evidence.required_text) != len(fixture.required) or not (
        len(evidence.forbidden_raw) == len(evidence.forbidden_text) == len(fixture.forbidden)
    ):
        raise EvidenceError("the evidence was taken against another fixture")


def _evidence_reasons(termination: Termination, evidence: Evidence | None) -> list[Reason]:
    reasons: list[Reason] = []
    if evidence is None:
        reasons.append(
            Reason(code="evidence_missing", detail="no evaluator evidence exists for this run")
        )
    if not termination.drained:
        reasons.append(
            Reason(
                code="stream_incomplete",
                detail="the terminal stream did not drain to its end: some output was "
                "never evaluated",
            )
        )
    if evidence is not None and evidence.utf8 == "invalid":
        reasons.append(
            Reason(
                code="utf8_invalid",
                detail=f"the output is not UTF-8 from byte {evidence.utf8_offset}",
                offset=evidence.utf8_offset,
            )
        )
    if evidence is not None and evidence.utf8 == "truncated":
        reasons.append(
            Reason(
                code="utf8_truncated",
                detail="the output ends inside a UTF-8 sequence that starts at byte "
                f"{evidence.utf8_offset}",
                offset=evidence.utf8_offset,
            )
        )
    return reasons


def _assertion_reasons(
    termination: Termination, evidence: Evidence | None, fixture: Fixture
) -> list[Reason]:
    reasons: list[Reason] = []
    code = termination.exit_code
    if code != fixture.exit_code:
        got = "no exit code (ended by a signal)" if code is None else f"exit code {code}"
        reasons.append(
            Reason(
                code="exit_code_mismatch",
                detail=f"{got}, expected exit code {fixture.exit_code}",
            )
        )
    if termination.wall_ms > fixture.max_wall_ms:
        reasons.append(
            Reason(
                code="wall_time_exceeded",
                detail=f"{termination.wall_ms} ms of wall time is over max_wall_ms "
                f"{fixture.max_wall_ms}",
            )
        )
    if evidence is None:
        return reasons
    for index, (raw, text) in enumerate(
        zip(evidence.forbidden_raw, evidence.forbidden_text, strict=True)
    ):
        if raw is not None:
            also = " (and in the text)" if text is not None else ""
            reasons.append(
                Reason(
                    code="forbidden_literal",
                    detail=f"forbidden[{index}] appears in the raw bytes at {raw}{also}",
                    literal=index,
                    stream="raw",
                    offset=raw,
                )
            )
        elif text is not None:
            reasons.append(
                Reason(
                    code="forbidden_literal",
                    detail=f"forbidden[{index}] appears in the text at {text}",
                    literal=index,
                    stream="text",
                    offset=text,
                )
            )
    reasons.extend(
        Reason(
            code="required_missing",
            detail=f"required[{index}] never appears in the text",
            literal=index,
        )
        for index, offset in enumerate(evidence.required_text)
        if offset is None
    )
    return reasons
