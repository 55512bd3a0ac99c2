"""A checkout, workspace, ``--use`` or ``--bind`` under ``/tmp`` works at its own path.

The sandbox's ``/tmp`` is its own (a directory of the size-limited root tmpfs); a host path
below ``/tmp`` is mounted into it at the same path, as ``bwrap --tmpfs /tmp --bind /tmp/x
/tmp/x`` does, with its parent directories made on that tmpfs. These run from a copy of the
repository's tracked files under a fresh ``/tmp`` directory (a clone where a new user makes
one), through the real CLI and the example's own script, as root and as the unprivileged
user, and check that nothing else of the host's ``/tmp`` shows and that the sandbox's
``/tmp`` stays private and bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, Unpriv

#: The npm MCP servers scripts/setup installs (the example's upstream among them).
PEERS = Path("tests") / "peers" / "node_modules"
RUN_DEADLINE_S = 120


@dataclass
class TmpClone:
    """A copy of the checkout's tracked files under a fresh /tmp directory, and who runs."""

    who: str
    base: Path
    clone: Path
    python: str
    wrap: list[str]
    env: dict[str, str]
    #: The unprivileged user who runs glove, or None for this process's own user.
    owner: Unpriv | None = None

    def run(
        self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (wrapped to the user) in ``cwd``; return it finished, as text."""
        return subprocess.run(
            [*self.wrap, *argv], cwd=cwd, env={**self.env, **(env or {})}, capture_output=True,
            text=True, timeout=RUN_DEADLINE_S, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def glove(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """``glove ARGS`` from ``cwd`` (the default profile: the same-path workspace)."""
        return self.run([self.python, "-m", "glove", *args], cwd=cwd)

    def make(self, relative: str) -> Path:
        """A directory under the base, owned by the runner."""
        path = self.base / relative
        path.mkdir(parents=True)
        self.own(path)
        return path

    def own(self, path: Path) -> None:
        """Hand ``path`` (itself, not what is below it) to the runner."""
        if self.owner is not None:
            os.chown(path, self.owner.uid, self.owner.gid)


def _copy_tracked(destination: Path) -> None:
    """Copy the files git tracks (as they are in the working tree) to ``destination``, and
    the npm peers setup installed, all readable by every user."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    )
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if not name or not source.is_file() or source.is_symlink():
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        target.chmod(target.stat().st_mode | 0o444)
    peers = (REPO / PEERS).resolve()
    if not peers.is_dir():
        pytest.fail(f"{REPO / PEERS} is missing: run scripts/setup (it installs the peers)")
    # Copies, not hard links: glove run refuses an upstream program with another name.
    shutil.copytree(peers, destination / PEERS, symlinks=True)
    for directory, _dirs, files in os.walk(destination / PEERS):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444)
    for directory, _dirs, _files in os.walk(destination):
        os.chmod(directory, 0o755)


