"""Make the legacy state fixture: a gloved home written by the landed version of Glove.

Run with the landed version's interpreter (its ``glove`` importable), from the repository
root::

    .venv/bin/python tests/vectors/legacy_state/generate.py tests/vectors/legacy_state/home.tar.xz

It sets up a private home, starts gloved, runs a pipes session, a PTY session, a session
that reads an exposure, acknowledges one receipt, exports a bundle, then leaves one session
running and kills gloved with SIGKILL, so the state holds an interrupted session for the
next version's recovery. The home (sockets and runtime files excluded) is archived with a
``manifest.json`` of what a reader must find. Kept so the fixture can be made again; the
archive itself is what the tests read.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HARNESSES = """
[harnesses.hello]
argv = ["/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"]

[harnesses.tty]
argv = ["/bin/sh", "-c", "printf 'tty says hi\\r\\n'; sleep 0.2"]

[harnesses.ls]
argv = ["/bin/sh", "-c", "cat /workspace/work/note.txt"]

[harnesses.sleep]
argv = ["/bin/sleep", "600"]
"""

LIMITS = {
    "wall_time_s": 60,
    "cpu_time_s": 10,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}


def plan(harness: str, **extra: Any) -> str:
    doc: dict[str, Any] = {
        "version": 1,
        "harness": harness,
        "exposures": [],
        "limits": dict(LIMITS),
        "network": "none",
        "terminal": "pipes",
    }
    doc.update(extra)
    return json.dumps(doc)


class Home:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        self.env.update(
            HOME=str(base),
            XDG_CONFIG_HOME=str(base / "config"),
            XDG_STATE_HOME=str(base / "state"),
            XDG_RUNTIME_DIR=str(base / "run"),
            XDG_DATA_HOME=str(base / "data"),
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def glove(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "glove", *args],
            env=self.env,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
            check=False,
        )
        if done.returncode > 10:  # a session's own failing exit is fine (wait says it)
            raise SystemExit(f"glove {' '.join(args)}: {done.returncode} {done.stderr}")
        return done.stdout

    def start(self) -> None:
        log = (self.base / "gloved.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "glove.daemon"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        sock = self.base / "run" / "glove" / "gloved.sock"
        for _ in range(1500):
            if sock.exists():
                with contextlib.suppress(SystemExit):
                    self.glove("capabilities", "--json")
                    return
            time.sleep(0.02)
        raise SystemExit("gloved did not start")

    def create(self, text: str) -> str:
        out = self.glove("session", "create", "-", "--json", stdin=text)
        return str(json.loads(out)["session_id"])

    def wait(self, session_id: str) -> dict[str, Any]:
        return dict(json.loads(self.glove("session", "wait", session_id, "--json")))


def main() -> None:
    out = Path(sys.argv[1]).absolute()
    with tempfile.TemporaryDirectory(prefix="glove-legacy-") as tmp:
        base = Path(tmp) / "home"
        base.mkdir(mode=0o700)
        (base / "run").mkdir(mode=0o700)
        home = Home(base)
        home.glove("setup", "--json")
        with (base / "config" / "glove" / "gloved.toml").open("a") as handle:
            handle.write(HARNESSES)
        work = base / "work"
        work.mkdir()
        (work / "note.txt").write_text("from the host\n")
        home.start()
        exposure = json.loads(home.glove("init", "work", str(work), "--json"))
        hello = home.create(plan("hello"))
        hello_final = home.wait(hello)
        tty = home.create(plan("tty", terminal="pty"))
        tty_final = home.wait(tty)
        ls = home.create(plan("ls", exposures=["work"]))
        ls_final = home.wait(ls)
        page = json.loads(home.glove("receipts", "page", "--json"))
        first = page["receipts"][0]["seq"]
        home.glove("receipts", "ack", str(first))
        key = next((base / "config" / "glove").glob("*sign*"))
        bundle = base / "bundle-hello.json"
        public = base / "receipts.pub"
        public.write_text(home.glove("receipts", "public-key"))
        home.glove("receipts", "export", hello, "-o", str(bundle), "--key", str(key))
        interrupted = home.create(plan("sleep"))
        for _ in range(1500):
            view = json.loads(home.glove("session", "status", interrupted, "--json"))
            if view["state"] == "running":
                break
            time.sleep(0.02)
        assert home.proc is not None
        home.proc.send_signal(signal.SIGKILL)
        home.proc.wait()
        time.sleep(0.5)  # the sandbox's init sees its launcher die and ends the tree
        manifest = {
            "made_by": subprocess.run(
                ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
            ).stdout.strip(),
            "exposure": exposure,
            "sessions": {
                "hello": {"id": hello, "final": hello_final},
                "tty": {"id": tty, "final": tty_final},
                "ls": {"id": ls, "final": ls_final},
                "interrupted": {"id": interrupted, "state": "running"},
            },
            "acked": first,
            "receipts": [r["seq"] for r in page["receipts"]],
            "bundle": "bundle-hello.json",
            "public_key": "receipts.pub",
            "base": str(base),
        }
        (base / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        with tarfile.open(out, "w:xz") as tar:
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(base)
                if rel.parts[0] == "run" or path.is_socket():
                    continue
                tar.add(path, arcname=str(rel), recursive=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
