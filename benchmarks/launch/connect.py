"""What the Unix socket gate costs: one ``connect()`` inside the sandbox against the same on
the host (decision 0034).

Run with the project interpreter (as root, and as the test user with its interpreter)::

    .venv/bin/python benchmarks/launch/connect.py [--calls 2000] [--rounds 5]

Every connect in a sandbox is a seccomp user notification performed by a launcher thread
(``glove.container.linux._unix_gate``); without the gate it would cost what it costs on the
host (the filter's own BPF is well under a microsecond). Each round runs the same loop, in
a fresh sandbox and then directly, for three kinds of connect the sandbox keeps: a
pathname socket in its own /tmp, an abstract name, and TCP on loopback (each connect
accepted and both ends closed, so no backlog fills). It prints the median per call of
each case, in microseconds, and the difference: the gate's price.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

#: The loop, run inside and outside: prints {"case": microseconds per connect}.
LOOP = textwrap.dedent(
    """
    import json, os, socket, sys, tempfile, time
    calls = int(sys.argv[1])
    where = tempfile.mkdtemp(dir="/tmp")
    out = {}
    def measure(name, family, address, bind):
        server = socket.socket(family)
        server.bind(bind)
        server.listen(64)
        started = time.perf_counter_ns()
        for _ in range(calls):
            client = socket.socket(family)
            client.connect(address if address is not None else server.getsockname())
            server.accept()[0].close()
            client.close()
        out[name] = (time.perf_counter_ns() - started) / calls / 1000
        server.close()
    path = where + "/s.sock"
    measure("unix-tmp", socket.AF_UNIX, path, path)
    name = b"\\0glove-bench-%d" % os.getpid()
    measure("unix-abstract", socket.AF_UNIX, name, name)
    measure("tcp-loopback", socket.AF_INET, None, ("127.0.0.1", 0))
    os.unlink(path)
    os.rmdir(where)
    print(json.dumps(out))
    """
)


def inside(calls: int) -> dict[str, float]:
    """One round in a fresh sandbox (the default profile's system binds, no limits)."""
    from glove.container import Bind, SandboxSpec, run

    binds = (Bind("/usr"), *(Bind(p, optional=True) for p in ("/bin", "/lib", "/lib64")))
    spec = SandboxSpec(
        argv=("/usr/bin/python3", "-c", LOOP, str(calls)), binds=binds, env={"PATH": "/usr/bin"}
    )
    with tempfile.TemporaryFile() as sink, open(os.devnull, "rb") as null:
        result = run(spec, stdin=null.fileno(), stdout=sink.fileno())
        if result.exit_code != 0:
            raise SystemExit(f"the sandboxed loop failed: {result.error or result.exit_code}")
        sink.seek(0)
        report: dict[str, float] = json.loads(sink.read())
    return report


def outside(calls: int) -> dict[str, float]:
    """One round on the host, same interpreter as inside."""
    done = subprocess.run(
        ["/usr/bin/python3", "-c", LOOP, str(calls)], capture_output=True, text=True, check=True
    )
    report: dict[str, float] = json.loads(done.stdout)
    return report


def main() -> None:
    """Interleave the rounds and print medians and the difference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds: dict[str, dict[str, list[float]]] = {"sandbox": {}, "host": {}}
    for _ in range(args.rounds):
        for where, measure in (("sandbox", inside), ("host", outside)):
            for case, micros in measure(args.calls).items():
                rounds[where].setdefault(case, []).append(micros)
    print(f"uid {os.getuid()}, {args.rounds} rounds of {args.calls} connects, us per connect")
    print(f"{'case':<16}{'sandbox':>10}{'host':>10}{'gate':>10}")
    for case, values in rounds["sandbox"].items():
        boxed = statistics.median(values)
        host = statistics.median(rounds["host"][case])
        print(f"{case:<16}{boxed:>10.1f}{host:>10.1f}{boxed - host:>10.1f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    main()
