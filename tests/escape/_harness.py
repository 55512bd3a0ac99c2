"""Run ``glove exec`` as root or as the unprivileged test user, and read what probes report.

The escape suite drives the real CLI (``python -m glove exec``) exactly as an operator would:
as root with the project venv, and as the unprivileged user through ``runuser`` with the
world-readable venv copy. Each test gets a fresh host directory owned by the user running
the sandbox, with a ``ws`` workspace holding the probes (at ``/workspace``, by the
suites' profile) and a ``status.json`` path for ``--json-status``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import at_workspace_profile

PROBES_DIR = Path(__file__).parent / "probes"
PROBE_MARK = b"GLOVE-PROBE:"
INSIDE_WS = "/workspace"
INSIDE_PYTHON = "/usr/bin/python3"
EXEC_TIMEOUT_S = 60.0
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class User:
    """Who launches the sandbox: ``root`` or the unprivileged test user."""

    label: str
    name: str
    uid: int
    gid: int
    python: str

    @property
    def is_root(self) -> bool:
        """Whether this launcher is uid 0."""
        return self.uid == 0

    def argv(self, argv: Sequence[str]) -> list[str]:
        """Wrap ``argv`` so it runs as this user."""
        if self.is_root:
            return list(argv)
        return ["runuser", "-u", self.name, "--", *argv]


@dataclass
class ExecResult:
    """One finished ``glove exec``: exit code, output, parsed json status, wall time."""

    argv: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes
    status: dict[str, Any] | None
    elapsed_s: float

    def probe(self) -> dict[str, Any]:
        """Return the probe's JSON report; fail with the full context if there is none."""
        for line in self.stdout.splitlines():
            if line.startswith(PROBE_MARK):
                result: dict[str, Any] = json.loads(line[len(PROBE_MARK) :])
                return result
        raise AssertionError(f"no probe report from the sandbox\n{self.describe()}")

    def describe(self) -> str:
        """A readable summary for assertion messages."""
        return (
            f"argv: {self.argv}\nrc: {self.returncode}\n"
            f"stdout: {self.stdout[-3000:]!r}\nstderr: {self.stderr[-3000:]!r}\n"
            f"status: {self.status}"
        )


