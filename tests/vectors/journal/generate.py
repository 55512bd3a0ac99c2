"""Generate the journal must-fail vectors under ``tests/vectors/journal/`` (byte-stable).

Run ``python -m tests.vectors.journal.generate`` from the repository root to rewrite them; the
test suite checks that the committed files equal what this produces, and that ``verify`` and
``glove journal verify`` classify every one as its ``wantErr`` says.

The journals are built here from the sans-IO codec and chain, not by the writer, so the
vectors are deterministic (fixed key, journal ids and clock) and are a second construction
of the format the writer produces. Mutants follow transparency-dev's ``proofgen`` idea: one
valid journal, then a systematic family of reorder, replay, delete, splice, forge, re-emit and
damage probes, each with the error class and position a verifier must report.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from glove.journal import _chain
from glove.journal._codec import (
    HEADER_BYTES,
    RecordKind,
    SegmentHeader,
    SegmentState,
    encode_body,
    encode_header,
    encode_record,
)

HERE = Path(__file__).parent
KEY = bytes(range(32))
JOURNAL_ID = bytes.fromhex("00112233445566778899aabbccddeeff")
OTHER_ID = bytes.fromhex("ffeeddccbbaa99887766554433221100")
T0 = 1_790_000_000_000_000_000
KIND = 2  # JournalKind.SESSION


@dataclass
class Segment:
    """One segment under construction: its header and its encoded records."""

    header: SegmentHeader
    records: list[bytes] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    end_tag: bytes = b""

    def bytes(self) -> bytes:
        """The segment file's content."""
        return encode_header(self.header) + b"".join(self.records)

    def offset_of(self, index: int) -> int:
        """Byte offset of record ``index``."""
        return HEADER_BYTES + sum(len(r) for r in self.records[:index])


def new_segment(
    jid: bytes, number: int, first_seq: int, start_tag: bytes, state: SegmentState
) -> Segment:
    """An empty segment with an authenticated header."""
    draft = SegmentHeader(jid, KIND, number, first_seq, start_tag, b"\0" * 32, state)
    tag = _chain.header_tag(KEY, draft)
    header = SegmentHeader(jid, KIND, number, first_seq, start_tag, tag, state)
    return Segment(header, end_tag=start_tag)


def add(seg: Segment, kind: RecordKind, payload: bytes, *, batch_pos: int = 0) -> None:
    """Append one correctly chained record."""
    seq = seg.header.first_seq + len(seg.records)
    body = encode_body(seq, T0 + seq, int(kind), payload, batch_pos)
    tag = _chain.record_tag(KEY, seg.header.journal_id, seg.end_tag, seq, body)
    seg.records.append(encode_record(body, tag))
    seg.seqs.append(seq)
    seg.end_tag = tag


def base_journal(jid: bytes = JOURNAL_ID) -> tuple[Segment, Segment]:
    """A valid two-segment journal: a sealed segment of 5 records + seal, then 4 records."""
    seg0 = new_segment(jid, 0, 1, _chain.genesis_tag(KEY, jid), SegmentState.SEALED)
    kinds = [RecordKind.RECEIPT, RecordKind.REFINEMENT, RecordKind.DATA]
    for i in range(5):
        add(seg0, kinds[i % 3], b"segment-0 record %d" % i)
    add(seg0, RecordKind.SEAL, struct.pack("<QQ", 0, 5))
    seg1 = new_segment(jid, 1, 7, seg0.end_tag, SegmentState.OFFLINE)
    for i in range(4):
        add(seg1, kinds[i % 3], b"segment-1 record %d" % i)
    return seg0, seg1


def _recrc(record: bytes) -> bytes:
    """Recompute a record's CRC after a deliberate edit (what a forger would do)."""
    length = record[4:8]
    body_len = struct.unpack("<I", length)[0]
    body, tag = record[12 : 12 + body_len], record[12 + body_len :]
    crc = zlib.crc32(tag, zlib.crc32(body, zlib.crc32(length)))
    return record[:8] + struct.pack("<I", crc) + record[12:]


