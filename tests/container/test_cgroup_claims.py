"""Claims of cgroup names by mkdir, and the sweep of stale groups, raced without a lock.

A group name is claimed by the ``mkdir`` that makes it (``claim_group``): of any number of
threads and processes claiming one name at once, exactly one wins. The sweep of stale
groups (``sweep_stale_groups``) removes each group whose maker is dead exactly once, and
never a group a live claimant made, however many sweeps and claims run at once. Each race
runs in a real cgroup v2 group (as root, where this host has a v2 site) and in a plain
directory (mkdir is the same atomic step there).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from glove.container.linux._cgroup_v2 import claim_group, probe_v2
from glove.container.linux._cgroups import sweep_stale_groups

#: Names raced for, one race each.
ROUNDS = 40
#: Claimants of each name: threads of this process and forked processes.
THREADS = 6
PROCESSES = 4
#: Stale groups (of dead makers) the racing sweeps must remove, and live claims beside.
STALE = 24
LIVE_THREADS = 6
LIVE_PROCESSES = 4
SWEEP_PROCESSES = 4
SWEEP_THREADS = 4
#: Bound on every wait: a broken run fails here instead of hanging.
WAIT_S = 60.0


def _v2_base() -> Path | None:
    if os.getuid() != 0:
        return None
    site = probe_v2().site
    return site.base if site is not None else None


@pytest.fixture(params=["cgroup-v2", "directory"])
def base(request: pytest.FixtureRequest) -> Iterator[Path]:
    """An empty directory to claim names in: a real v2 group, or a plain directory."""
    if request.param == "cgroup-v2":
        parent = _v2_base()
        if parent is None:
            pytest.skip("no cgroup v2 site here (root with a v2 site only)")
        made = parent / f"claims-{os.getpid()}-{secrets.token_hex(4)}"
        made.mkdir(mode=0o755)
        try:
            yield made
        finally:
            for child in made.iterdir():
                with contextlib.suppress(OSError):
                    child.rmdir()
            made.rmdir()
    else:
        made = Path(tempfile.mkdtemp(prefix="glove-claims-"))
        try:
            yield made
        finally:
            shutil.rmtree(made, ignore_errors=True)


def _fork(task: Callable[[], str], go: int, hold: int, parents: tuple[int, ...]) -> tuple[int, int]:
    """A child that waits for ``go`` to end (EOF), runs ``task``, writes its result to the
    returned pipe, then waits for ``hold`` to end too before it exits. ``parents`` are the
    write ends it closes (only the parent's copies may keep those pipes open)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            for fd in (read_end, *parents):
                os.close(fd)
            os.read(go, 1)
            os.write(write_end, task().encode())
            os.close(write_end)
            os.read(hold, 1)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _race(tasks: list[Callable[[], str]], processes: list[Callable[[], str]]) -> list[str]:
    """Run ``tasks`` in threads and ``processes`` in forked children, all released at once;
    every result (threads first). The children live until every result is in."""
    go_read, go_write = os.pipe()
    hold_read, hold_write = os.pipe()
    children = [  # forked before any thread
        _fork(task, go_read, hold_read, (go_write, hold_write)) for task in processes
    ]
    os.close(go_read)
    os.close(hold_read)
    barrier = threading.Barrier(len(tasks) + 1, timeout=WAIT_S)
    results: list[str] = [""] * len(tasks)

    def run(index: int) -> None:
        barrier.wait()
        results[index] = tasks[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tasks))]
    try:
        for thread in threads:
            thread.start()
        barrier.wait()
        os.close(go_write)  # the children's go: EOF
        go_write = -1
        for thread in threads:
            thread.join(WAIT_S)
            assert not thread.is_alive()
        for _, read_end in children:
            with os.fdopen(read_end, "rb", closefd=False) as pipe:
                results.append(pipe.read().decode())
    finally:
        for fd in (go_write, hold_write):
            if fd >= 0:
                os.close(fd)
        codes = []
        for pid, read_end in children:
            os.close(read_end)
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    assert codes == [0] * len(children), codes
    return results


def test_exactly_one_claim_of_a_name_wins_among_threads_and_processes(base: Path) -> None:
    for round_ in range(ROUNDS):
        name = base / f"sbx-{os.getpid()}-{round_:04d}{secrets.token_hex(4)}"

        def claim(name: Path = name) -> str:
            return "won" if claim_group(name) else "taken"

        results = _race([claim] * THREADS, [claim] * PROCESSES)
        assert results.count("won") == 1, (round_, results)
        assert name.is_dir()


def _groups(base: Path) -> set[str]:
    """The groups (directories) in ``base``, not its cgroup interface files."""
    return {entry.name for entry in base.iterdir() if entry.is_dir()}


def _dead_pid() -> int:
    """A pid no process has now (a child's, reaped)."""
    while True:
        child = subprocess.Popen(["/bin/true"])
        child.wait()
        if not Path(f"/proc/{child.pid}").exists():
            return child.pid


def _sweep_in_a_new_process(base: Path) -> int:
    code = "import sys; from pathlib import Path\n"
    code += "from glove.container.linux._cgroups import sweep_stale_groups\n"
    code += "print(sweep_stale_groups(Path(sys.argv[1])))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(base)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    return int(done.stdout)


def test_racing_sweeps_remove_each_stale_group_once_and_no_live_claim(base: Path) -> None:
    stale = {base / f"sbx-{_dead_pid()}-{secrets.token_hex(6)}" for _ in range(STALE)}
    for group in stale:
        group.mkdir()

    def claim() -> str:
        name = base / f"sbx-{os.getpid()}-{secrets.token_hex(6)}"
        return f"claimed {name.name}" if claim_group(name) else "taken"

    def sweep() -> str:
        return f"swept {sweep_stale_groups(base)}"

    # Live claims and sweeps at once, in threads and processes (the claiming processes
    # live until every result is in: their groups are live claims all along) ...
    results = _race(
        [claim] * LIVE_THREADS + [sweep] * SWEEP_THREADS,
        [claim] * LIVE_PROCESSES + [sweep] * SWEEP_PROCESSES,
    )
    claimed = {r.split()[1] for r in results if r.startswith("claimed")}
    removed = sum(int(r.split()[1]) for r in results if r.startswith("swept"))
    left = _groups(base)
    assert len(claimed) == LIVE_THREADS + LIVE_PROCESSES, results
    assert claimed <= left, claimed - left  # no live claim was swept
    # ... then one more sweep, in a new process: the claiming processes are gone by now
    # (every sweep above ended while they lived), so their groups are stale too.
    removed += _sweep_in_a_new_process(base)
    own = {name for name in claimed if name.startswith(f"sbx-{os.getpid()}-")}
    assert len(own) == LIVE_THREADS
    assert _groups(base) == own  # every stale group went ...
    assert removed == STALE + LIVE_PROCESSES, results  # ... each exactly once