@dataclass
class Sandbox:
    """A per-test host directory and the means to run ``glove exec`` in it as one user."""

    user: User
    base: Path
    rawsys: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def ws(self) -> Path:
        """The host side of the workspace."""
        return self.base / "ws"

    @property
    def status_path(self) -> Path:
        """Where ``--json-status`` writes."""
        return self.base / "status.json"

    def marker(self, what: str) -> str:
        """A unique, greppable marker for host-side process and object scans."""
        return f"glove-escape-{what}-{self.tag}"

    def give(self, path: Path) -> None:
        """Hand ``path`` (recursively) to the sandbox user."""
        for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
            os.lchown(p, self.user.uid, self.user.gid)

    def glove_argv(self, flags: Sequence[str], cmd: Sequence[str], json_status: bool) -> list[str]:
        """The full host argv of one ``glove exec``."""
        status = ["--json-status", str(self.status_path)] if json_status else []
        profile = [] if "--profile" in flags else ["--profile", at_workspace_profile(self.base)]
        # -P: never let the workspace (the cwd) shadow modules of the host-side glove process.
        argv = [
            self.user.python,
            "-P",
            "-m",
            "glove",
            "exec",
            "--workspace",
            str(self.ws),
            *profile,
            *status,
            *flags,
            "--",
            *cmd,
        ]
        return self.user.argv(argv)

    def host_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A small, explicit environment for the glove process on the host."""
        env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": str(self.base)}
        if extra:
            env.update(extra)
        return env

    def popen(
        self,
        cmd: Sequence[str],
        flags: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        pass_fds: Iterable[int] = (),
        stdin: int | None = subprocess.DEVNULL,
        stdout: int | None = subprocess.PIPE,
        stderr: int | None = subprocess.PIPE,
        json_status: bool = True,
        start_new_session: bool = True,
    ) -> subprocess.Popen[bytes]:
        """Start ``glove exec`` without waiting for it."""
        self.status_path.unlink(missing_ok=True)
        return subprocess.Popen(
            self.glove_argv(flags, cmd, json_status),
            cwd=self.ws,
            env=self.host_env(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=tuple(pass_fds),
            start_new_session=start_new_session,
        )

    def finish(self, proc: subprocess.Popen[bytes], started: float, timeout: float) -> ExecResult:
        """Wait for a started ``glove exec`` and collect its result."""
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            out, err = proc.communicate()
            raise AssertionError(
                f"glove exec did not return within {timeout}s\nstdout: {out[-2000:]!r}\n"
                f"stderr: {err[-2000:]!r}"
            ) from None
        elapsed = time.monotonic() - started
        status = None
        if self.status_path.exists():
            text = self.status_path.read_text()
            status = json.loads(text) if text.strip() else None
        args = proc.args if isinstance(proc.args, list) else [str(proc.args)]
        return ExecResult([str(a) for a in args], proc.returncode, out, err, status, elapsed)

    def run(
        self,
        cmd: Sequence[str],
        flags: Sequence[str] = (),
        *,
        timeout: float = EXEC_TIMEOUT_S,
        **kwargs: Any,
    ) -> ExecResult:
        """Run ``glove exec FLAGS -- CMD`` to completion."""
        started = time.monotonic()
        proc = self.popen(cmd, flags, **kwargs)
        return self.finish(proc, started, timeout)

    def probe_cmd(self, sub: str, arg: Mapping[str, Any] | None = None) -> list[str]:
        """The in-sandbox argv of a Python probe subcommand."""
        return [INSIDE_PYTHON, "-I", "-S", f"{INSIDE_WS}/probe.py", sub, json.dumps(arg or {})]

    def probe(
        self,
        sub: str,
        arg: Mapping[str, Any] | None = None,
        flags: Sequence[str] = (),
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Run a Python probe in the sandbox; require a clean exit and return its report."""
        res = self.run(self.probe_cmd(sub, arg), flags, **kwargs)
        assert res.returncode == 0, f"probe {sub} failed\n{res.describe()}"
        return res.probe()

    def raw(self, sub: str, flags: Sequence[str] = ()) -> dict[str, Any]:
        """Run the compiled raw-syscall probe in the sandbox and return its report."""
        res = self.run([f"{INSIDE_WS}/rawsys", sub], flags)
        assert res.returncode == 0, f"rawsys {sub} failed\n{res.describe()}"
        return res.probe()

    def host(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` on the host as this user, outside any sandbox (control cases)."""
        return subprocess.run(
            self.user.argv(argv),
            cwd=self.ws,
            env=self.host_env(env),
            capture_output=True,
            check=False,
            timeout=EXEC_TIMEOUT_S,
            **kwargs,
        )

    def host_probe(
        self, sub: str, arg: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run a probe on the host as this user (the control that proves the probe works)."""
        cmd = [INSIDE_PYTHON, "-I", "-S", str(self.ws / "probe.py"), sub, json.dumps(arg or {})]
        p = self.host(cmd, **kwargs)
        res = ExecResult(cmd, p.returncode, p.stdout, p.stderr, None, 0.0)
        return res.probe()


def make_sandbox(user: User, rawsys: Path) -> Sandbox:
    """Create the per-test directory tree owned by ``user``."""
    base = Path(tempfile.mkdtemp(prefix="glove-escape-"))
    sb = Sandbox(user=user, base=base, rawsys=rawsys)
    sb.ws.mkdir()
    shutil.copy(PROBES_DIR / "probe.py", sb.ws / "probe.py")
    shutil.copy(rawsys, sb.ws / "rawsys")
    (sb.ws / "rawsys").chmod(0o755)
    base.chmod(0o700)
    sb.give(base)
    return sb


def build_rawsys(out_dir: Path) -> Path:
    """Compile the raw-syscall probe; gcc is part of the project's setup packages."""
    out = out_dir / "rawsys"
    subprocess.run(
        ["gcc", "-O1", "-Wall", "-o", str(out), str(PROBES_DIR / "rawsys.c")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


def host_pids_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` on the host."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry))
    return kids


def glove_pid(sb: Sandbox, launched: int) -> int:
    """The pid of the glove process itself (runuser forks it as a child)."""
    if sb.user.is_root:
        return launched
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = children_of(launched)
        if kids:
            return kids[0]
        time.sleep(0.02)
    raise AssertionError("runuser never started glove")


def wait_until(pred: Any, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``pred`` until it is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


def kill_tree(pid: int) -> None:
    """Kill a process group started with ``start_new_session`` (test cleanup only)."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def kill_marked(marker: str) -> None:
    """Clean up any host process left with ``marker`` after a failed assertion."""
    for pid in host_pids_with(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def unpriv_user() -> User:
    """The unprivileged launcher from ``GLOVE_UNPRIV_USER`` / ``GLOVE_UNPRIV_PYTHON``."""
    import pwd

    name = os.environ.get("GLOVE_UNPRIV_USER", "glovetest")
    python = os.environ.get("GLOVE_UNPRIV_PYTHON", "/var/tmp/glove-unpriv/venv/bin/python")
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise AssertionError(
            f"test user {name!r} is missing: run scripts/setup as root first"
        ) from None
    assert os.access(python, os.X_OK), f"{python} missing: run scripts/setup as root first"
    return User("unpriv", name, pw.pw_uid, pw.pw_gid, python)


def root_user() -> User:
    """The root launcher, using the interpreter that runs the tests."""
    return User("root", "root", 0, 0, sys.executable)
