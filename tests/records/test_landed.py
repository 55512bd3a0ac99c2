"""Records the landed version wrote decode strictly as ``glove.records`` types and encode
back to the same bytes (they are hashed, and the receipts signed).

``tests/vectors/records/landed.json`` holds what the legacy state fixture lacks (a
refinement envelope, receipts with projections or an ``error_code``, an ``internal_error``
outcome, every session journal event), made by the dict writers of commit 4702f0a, and
receipts of the two older formats (no ``audit`` and ``counts``; an ``audit`` without
``files``), made by the writers of their commits (its ``generate.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from glove.records import (
    RecordInvalid,
    RefinementEnvelope,
    SessionReceipt,
    StateChanged,
    Terminal,
    decode_event,
    decode_receipt,
    encode_event,
    encode_receipt,
)

VECTORS = json.loads(
    (Path(__file__).parents[1] / "vectors" / "records" / "landed.json").read_text()
)
RECEIPTS = {name: bytes.fromhex(v) for name, v in VECTORS["receipts"].items()}
EVENTS = {name: bytes.fromhex(v) for name, v in VECTORS["events"].items()}


@pytest.mark.parametrize("name", sorted(RECEIPTS))
def test_a_landed_receipt_decodes_and_encodes_to_its_bytes(name: str) -> None:
    receipt = decode_receipt(RECEIPTS[name])
    assert encode_receipt(receipt) == RECEIPTS[name]


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_a_landed_event_decodes_and_encodes_to_its_bytes(name: str) -> None:
    assert encode_event(decode_event(EVENTS[name])) == EVENTS[name]


def test_the_kinds_are_told_apart() -> None:
    assert isinstance(decode_receipt(RECEIPTS["refinement_envelope"]), RefinementEnvelope)
    projected = decode_receipt(RECEIPTS["receipt_with_projections"])
    assert isinstance(projected, SessionReceipt)
    assert projected.projections is not msgspec.UNSET
    assert len(projected.projections) == 2
    internal = decode_receipt(RECEIPTS["internal_error"])
    assert internal.outcome.kind == "internal_error"
    assert internal.outcome.error_code is msgspec.UNSET  # absent, not null
    first = decode_receipt(RECEIPTS["first_format"])  # the reader of the first format
    assert first.audit is msgspec.UNSET
    assert first.counts is msgspec.UNSET
    audited = decode_receipt(RECEIPTS["audit_without_files"])
    assert audited.audit is not None
    assert audited.audit is not msgspec.UNSET
    assert audited.audit.files is msgspec.UNSET
    refused = decode_receipt(RECEIPTS["setup_error_code"])
    assert refused.outcome.error_code == "projection_digest_mismatch"
    preparing = decode_event(EVENTS["preparing"])
    assert isinstance(preparing, StateChanged)
    assert preparing.details is msgspec.UNSET
    assert isinstance(decode_event(EVENTS["terminal_refinement"]), Terminal)


def _edited(payload: bytes, **members: object) -> bytes:
    value = json.loads(payload)
    value.update(members)
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (_edited(EVENTS["cleaned"], t="purged"), "purged"),  # an unknown kind
        (_edited(EVENTS["cleaned"], extra=1), "extra"),  # an unknown member
        (_edited(EVENTS["running"], state="flying"), "state"),  # an unknown state
        (_edited(EVENTS["created"], at="soon"), "at"),  # a member of the wrong type
        (b"[1]", "no event"),
        (b"{", "no event"),
    ],
)
def test_an_event_that_is_not_one_is_refused(payload: bytes, needle: str) -> None:
    with pytest.raises(RecordInvalid, match=needle):
        decode_event(payload)


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (_edited(RECEIPTS["internal_error"], receipt="glove-session/v9"), "glove-session/v9"),
        (_edited(RECEIPTS["internal_error"], tip=1), "tip"),
        (
            _edited(RECEIPTS["internal_error"], outcome={"kind": "vanished"}),
            "outcome",
        ),
        # a refinement envelope must carry its evaluation
        (_edited(RECEIPTS["internal_error"], receipt="glove-refinement/v1"), "evaluation"),
    ],
)
def test_a_receipt_that_is_not_one_is_refused(payload: bytes, needle: str) -> None:
    with pytest.raises(RecordInvalid, match=needle):
        decode_receipt(payload)
