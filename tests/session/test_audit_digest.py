"""The receipt's audit digest: every file a session's audit log rotated into, oldest first,
whole records only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from glove.actors import running
from glove.audit import AuditLog
from glove.session._mediated import AUDIT_NAME, audit_digest


async def test_a_rotated_log_is_digested_oldest_first(tmp_path: Path) -> None:
    """A real AuditLog rotating at 64 KiB: the digest covers audit.log.N ... .1, audit.log."""
    path = tmp_path / AUDIT_NAME
    async with running(AuditLog(path, max_bytes=65536, keep_files=4)) as log:
        for n in range(200):
            await log.append({"kind": "mcp.call", "tool": "echo__echo", "n": n, "pad": "x" * 1000})
    rotated = sorted(tmp_path.glob(f"{AUDIT_NAME}.*"), key=lambda p: -int(p.suffix[1:]))
    assert len(rotated) >= 2, "the log did not rotate"
    ordered = b"".join(p.read_bytes() for p in [*rotated, path])
    digest = audit_digest(path)
    assert digest is not None
    assert (digest.files, digest.bytes, digest.records) == (
        len(rotated) + 1,
        len(ordered),
        ordered.count(b"\n"),
    )
    assert digest.sha256 == "sha256:" + hashlib.sha256(ordered).hexdigest()
    seqs = [json.loads(line)["seq"] for line in ordered.splitlines()]
    assert seqs == sorted(seqs)  # oldest first, in the order they were written


def test_a_torn_last_line_is_not_committed_to(tmp_path: Path) -> None:
    """A crash mid-append leaves a line without its newline: it was never acknowledged."""
    path = tmp_path / AUDIT_NAME
    whole = b'{"seq":1,"decision":"allow"}\n{"seq":2,"decision":"deny"}\n'
    path.write_bytes(whole + b'{"seq":3,"deci')
    digest = audit_digest(path)
    assert digest is not None
    assert (digest.records, digest.bytes) == (2, len(whole))
    assert digest.sha256 == "sha256:" + hashlib.sha256(whole).hexdigest()
    assert audit_digest(tmp_path / "absent.log") is None
