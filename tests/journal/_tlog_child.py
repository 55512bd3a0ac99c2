"""A fork server for the transparency-log kill -9 test (run as a script).

Protocol, one line each way: the parent sends ``JDIR SEED OUT KILL_STEP KILL_AT``, the server
forks a worker and answers with its pid. The worker opens the transparency log and loops:
append 1-4 receipts concurrently, sometimes acknowledge them all (so segments rotate and are
pruned into the tree base), and checkpoint. After each durable append it writes ``A SEQ`` to
OUT, after each checkpoint ``C SIZE ROOTHEX``, each with one ``write(2)`` that survives SIGKILL.

With ``KILL_STEP >= 0`` the worker kills itself with SIGKILL inside its ``KILL_AT``-th
checkpoint write, at that step of temp-file / write / fsync / rename / fsync-dir (the fault
injection); otherwise the parent kills it from outside at a random moment.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from pathlib import Path

from glove.journal import JournalLimits, SigningKey, open_transparency_log
from glove.journal._storage import FILE_MODE, PosixStorage

KEY = bytes(range(32))
SIGNING_KEY = SigningKey("example.com/glove-test-log", bytes(range(100, 132)))
LIMITS = JournalLimits(max_segment_bytes=8192, max_segment_records=1000, max_segments=3)
#: After: create temp, half written, all written, fsync, rename, and the write's return (the
#: checkpoint has no directory fsync any more: the last two are the same moment, kept so the
#: plan of kills, and the pruning it reaches, stay as they were).
KILL_STEPS = 6


class KillingStorage(PosixStorage):
    """PosixStorage that SIGKILLs its process inside the n-th checkpoint write."""

    def __init__(self, step: int, at: int) -> None:
        self.step, self.at, self.writes = step, at, 0

    def _maybe_die(self, step: int) -> None:
        if self.writes == self.at and step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)

    def replace_file(self, path: str, data: bytes) -> None:
        """The same steps as PosixStorage's, with a kill point between each."""
        if not path.endswith("/checkpoint"):
            super().replace_file(path, data)
            return
        self.writes += 1
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            self._maybe_die(0)
            os.write(fd, data[: len(data) // 2])
            self._maybe_die(1)
            os.write(fd, data[len(data) // 2 :])
            self._maybe_die(2)
            os.fsync(fd)
            self._maybe_die(3)
        finally:
            os.close(fd)
        Path(tmp).replace(path)
        self._maybe_die(4)
        self._maybe_die(5)


async def _work(jdir: str, seed: int, out_path: str, step: int, at: int) -> None:
    rng = random.Random(seed)
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    storage = KillingStorage(step, at) if step >= 0 else PosixStorage()
    log = await open_transparency_log(jdir, KEY, SIGNING_KEY, limits=LIMITS, storage=storage)
    n = 0
    while True:
        batch = []
        for _ in range(rng.randrange(1, 5)):
            n += 1
            body = {"session_id": f"s{rng.randrange(6)}", "n": n, "pad": "x" * rng.randrange(200)}
            batch.append(json.dumps(body).encode())
        results = await asyncio.gather(*(log.append_receipt(p) for p in batch))
        os.write(out, b"".join(b"A %d\n" % r.seq for r, _ in results))
        if rng.random() < 0.3:
            while page := (
                await log.journal.page(after=(await log.journal.status()).acked)
            ).receipts:
                for item in page:
                    await log.journal.ack(item.seq)
        signed = await log.checkpoint()
        os.write(out, b"C %d %s\n" % (signed.size, signed.root.hex().encode()))


def main() -> None:
    """Serve fork requests until stdin closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        jdir, seed, out, step, at = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                asyncio.run(_work(jdir, int(seed), out, int(step), int(at)))
            finally:
                os._exit(1)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
