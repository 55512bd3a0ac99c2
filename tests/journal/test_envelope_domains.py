"""Resource receipts and refinement envelopes share one journal, but neither a MAC nor a
signature over one domain ever verifies as the other."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from glove.journal import (
    ENVELOPE_DOMAINS,
    REFINEMENT_ENVELOPE,
    RESOURCE_ENVELOPE,
    EntryMismatch,
    ProofInvalid,
    RecordKind,
    decode_bundle,
    envelope_kind,
    open_transparency_log,
    verify,
    verify_bundle,
)
from tests.journal._tlog_helpers import SIGNING_KEY

from .test_bundle import _rewrite

VERIFIER = SIGNING_KEY.verifier


def _envelope(session: str, domain: str, **extra: object) -> bytes:
    return json.dumps({"receipt": domain, "session_id": session, **extra}).encode()


async def _log_of_both(jdir: Path, key: bytes) -> dict[str, bytes]:
    """A log holding a resource receipt then a refinement envelope; both bundles."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    resource, _ = await log.append_receipt(
        _envelope("res", RESOURCE_ENVELOPE), kind=RecordKind.RECEIPT
    )
    refined, _ = await log.append_receipt(
        _envelope("ref", REFINEMENT_ENVELOPE, evaluation={"outcome": {"verdict": "pass"}}),
        kind=RecordKind.REFINEMENT,
    )
    assert (resource.seq + 1, resource.kind, refined.kind) == (refined.seq, 2, 3)
    await log.checkpoint()
    bundles = {name: await log.export_bundle(name) for name in ("res", "ref")}
    await log.close()
    return bundles


def test_each_receipt_kind_has_its_own_envelope_domain() -> None:
    """RECEIPT and REFINEMENT name two different domains, and envelope_kind reads them back."""
    assert ENVELOPE_DOMAINS == {
        RecordKind.RECEIPT: "glove-session/v1",
        RecordKind.REFINEMENT: "glove-refinement/v1",
    }
    for kind, domain in ENVELOPE_DOMAINS.items():
        assert envelope_kind({"receipt": domain}) == kind
    assert envelope_kind({"receipt": "glove-other/v1"}) is None


async def test_a_signed_bundle_verifies_only_as_its_own_domain(jdir: Path, key: bytes) -> None:
    """Both bundles verify under one checkpoint signature; each verifies as its own kind and
    is refused as the other's, and without a kind both still verify as before."""
    bundles = await _log_of_both(jdir, key)
    for name, own, other in (
        ("res", RecordKind.RECEIPT, RecordKind.REFINEMENT),
        ("ref", RecordKind.REFINEMENT, RecordKind.RECEIPT),
    ):
        verify_bundle(bundles[name], VERIFIER)
        assert verify_bundle(bundles[name], VERIFIER, kind=own).session_id == name
        with pytest.raises(EntryMismatch, match="envelope domain"):
            verify_bundle(bundles[name], VERIFIER, kind=other)


async def test_relabelling_an_entry_into_the_other_domain_breaks_the_proof(
    jdir: Path, key: bytes
) -> None:
    """A forger who rewrites a refinement envelope as a resource receipt (entry and shown
    receipt alike, canonically re-encoded) or the reverse gets a leaf the signed tree does
    not hold: the inclusion proof fails."""
    bundles = await _log_of_both(jdir, key)
    for name, domain in (("ref", RESOURCE_ENVELOPE), ("res", REFINEMENT_ENVELOPE)):
        bundle = decode_bundle(bundles[name])
        forged = {**bundle.receipt, "receipt": domain}
        leaf = json.dumps(forged).encode()
        mutant = _rewrite(
            bundles[name], receipt=forged, leaf=base64.b64encode(leaf).decode("ascii")
        )
        with pytest.raises(ProofInvalid):
            verify_bundle(mutant, VERIFIER)


async def test_a_refinement_record_relabelled_as_a_receipt_fails_its_mac(
    jdir: Path, key: bytes
) -> None:
    """Flipping a REFINEMENT record's kind byte to RECEIPT (its CRC recomputed, so only the
    HMAC can tell) makes the journal fail verification; so does the reverse."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    await log.append_receipt(_envelope("res", RESOURCE_ENVELOPE), kind=RecordKind.RECEIPT)
    await log.append_receipt(_envelope("ref", REFINEMENT_ENVELOPE), kind=RecordKind.REFINEMENT)
    await log.close()
    assert verify(jdir, key).ok
    (segment,) = [p for p in jdir.iterdir() if p.name.startswith("seg-")]
    original = segment.read_bytes()
    for session, was, now in (("ref", 3, 2), ("res", 2, 3)):
        data = bytearray(original)
        payload = data.find(b'"session_id": "' + session.encode())
        start = data.rfind(b'{"receipt"', 0, payload)
        kind_at = start - 5  # body: seq u64, t_ns u64, kind u8, batch position u32, payload
        assert data[kind_at] == was
        data[kind_at] = now
        record = kind_at - 16 - 12  # GREC, u32 length, u32 crc, then the body
        assert data[record : record + 4] == b"GREC"
        (length,) = struct.unpack_from("<I", data, record + 4)
        body_and_tag = bytes(data[record + 12 : record + 12 + length + 32])
        crc = zlib.crc32(data[record + 4 : record + 8])
        crc = zlib.crc32(body_and_tag[length:], zlib.crc32(body_and_tag[:length], crc))
        struct.pack_into("<I", data, record + 8, crc)
        segment.write_bytes(bytes(data))
        report = verify(jdir, key)
        assert not report.ok, session
        assert "tag" in repr(report).lower(), report  # the HMAC refused it, not the CRC
    segment.write_bytes(original)
    assert verify(jdir, key).ok
