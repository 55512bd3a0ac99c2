"""Session terminals: a keystroke's round trip through gloved against a bare PTY, transcript
replay throughput against a bare Unix socket, and what a stalled viewer costs the agent.

Each figure is printed with its peer, measured in the same run on the same machine:

1. **keystroke round trip**: the time from a key being sent to its echo being seen by the
   client. Through gloved: ``session.input`` on the client's connection, gloved writes the
   PTY master, the agent echoes, the PTY drain appends it to the transcript, the viewer's
   ``session.attach`` stream delivers it. The peer: the same agent (``stty raw -echo;
   cat``) on a bare ``openpty`` in this process, written and read directly. p50/p99 and
   the difference (the issue's goal: within 1 ms of the bare PTY at p50).
2. **replay throughput**: a finished session's transcript (about 17 MB) read through
   ``session.attach`` from offset 0, against the same bytes sent raw over a Unix socket by
   an asyncio server in this process (the floor of moving bytes between two processes'
   loops; gloved adds JSON frames and base64).
3. **a stalled viewer**: how long the agent takes to print 104 MiB (``seq``) with no
   viewer, with a viewer that reads nothing, and with one that keeps up (ratios to none).

    .venv/bin/python benchmarks/attach/bench.py [--keys 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path
from typing import Any

from glove.config import GlovePaths
from glove.control import AsyncClient
from glove.control._paths import RuntimePaths
from glove.host._setup import setup
from glove.testing.control import RawPeer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import _report

MIB = 1024 * 1024
START_DEADLINE_S = 30.0
ECHO_AGENT = ["/bin/sh", "-c", "stty raw -echo; echo READY; exec cat"]
HARNESSES = f"""
[harnesses.echo]
argv = {json.dumps(ECHO_AGENT)}

[harnesses.flood]
argv = ["/usr/bin/seq", "1", "12000000"]

[harnesses.replay]
argv = ["/usr/bin/seq", "1", "2000000"]
"""
LIMITS = {
    "wall_time_s": 600,
    "cpu_time_s": 600,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1024**3,
}


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _plan(harness: str) -> str:
    return json.dumps({"version": 1, "harness": harness, "exposures": [], "limits": LIMITS,
                       "network": "none", "terminal": "pty", "rows": 24, "cols": 80})  # fmt: skip


class Home:
    """A private Glove home with its own gloved."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        self.env.update(
            HOME=str(base),
            XDG_CONFIG_HOME=str(base / "config"),
            XDG_STATE_HOME=str(base / "state"),
            XDG_RUNTIME_DIR=str(base / "run"),
        )
        self.paths = GlovePaths(base / "config/glove", base / "state/glove", base / "run/glove")
        (base / "run").mkdir(mode=0o700)
        setup(self.paths, home=str(base))
        text = self.paths.gloved_toml.read_text().replace(
            "output_bytes = 67108864", f"output_bytes = {1024**3}"
        )
        text = text.replace("transcript_bytes = 16777216", f"transcript_bytes = {32 * MIB}")
        self.paths.gloved_toml.write_text(text + HARNESSES)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "glove.daemon"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_DEADLINE_S
        while not (self.paths.runtime_dir / "gloved.sock").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("gloved did not start")
            time.sleep(0.02)
        time.sleep(0.5)  # recovery and READY

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def client(self) -> AsyncClient:
        return AsyncClient.for_runtime_dir(self.paths.runtime_dir, timeout=600)


async def _wait_terminal(client: AsyncClient, session_id: str) -> None:
    async with client.stream("session.watch", {"session_id": session_id}, timeout=600) as views:
        async for _ in views:
            pass


# -- 1. keystrokes ------------------------------------------------------------------------


async def keystrokes_gloved(home: Home, keys: int) -> list[float]:
    """Round trips of ``keys`` keystrokes through gloved, as glove attach sends them."""
    async with home.client() as client:
        view = await client.call("session.create", {"plan": _plan("echo")})
        session_id = view["session_id"]
        received: asyncio.Queue[bytes] = asyncio.Queue()
        stream = client.stream(
            "session.attach", {"session_id": session_id, "mode": "write"}, timeout=600
        )
        attached = await anext(stream)
        viewer = attached["viewer"]

        async def read() -> None:
            async for event in stream:
                if event["kind"] == "data":
                    received.put_nowait(base64.b64decode(event["data"]))

        reader = asyncio.get_running_loop().create_task(read())
        seen = b""
        while b"READY" not in seen:
            seen += await received.get()
        samples = []
        for i in range(keys):
            key = bytes([97 + i % 26])
            started = time.perf_counter()
            call = asyncio.ensure_future(client.call(
                "session.input",
                {"session_id": session_id, "raw": base64.b64encode(key).decode(),
                 "viewer": viewer},
            ))  # fmt: skip
            got = b""
            while key not in got:
                got += await received.get()
            samples.append(time.perf_counter() - started)
            await call
        reader.cancel()
        await stream.aclose()
        await client.call("session.stop", {"session_id": session_id})
    return samples


