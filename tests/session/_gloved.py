"""A real gloved process in a private home: `glove setup`, test harnesses, start, kill -9."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glove.control import Client

START_DEADLINE_S = 30.0
#: One readiness probe's own deadline: a socket that accepts but never answers (a stale
#: listener) must not eat the whole start deadline in one call.
PROBE_TIMEOUT_S = 2.0
#: The same through the CLI (its interpreter's start included).
CLI_PROBE_TIMEOUT_S = 15.0
#: The production entry point, and the fault-injection one (glove.testing.faulty_gloved).
GLOVED = ("-m", "glove.daemon")
FAULTY_GLOVED = ("-m", "glove.testing.faulty_gloved")

#: Harnesses every test home gets (the marker makes a leaked sandbox findable by argv).
MARKER = "glove-test-marker-7f3a"
HARNESSES = f"""
[harnesses.hello]
argv = ["/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"]

[harnesses.ok]
argv = ["/bin/true"]

[harnesses.sleep]
argv = ["/bin/sh", "-c", "/bin/sleep 30; : {MARKER}"]

[harnesses.short]
argv = ["/bin/sh", "-c", "/bin/sleep 0.3; echo done"]

[harnesses.ls]
argv = ["/bin/sh", "-c", "cat /workspace/work/note.txt"]
"""

LIMITS = {
    "wall_time_s": 60,
    "cpu_time_s": 10,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}


def plan_text(harness: str = "ok", **extra: Any) -> str:
    """A plan v1 for ``harness`` with modest limits, as JSON text."""
    doc = {
        "version": 1,
        "harness": harness,
        "exposures": [],
        "limits": dict(LIMITS),
        "network": "none",
        "terminal": "pipes",
    }
    doc.update(extra)
    return json.dumps(doc)


@dataclass
class Gloved:
    """One user's Glove home and (when started) its gloved."""

    base: Path
    python: str = sys.executable
    #: Popen keywords that run every command as the home's owner (empty: as we are).
    creds: dict[str, Any] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env.update(
            HOME=str(self.base),
            XDG_CONFIG_HOME=str(self.base / "config"),
            XDG_STATE_HOME=str(self.base / "state"),
            XDG_RUNTIME_DIR=str(self.base / "run"),
            XDG_DATA_HOME=str(self.base / "data"),
        )
        return env

    @property
    def runtime(self) -> Path:
        return self.base / "run" / "glove"

    @property
    def config(self) -> Path:
        return self.base / "config" / "glove"

    @property
    def state(self) -> Path:
        return self.base / "state" / "glove"

    def glove(self, *args: str, timeout: float = 120.0, stdin: str | None = None) -> Any:
        """Run the glove CLI as this user; the CompletedProcess (text)."""
        return subprocess.run(
            [self.python, "-m", "glove", *args],
            **self.creds,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            check=False,
        )

    def setup(self, harnesses: str = HARNESSES) -> None:
        """`glove setup`, then the test harnesses appended to gloved.toml."""
        subprocess.run(
            ["mkdir", "-m", "700", "-p", str(self.base / "run")], check=True, **self.creds
        )
        done = self.glove("setup", "--json")
        assert done.returncode == 0, done.stderr
        with (self.config / "gloved.toml").open("a") as handle:
            handle.write(harnesses)

    def start(self, *extra: str, entry: tuple[str, ...] = GLOVED) -> None:
        """Start gloved and wait until its socket answers (recovery is done by then)."""
        self.spawn(*extra, entry=entry)
        self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until the spawned gloved's socket answers; fail if it exits first."""
        assert self.proc is not None
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"gloved exited {self.proc.returncode}: {self.stderr()}")
            if (self.runtime / "gloved.sock").exists():
                if self.creds:  # another user's daemon: ask through its own CLI
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        probe = self.glove("capabilities", "--json", timeout=CLI_PROBE_TIMEOUT_S)
                        if probe.returncode == 0:
                            return
                else:
                    with contextlib.suppress(Exception):
                        with Client.for_runtime_dir(self.runtime, timeout=PROBE_TIMEOUT_S) as c:
                            c.call("health")
                        return
            if time.monotonic() > deadline:
                raise AssertionError(f"gloved did not answer in time: {self.stderr()}")
            time.sleep(0.02)

    def spawn(self, *extra: str, entry: tuple[str, ...] = GLOVED) -> subprocess.Popen[bytes]:
        """Start gloved (stderr to a fresh log file) without waiting for it; the process."""
        assert self.proc is None or self.proc.poll() is not None
        self.log = self.base / f"gloved-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [self.python, *entry, *extra],
                **self.creds,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=out,
            )
        return self.proc

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log is not None else ""

    def client(self) -> Client:
        return Client.for_runtime_dir(self.runtime, timeout=60.0)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        with self.client() as client:
            return client.call(method, params)

    def kill9(self) -> None:
        """SIGKILL gloved (no cleanup of any kind runs) and reap it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise

    def wait_terminal(self, session_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """Watch until terminal; the final view."""
        last: dict[str, Any] | None = None
        with self.client() as client:
            for view in client.stream("session.watch", {"session_id": session_id}, timeout=timeout):
                last = view
        assert last is not None
        assert last["state"] == "terminal", last
        return last

    def all_receipts(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.call("receipts.page", {"after": after, "limit": 1000})
            out.extend(page["receipts"])
            if not page["receipts"]:
                return out
            after = page["receipts"][-1]["seq"]


def leaked_sandboxes() -> list[int]:
    """Pids of any process still running a test harness (none may outlive its gloved)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if MARKER.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found
