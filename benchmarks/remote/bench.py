"""Start-up cost of the forced executor against the interpreter's own start-up.

Run as root with the project interpreter (the identity file must be root-owned)::

    .venv/bin/python benchmarks/remote/bench.py [--runs 30]

Cases, interleaved round by round:

``python``     ``python -c pass`` (the floor any Python ForceCommand pays per SSH login)
``imports``    ``python -c "from glove.remote._executor import main"`` (the executor's imports)
``executor``   the executor started with a valid identity, until its first ``remote_health``
               answer arrives (imports, identity checks, measuring the interpreter and the
               Glove modules, one frame each way)

It prints medians and the ratios executor/python and executor/imports; the difference
between the last two is what the identity check and measurement cost per login.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glove.protocol import FrameDecoder, decode_response
from glove.remote import (
    EXECUTOR_MAX_FRAME_BYTES,
    ExecutorRequest,
    encode_request,
    measure_executable,
    render_identity,
)

LAUNCHER = Path(__file__).resolve().parents[2] / "tests" / "remote" / "executor_launcher.py"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def _python() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=ENV)


def _imports() -> None:
    subprocess.run(
        [sys.executable, "-c", "from glove.remote._executor import main"], check=True, env=ENV
    )


def _executor(identity: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(LAUNCHER), str(identity), "--", "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(encode_request(ExecutorRequest(id=1, method="remote_health", ttl_ms=10000)))
    proc.stdin.flush()
    decoder = FrameDecoder(max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)
    while (frame := decoder.next_frame()) is None:
        decoder.feed(os.read(proc.stdout.fileno(), 65536))
    assert decode_response(frame).result == {"status": "not_operational"}
    proc.stdin.close()
    proc.wait(30)
    proc.stdout.close()


def main() -> None:
    """Measure and print medians and ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the identity file must be root-owned")
    with tempfile.TemporaryDirectory() as tmp:
        identity = Path(tmp) / "remote-executor.identity"
        identity.write_bytes(render_identity(measure_executable(), "sha256:" + "0" * 64))
        identity.chmod(0o644)
        cases = {"python": _python, "imports": _imports, "executor": lambda: _executor(identity)}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(3):
            for run in cases.values():
                run()
        for _ in range(args.runs):
            for name, run in cases.items():
                start = time.perf_counter()
                run()
                samples[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, value in medians.items():
        print(f"{name:9s} median {value * 1000:7.1f} ms")
    print(f"executor/python  {medians['executor'] / medians['python']:.2f}x")
    print(f"executor/imports {medians['executor'] / medians['imports']:.2f}x")


if __name__ == "__main__":
    main()
