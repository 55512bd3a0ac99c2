"""The end-to-end harness: a network namespace the test creates, the helper inside, a proxy outside.

Shape (the same as a Glove sandbox in ``proxy`` mode, minus the rest of the sandbox)::

    test process (host netns)                    new netns (+ mount ns; + user ns unprivileged)
      EgressProxy actor on the host end  <----     /etc/resolv.conf bound to the guest copy
      servers on 127.0.0.1 (host loopback)         lo up, no routes
                                                   glove-egress FD -- /bin/sh -c SCRIPT

As root the namespace is ``unshare --net --mount``; as the unprivileged test user it is
``unshare --user --map-root-user --net --mount`` (the user owns both). Nothing the script
runs can reach the host's loopback except through the helper and the proxy.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from glove.egress import write_guest_files
from tests.conftest import Unpriv

SYSTEM_PYTHON = "/usr/bin/python3"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Seconds one script inside a namespace may run.
INSIDE_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Inside:
    """What a script inside the namespace produced."""

    rc: int
    stdout: str
    stderr: str


@contextmanager
def open_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory every user can read (the unprivileged user's clients use it)."""
    import shutil

    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def guest_dir(root: Path) -> Path:
    """The helper and resolv.conf, as a sandbox would see them at /opt/glove."""
    target = root / "guest"
    target.mkdir()
    target.chmod(0o755)
    write_guest_files(target)
    return target


def namespace_argv(
    guest: Path, fd: int, script: str, *, unprivileged: bool, flags: tuple[str, ...] = ()
) -> list[str]:
    """The command line that builds the namespace and starts the helper in it."""
    helper = [
        SYSTEM_PYTHON,
        str(guest / "glove-egress"),
        str(fd),
        *flags,
        "--",
        "/bin/sh",
        "-c",
        script,
    ]
    setup = (
        f"mount --bind {shlex.quote(str(guest / 'resolv.conf'))} /etc/resolv.conf"
        " && ip link set lo up && exec " + shlex.join(helper)
    )
    namespaces = ["--user", "--map-root-user"] if unprivileged else []
    return ["unshare", *namespaces, "--net", "--mount", "--", "/bin/sh", "-c", setup]


async def run_inside(
    guest: Path,
    guest_end: socket.socket,
    script: str,
    *,
    unpriv: Unpriv | None = None,
    env: Mapping[str, str] | None = None,
    flags: tuple[str, ...] = (),
    timeout: float = INSIDE_TIMEOUT_S,
) -> Inside:
    """Run ``script`` under the helper in a fresh namespace; the proxy holds the other end."""
    fd = guest_end.fileno()
    argv = namespace_argv(guest, fd, script, unprivileged=unpriv is not None, flags=flags)
    environment = {"PATH": BASE_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
    environment.update(env or {})
    credentials = unpriv.credentials() if unpriv is not None and os.getuid() == 0 else {}
    process = await asyncio.create_subprocess_exec(
        *argv,
        pass_fds=[fd],
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment,
        **credentials,  # type: ignore[arg-type]
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        raise AssertionError(f"timed out inside the namespace: {out!r} {err!r}") from None
    assert process.returncode is not None
    return Inside(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
