"""A fork server for the kill -9 test: forks journal writers on request (run as a script).

Protocol on stdin/stdout, one line each: the parent sends ``JDIR SEED RECEIPTS_PATH``, the
server forks a writer and answers with its pid. The writer appends random records in
concurrent batches forever and, after each batch is acknowledged, writes one ``SEQ TAGHEX``
line per receipt to RECEIPTS_PATH with a plain ``write(2)`` (which survives SIGKILL: it is in
the kernel once it returns). Forking from this small single-threaded process keeps each
iteration cheap and free of the test runner's threads.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys

from glove.journal import JournalKind, JournalLimits, open_journal

KEY = bytes(range(32))
LIMITS = JournalLimits(max_segment_bytes=64 * 1024, max_segment_records=10_000, max_segments=64)


async def _write_forever(jdir: str, seed: int, receipts_path: str) -> None:
    rng = random.Random(seed)
    out = os.open(receipts_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    journal = await open_journal(jdir, KEY, kind=JournalKind.SESSION, limits=LIMITS)
    while True:
        payloads = [rng.randbytes(rng.randrange(1, 1500)) for _ in range(rng.randrange(1, 9))]
        receipts = await asyncio.gather(*(journal.append(p) for p in payloads))
        os.write(out, b"".join(b"%d %s\n" % (r.seq, r.tag.hex().encode()) for r in receipts))


def main() -> None:
    """Serve fork requests until stdin closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in sys.stdin:
        jdir, seed, receipts_path = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                asyncio.run(_write_forever(jdir, int(seed), receipts_path))
            finally:
                os._exit(1)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
