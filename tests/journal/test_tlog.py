"""The transparency log over a real receipts journal: appends, checkpoints, bundles, recovery."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from glove.journal import (
    JournalKind,
    JournalLimits,
    LogMismatch,
    NotSealed,
    ReceiptPayloadInvalid,
    RecordKind,
    SessionNotFound,
    TransparencyLog,
    _tlog,
    export_offline,
    open_journal,
    open_transparency_log,
    verify,
    verify_bundle,
)
from glove.journal._codec import decode_header
from glove.journal._entries import iter_entries
from glove.journal._merkle import leaf_hash, root_of
from glove.journal._storage import PosixStorage
from glove.journal._treebase import read_base
from tests.journal._tlog_helpers import (
    OTHER_SIGNING_KEY,
    SIGNING_KEY,
    ack_all,
    receipt,
    rewrite_segment,
)

SMALL = JournalLimits(max_segment_bytes=4096, max_segment_records=1000, max_segments=3)


def _journal_root(path: Path, key: bytes, size: int) -> bytes:
    """The RFC 6962 root of the first ``size`` records, from scratch (and the tree base of
    deleted segments, when there are any)."""
    storage = PosixStorage()
    entries = list(iter_entries(storage, str(path), key))
    base = read_base(
        storage,
        str(path),
        key,
        decode_header((path / f"seg-{entries[0].segment:08d}.glj").read_bytes()[:128]).journal_id,
    )
    if base.size == 0:
        return root_of([leaf_hash(e.payload) for e in entries][:size])
    tree = base.compact_range()
    for entry in entries:
        if entry.seq > base.size and tree.size < size:
            tree.append(leaf_hash(entry.payload))
    assert tree.size == size
    return tree.root()


async def test_append_returns_leaf_index_and_bundles_verify(jdir: Path, key: bytes) -> None:
    """Leaf index is seq - 1; a checkpoint seals; the bundle verifies with the public key."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    got = [await log.append_receipt(receipt(f"s{i % 3}", i)) for i in range(10)]
    assert [leaf for _, leaf in got] == list(range(10))
    assert [r.seq for r, _ in got] == list(range(1, 11))
    sealed = await log.checkpoint()
    assert sealed.size == 10
    assert sealed.root == _journal_root(jdir, key, 10)
    assert sealed.checkpoint.origin == SIGNING_KEY.name
    bundle = await log.export_bundle("s1")
    await log.close()
    verified = verify_bundle(bundle, SIGNING_KEY.verifier)
    assert verified.session_id == "s1"
    assert verified.leaf_index == 7
    assert verified.receipt == {"session_id": "s1", "n": 7}
    doc = json.loads(bundle)
    assert set(doc) >= {"checkpoint", "tree_size", "leaf_index", "leaf", "inclusion_proof"}
    assert verify(jdir, key).ok


async def test_checkpoint_is_stored_durably_and_reused(jdir: Path, key: bytes) -> None:
    """The checkpoint file holds the signed note; an unchanged tree is not re-signed."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    await log.append_receipt(receipt("a", 1))
    first = await log.checkpoint()
    assert (jdir / "checkpoint").read_text() == first.note
    assert await log.checkpoint() is first
    await log.append_receipt(receipt("a", 2))
    second = await log.checkpoint()
    assert second.size == 2
    assert (jdir / "checkpoint").read_text() == second.note
    await log.close(seal=False)


async def test_close_seals_and_reopen_recovers(jdir: Path, key: bytes) -> None:
    """Closing checkpoints the tail; reopening rebuilds the same tree and the session index."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    for i in range(25):
        await log.append_receipt(receipt(f"s{i % 4}", i))
    await log.close()
    sealed = (jdir / "checkpoint").read_text()
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    assert log.last_checkpoint is not None
    assert log.last_checkpoint.note == sealed
    assert log.size == 25
    bundle = await log.export_bundle("s2")
    assert verify_bundle(bundle, SIGNING_KEY.verifier).receipt["n"] == 22
    _, leaf = await log.append_receipt(receipt("s9", 99))
    assert leaf == 25
    await log.close()