@pytest.fixture(scope="module", params=["root", "unpriv"] if os.getuid() == 0 else ["self"])
def tmp_clone(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[TmpClone]:
    """The checkout copied under a fresh /tmp directory (one per user, shared by this
    module's tests, each using its own directories beside it), run by root and by the user."""
    base = Path(tempfile.mkdtemp(prefix="glove-clone-", dir="/tmp"))
    base.chmod(0o755)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8",
           "HOME": str(base)}  # fmt: skip
    owner = unpriv if request.param == "unpriv" else None
    python = unpriv.python if owner is not None else sys.executable
    wrap = unpriv.command() if owner is not None else []
    try:
        _copy_tracked(base / "glove")
        clone = TmpClone(request.param, base, base / "glove", python, wrap, env, owner)
        clone.own(base)
        clone.own(clone.clone)  # the workspace of the exec test: the command writes there
        yield clone
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_the_example_runs_from_a_clone_under_tmp(tmp_clone: TmpClone) -> None:
    """``examples/mediated-agent/run`` from the clone under /tmp (its own upstream, from the
    clone's peers): the example's folder is bound at its own path, the workspace under /tmp
    too, and the agent's allowed call lists it by the same path as on the host, with the two
    refusals audited."""
    workspace = tmp_clone.make("agent-workspace")
    config = tmp_clone.make("config")
    glove = str(Path(tmp_clone.python).parent / "glove")
    done = tmp_clone.run(
        [str(tmp_clone.clone / "examples" / "mediated-agent" / "run"), str(workspace)],
        cwd=tmp_clone.base,
        env={"GLOVE": glove, "XDG_CONFIG_HOME": str(config)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sandbox-owned" not in done.stderr
    steps = {
        step["step"]: step
        for line in done.stdout.splitlines()
        if line.startswith("{")
        for step in [json.loads(line)]
    }
    assert steps["allowed"]["ok"] is True
    assert steps["allowed"]["workspace"] == str(workspace)  # the same path on both sides
    assert "[FILE] hello.txt" in steps["allowed"]["listing"]
    assert steps["hidden"]["error"]["code"] == -32602
    assert steps["outside"]["error"]["code"] == -33001
    assert "glove run: 2 MCP call(s) denied" in done.stderr


#: What the command inside reports about /tmp, one ``key: value`` line each.
_LOOK = r"""
echo "cwd: $PWD"
echo "tmp: $(ls -A /tmp | tr '\n' ' ')"
echo "base: $(ls -A "$BASE" | tr '\n' ' ')"
echo "secret: $(cat "$SECRET" 2>&1 | sed 's/.*: //')"
echo "venv: $(python -c 'import sys; print(sys.prefix)')"
echo "data: $(cat "$BASE/data/file")"
echo "data-write: $(touch "$BASE/data/new" 2>&1 | sed 's/.*: //')"
echo "inside" > "$BASE/made-inside"
echo "inside" > /tmp/private
echo "ws" > "$PWD/from-inside"
echo "tmpfs: $(awk '$5 == "/tmp" {print $(NF-2)}' /proc/self/mountinfo)"
echo "fill: $(dd if=/dev/zero of=/tmp/fill bs=64k count=64 2>&1 | grep -o 'No space left')"
"""


def test_workspace_use_and_bind_under_tmp_with_the_rest_unseen(tmp_clone: TmpClone) -> None:
    """From a workspace in the clone under /tmp, with ``--use`` a venv and ``--bind`` a
    directory both under /tmp: each is at its own path (the venv's python runs, the bind is
    read-only), and nothing else of the host's /tmp shows: not a file beside them, not a
    secret elsewhere; what the command writes to /tmp stays in its private, size-limited
    tmpfs, while the workspace write reaches the host."""
    base = tmp_clone.base
    venv = base / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    data = tmp_clone.make("data")
    (data / "file").write_text("shown\n")
    (base / "host-only").write_text("beside the binds\n")
    secret = Path(tempfile.mkdtemp(prefix="glove-secret-", dir="/tmp")) / "s"
    secret.write_text("host secret\n")
    workspace = tmp_clone.clone  # the clone itself is the workspace, as in the README
    try:
        done = tmp_clone.glove(
            "exec", "--quiet", "--use", str(venv), "--bind", str(data), "--disk", "1M",
            "--env", f"BASE={base}", "--env", f"SECRET={secret}",
            "--", "/bin/sh", "-c", _LOOK, cwd=workspace,
        )  # fmt: skip
    finally:
        shutil.rmtree(secret.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert seen["cwd"] == str(workspace)
    assert seen["tmp"].split() == [base.name]  # nothing else of the host's /tmp
    assert sorted(seen["base"].split()) == ["data", "glove", "venv"]  # not host-only
    assert seen["secret"] == "No such file or directory"
    assert seen["venv"] == str(venv)
    assert seen["data"] == "shown"
    assert seen["data-write"] == "Read-only file system"
    assert seen["tmpfs"] == "tmpfs"
    assert seen["fill"] == "No space left"
    assert (workspace / "from-inside").read_text() == "ws\n"
    assert not (base / "made-inside").exists()  # the parent directory is the sandbox's
    assert not Path("/tmp/private").exists()
    assert not (data / "new").exists()


def test_dry_run_shows_the_private_tmp_before_the_binds_below_it(tmp_clone: TmpClone) -> None:
    """``--dry-run --json`` lists the private /tmp tmpfs first, then the workspace under it
    at its own path, and the run starts there."""
    done = tmp_clone.glove("exec", "--dry-run", "--json", "--", "true", cwd=tmp_clone.clone)
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert described["cwd"] == str(tmp_clone.clone)
    mounts = [(m["target"], m["kind"]) for m in described["mounts"]]
    assert mounts.index(("/tmp", "tmpfs")) < mounts.index((str(tmp_clone.clone), "bind"))
    workspace = next(m for m in described["mounts"] if m["target"] == str(tmp_clone.clone))
    assert (workspace["source"], workspace["mode"]) == (str(tmp_clone.clone), "rw")


def test_a_use_directory_in_a_sandbox_built_tree_is_refused_naming_the_flag(
    tmp_clone: TmpClone,
) -> None:
    """``--use`` of a directory under /dev (shown at its own path, which the sandbox builds)
    is refused (125) naming --use; a --bind under /run, which the sandbox does not build,
    shows at its own path."""
    shm = Path(tempfile.mkdtemp(prefix="glove-use-", dir="/dev/shm"))
    try:
        refused = tmp_clone.glove("exec", "--use", str(shm), "--", "true", cwd=tmp_clone.clone)
        assert refused.returncode == 125, refused
        assert f"--use {shm}" in refused.stderr
        assert "the sandbox's own /dev" in refused.stderr
    finally:
        shm.rmdir()
    data = tmp_clone.make("run-data")
    (data / "f").write_text("under run\n")
    shown = tmp_clone.glove(
        "exec", "--quiet", "--bind", f"{data}:/run/glove-data", "--", "cat", "/run/glove-data/f",
        cwd=tmp_clone.clone,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "under run\n"
