"""Drive the library launch path the way the daemon will: many threads, many open fds.

Runs on the HOST (as root or the test user, with that user's glove install). While helper
threads keep opening inheritable descriptors (pipes, a directory fd on a host secret, a
listening unix socket), it launches the fds probe through ``glove.container.run`` from a
worker thread and from asyncio (``run_async``), and prints one JSON line: for every launch,
the descriptors the sandboxed probe saw besides 0/1/2.

Usage: ``python libdriver.py WORKSPACE SECRET_DIR LAUNCHES``
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
from typing import Any

from glove.container import Overrides, build_spec, decode_profile, run, run_async

PROBE_MARK = b"GLOVE-PROBE:"
#: The suites' profile: the default, with the workspace at /workspace.
AT_WORKSPACE = b'extends = "default"\n[workspace]\ntarget = "/workspace"\n'


def churn(stop: threading.Event) -> None:
    """Keep inheritable pipes open and closing, to race any fd scrub in the launcher."""
    while not stop.is_set():
        r, w = os.pipe()
        os.set_inheritable(r, True)
        os.set_inheritable(w, True)
        time.sleep(0.0005)
        os.close(r)
        os.close(w)


def parse(out: bytes) -> dict[str, Any]:
    """The probe report inside captured output."""
    for line in out.splitlines():
        if line.startswith(PROBE_MARK):
            report: dict[str, Any] = json.loads(line[len(PROBE_MARK) :])
            return report
    return {"error": out[-500:].decode(errors="replace")}


def launch_once(spec: Any) -> dict[str, Any]:
    """Run the spec with stdout into a pipe; return the probe's report."""
    r, w = os.pipe()
    out = b""
    try:
        result: dict[str, Any] = {}

        def reader() -> None:
            nonlocal out
            while chunk := os.read(r, 65536):
                out += chunk

        t = threading.Thread(target=reader)
        t.start()
        res = run(spec, stdin=os.open(os.devnull, os.O_RDONLY), stdout=w, stderr=2)
        os.close(w)
        w = -1
        t.join(10)
        result["exit_code"] = res.exit_code
    finally:
        if w >= 0:
            os.close(w)
        os.close(r)
    return {**result, **parse(out)}


async def launch_async(spec: Any) -> dict[str, Any]:
    """Run the spec through run_async from an event loop with a listening socket open."""
    r, w = os.pipe()
    loop = asyncio.get_running_loop()
    srv = await asyncio.start_unix_server(lambda _r, _w: None, path=None, sock=_listener())
    try:
        res = await run_async(spec, stdin=os.open(os.devnull, os.O_RDONLY), stdout=w, stderr=2)
        os.close(w)
        out = await loop.run_in_executor(None, _read_all, r)
    finally:
        srv.close()
        os.close(r)
    return {"exit_code": res.exit_code, **parse(out)}


def _listener() -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(b"\0glove-libdriver-" + str(os.getpid()).encode())
    s.set_inheritable(True)
    return s


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return data


def main() -> None:
    """Launch the fds probe repeatedly from a busy, fd-rich, multi-threaded process."""
    ws, secret_dir, launches = sys.argv[1], sys.argv[2], int(sys.argv[3])
    held = [os.open(secret_dir, os.O_RDONLY | os.O_DIRECTORY)]
    held.append(os.open(os.path.join(secret_dir, "secret.txt"), os.O_RDONLY))
    for fd in held:
        os.set_inheritable(fd, True)
    argv = ["/usr/bin/python3", "-I", "-S", "/workspace/probe.py", "fds"]
    argv.append(json.dumps({"numbers": held, "relative": "secret.txt"}))
    spec = build_spec(
        decode_profile(AT_WORKSPACE, "<test>"),
        argv,
        cwd=ws,
        host_env={},
        overrides=Overrides(workspace=ws),
    )
    # Control: an ordinary child that inherits descriptors does see the held ones.
    import subprocess

    host_argv = [*argv[:3], os.path.join(ws, "probe.py"), *argv[4:]]
    control = subprocess.run(host_argv, capture_output=True, close_fds=False, check=False)
    stop = threading.Event()
    churners = [threading.Thread(target=churn, args=(stop,), daemon=True) for _ in range(3)]
    for t in churners:
        t.start()
    reports = []
    try:
        for _ in range(launches):
            reports.append(launch_once(spec))
        reports.append(asyncio.run(launch_async(spec)))
    finally:
        stop.set()
    print(json.dumps({"held": held, "control": parse(control.stdout), "reports": reports}))


if __name__ == "__main__":
    main()