async def test_rotation_and_pruning_keep_the_tree(jdir: Path, key: bytes) -> None:
    """Seals are leaves, deleted segments live on in the tree base, bundles still verify."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    for i in range(150):
        await log.append_receipt(receipt(f"s{i % 5}", i, pad="x" * 40))
        if i % 20 == 0:
            await ack_all(log.journal)
    await ack_all(log.journal)
    for i in range(150, 160):
        await log.append_receipt(receipt(f"s{i % 5}", i))
    sealed = await log.checkpoint()
    assert sealed.size == (await log.journal.status()).seq > 160  # seal records count too
    assert (jdir / "tree-base").exists()
    assert not (jdir / "seg-00000000.glj").exists()
    bundle = await log.export_bundle("s3")
    await log.close()
    assert verify_bundle(bundle, SIGNING_KEY.verifier).receipt["n"] == 158
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    assert (await log.checkpoint()).note == sealed.note
    assert verify_bundle(await log.export_bundle("s4"), SIGNING_KEY.verifier)
    await log.close()
    assert export_offline(jdir, "s3", SIGNING_KEY.verifier) == bundle


async def test_pruned_session_is_not_found(jdir: Path, key: bytes) -> None:
    """A session whose receipts were acknowledged and deleted has no bundle any more."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    await log.append_receipt(receipt("old", 0))
    for i in range(200):
        await log.append_receipt(receipt("new", i, pad="y" * 60))
        await ack_all(log.journal)
    with pytest.raises(SessionNotFound, match="deleted"):
        await log.export_bundle("old")
    with pytest.raises(SessionNotFound):
        await log.export_bundle("never")
    await log.close()
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    with pytest.raises(SessionNotFound):
        await log.export_bundle("old")
    await log.close()


async def test_concurrent_appends_each_get_their_own_leaf(jdir: Path, key: bytes) -> None:
    """Fifty concurrent appenders (group commit) get distinct leaves that match the journal."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    results = await asyncio.gather(
        *(log.append_receipt(receipt(f"c{i}", i, pad="z" * 30)) for i in range(50))
    )
    assert sorted(leaf for _, leaf in results) == sorted(r.seq - 1 for r, _ in results)
    sealed = await log.checkpoint()
    assert sealed.root == _journal_root(jdir, key, sealed.size)
    for i in (0, 17, 49):
        assert verify_bundle(await log.export_bundle(f"c{i}"), SIGNING_KEY.verifier)
    await log.close()


async def test_appends_during_attach_are_not_lost(jdir: Path, key: bytes) -> None:
    """Records committed while the log recovers are replayed into the tree, in order."""
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS)
    for i in range(300):
        await journal.append(receipt("pre", i), kind=RecordKind.RECEIPT)
    writers = [
        asyncio.ensure_future(journal.append(receipt("during", i), kind=RecordKind.RECEIPT))
        for i in range(40)
    ]
    log = await TransparencyLog.attach(journal, hmac_key=key, signing_key=SIGNING_KEY)
    await asyncio.gather(*writers)
    sealed = await log.checkpoint()
    assert sealed.size == 340
    assert sealed.root == _journal_root(jdir, key, 340)
    await log.close()
    await journal.close()


async def test_bad_payloads_are_refused_before_the_journal(jdir: Path, key: bytes) -> None:
    """A payload that is not a JSON object with a session_id never reaches the journal."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    for bad in (
        b"[]",
        b"{}",
        b'{"session_id": 3}',
        b'{"session_id": ""}',
        b"\xff",
        b"{",
        b'{"session_id": "a", "session_id": "b"}',
        b'{"session_id": "a", "x": NaN}',
    ):
        with pytest.raises(ReceiptPayloadInvalid):
            await log.append_receipt(bad)
    with pytest.raises(ValueError, match="RECEIPT or REFINEMENT"):
        await log.append_receipt(receipt("a", 1), kind=RecordKind.DATA)
    assert log.size == 0
    await log.close()


