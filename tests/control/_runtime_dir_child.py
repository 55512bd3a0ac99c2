"""Run one runtime-directory attack in a private mount namespace (started under ``unshare -m``).

The namespace gets its own empty ``/tmp`` (1777), ``/run/user`` and ``/home``, so the attack
is exactly the issue's ("``XDG_RUNTIME_DIR`` unset and no ``/run/user/UID``") whatever the
host has, and nothing another process on the host uses is touched. As root it:

1. makes the victim's home ``/home/victim`` (the victim's, 0700);
2. lets the attacker (the other user) act first: pre-create ``/tmp/glove-<victim uid>``, or
   plant it as a symlink to a directory the attacker owns, or pre-create ``glove`` in a
   shared ``XDG_RUNTIME_DIR`` (``/tmp``), and try to squat the victim's fallback directory;
3. runs, as the victim: ``glove setup``, ``gloved`` (readiness by ``READY=1``), the clients
   (``glove session list``, ``glove receipts page``, the blocking and the async Python
   clients), ``glove doctor``, then stops gloved;
4. prints one JSON object with every result, for the test to judge.

Usage: ``_runtime_dir_child.py VICTIM ATTACK UNPRIV_USER UNPRIV_PYTHON ROOT_PYTHON``, with
VICTIM ``root`` or ``unpriv`` and ATTACK ``mkdir``, ``symlink`` or ``xdg-shared``.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from glove.testing.notify import NotifyListener

READY_DEADLINE_S = 60.0
COMMAND_DEADLINE_S = 120.0
HOME = Path("/home/victim")

ASYNC_PROBE = """
import asyncio
from glove.control import AsyncClient
async def main():
    async with AsyncClient.for_runtime_dir() as client:
        print((await client.call("health"))["status"])
asyncio.run(main())
"""
SYNC_PROBE = """
from glove.control import Client, default_runtime_dir
with Client.for_runtime_dir() as client:
    print(client.call("health")["status"], default_runtime_dir())
"""


def mount_private_tmpfs(target: str, mode: str) -> None:
    """A fresh tmpfs at ``target``, visible in this mount namespace only."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"mode={mode}", "glove-test", target], check=True)


def as_user(user: str | None, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """``argv`` run as ``user`` (None: root), with exactly ``env`` (plus PATH). ``setpriv``
    execs the command itself (no session process in between), so signals and exit codes
    are the command's own."""
    env_argv = ["env", "-i", f"PATH={os.environ['PATH']}"]
    env_argv += [f"{k}={v}" for k, v in (env or {}).items()]
    prefix: list[str] = []
    if user:
        entry = pwd.getpwnam(user)
        prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}"]
        prefix += ["--clear-groups", "--"]
    return [*prefix, *env_argv, *argv]


def run(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=COMMAND_DEADLINE_S, check=False
    )
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def main() -> int:
    victim, attack, unpriv_user, unpriv_python, root_python = sys.argv[1:6]
    mount_private_tmpfs("/tmp", "1777")
    Path("/run/user").mkdir(parents=True, exist_ok=True)
    mount_private_tmpfs("/run/user", "0755")
    mount_private_tmpfs("/home", "0755")
    unpriv = pwd.getpwnam(unpriv_user)
    victim_user, attacker_user = (None, unpriv_user) if victim == "root" else (unpriv_user, None)
    victim_uid = 0 if victim == "root" else unpriv.pw_uid
    python = root_python if victim == "root" else unpriv_python
    attacker_python = unpriv_python if victim == "root" else root_python
    HOME.mkdir(mode=0o700)
    os.chown(HOME, victim_uid, 0 if victim == "root" else unpriv.pw_gid)
    env = {
        "HOME": str(HOME),
        "XDG_CONFIG_HOME": str(HOME / ".config"),
        "XDG_STATE_HOME": str(HOME / ".local" / "state"),
        "LANG": "C.UTF-8",
    }
    old_path = Path(f"/tmp/glove-{victim_uid}")
    result: dict[str, Any] = {"victim_uid": victim_uid, "attack": attack}
    # The attacker moves first.
    planted: list[str] = []
    if attack == "mkdir":
        planted = [str(old_path)]
        result["attacker"] = run(as_user(attacker_user, ["mkdir", "-m", "0700", str(old_path)]))
    elif attack == "symlink":
        bait = Path("/tmp/attacker-owned")
        planted = [str(bait)]
        result["attacker"] = run(
            as_user(
                attacker_user,
                ["sh", "-c", f"mkdir -m 0777 {bait} && ln -s {bait} {old_path}"],
            )
        )
    elif attack == "xdg-shared":
        env["XDG_RUNTIME_DIR"] = "/tmp"
        planted = ["/tmp/glove"]
        result["attacker"] = run(as_user(attacker_user, ["mkdir", "-m", "0700", "/tmp/glove"]))
    else:
        raise SystemExit(f"unknown attack {attack!r}")
    fallback = HOME / ".local" / "state" / "glove" / "run"
    if attacker_user is not None:  # root, the attacker of an unprivileged victim, can do anything
        result["squat"] = run(as_user(attacker_user, ["mkdir", "-p", str(fallback)]))
    # The victim.
    result["setup"] = run(as_user(victim_user, [python, "-m", "glove", "setup", "--json"], env))
    with NotifyListener.abstract() as listener:
        daemon_env = {**env, **listener.environ()}
        argv = as_user(victim_user, [python, "-m", "glove.daemon"], daemon_env)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            listener.wait_for(lambda n: n.fields.get("READY") == "1", timeout=READY_DEADLINE_S)
            result["ready"] = True
        except TimeoutError:
            result["ready"] = False
        if proc.poll() is None:
            glove = [python, "-m", "glove"]
            result["session_list"] = run(as_user(victim_user, [*glove, "session", "list"], env))
            result["receipts_page"] = run(
                as_user(victim_user, [*glove, "receipts", "page", "--json"], env)
            )
            result["sync_client"] = run(as_user(victim_user, [python, "-c", SYNC_PROBE], env))
            result["async_client"] = run(as_user(victim_user, [python, "-c", ASYNC_PROBE], env))
            result["doctor"] = run(as_user(victim_user, [*glove, "doctor", "--json"], env))
            # The attacker's client cannot use the victim's daemon either.
            result["attacker_client"] = run(
                as_user(attacker_user, [attacker_python, "-c", SYNC_PROBE], env)
            )
            proc.send_signal(signal.SIGTERM)
        try:
            result["gloved_rc"] = proc.wait(timeout=COMMAND_DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        result["gloved_stderr"] = proc.stderr.read() if proc.stderr else ""
    result["fallback"] = {
        "exists": fallback.is_dir(),
        "uid": fallback.stat().st_uid if fallback.exists() else None,
        "mode": oct(fallback.stat().st_mode & 0o7777) if fallback.exists() else None,
    }
    result["planted"] = {
        name: sorted(os.listdir(name)) if Path(name).is_dir() else None for name in planted
    }
    result["old_path_is_symlink"] = old_path.is_symlink()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
