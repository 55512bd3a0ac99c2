"""Interop with Go's golang.org/x/mod/sumdb/note and sumdb/tlog (an implementation Glove did
not write): Go verifies Glove's notes, checkpoints, proofs and bundles, and computes the same
roots and proofs byte for byte. The Go program is built offline from Debian's
golang-golang-x-mod-dev (GOPATH mode, GOPROXY=off)."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from glove.journal import JournalLimits, open_transparency_log, sign_note
from glove.journal._merkle import CompactRange, consistency_proof, inclusion_proof, leaf_hash
from tests.journal._tlog_helpers import OTHER_SIGNING_KEY, SIGNING_KEY, ack_all, receipt

SOURCE = Path(__file__).with_name("go") / "verify_receipts.go"
GOPATH = Path("/usr/share/gocode")
GO_BUILD_TIMEOUT_S = 120.0
GO_RUN_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def go_verifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go verifier, built offline; fails (never skips) if Go or x/mod is missing."""
    go = shutil.which("go")
    if go is None or not (GOPATH / "src/golang.org/x/mod/sumdb/note").is_dir():
        pytest.fail("Go or golang-golang-x-mod-dev is missing: run scripts/setup")
    scratch = tmp_path_factory.mktemp("go")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch),
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GOCACHE": str(scratch / "cache"),
    }
    binary = scratch / "verify_receipts"
    subprocess.run(
        [go, "build", "-o", str(binary), str(SOURCE)],
        env=env,
        check=True,
        timeout=GO_BUILD_TIMEOUT_S,
        cwd=scratch,
    )
    return binary


def _ask(binary: Path, request: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [str(binary)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
        timeout=GO_RUN_TIMEOUT_S,
    )
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def _request(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "vkey": SIGNING_KEY.verifier.text,
        "skey": SIGNING_KEY.text,
        "sign": [],
        "notes": [],
        "bundles": [],
        "trees": [],
    }
    base.update(parts)
    return base


def test_go_loads_our_keys_and_signs_what_we_sign(go_verifier: Path) -> None:
    """Go reads Glove's key encodings, and its signatures equal Glove's byte for byte."""
    texts = ["hello\n", "example.com/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"]
    answer = _ask(
        go_verifier, _request(sign=texts, notes=[sign_note(t, SIGNING_KEY) for t in texts])
    )
    assert answer["verifier_of_signer"] == f"{SIGNING_KEY.name}+{SIGNING_KEY.key_hash:08x}"
    assert answer["signed"] == [sign_note(t, SIGNING_KEY) for t in texts]
    assert answer["notes"] == [f"ok:{t}" for t in texts]


def test_go_refuses_notes_of_other_keys_and_edited_notes(go_verifier: Path) -> None:
    """Go rejects a note signed by another key and a note whose text was changed."""
    good = sign_note("a\n", SIGNING_KEY)
    notes = [sign_note("a\n", OTHER_SIGNING_KEY), good.replace("a\n\n", "b\n\n", 1)]
    answer = _ask(go_verifier, _request(notes=notes))
    assert all(item.startswith("error:") for item in answer["notes"]), answer["notes"]


def test_go_computes_the_same_roots_and_proofs(go_verifier: Path) -> None:
    """For random trees, Go's tlog gives the same roots and proofs as Glove, byte for byte."""
    rng = random.Random(7)
    trees, expected = [], []
    for size in (1, 2, 3, 5, 8, 13, 64, 65, 100):
        entries = [rng.randbytes(rng.randrange(0, 40)) for _ in range(size)]
        store: list[bytes] = []
        tree = CompactRange()
        roots = []
        for entry in entries:
            store.extend(tree.append(leaf_hash(entry)))
            roots.append(base64.b64encode(tree.root()).decode())
        read = lambda idx, s=store: [s[i] for i in idx]  # noqa: E731
        incl = [(rng.randrange(n), n) for n in (rng.randrange(1, size + 1) for _ in range(10))]
        cons = [
            (rng.randrange(1, n + 1), n) for n in (rng.randrange(1, size + 1) for _ in range(10))
        ]
        trees.append(
            {
                "leaves": [base64.b64encode(e).decode() for e in entries],
                "inclusion": incl,
                "consistency": cons,
            }
        )
        b64 = lambda hs: [base64.b64encode(h).decode() for h in hs]  # noqa: E731
        expected.append(
            {
                "roots": roots,
                "inclusion": [b64(inclusion_proof(i, n, read)) for i, n in incl],
                "consistency": [b64(consistency_proof(m, n, read)) for m, n in cons],
            }
        )
    answer = _ask(go_verifier, _request(trees=trees))
    assert answer["trees"] == expected


async def test_go_verifies_our_bundles_and_refuses_forgeries(
    go_verifier: Path, jdir: Path, key: bytes
) -> None:
    """Go verifies bundles (with rotation seals and a consistency proof) and refuses edits."""
    limits = JournalLimits(max_segment_bytes=4096, max_segment_records=1000, max_segments=3)
    log = await open_transparency_log(jdir, key, SIGNING_KEY, limits=limits)
    await log.append_receipt(receipt("early", 0))
    old = await log.checkpoint()
    for i in range(1, 90):
        await log.append_receipt(receipt(f"s{i % 4}", i, pad="q" * 30))
        if i % 10 == 0:
            await ack_all(log.journal)
    bundles = [await log.export_bundle(f"s{i}") for i in range(4)]
    bundles.append(await log.export_bundle("s1", since=old.checkpoint))
    await log.close()
    good = [b.decode() for b in bundles]
    doc = json.loads(good[0])
    forged = []
    for field, value in (
        ("leaf_index", doc["leaf_index"] - 1),
        ("tree_size", doc["tree_size"] + 1),
    ):
        forged.append(json.dumps({**doc, field: value}))
    forged.append(json.dumps({**doc, "receipt": {**doc["receipt"], "n": -1}}))
    forged.append(json.dumps({**doc, "leaf": json.loads(good[1])["leaf"]}))
    forged.append(good[0].replace(doc["inclusion_proof"][0], doc["inclusion_proof"][1]))
    answer = _ask(go_verifier, _request(bundles=good + forged))
    assert answer["bundles"][: len(good)] == ["ok"] * len(good)
    assert all(item.startswith("error:") for item in answer["bundles"][len(good) :]), answer
    other = _ask(go_verifier, _request(vkey=OTHER_SIGNING_KEY.verifier.text, bundles=good))
    assert all(item.startswith("error:") for item in other["bundles"])
