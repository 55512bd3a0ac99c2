"""Where the milliseconds of one library launch go, step by step (the default profile).

Run with the project interpreter, as root or as any user with namespaces::

    .venv/bin/python benchmarks/launch/profile.py [--runs 30] [--json out.json]

It launches ``/bin/true`` through :func:`glove.container.linux.launch` (the clone3 path: a
single-threaded process, as gloved's launcher is) with every step of the launcher's side
and of the sandbox init's side wrapped in a timer. The init is a clone of this process, so
its timers write into a shared anonymous mapping; both sides read ``CLOCK_MONOTONIC``. Each
row is the median over the runs, in milliseconds, in launch order, and ``bwrap`` (the same
binds, ``/bin/true``) is measured interleaved for scale. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks.launch.bench import ENV, bwrap_argv, ensure_bwrap  # noqa: E402

#: Steps in the launcher (this process), then in the init, in the order they run.
PARENT_STEPS = (
    "plan_limits",
    "probe_host_limits",
    "seccomp_program",
    "open_sources",
    "check_protected",
    "open_sandbox_cgroups",
    "open_v1_tasks",
    "clone3",
    "_write_id_maps",
    "place",
)
CHILD_STEPS = (
    "join_own_groups",
    "build_rootfs",
    "forbid_nested_user_namespaces",
    "harden_proc",
    "_keep_only_needed_fds",
    "drop_all_capabilities",
    "_install_seccomp",
    "_spawn_command",
)
_SLOT = struct.Struct("dd")


class Timers:
    """Per-step (start, end) pairs in a mapping the init shares (MAP_SHARED survives clone)."""

    def __init__(self) -> None:
        self.names = list(PARENT_STEPS + CHILD_STEPS)
        self.shared = mmap.mmap(-1, _SLOT.size * len(self.names))

    def reset(self) -> None:
        self.shared[:] = bytes(len(self.shared))

    def wrap(self, owner: Any, attr: str, name: str | None = None) -> None:
        original: Callable[..., Any] = getattr(owner, attr)
        slot = self.names.index(name or attr) * _SLOT.size
        shared = self.shared

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                old_start, _ = _SLOT.unpack_from(shared, slot)
                _SLOT.pack_into(shared, slot, old_start or start, time.monotonic())

        setattr(owner, attr, timed)

    def read(self) -> dict[str, tuple[float, float]]:
        return {
            name: _SLOT.unpack_from(self.shared, i * _SLOT.size)
            for i, name in enumerate(self.names)
        }


def instrument(timers: Timers) -> None:
    from glove.container.linux import _cgroups, _launch
    from glove.container.linux import _syscalls as sc

    for name in (*PARENT_STEPS[:6], "_write_id_maps"):
        timers.wrap(_launch, name)
    timers.wrap(sc, "clone3")
    timers.wrap(_cgroups.SandboxCgroups, "open_v1_tasks")
    timers.wrap(_cgroups.SandboxCgroups, "place")
    for name in CHILD_STEPS:
        timers.wrap(sc if name == "drop_all_capabilities" else _launch, name)


def one(spec: Any, devnull: int, timers: Timers) -> dict[str, float]:
    """One launch; the milliseconds of each step and of the phases between them."""
    from glove.container.linux._launch import launch

    timers.reset()
    t0 = time.monotonic()
    process = launch(spec, (devnull, devnull, devnull))
    released = time.monotonic()
    lines: list[tuple[float, bytes]] = []
    buffer = b""
    while chunk := os.read(process.status_fd, 4096):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            lines.append((time.monotonic(), line))
    eof = time.monotonic()
    process.wait()
    reaped = time.monotonic()
    process.close()
    closed = time.monotonic()
    steps = timers.read()
    out = {name: (end - start) * 1000 for name, (start, end) in steps.items() if end}
    out["launch() total (to release)"] = (released - t0) * 1000
    ready = next((t for t, line in lines if line.startswith(b"ready")), None)
    if ready is not None:
        out["release -> ready line read"] = (ready - released) * 1000
    out["release -> status EOF"] = (eof - released) * 1000
    out["waitpid"] = (reaped - eof) * 1000
    out["close (cgroups destroy, fds)"] = (closed - reaped) * 1000
    out["total"] = (closed - t0) * 1000
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from glove.container import Overrides, build_spec, load_profile

    ws = tempfile.mkdtemp(prefix="glove-profile-")
    spec = build_spec(
        load_profile(None),
        ["/bin/true"],
        cwd=ws,
        host_env=dict(ENV),
        overrides=Overrides(workspace=ws),
    )
    devnull = os.open(os.devnull, os.O_RDWR)
    timers = Timers()
    instrument(timers)
    bwrap = ensure_bwrap()
    samples: dict[str, list[float]] = {}
    peer: list[float] = []
    for i in range(args.runs + 3):
        result = one(spec, devnull, timers)
        t = time.monotonic()
        subprocess.run(bwrap_argv(bwrap, ws), check=True, stdin=devnull, stdout=devnull)
        if i >= 3:
            peer.append((time.monotonic() - t) * 1000)
            for key, value in result.items():
                samples.setdefault(key, []).append(value)
    rows = {key: round(statistics.median(values), 3) for key, values in samples.items()}
    rows["bwrap (same binds, /bin/true)"] = round(statistics.median(peer), 3)
    print(f"== one library launch, uid {os.geteuid()}, median of {args.runs} (ms) ==")
    for key, value in rows.items():
        print(f"{key:36s} {value:8.3f}")
    if args.json:
        args.json.write_text(json.dumps({"uid": os.geteuid(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
