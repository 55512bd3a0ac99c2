"""Start stdio upstreams before the mediator has finished importing itself.

An MCP client launches ``glove mcp serve`` and waits for its first answer; the upstream's
own start-up (an interpreter, its SDK) is usually the long part. ``glove mcp serve`` on
stdio therefore spawns each stdio upstream as soon as it has read its configuration, with
the same environment, directory and process group the upstream actor would give it, and
the actor later **adopts** the running process
(:class:`~glove.mcp._upstream_stdio.AdoptedProcess`) instead of
spawning one: Glove's own imports and set-up overlap the upstream's start-up.

The audit log comes first: nothing is prestarted unless the log can be opened for
appending as the audit actor will open it (its folder exists, the file if present is
writable), so a configuration whose log cannot open starts no upstream at all. A prestarted
server's output is not read before the mediation's audit log is open (it waits in the pipe,
which blocks the server when full), so every line it prints is audited from the first byte.

Ownership: :func:`prestart` returns the processes; whoever holds the dict owns them until an
actor adopts one (it pops it). :func:`kill_all` ends what was never adopted. A program
that cannot be started is simply not prestarted: the actor then tries, and reports the
error, as without this step. Needs ``os.pidfd_open`` (Linux 5.3+) to watch an adopted
process's exit from the event loop; without it nothing is prestarted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from glove.mcp._config import McpConfig, UpstreamConfig, child_environment


def prestart(config: McpConfig) -> dict[str, subprocess.Popen[bytes]]:
    """Spawn every stdio upstream of ``config`` now, if its audit log can be opened; return
    them by upstream id."""
    if not hasattr(os, "pidfd_open") or not audit_log_opens(config.audit):
        return {}
    started: dict[str, subprocess.Popen[bytes]] = {}
    parent = dict(os.environ)
    for upstream_id, upstream in config.upstreams.items():
        if upstream.url is not None or not upstream.command:
            continue
        try:
            started[upstream_id] = spawn(upstream, parent)
        except OSError:
            continue  # the actor will try again and say why
    return started


def audit_log_opens(path: str) -> bool:
    """Whether the audit log at ``path`` can be opened for appending (nothing is created)."""
    log = Path(path)
    try:
        if log.is_symlink() or log.exists():
            os.close(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC))
            return True
        return log.parent.is_dir() and os.access(log.parent, os.W_OK | os.X_OK)
    except OSError:
        return False


def spawn(upstream: UpstreamConfig, parent: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start one upstream as the actor would: scrubbed environment, own process group.

    Raises:
        OSError: the program cannot be started.
    """
    return subprocess.Popen(
        upstream.command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(upstream, parent),
        cwd=upstream.cwd,
        start_new_session=True,
    )


def kill_all(started: dict[str, subprocess.Popen[bytes]]) -> None:
    """Kill and reap every process nobody adopted."""
    for proc in started.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
    started.clear()