async def test_export_since_carries_a_consistency_proof(jdir: Path, key: bytes) -> None:
    """With an older checkpoint, the bundle proves the new one extends it; a foreign one fails."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    await log.append_receipt(receipt("a", 1))
    old = await log.checkpoint()
    for i in range(7):
        await log.append_receipt(receipt("b", i))
    bundle = await log.export_bundle("b", since=old.checkpoint)
    verified = verify_bundle(bundle, SIGNING_KEY.verifier)
    assert verified.consistency_from == (1, old.root)
    forged = type(old.checkpoint)(old.checkpoint.origin, 1, bytes(32))
    with pytest.raises(LogMismatch, match="history"):
        await log.export_bundle("b", since=forged)
    await log.close()


async def test_unsealed_session_cannot_be_exported_offline(jdir: Path, key: bytes) -> None:
    """Offline export refuses a receipt no stored checkpoint covers; with no checkpoint too."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    await log.append_receipt(receipt("a", 1))
    await log.close(seal=False)
    with pytest.raises(NotSealed, match="no checkpoint"):
        export_offline(jdir, "a", SIGNING_KEY.verifier)
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    await log.checkpoint()
    await log.append_receipt(receipt("b", 2))
    await log.close(seal=False)
    assert verify_bundle(export_offline(jdir, "a", SIGNING_KEY.verifier), SIGNING_KEY.verifier)
    with pytest.raises(NotSealed, match="not sealed"):
        export_offline(jdir, "b", SIGNING_KEY.verifier)
    with pytest.raises(SessionNotFound):
        export_offline(jdir, "zzz", SIGNING_KEY.verifier)
    with pytest.raises(LogMismatch, match="does not verify"):
        export_offline(jdir, "a", OTHER_SIGNING_KEY.verifier)


async def _sealed_journal(jdir: Path, key: bytes, count: int = 12, tag: str = "") -> None:
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    for i in range(count):
        await log.append_receipt(receipt(f"s{i % 3}", i, tag=tag))
    await log.close()


async def _refused(jdir: Path, key: bytes, fragment: str) -> None:
    with pytest.raises(LogMismatch, match=fragment):
        await open_transparency_log(jdir, key, SIGNING_KEY)
    with pytest.raises(LogMismatch):
        export_offline(jdir, "s1", SIGNING_KEY.verifier)


async def test_cut_tail_is_refused(jdir: Path, key: bytes) -> None:
    """A clean cut at a record boundary passes the HMAC chain but not the checkpoint."""
    await _sealed_journal(jdir, key)
    rewrite_segment(jdir / "seg-00000000.glj", key, lambda rows: rows[:-2])
    assert verify(jdir, key).ok  # the chain alone cannot see it (journald's CVE-2023-31438)
    await _refused(jdir, key, "tail was cut")


@pytest.mark.parametrize(
    ("name", "transform"),
    [
        ("reordered", lambda rows: [rows[1], rows[0], *rows[2:]]),
        ("duplicated", lambda rows: [rows[0], *rows[:-1]]),
        ("spliced", lambda rows: [*rows[:5], (rows[5][0], rows[5][1], receipt("x", 0)), *rows[6:]]),
        ("dropped", lambda rows: [*rows[:3], *rows[4:], rows[-1]]),
    ],
)
async def test_rewritten_entries_are_refused(
    jdir: Path, key: bytes, name: str, transform: object
) -> None:
    """Reordered, duplicated, spliced or dropped entries, re-chained with the HMAC key, fail."""
    await _sealed_journal(jdir, key)
    rewrite_segment(jdir / "seg-00000000.glj", key, transform)  # type: ignore[arg-type]
    assert verify(jdir, key).ok, name
    await _refused(jdir, key, "rewritten")


