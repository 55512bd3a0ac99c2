"""A real, private ``systemd --user`` for the unprivileged test user, on a host whose PID 1
is not systemd (this CI machine) or is.

The manager runs in its own mount namespace and in a cgroup made for it (see
``enter_user_manager.py``); every command of a test runs as the test user inside that mount
namespace, with the manager's ``XDG_RUNTIME_DIR`` and a throwaway ``HOME``. Teardown stops
the manager, kills whatever is left in its cgroup with ``cgroup.kill``, and removes the
cgroups and directories.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import Unpriv

CGROUP_ROOT = Path("/sys/fs/cgroup")
START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 30.0
HERE = Path(__file__).resolve().parent


def cgroup_hierarchies() -> list[Path]:
    """The hierarchies systemd tracks units in: the v2 one, and name=systemd on a hybrid host."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return [CGROUP_ROOT / "unified", CGROUP_ROOT / "systemd"]


class UserManager:
    """One ``systemd --user`` for ``unpriv``, started by :meth:`start`, ended by :meth:`stop`."""

    def __init__(self, unpriv: Unpriv) -> None:
        self.unpriv = unpriv
        self.base = Path(tempfile.mkdtemp(prefix="glove-um-", dir="/tmp"))
        self.base.chmod(0o711)
        self.home = self.base / "home"
        self.runtime = self.base / "run"
        for d in (self.home, self.runtime):
            d.mkdir(mode=0o700)
            os.chown(d, unpriv.uid, unpriv.gid)
        self.cgroup_name = f"glove-test-user-{os.getpid()}-{secrets.token_hex(4)}.service"
        self.cgroups = [h / self.cgroup_name for h in cgroup_hierarchies()]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The manager's pid."""
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        """Start the manager and wait until it answers ``systemctl --user``."""
        for cg in self.cgroups:
            cg.mkdir()
            for entry in [cg, *cg.iterdir()]:
                os.chown(entry, self.unpriv.uid, self.unpriv.gid)
        self.proc = subprocess.Popen(
            [
                "unshare", "--mount", "--propagation", "private", "--",
                sys.executable, str(HERE / "enter_user_manager.py"),
                str(self.unpriv.uid), str(self.unpriv.gid), str(self.home), str(self.runtime),
                *map(str, self.cgroups),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"systemd --user exited with {self.proc.returncode}")
            if (self.runtime / "systemd" / "private").exists():
                state = self.systemctl("is-system-running").stdout.strip()
                if state in ("running", "degraded"):
                    return
            time.sleep(0.1)
        raise RuntimeError("systemd --user did not come up")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a login session of the test user, with ``extra`` on top."""
        venv_bin = str(Path(self.unpriv.python).parent)
        return {
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            **extra,
        }

    def run(
        self, *argv: str, env: dict[str, str] | None = None, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as the test user in the manager's mount namespace."""
        assignments = [f"{k}={v}" for k, v in (env or self.env()).items()]
        return subprocess.run(
            [
                "nsenter", "--mount", f"--target={self.pid}",
                "setpriv", f"--reuid={self.unpriv.uid}", f"--regid={self.unpriv.gid}",
                "--clear-groups", "--", "env", "-i", *assignments, *argv,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )  # fmt: skip

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``systemctl --user ARGS``."""
        return self.run("systemctl", "--user", *args)

    def glove(self, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        """The test user's ``glove`` CLI (from its own virtualenv)."""
        return self.run(self.unpriv.python, "-m", "glove", *args, env=self.env(**extra_env))

    def show(self, unit: str, *props: str) -> dict[str, str]:
        """``systemctl --user show UNIT -p ...`` as a dict."""
        out = self.systemctl("show", unit, "--property=" + ",".join(props))
        assert out.returncode == 0, out.stderr
        return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)

    def unit_cgroups(self, control_group: str) -> list[Path]:
        """The directories of a unit's ``ControlGroup=`` in each tracked hierarchy."""
        return [h / control_group.lstrip("/") for h in cgroup_hierarchies()]

    def stop(self) -> None:
        """Stop the manager, kill what is left in its cgroup, remove everything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        kill = self.cgroups[0] / "cgroup.kill"
        if kill.exists():
            with contextlib.suppress(OSError):
                kill.write_text("1")
        for cg in self.cgroups:
            _remove_tree(cg)
        shutil.rmtree(self.base, ignore_errors=True)


def _remove_tree(cgroup: Path) -> None:
    """rmdir a cgroup and its children, deepest first, waiting briefly for dying tasks."""
    if not cgroup.exists():
        return
    dirs = sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for d in [*dirs, cgroup]:
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


@contextlib.contextmanager
def user_manager(unpriv: Unpriv) -> Iterator[UserManager]:
    """A started :class:`UserManager`, stopped and removed afterwards."""
    manager = UserManager(unpriv)
    try:
        manager.start()
        yield manager
    finally:
        manager.stop()