def keystrokes_bare(keys: int) -> list[float]:
    """The same agent on a bare PTY in this process: write the key, read the echo."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        ECHO_AGENT, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    tty.setraw(master)
    seen = b""
    while b"READY" not in seen:
        select.select([master], [], [], 5)
        seen += os.read(master, 4096)
    samples = []
    for i in range(keys):
        key = bytes([97 + i % 26])
        started = time.perf_counter()
        os.write(master, key)
        got = b""
        while key not in got:
            select.select([master], [], [], 5)
            got += os.read(master, 4096)
        samples.append(time.perf_counter() - started)
    proc.kill()
    proc.wait()
    os.close(master)
    return samples


# -- 2. replay ----------------------------------------------------------------------------


async def replay_gloved(home: Home) -> tuple[int, float]:
    """Bytes and seconds to replay a finished transcript through session.attach."""
    async with home.client() as client:
        view = await client.call("session.create", {"plan": _plan("replay")})
        session_id = view["session_id"]
        await _wait_terminal(client, session_id)
    peer = await RawPeer.open(RuntimePaths(home.paths.runtime_dir))
    await peer.hello()
    started = time.perf_counter()
    await peer.send({"id": 2, "method": "session.attach",
                     "params": {"session_id": session_id, "from": 0, "follow": False}})  # fmt: skip
    total = 0
    while "event" in (frame := await peer.reply(timeout=60)):
        if frame["event"]["kind"] == "data":
            total += len(base64.b64decode(frame["event"]["data"]))
    elapsed = time.perf_counter() - started
    await peer.close()
    return total, elapsed


async def replay_bare(data: bytes, directory: Path) -> float:
    """Seconds to send ``data`` raw over a Unix socket between two asyncio ends."""
    path = directory / "bare.sock"

    async def serve(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for at in range(0, len(data), 64 * 1024):
            writer.write(data[at : at + 64 * 1024])
            await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(serve, path=str(path))
    started = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(str(path))
    total = 0
    while chunk := await reader.read(256 * 1024):
        total += len(chunk)
    elapsed = time.perf_counter() - started
    writer.close()
    server.close()
    assert total == len(data)
    return elapsed


# -- 3. a stalled viewer --------------------------------------------------------------------


async def flood(home: Home, viewer: str) -> float:
    """Seconds from create to terminal for the 104 MiB agent, with ``viewer`` attached."""
    async with home.client() as client:
        started = time.perf_counter()
        view = await client.call("session.create", {"plan": _plan("flood")})
        session_id = view["session_id"]
        peer = None
        keeping_up: asyncio.Task[None] | None = None
        if viewer != "none":
            peer = await RawPeer.open(RuntimePaths(home.paths.runtime_dir))
            await peer.hello()
            await peer.send({"id": 2, "method": "session.attach",
                             "params": {"session_id": session_id, "from": 0}})  # fmt: skip
        if viewer == "reading" and peer is not None:

            async def drain(p: RawPeer) -> None:
                while "event" in await p.reply(timeout=600):
                    pass

            keeping_up = asyncio.get_running_loop().create_task(drain(peer))
        await _wait_terminal(client, session_id)
        elapsed = time.perf_counter() - started
        if keeping_up is not None:
            keeping_up.cancel()
        if peer is not None:
            await peer.close()
    return elapsed


async def main_async(args: argparse.Namespace, home: Home, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bare = keystrokes_bare(args.keys)
    through = await keystrokes_gloved(home, args.keys)
    out["keystroke_us"] = {
        "gloved_p50": _percentile(through, 0.5) * 1e6,
        "gloved_p99": _percentile(through, 0.99) * 1e6,
        "bare_p50": _percentile(bare, 0.5) * 1e6,
        "bare_p99": _percentile(bare, 0.99) * 1e6,
    }
    total, seconds = await replay_gloved(home)
    ring = work / "replay.bin"
    ring.write_bytes(os.urandom(total))
    bare_s = await replay_bare(ring.read_bytes(), work)
    out["replay"] = {"bytes": total, "gloved_mib_s": total / MIB / seconds,
                     "bare_mib_s": total / MIB / bare_s}  # fmt: skip
    out["flood_s"] = {kind: await flood(home, kind) for kind in ("none", "stalled", "reading")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="glove-bench-attach-"))
    home = Home(work)
    home.start()
    try:
        out = asyncio.run(main_async(args, home, work))
    finally:
        home.stop()
        shutil.rmtree(work, ignore_errors=True)
    k = out["keystroke_us"]
    print(f"keystroke round trip ({args.keys} keys), p50 / p99:")
    print(f"  through gloved  {k['gloved_p50']:8.0f} / {k['gloved_p99']:8.0f} us")
    print(f"  bare PTY        {k['bare_p50']:8.0f} / {k['bare_p99']:8.0f} us")
    print(f"  ratio           {k['gloved_p50'] / k['bare_p50']:8.1f}x / "
          f"{k['gloved_p99'] / k['bare_p99']:6.1f}x; p50 difference "
          f"{(k['gloved_p50'] - k['bare_p50']) / 1000:.2f} ms (goal: within 1 ms)")  # fmt: skip
    _report.row(
        "attach", "keystroke round trip p50", k["gloved_p50"], "bare PTY", k["bare_p50"], "us"
    )
    r = out["replay"]
    print(f"transcript replay ({r['bytes'] / MIB:.1f} MiB): gloved {r['gloved_mib_s']:.0f} MiB/s, "
          f"bare socket {r['bare_mib_s']:.0f} MiB/s, ratio "
          f"{r['bare_mib_s'] / r['gloved_mib_s']:.1f}x slower")  # fmt: skip
    f = out["flood_s"]
    print(f"agent printing 104 MiB: no viewer {f['none']:.2f} s, stalled viewer "
          f"{f['stalled']:.2f} s ({f['stalled'] / f['none']:.2f}x), viewer keeping up "
          f"{f['reading']:.2f} s ({f['reading'] / f['none']:.2f}x)")  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
