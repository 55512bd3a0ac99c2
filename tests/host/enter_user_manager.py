"""Become a private ``systemd --user`` for the test user (run as root by the test harness).

Run under ``unshare --mount --propagation private``: this mount namespace gets its own
``/run/systemd`` (a tmpfs holding ``system/``, which is how systemd recognises a booted
system, and ``unit-root/``, which a booted system's manager has made before any user
manager needs it), the process moves itself into the cgroup prepared for it (so the
manager manages that subtree and nothing else on the machine), and then execs
``systemd --user`` as the test user. Nothing outside this namespace and that cgroup is
touched.

Usage: enter_user_manager.py UID GID HOME RUNTIME_DIR CGROUP_DIR...
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SYSTEMD = "/usr/lib/systemd/systemd"


def main(argv: list[str]) -> None:
    """Prepare the namespace and the cgroup, then exec the user manager."""
    uid, gid, home, runtime, *cgroups = argv
    # The mount point must exist (the systemd package ships it); an empty directory is all
    # this adds to the host, and only where it is missing.
    Path("/run/systemd").mkdir(mode=0o755, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "mode=0755", "glove-test-systemd", "/run/systemd"],
        check=True,
    )
    Path("/run/systemd/system").mkdir(mode=0o755)
    Path("/run/systemd/unit-root").mkdir(mode=0o700)
    for cgroup in cgroups:
        (Path(cgroup) / "cgroup.procs").write_text(str(os.getpid()))
    env = {
        "HOME": home,
        "XDG_RUNTIME_DIR": runtime,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    os.execve(
        "/usr/bin/setpriv",
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", SYSTEMD, "--user"],
        env,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
