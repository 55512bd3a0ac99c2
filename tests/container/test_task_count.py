"""The task count behind the ``rlimit-nproc-userns`` pids watchdog, on a real process tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from glove.container.linux._events import count_tasks, host_tasks

#: A tree of 7 tasks: the root with two more threads, a child with a grandchild, a sleeping
#: child, and a zombie child (exited, not reaped: RLIMIT_NPROC still counts it).
TREE = """
import os, sys, threading, time
kids = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        if i == 0 and os.fork() != 0:
            print("grandchild", flush=True)
        if i == 2:
            os._exit(0)
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
os.waitid(os.P_PID, kids[2], os.WEXITED | os.WNOWAIT)
stop = threading.Event()
for _ in range(2):
    threading.Thread(target=stop.wait, daemon=True).start()
print("ready", flush=True)
time.sleep(60)
"""


def test_the_count_covers_threads_descendants_and_zombies() -> None:
    """Every task of the tree is counted once (threads, a grandchild, a zombie), nothing
    outside it; the host's total bounds it, and a gone root counts nothing."""
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        assert sorted([proc.stdout.readline(), proc.stdout.readline()]) == [
            "grandchild\n",
            "ready\n",
        ]
        assert count_tasks(proc.pid) == 7
        assert count_tasks(os.getpid()) >= 8  # this test's process and the whole tree
        assert host_tasks() >= count_tasks(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert count_tasks(proc.pid) == 0
