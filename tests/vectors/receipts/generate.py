"""Export the receipt-bundle vectors under ``tests/vectors/receipts/`` with the writer itself.

Run ``python -m tests.vectors.receipts.generate`` from the repository root. Unlike the journal
vectors, these are *not* rebuilt by the tests: the committed files are bundles exported by the
code as it stood when they were made (the first, ``v1-*``, by commit ac7a72f), and the tests
check that they still verify and that today's export of the same log is byte for byte the same,
so a change of the bundle format can never go unnoticed. Write new files under new names;
never regenerate an old one.

The log is deterministic: a fixed HMAC key, a fixed Ed25519 seed, fixed receipt payloads (a
leaf is the payload, so the journal's clock does not reach the bundle) and an Ed25519
signature, which is deterministic by construction.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from glove.journal import SigningKey, open_transparency_log

HERE = Path(__file__).parent
HMAC_KEY = bytes(range(32))
SIGNING_KEY = SigningKey("example.com/glove-vector-log", bytes(range(7, 39)))
SESSIONS = ("first", "s0", "s1", "s2")


def payloads() -> list[bytes]:
    """The receipts appended, in order: non-ASCII text, floats, lists, booleans, nulls."""
    out = [
        json.dumps(
            {"session_id": "first", "n": 0, "note": "d\u00e9j\u00e0 vu \u2014 1e5"},
            ensure_ascii=False,
        ).encode()
    ]
    for i in range(1, 11):
        body = {
            "session_id": f"s{i % 3}",
            "n": i,
            "outcome": {"kind": "exited", "exit_code": i % 2},
            "ratio": 1.5e-7,
            "ok": True,
            "tags": ["a", "b"],
            "none": None,
        }
        out.append(json.dumps(body).encode())
    return out


async def export_all(scratch: Path) -> dict[str, bytes]:
    """Build the log in ``scratch`` and export each session's bundle, with and without a
    consistency proof from the checkpoint taken after the first receipt."""
    log = await open_transparency_log(scratch / "receipts", HMAC_KEY, SIGNING_KEY)
    first, *rest = payloads()
    await log.append_receipt(first)
    old = await log.checkpoint()
    for payload in rest:
        await log.append_receipt(payload)
    out = {"v1-old.checkpoint": old.note.encode()}
    for name in SESSIONS:
        out[f"v1-{name}.json"] = await log.export_bundle(name)
        out[f"v1-{name}-since.json"] = await log.export_bundle(name, since=old.checkpoint)
    await log.close()
    out["v1-log.pub"] = (SIGNING_KEY.verifier.text + "\n").encode()
    return out


def main() -> int:
    """Write the files that do not exist yet; refuse to overwrite one that differs."""
    with tempfile.TemporaryDirectory() as scratch:
        files = asyncio.run(export_all(Path(scratch)))
    for name, data in sorted(files.items()):
        path = HERE / name
        if path.exists():
            if path.read_bytes() != data:
                sys.stderr.write(f"{path} differs from today's export; not overwritten\n")
                return 1
            continue
        path.write_bytes(data)
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