async def test_forged_or_foreign_checkpoints_are_refused(
    jdir: Path, key: bytes, tmp_path: Path
) -> None:
    """A flipped checkpoint byte, another key's checkpoint, or another log's: all refused."""
    await _sealed_journal(jdir, key)
    good = (jdir / "checkpoint").read_bytes()
    (jdir / "checkpoint").write_bytes(good.replace(b"\n12\n", b"\n11\n"))
    await _refused(jdir, key, "does not verify")
    other = tmp_path / "other"
    await _sealed_journal(other, key, count=12, tag="other")
    shutil.copy(other / "checkpoint", jdir / "checkpoint")  # same key, same size, other log
    await _refused(jdir, key, "rewritten")


async def test_tree_base_is_authenticated(jdir: Path, key: bytes) -> None:
    """A forged or missing tree base (with segments deleted) stops the log from starting."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    for i in range(120):
        await log.append_receipt(receipt("s1", i, pad="p" * 40))
        await ack_all(log.journal)
    await log.close()
    base = jdir / "tree-base"
    data = bytearray(base.read_bytes())
    data[30] ^= 1
    base.write_bytes(bytes(data))
    with pytest.raises(LogMismatch, match="tag"):
        await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    base.unlink()
    with pytest.raises(LogMismatch, match="cannot be recovered"):
        await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)


async def test_tree_hashes_are_a_rebuildable_cache(jdir: Path, key: bytes) -> None:
    """A damaged or deleted tree-hashes file is rebuilt from the journal at open."""
    await _sealed_journal(jdir, key, count=40)
    sealed = (jdir / "checkpoint").read_text()
    hashes = jdir / "tree-hashes"
    data = bytearray(hashes.read_bytes())
    data[100] ^= 0xFF
    hashes.write_bytes(bytes(data[:-7]))
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    assert verify_bundle(await log.export_bundle("s0"), SIGNING_KEY.verifier)
    await log.close()
    assert (jdir / "checkpoint").read_text() == sealed
    hashes.unlink()
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    assert verify_bundle(await log.export_bundle("s2"), SIGNING_KEY.verifier)
    await log.close()


async def test_folding_under_concurrency_keeps_order(
    jdir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folds into the tree file while 32 appenders keep committing lose and reorder nothing."""
    monkeypatch.setattr(_tlog, "MAX_PENDING_LEAVES", 8)
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=SMALL)
    acking = asyncio.Lock()  # acks are exact: one acknowledger at a time

    async def appender(worker: int) -> None:
        for i in range(12):
            await log.append_receipt(receipt(f"w{worker}", i, pad="f" * 30))
            if i % 5 == 0:
                async with acking:
                    await ack_all(log.journal)

    await asyncio.gather(*(appender(w) for w in range(32)))
    sealed = await log.checkpoint()
    assert sealed.size == log.size == (await log.journal.status()).seq
    assert sealed.root == _journal_root(jdir, key, sealed.size)
    await log.close()


async def test_concurrent_checkpoints_cover_their_receipts(jdir: Path, key: bytes) -> None:
    """Each append-then-checkpoint gets a checkpoint covering its receipt; they are shared."""
    log = await open_transparency_log(jdir, key, SIGNING_KEY)

    async def seal(i: int) -> tuple[int, int]:
        _, leaf = await log.append_receipt(receipt(f"t{i}", i))
        return leaf, (await log.checkpoint()).size

    results = await asyncio.gather(*(seal(i) for i in range(40)))
    assert all(size > leaf for leaf, size in results)
    assert len({size for _, size in results}) < 40  # group commit: fewer checkpoints
    await log.close()


async def test_only_a_receipts_journal_can_carry_a_log(jdir: Path, key: bytes) -> None:
    """A SESSION journal prunes without a tree base, so a log refuses to attach to it."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    with pytest.raises(ValueError, match="RECEIPTS"):
        await TransparencyLog.attach(journal, hmac_key=key, signing_key=SIGNING_KEY)
    await journal.close()
