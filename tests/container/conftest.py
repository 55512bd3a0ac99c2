"""Fixtures for the sandbox tests: run ``glove exec`` for real, as root and unprivileged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Unpriv, at_workspace_profile

#: Per-command deadline for a sandboxed run in these tests.
RUN_TIMEOUT_S = 60.0


@dataclass
class ExecResult:
    """What one ``glove exec`` run produced."""

    rc: int
    stdout: str
    stderr: str
    status: dict[str, Any]


@dataclass
class GloveExec:
    """Runs ``glove exec`` as one launcher identity with a private workspace."""

    who: str
    python: str
    wrap: list[str]
    workspace: Path

    def __call__(
        self,
        *cmd: str,
        flags: tuple[str, ...] = (),
        stdin: str | None = None,
        timeout: float = RUN_TIMEOUT_S,
    ) -> ExecResult:
        """Run ``glove exec FLAGS -- CMD`` in the workspace and decode its json status."""
        status_path = self.workspace.parent / "status.json"
        status_path.unlink(missing_ok=True)
        profile = (
            []
            if "--profile" in flags
            else ["--profile", at_workspace_profile(self.workspace.parent)]
        )
        argv = [
            *self.wrap,
            self.python,
            "-m",
            "glove",
            "exec",
            "--json-status",
            str(status_path),
            *profile,
            *flags,
            "--",
            *cmd,
        ]
        done = subprocess.run(
            argv,
            cwd=self.workspace,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        status = json.loads(status_path.read_text()) if status_path.exists() else {}
        return ExecResult(done.returncode, done.stdout, done.stderr, status)

    def sh(
        self,
        script: str,
        *,
        flags: tuple[str, ...] = (),
        timeout: float = RUN_TIMEOUT_S,
        stdin: str | None = None,
    ) -> ExecResult:
        """Run a shell script in the sandbox."""
        return self("/bin/sh", "-c", script, flags=flags, timeout=timeout, stdin=stdin)


def _workspace_for(uid: int, gid: int) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="glove-sbx-", dir="/var/tmp"))
    workspace = base / "ws"
    workspace.mkdir()
    for path in (base, workspace):
        os.chown(path, uid, gid)
    try:
        yield workspace
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.fixture(params=["root", "unpriv"] if os.getuid() == 0 else ["self"])
def glove_exec(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[GloveExec]:
    """``glove exec`` as root and as the unprivileged user (or as oneself when not root)."""
    if request.param == "unpriv":
        wrap, python, uid, gid = unpriv.command(), unpriv.python, unpriv.uid, unpriv.gid
    else:
        wrap, python, uid, gid = [], sys.executable, os.getuid(), os.getgid()
    for workspace in _workspace_for(uid, gid):
        yield GloveExec(request.param, python, wrap, workspace)


@pytest.fixture
def root_exec(unpriv: Unpriv) -> Iterator[GloveExec]:
    """``glove exec`` as the invoking user only (root in CI)."""
    del unpriv
    for workspace in _workspace_for(os.getuid(), os.getgid()):
        yield GloveExec("root" if os.getuid() == 0 else "self", sys.executable, [], workspace)