def _header_with(seg: Segment, **fields: object) -> bytes:
    """A header with edited fields and a recomputed CRC but the original tag (a forgery)."""
    h = seg.header
    values = {
        "journal_id": h.journal_id,
        "journal_kind": h.journal_kind,
        "segment": h.segment,
        "first_seq": h.first_seq,
        "start_tag": h.start_tag,
        "header_tag": h.header_tag,
        "state": h.state,
    }
    values.update(fields)
    return encode_header(SegmentHeader(**values))  # type: ignore[arg-type]


def _files(*segments: tuple[int, bytes]) -> dict[str, bytes]:
    return {f"seg-{n:08d}.glj": data for n, data in segments}


def build_vectors() -> dict[str, dict[str, object]]:
    """Every vector by name: files, optional checkpoint and the expected finding."""
    seg0, seg1 = base_journal()
    s0 = seg0.bytes()
    header1 = encode_header(seg1.header)
    recs = seg1.records
    last_tag = seg1.end_tag.hex()
    vectors: dict[str, dict[str, object]] = {}

    def vector(
        name: str,
        description: str,
        files: dict[str, bytes],
        want: str | None,
        *,
        seq: int | None = None,
        offset: int | None = None,
        segment: str | None = None,
        checkpoint: str | None = None,
    ) -> None:
        vectors[name] = {
            "name": name,
            "description": description,
            "key": KEY.hex(),
            "checkpoint": checkpoint,
            "wantErr": want,
            "wantSeq": seq,
            "wantOffset": offset,
            "wantSegment": segment,
            "files": {k: base64.b64encode(v).decode() for k, v in sorted(files.items())},
        }

    seg1_name = "seg-00000001.glj"
    vector(
        "valid",
        "the unmodified two-segment journal, with a checkpoint on its last record",
        _files((0, s0), (1, seg1.bytes())),
        None,
        checkpoint=f"10:{last_tag}",
    )
    vector(
        "reorder",
        "records 8 and 9 swapped",
        _files((0, s0), (1, header1 + recs[0] + recs[2] + recs[1] + recs[3])),
        "JournalTampered",
        seq=8,
        offset=seg1.offset_of(1),
        segment=seg1_name,
    )
    vector(
        "replay",
        "record 8 appended again at the tail",
        _files((0, s0), (1, seg1.bytes() + recs[1])),
        "JournalTampered",
        seq=11,
        offset=seg1.offset_of(4),
        segment=seg1_name,
    )
    vector(
        "delete-middle",
        "record 8 removed",
        _files((0, s0), (1, header1 + recs[0] + recs[2] + recs[3])),
        "JournalTampered",
        seq=8,
        offset=seg1.offset_of(1),
        segment=seg1_name,
    )
    vector(
        "delete-last-with-checkpoint",
        "record 10 removed at a boundary; only the checkpoint on record 10 reveals it",
        _files((0, s0), (1, header1 + recs[0] + recs[1] + recs[2])),
        "JournalTruncated",
        seq=10,
        checkpoint=f"10:{last_tag}",
    )
    _, other1 = base_journal(OTHER_ID)
    vector(
        "splice-foreign-record",
        "record 8 replaced by record 8 of another journal under the same key",
        _files((0, s0), (1, header1 + recs[0] + other1.records[1] + recs[2] + recs[3])),
        "JournalTampered",
        seq=8,
        offset=seg1.offset_of(1),
        segment=seg1_name,
    )
    vector(
        "splice-foreign-segment",
        "segment 1 taken from another journal under the same key",
        _files((0, s0), (1, other1.bytes())),
        "JournalTampered",
        offset=0,
        segment=seg1_name,
    )
    sealed1 = new_segment(JOURNAL_ID, 1, 7, seg0.end_tag, SegmentState.SEALED)
    for i in range(4):
        add(
            sealed1,
            [RecordKind.RECEIPT, RecordKind.REFINEMENT, RecordKind.DATA][i % 3],
            b"s1 %d" % i,
        )
    add(sealed1, RecordKind.SEAL, struct.pack("<QQ", 1, 4))
    vector(
        "reemit-old-segment",
        "segment 0 re-emitted as segment 2 after segment 1 was sealed",
        _files((0, s0), (1, sealed1.bytes()), (2, s0)),
        "JournalTampered",
        offset=0,
        segment="seg-00000002.glj",
    )
    vector(
        "missing-segment",
        "segment 0 of a three-segment journal kept, segment 1 deleted, segment 2 present",
        _files((0, s0), (2, seg1.bytes())),
        "JournalTampered",
        segment="seg-00000002.glj",
    )
    vector(
        "forged-payload",
        "record 9's payload edited and its CRC recomputed",
        _files(
            (0, s0),
            (
                1,
                header1
                + recs[0]
                + recs[1]
                + _recrc(recs[2].replace(b"record", b"RECORD"))
                + recs[3],
            ),
        ),
        "JournalTampered",
        seq=9,
        offset=seg1.offset_of(2),
        segment=seg1_name,
    )
    domain = bytearray(recs[0])
    domain[12 + 16] = int(RecordKind.REFINEMENT)  # a receipt relabelled as a refinement
    vector(
        "kind-domain-swap",
        "record 7's kind changed from receipt to refinement, CRC recomputed",
        _files((0, s0), (1, header1 + _recrc(bytes(domain)) + recs[1] + recs[2] + recs[3])),
        "JournalTampered",
        seq=7,
        offset=seg1.offset_of(0),
        segment=seg1_name,
    )
    vector(
        "forged-header",
        "segment 1's first_seq edited, header CRC recomputed, tag kept",
        _files((0, s0), (1, _header_with(seg1, first_seq=8) + b"".join(recs))),
        "JournalTampered",
        offset=0,
        segment=seg1_name,
    )
    after_seal = new_segment(
        JOURNAL_ID, 0, 1, _chain.genesis_tag(KEY, JOURNAL_ID), SegmentState.OFFLINE
    )
    for i in range(2):
        add(after_seal, RecordKind.DATA, b"r%d" % i)
    add(after_seal, RecordKind.SEAL, struct.pack("<QQ", 0, 2))
    add(after_seal, RecordKind.DATA, b"written after the seal")
    vector(
        "record-after-seal",
        "a correctly chained record after the seal record",
        _files((0, after_seal.bytes())),
        "JournalTampered",
        offset=after_seal.offset_of(3),
        segment="seg-00000000.glj",
    )
    vector(
        "checkpoint-tag-mismatch",
        "a checkpoint on record 8 with record 9's tag",
        _files((0, s0), (1, seg1.bytes())),
        "JournalTampered",
        seq=8,
        checkpoint=f"8:{_tag_of(recs[2]).hex()}",
    )
    flipped = bytearray(recs[1])
    flipped[20] ^= 0x10
    vector(
        "bitflip-middle",
        "one bit flipped inside record 8, valid records after it",
        _files((0, s0), (1, header1 + recs[0] + bytes(flipped) + recs[2] + recs[3])),
        "JournalCorrupt",
        seq=8,
        offset=seg1.offset_of(1),
        segment=seg1_name,
    )
    vector(
        "torn-tail",
        "record 10 cut in the middle",
        _files((0, s0), (1, seg1.bytes()[:-20])),
        "JournalCorrupt",
        seq=10,
        offset=seg1.offset_of(3),
        segment=seg1_name,
    )
    vector(
        "zero-tail",
        "4 KiB of zeros appended (an external resize)",
        _files((0, s0), (1, seg1.bytes() + bytes(4096))),
        "JournalCorrupt",
        seq=11,
        offset=seg1.offset_of(4),
        segment=seg1_name,
    )
    vector(
        "damaged-sealed-segment",
        "segment 0 cut inside its seal record",
        _files((0, s0[:-10]), (1, seg1.bytes())),
        "JournalTampered",
        segment="seg-00000000.glj",
    )
    vector(
        "short-header",
        "segment 1 holds only part of a header",
        _files((0, s0), (1, header1[:100])),
        "JournalCorrupt",
        offset=0,
        segment=seg1_name,
    )
    incompat = bytearray(header1)
    incompat[6] = 0x80
    vector(
        "unknown-incompatible-flag",
        "segment 1 sets an unknown incompatible feature flag",
        _files((0, s0), (1, bytes(incompat) + b"".join(recs))),
        "UnsupportedFormat",
    )
    return vectors


def _tag_of(record: bytes) -> bytes:
    return record[-32:]


def render(vector: dict[str, object]) -> str:
    """The canonical JSON text of a vector (what is committed)."""
    return json.dumps(vector, indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Rewrite every vector file."""
    for name, vector in build_vectors().items():
        (HERE / f"{name}.json").write_text(render(vector))


if __name__ == "__main__":
    main()
