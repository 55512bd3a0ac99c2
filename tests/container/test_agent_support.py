"""What real agents need from the sandbox: lookups that fail at once, clear symlink binds."""

from __future__ import annotations

from pathlib import Path

from tests.container.conftest import GloveExec

#: Lookups made in one run; waiting on a resolver timeout each would take this many seconds.
LOOKUPS = 20

LOOKUP = f"""
import resource, socket
for _ in range({LOOKUPS}):
    try:
        socket.getaddrinfo("api.anthropic.com", 443)
    except socket.gaierror as exc:
        error = exc.errno
u = resource.getrusage(resource.RUSAGE_SELF)
print("ERR", error == socket.EAI_AGAIN, "CPU", u.ru_utime + u.ru_stime)
"""


def test_offline_lookups_fail_at_once(glove_exec: GloveExec) -> None:
    """20 lookups all fail with EAI_AGAIN well inside a wall limit shorter than their timeouts."""
    done = glove_exec("python3", "-c", LOOKUP, flags=("--wall-time", "10"))
    assert done.status["outcome"] == "exited", done.status
    words = done.stdout.split()
    assert words[:2] == ["ERR", "True"], done.stdout
    assert float(words[3]) < 5.0, "a busy resolver loop"  # CPU seconds, for 20 lookups


def test_the_sandbox_has_its_own_resolv_conf(glove_exec: GloveExec) -> None:
    """Offline, /etc/resolv.conf names an unroutable server with one quick attempt."""
    done = glove_exec("cat", "/etc/resolv.conf")
    assert "nameserver 192.0.2.1" in done.stdout
    assert "options timeout:1 attempts:1" in done.stdout


def test_a_relocated_symlink_bind_names_what_to_bind(glove_exec: GloveExec) -> None:
    """A relative link bound elsewhere is refused with the resolved path to bind instead."""
    ws = Path(glove_exec.workspace)
    (ws / "pkg" / "bin").mkdir(parents=True)
    (ws / "pkg" / "bin" / "tool").write_text("#!/bin/sh\necho TOOL\n")
    (ws / "pkg" / "bin" / "tool").chmod(0o755)
    (ws / ".bin").mkdir()
    (ws / ".bin" / "tool").symlink_to("../pkg/bin/tool")
    done = glove_exec("/opt/tool", flags=("--bind", f"{ws}/.bin/tool:/opt/tool"))
    assert done.rc == 125
    assert f"--bind {ws}/pkg/bin/tool:/opt/tool" in done.stderr, done.stderr
    fixed = glove_exec("/opt/tool", flags=("--bind", f"{ws}/pkg/bin/tool:/opt/tool"))
    assert fixed.stdout.strip() == "TOOL", fixed.stderr
