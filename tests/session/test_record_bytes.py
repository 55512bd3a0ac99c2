"""The typed writers give the bytes the landed dict writers gave (tests/vectors/records):
the same inputs through ``terminal_receipt`` and ``SessionStore`` encode to the same
receipts and journal records, byte for byte; and a journal record of an unknown kind
refuses the replay instead of being skipped."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import msgspec
import pytest

from glove.container import Durations, LimitReport, SandboxResult
from glove.container._result import OutputReport, Usage
from glove.evaluate import Evidence, Outcome, Termination
from glove.records import (
    AuditDigest,
    OutputDigest,
    Projection,
    ReceiptOutcome,
    StateDetails,
    TranscriptEntry,
    encode_receipt,
)
from glove.session._driver import internal_outcome
from glove.session._evaluation import evaluation_entry, infra_outcome
from glove.session._receipt import outcome_of, terminal_receipt
from glove.session._store import SessionStore
from glove.session.errors import RecoveryRefused

VECTORS = json.loads(
    (Path(__file__).parents[1] / "vectors" / "records" / "landed.json").read_text()
)
RECEIPTS = {name: bytes.fromhex(v) for name, v in VECTORS["receipts"].items()}
EVENTS = {name: bytes.fromhex(v) for name, v in VECTORS["events"].items()}
SID = "20261202T131500Z-0123456789abcdef"
PROJECTION = Projection(
    alias="src",
    target="/workspace/src",
    digest="sha256:" + "ab" * 32,
    size=4096,
    mount_flags=["ro", "nosuid", "nodev", "noexec"],
    freeze_method="detached-tmpfs",
)
COMMON: dict[str, Any] = {
    "session_id": SID,
    "plan_sha256": "sha256:" + "11" * 32,
    "plan_blake3": "blake3:" + "22" * 32,
    "created_ns": 1796200000123456789,
    "ended_ns": 1796200009123456789,
}


def _result() -> SandboxResult:
    return SandboxResult(
        outcome="limit",
        exit_code=137,
        signal=9,
        durations=Durations(setup_s=0.012, total_s=2.5),
        limits={
            "wall_time_s": LimitReport(2.5, "timer", True),
            "memory_bytes": LimitReport(268435456, "cgroup", False),
            "cpu_time_s": LimitReport(10, "rlimit", None),
        },
        output=OutputReport(bytes=123),
        error="wall time limit reached",
        usage=Usage(cpu_user_s=0.25, cpu_system_s=0.125, peak_rss_bytes=1 << 20, disk_bytes=0),
    )


def test_the_typed_receipt_writer_gives_the_landed_bytes() -> None:
    evidence = Evidence(
        bytes_total=40,
        bytes_evicted=0,
        text_bytes=38,
        sha256="sha256:" + "cd" * 32,
        utf8="valid",
        utf8_offset=None,
        required_text=(3,),
        forbidden_raw=(None,),
        forbidden_text=(None,),
    )
    refinement = terminal_receipt(
        **COMMON,
        launch_binding="sha256:" + "33" * 32,
        result=None,
        outcome=outcome_of(None, kind="exited", error=None),
        output={"pty": OutputDigest(bytes=40, sha256="sha256:" + "44" * 32)},
        launched_ns=1796200001123456789,
        transcript=TranscriptEntry(
            format="glove-transcript/v1",
            bytes=40,
            digest="sha256:" + "55" * 32,
            evicted=0,
            ring_bytes=65536,
            complete=True,
        ),
        evaluation=evaluation_entry(
            fixture_digest="sha256:" + "66" * 32,
            fixture_size=321,
            refusal=None,
            termination=Termination(
                drained=True, infra_error=None, limits_hit=(), exit_code=0, wall_ms=812
            ),
            evidence=evidence,
            outcome=infra_outcome("fixture_missing"),
        ),
        projections=[PROJECTION],
    )
    assert encode_receipt(refinement) == RECEIPTS["refinement_envelope"]
    projected = terminal_receipt(
        **COMMON,
        launch_binding="sha256:" + "77" * 32,
        result=_result(),
        outcome=outcome_of(_result()),
        output={
            "stdout": OutputDigest(bytes=100, sha256="sha256:" + "88" * 32),
            "stderr": OutputDigest(bytes=23, sha256="sha256:" + "99" * 32),
        },
        launched_ns=1796200001123456789,
        audit=AuditDigest(records=4, bytes=812, sha256="sha256:" + "aa" * 32, files=2),
        counts={"tool_calls_denied": 1, "egress_allowed": 2, "egress_denied": 0},
        projections=[
            PROJECTION,
            msgspec.structs.replace(PROJECTION, alias="docs", target="/workspace/docs"),
        ],
    )
    assert encode_receipt(projected) == RECEIPTS["receipt_with_projections"]
    internal = terminal_receipt(
        **COMMON,
        launch_binding=None,
        result=None,
        outcome=internal_outcome(RuntimeError("boom"), "finalize"),
        output={},
        launched_ns=None,
        transcript=TranscriptEntry(
            format="glove-transcript/v1",
            bytes=None,
            digest=None,
            evicted=None,
            ring_bytes=None,
            complete=False,
            error="the transcript does not verify: torn meta record",
        ),
    )
    assert encode_receipt(internal) == RECEIPTS["internal_error"]
    refused = terminal_receipt(
        **COMMON,
        launch_binding=None,
        result=None,
        outcome=outcome_of(
            None, error="projection src refused", error_code="projection_digest_mismatch"
        ),
        output={},
        launched_ns=None,
    )
    assert encode_receipt(refused) == RECEIPTS["setup_error_code"]


class _Seq:
    def __init__(self, seq: int) -> None:
        self.seq = seq


class _Journal:
    """Captures what the store appends (the writer is not under test here)."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []

    async def append(self, payload: bytes, **_: Any) -> _Seq:
        self.payloads.append(payload)
        return _Seq(len(self.payloads))

    async def sync(self) -> int:
        return len(self.payloads)


