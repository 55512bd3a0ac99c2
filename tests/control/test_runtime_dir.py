"""No other user can keep gloved from starting: the runtime directory is chosen by one rule
every client shares, never in a shared directory, and a socket path of any length works."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.config import _runtime_rule as paths_module
from glove.control import (
    MAX_SOCKET_PATH_BYTES,
    Client,
    UnsafeRuntimeDir,
    call,
    choose_runtime_dir,
    prepare_runtime_dir,
)
from glove.testing.notify import NotifyListener
from tests.conftest import Unpriv

CHILD = Path(__file__).with_name("_runtime_dir_child.py")
READY_DEADLINE_S = 60.0


@pytest.fixture
def no_run_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``/run/user`` replaced by an empty directory of the test's (no logind directory)."""
    run_user = tmp_path / "run-user"
    run_user.mkdir()
    monkeypatch.setattr(paths_module, "RUN_USER", str(run_user))
    return run_user


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), **extra}


def test_xdg_runtime_dir_is_used_when_it_is_a_private_directory_of_ours(
    tmp_path: Path, no_run_user: Path
) -> None:
    """An owner-only XDG_RUNTIME_DIR (or one that does not exist yet) is the first choice."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    choice = choose_runtime_dir(_env(tmp_path, XDG_RUNTIME_DIR=str(xdg)))
    assert (choice.directory, choice.source) == (xdg / "glove", "XDG_RUNTIME_DIR")
    missing = tmp_path / "not-yet"
    assert choose_runtime_dir(_env(tmp_path, XDG_RUNTIME_DIR=str(missing))).directory == (
        missing / "glove"
    )


@pytest.mark.parametrize("kind", ["relative", "shared", "symlink", "file", "other-owner"])
def test_an_xdg_runtime_dir_others_could_write_is_passed_over(
    kind: str, tmp_path: Path, no_run_user: Path
) -> None:
    """A relative, group/other-writable, symlinked, non-directory or foreign XDG_RUNTIME_DIR
    is passed over (with its reason) for the private fallback, never used."""
    target = tmp_path / "xdg"
    if kind == "relative":
        value = "relative/run"
    else:
        value = str(target)
        if kind == "shared":
            target.mkdir()
            target.chmod(0o1777)
        elif kind == "symlink":
            (tmp_path / "real").mkdir(mode=0o700)
            target.symlink_to(tmp_path / "real")
        elif kind == "file":
            target.write_text("")
        else:
            if os.getuid() != 0:
                pytest.skip("needs root to make a directory of another owner")  # pragma: no cover
            target.mkdir(mode=0o700)
            os.chown(target, 65534, 65534)
    choice = choose_runtime_dir(
        _env(tmp_path, XDG_RUNTIME_DIR=value, XDG_STATE_HOME=str(tmp_path / "state"))
    )
    assert choice.source == "state"
    assert choice.directory == tmp_path / "state" / "glove" / "run"
    assert choice.passed_over[0].startswith("XDG_RUNTIME_DIR")
    assert f"/run-user/{os.getuid()} does not exist" in choice.passed_over[1]


def test_run_user_is_used_only_when_it_is_ours(tmp_path: Path, no_run_user: Path) -> None:
    """logind's /run/user/UID is used when private and ours; a symlink there is not."""
    mine = no_run_user / str(os.getuid())
    mine.mkdir(mode=0o700)
    choice = choose_runtime_dir(_env(tmp_path))
    assert (choice.directory, choice.source) == (mine / "glove", "/run/user")
    mine.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    mine.symlink_to(tmp_path / "elsewhere")
    assert choose_runtime_dir(_env(tmp_path)).source == "state"


