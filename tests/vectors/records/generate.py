"""Make ``landed.json``: the record kinds the legacy state fixture lacks, written by the
dict writers of the landed version (commit 4702f0a, before ``glove.records``), and
receipts of the two older formats, written by the receipt writers of commits cdfa071 (the
first: no ``audit``, no ``counts``) and a5f53e3 (an ``audit`` without ``files``), read
from git.

Run once with the landed version importable, from the repository root (a git checkout)::

    .venv/bin/python tests/vectors/records/generate.py tests/vectors/records/landed.json

Each vector is a record's exact bytes (``hex``), as the writers encoded it: session
journal events (``json.dumps``, sorted keys) and terminal envelopes (RFC 8785): a
refinement envelope, a receipt with projections, an ``internal_error`` outcome, a
transcript that did not verify, a result with fractional limits. Kept so the vectors can
be made again; the JSON file is what the tests read.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

from glove.container import SandboxResult
from glove.container._result import Durations, LimitReport, OutputReport, Usage
from glove.evaluate import Evidence, Termination
from glove.plan import jcs_dumps
from glove.session._driver import internal_outcome
from glove.session._evaluation import evaluation_entry, infra_outcome
from glove.session._receipt import outcome_of, terminal_receipt
from glove.session._store import SessionStore

SID = "20261202T131500Z-0123456789abcdef"
PROJECTION = {
    "alias": "src",
    "target": "/workspace/src",
    "digest": "sha256:" + "ab" * 32,
    "size": 4096,
    "mount_flags": ["ro", "nosuid", "nodev", "noexec"],
    "freeze_method": "detached-tmpfs",
}
EVIDENCE = Evidence(
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


def receipts() -> dict[str, bytes]:
    plan = {"sha256": "sha256:" + "11" * 32, "blake3": "blake3:" + "22" * 32}
    common: dict[str, Any] = {
        "session_id": SID,
        "plan_sha256": plan["sha256"],
        "plan_blake3": plan["blake3"],
        "created_ns": 1796200000123456789,
        "ended_ns": 1796200009123456789,
    }
    termination = Termination(
        drained=True, infra_error=None, limits_hit=(), exit_code=0, wall_ms=812
    )
    judged = infra_outcome("fixture_missing")
    refinement = terminal_receipt(
        **common,
        launch_binding="sha256:" + "33" * 32,
        result=None,
        outcome=outcome_of(None, kind="exited", error=None),
        output={"pty": {"bytes": 40, "sha256": "sha256:" + "44" * 32}},
        launched_ns=1796200001123456789,
        transcript={
            "format": "glove-transcript/v1",
            "bytes": 40,
            "digest": "sha256:" + "55" * 32,
            "evicted": 0,
            "ring_bytes": 65536,
            "complete": True,
        },
        evaluation=evaluation_entry(
            fixture_digest="sha256:" + "66" * 32,
            fixture_size=321,
            refusal=None,
            termination=termination,
            evidence=EVIDENCE,
            outcome=judged,
        ),
        projections=[PROJECTION],
    )
    projected = terminal_receipt(
        **common,
        launch_binding="sha256:" + "77" * 32,
        result=_result(),
        outcome=outcome_of(_result()),
        output={
            "stdout": {"bytes": 100, "sha256": "sha256:" + "88" * 32},
            "stderr": {"bytes": 23, "sha256": "sha256:" + "99" * 32},
        },
        launched_ns=1796200001123456789,
        audit={"records": 4, "bytes": 812, "sha256": "sha256:" + "aa" * 32, "files": 2},
        counts={"tool_calls_denied": 1, "egress_allowed": 2, "egress_denied": 0},
        projections=[PROJECTION, dict(PROJECTION, alias="docs", target="/workspace/docs")],
    )
    internal = terminal_receipt(
        **common,
        launch_binding=None,
        result=None,
        outcome=internal_outcome(RuntimeError("boom \u00e9\u2603"), "finalize"),
        output={},
        launched_ns=None,
        transcript={
            "format": "glove-transcript/v1",
            "bytes": None,
            "digest": None,
            "evicted": None,
            "ring_bytes": None,
            "complete": False,
            "error": "the transcript does not verify: torn meta record",
        },
    )
    refused = terminal_receipt(
        **common,
        launch_binding=None,
        result=None,
        outcome=outcome_of(
            None, error="projection src refused", error_code="projection_digest_mismatch"
        ),
        output={},
        launched_ns=None,
    )
    return {
        "refinement_envelope": jcs_dumps(refinement),
        "receipt_with_projections": jcs_dumps(projected),
        "internal_error": jcs_dumps(internal),
        "setup_error_code": jcs_dumps(refused),
    }


def _old_writer(commit: str) -> types.ModuleType:
    """``glove.session._receipt`` as it was at ``commit`` (pure: it needs the container's
    result type only)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:src/glove/session/_receipt.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType(f"receipt_{commit}")
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    return module


def older_receipts() -> dict[str, bytes]:
    first, audited = _old_writer("cdfa071"), _old_writer("a5f53e3")
    common: dict[str, Any] = {
        "session_id": SID,
        "plan_sha256": "sha256:" + "11" * 32,
        "plan_blake3": "blake3:" + "22" * 32,
        "launch_binding": "sha256:" + "33" * 32,
        "output": {"stdout": {"bytes": 6, "sha256": "sha256:" + "44" * 32}},
        "created_ns": 1796200000123456789,
        "launched_ns": 1796200001123456789,
        "ended_ns": 1796200009123456789,
    }
    return {
        "first_format": jcs_dumps(
            first.terminal_receipt(**common, result=_result(), outcome=first.outcome_of(_result()))
        ),
        "audit_without_files": jcs_dumps(
            audited.terminal_receipt(
                **common,
                result=None,
                outcome=audited.outcome_of(None, kind="daemon_lost", error="gloved stopped"),
                audit={"records": 2, "bytes": 300, "sha256": "sha256:" + "55" * 32},
                counts={"tool_calls_denied": 0, "egress_allowed": 0, "egress_denied": 1},
            )
        ),
    }


async def events() -> dict[str, bytes]:
    journal = _Journal()
    store = SessionStore(journal, b"k" * 32)  # type: ignore[arg-type]
    plan = {"version": 1, "harness": "h\u00e9", "limits": {"wall_time_s": 2.5}, "x": None}
    await store.created(SID, plan, "sha256:" + "11" * 32, "blake3:" + "22" * 32, {"w": 1})
    await store.transition(SID, "preparing", durable=False)
    await store.transition(
        SID, "composed", {"launch_binding": "sha256:" + "33" * 32, "projections": [PROJECTION]}
    )
    await store.transition(SID, "running", {"launched_ns": 1796200001123456789})
    await store.terminal(
        SID,
        7,
        internal_outcome(RuntimeError("boom"), "drive"),
        {
            "verdict": "infra_error",
            "reasons": [{"code": "infra_error", "detail": "d", "infra_error": "internal_error"}],
        },
    )
    await store.cleaned(SID)
    names = ["created", "preparing", "composed", "running", "terminal_refinement", "cleaned"]
    return dict(zip(names, journal.payloads, strict=True))


def main(out: Path) -> None:
    vectors = {
        "receipts": {k: v.hex() for k, v in {**receipts(), **older_receipts()}.items()},
        "events": {k: v.hex() for k, v in asyncio.run(events()).items()},
    }
    out.write_text(json.dumps(vectors, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