NAMES = ["created", "preparing", "composed", "running", "terminal_refinement", "cleaned"]


@pytest.fixture
def landed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's clock gives the vectors' ``at``, in order."""
    import glove.session._store as store_module

    times = iter(json.loads(EVENTS[name])["at"] for name in NAMES)
    monkeypatch.setattr(store_module, "time", types.SimpleNamespace(time_ns=lambda: next(times)))


@pytest.mark.usefixtures("landed_clock")
async def test_the_typed_store_writes_the_landed_events() -> None:
    journal = _Journal()
    store = SessionStore(journal, b"k" * 32)  # type: ignore[arg-type]
    plan = {"version": 1, "harness": "h\u00e9", "limits": {"wall_time_s": 2.5}, "x": None}
    await store.created(SID, plan, "sha256:" + "11" * 32, "blake3:" + "22" * 32, {"w": 1})
    await store.transition(SID, "preparing", durable=False)
    await store.transition(
        SID,
        "composed",
        StateDetails(launch_binding="sha256:" + "33" * 32, projections=[PROJECTION]),
    )
    await store.transition(SID, "running", StateDetails(launched_ns=1796200001123456789))
    verdict = msgspec.convert(
        {
            "verdict": "infra_error",
            "reasons": [{"code": "infra_error", "detail": "d", "infra_error": "internal_error"}],
        },
        Outcome,
    )
    await store.terminal(SID, 7, internal_outcome(RuntimeError("boom"), "drive"), verdict)
    await store.cleaned(SID)
    assert dict(zip(NAMES, journal.payloads, strict=True)) == EVENTS
    record = store.sessions[SID]
    assert record.launch_binding == "sha256:" + "33" * 32
    assert record.launched_ns == 1796200001123456789
    assert record.projections == [PROJECTION]
    assert isinstance(record.outcome, ReceiptOutcome)
    assert record.cleaned


def test_an_unknown_event_kind_refuses_the_replay() -> None:
    """Never skipped: a record the code does not know stops recovery (fail closed)."""
    store = SessionStore(_Journal(), b"k" * 32)  # type: ignore[arg-type]
    store._apply(EVENTS["created"])
    with pytest.raises(RecoveryRefused, match="purged"):
        store._apply(b'{"at":1,"id":"' + SID.encode() + b'","t":"purged"}')
    with pytest.raises(RecoveryRefused, match="unknown"):
        store._apply(b'{"at":1,"id":"other","t":"cleaned"}')