def test_the_fallback_is_made_owner_only_inside_the_state_directory(
    tmp_path: Path, no_run_user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gloved's start makes $XDG_STATE_HOME/glove 0700 and run/ 0700; a state directory
    open to others is refused, never repaired."""
    state = tmp_path / "deep" / "state"
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    made = prepare_runtime_dir()
    assert made.directory == state / "glove" / "run"
    for directory in (state.parent, state, state / "glove", made.directory):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    shutil.rmtree(state / "glove")
    (state / "glove").mkdir(mode=0o755)
    (state / "glove").chmod(0o755)
    with pytest.raises(UnsafeRuntimeDir, match="0755"):
        prepare_runtime_dir()
    assert stat.S_IMODE((state / "glove").stat().st_mode) == 0o755  # left as found


@pytest.fixture
def long_dir() -> Iterator[Path]:
    """A private directory whose gloved.sock path is longer than a Unix socket takes."""
    base = Path(tempfile.mkdtemp(prefix="glove-long-"))
    deep = base / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    try:
        yield deep / "glove"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_socket_path_too_long_for_sun_path_still_works(long_dir: Path) -> None:
    """gloved binds, and the blocking and async clients connect, through /proc/self/fd when
    gloved.sock's path is over MAX_SOCKET_PATH_BYTES."""
    sock = long_dir / "gloved.sock"
    assert len(os.fsencode(sock)) > MAX_SOCKET_PATH_BYTES
    env = {**os.environ, "XDG_CONFIG_HOME": str(long_dir.parent / "config")}
    env["XDG_STATE_HOME"] = str(long_dir.parent / "state")
    with NotifyListener.abstract() as listener:
        argv = [sys.executable, "-m", "glove.daemon", "--runtime-dir", str(long_dir)]
        proc = subprocess.Popen(
            argv, env={**env, **listener.environ()}, stderr=subprocess.PIPE, text=True
        )
        try:
            listener.wait_for(lambda n: n.fields.get("READY") == "1", timeout=READY_DEADLINE_S)
            assert sock.exists()
            assert call(sock, "health")["status"] == "ok"
            with Client.for_runtime_dir(long_dir) as client:
                assert client.call("health")["status"] == "ok"
            probe = (
                "import asyncio, sys\nfrom pathlib import Path\n"
                "from glove.control import AsyncClient\n"
                "async def main():\n"
                "    async with AsyncClient.for_runtime_dir(Path(sys.argv[1])) as c:\n"
                "        print((await c.call('health'))['status'])\n"
                "asyncio.run(main())\n"
            )
            done = subprocess.run(
                [sys.executable, "-c", probe, str(long_dir)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.stdout.strip() == "ok", done.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
            stderr = proc.stderr.read() if proc.stderr else ""
            if proc.stderr:
                proc.stderr.close()
        assert code == 0, stderr
    assert not sock.exists()


def _attack(victim: str, attack: str, unpriv: Unpriv) -> dict[str, Any]:
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            str(CHILD),
            victim,
            attack,
            unpriv.user,
            unpriv.python,
            sys.executable,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(os.getuid() != 0, reason="two users and a mount namespace need root")
@pytest.mark.parametrize("attack", ["mkdir", "symlink", "xdg-shared"])
@pytest.mark.parametrize("victim", ["root", "unpriv"])
def test_another_user_cannot_keep_gloved_from_starting(
    victim: str, attack: str, unpriv: Unpriv
) -> None:
    """With XDG_RUNTIME_DIR unset (or shared) and no /run/user/UID, the other user plants
    /tmp/glove-UID (a directory, or a symlink to a directory of theirs) or XDG_RUNTIME_DIR/glove
    first: the victim's glove setup, gloved and every client still work, all in the victim's
    private fallback; the attacker cannot create that, its plant is never touched, and
    glove doctor names the directory in use, why, and the planted path."""
    result = _attack(victim, attack, unpriv)
    uid = result["victim_uid"]
    assert result["attacker"]["rc"] == 0, result["attacker"]  # the plant is in place
    if victim == "root":  # the test user cannot create root's fallback (root could any)
        assert result["squat"]["rc"] != 0, result["squat"]
    fallback = "/home/victim/.local/state/glove/run"
    assert result["setup"]["rc"] == 0, result["setup"]
    assert json.loads(result["setup"]["stdout"])["runtime_dir"] == fallback
    assert result["ready"], result["gloved_stderr"]
    for client in ("session_list", "receipts_page", "sync_client", "async_client"):
        assert result[client]["rc"] == 0, (client, result[client])
    assert result["sync_client"]["stdout"].split() == ["ok", fallback]
    assert result["async_client"]["stdout"].strip() == "ok"
    assert result["attacker_client"]["rc"] != 0
    assert result["gloved_rc"] == 0, result["gloved_stderr"]
    assert result["fallback"] == {"exists": True, "uid": uid, "mode": "0o700"}
    assert all(entries == [] for entries in result["planted"].values()), result["planted"]
    checks = {c["name"]: c for c in json.loads(result["doctor"]["stdout"])["checks"]}
    runtime = checks["runtime_dir"]
    assert runtime["status"] == "warn"
    assert fallback in runtime["summary"]
    assert f"/run/user/{uid} does not exist" in runtime["detail"]
    assert "enable-linger" in runtime["fix"]
    if attack == "xdg-shared":
        assert "not used: XDG_RUNTIME_DIR: /tmp " in runtime["detail"]  # not ours, or 1777
    else:
        assert f"/tmp/glove-{uid} exists" in runtime["detail"]
        assert result["old_path_is_symlink"] is (attack == "symlink")
