"""The library launch path, driven like the daemon: threads and open fds must not leak in."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.escape._harness import (
    PROBES_DIR,
    Sandbox,
    glove_pid,
    host_pids_with,
    kill_marked,
    kill_tree,
    wait_until,
)

LAUNCHES = 6
SECRET = "glove-library-secret"


def test_library_launch_leaks_no_fds_from_a_busy_process(sb: Sandbox) -> None:
    """run() and run_async() from a multi-threaded, fd-churning process pass only 0/1/2."""
    secret_dir = Path(tempfile.mkdtemp(prefix="glove-escape-lib-"))
    try:
        secret_dir.chmod(0o755)
        (secret_dir / "secret.txt").write_text(SECRET)
        (secret_dir / "secret.txt").chmod(0o644)
        shutil.copy(PROBES_DIR / "libdriver.py", sb.ws / "libdriver.py")
        sb.give(sb.ws)
        driver = [sb.user.python, "-P", str(sb.ws / "libdriver.py")]
        p = sb.host([*driver, str(sb.ws), str(secret_dir), str(LAUNCHES)])
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
        summary = json.loads(p.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)
    control = summary["control"]["probes"]
    assert control[f"{summary['held'][0]}/secret.txt"] == {"ok": SECRET}, f"control: {control}"
    reports = summary["reports"]
    assert len(reports) == LAUNCHES + 1, summary
    for i, report in enumerate(reports):
        assert report.get("exit_code") == 0, f"launch {i}: {report}"
        assert "fds" in report, f"control: launch {i} produced a probe report: {report}"
        extra = {
            n: t
            for n, t in report["fds"].items()
            if n not in {"0", "1", "2"} and "ok" in t and not t["ok"].endswith("/fd")
        }
        assert extra == {}, f"launch {i}: fds leaked into the sandbox: {extra}"
        used = {k: v for k, v in report["probes"].items() if "ok" in v}
        assert used == {}, f"launch {i}: host fds usable inside: {used}"


RETAINED_SCRIPT = """
import json, sys
import msgspec
from glove.container import Overrides, build_spec, decode_profile, run
from glove.container._spec import Retained
ws, image = sys.argv[1], sys.argv[2]
argv = ["/usr/bin/python3", "-I", "-S", "/workspace/probe.py", "read", '{"paths": ["/data/s.txt"]}']
PROFILE = b'extends = "default"\\n[workspace]\\ntarget = "/workspace"\\n'
spec = build_spec(
    decode_profile(PROFILE, "t"), argv, cwd=ws, host_env={}, overrides=Overrides(workspace=ws)
)
keep = Retained(image=image, target="/data", size=16 * 1024 * 1024, seed=ws + "/seed")
spec = msgspec.structs.replace(spec, retained=(keep,))
try:
    result = run(spec, stdin=0, stdout=1, stderr=2)
except Exception as exc:
    print("REFUSED:" + json.dumps(f"{type(exc).__name__}: {exc}"))
else:
    print("RESULT:" + json.dumps(result.outcome))
"""


def test_retained_seed_does_not_follow_a_planted_link(sb: Sandbox) -> None:
    """A retained image is never seeded through a symlink the sandbox planted in its workspace."""
    secret_dir = Path(tempfile.mkdtemp(prefix="glove-escape-seed-"))
    image_dir = Path(tempfile.mkdtemp(prefix="glove-escape-img-"))
    try:
        (secret_dir / "s.txt").write_text(SECRET)
        secret_dir.chmod(0o700)  # root-only: nothing the launching user may copy
        plant = sb.run(["/bin/ln", "-s", str(secret_dir), "/workspace/seed"])
        assert plant.returncode == 0, plant.describe()
        sb.give(image_dir)
        p = sb.host([sb.user.python, "-P", "-c", RETAINED_SCRIPT, str(sb.ws), f"{image_dir}/i.img"])
        out = p.stdout.decode(errors="replace")
        assert "REFUSED:" in out or "RESULT:" in out, p.stderr.decode(errors="replace")[-2000:]
        if not sb.user.is_root:
            assert "REFUSED:" in out, f"retained copies need a root launcher: {out}"
        assert SECRET not in out, f"the seed followed the planted link into a host dir: {out}"
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)
        shutil.rmtree(image_dir, ignore_errors=True)


HOLDER_SCRIPT = """
import json, sys, threading
from glove.container import Overrides, build_spec, decode_profile, run
ws, arg = sys.argv[1], sys.argv[2]
argv = ["/usr/bin/python3", "-I", "-S", "/workspace/probe.py", "spawn", arg]
PROFILE = b'extends = "default"\\n[workspace]\\ntarget = "/workspace"\\n'
spec = build_spec(
    decode_profile(PROFILE, "t"), argv, cwd=ws, host_env={}, overrides=Overrides(workspace=ws)
)
# Like the daemon: the launch happens on a worker thread while the main thread lives on.
worker = threading.Thread(target=run, args=(spec,), kwargs={"stdin": 0, "stdout": 1, "stderr": 2})
worker.start()
worker.join()
"""


def test_library_caller_killed_leaves_nothing(sb: Sandbox) -> None:
    """kill -9 of a process that launched through the library (from a thread) kills the tree."""
    marker = sb.marker("libdwp")
    arg = json.dumps({"marker": marker, "ready": "/workspace/ready", "then": "sleep"})
    proc = subprocess.Popen(
        sb.user.argv([sb.user.python, "-P", "-c", HOLDER_SCRIPT, str(sb.ws), arg]),
        cwd=sb.ws,
        env=sb.host_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_until((sb.ws / "ready").exists, 30), "control: the sandbox started"
        assert wait_until(lambda: len(host_pids_with(marker)) >= 4, 5), host_pids_with(marker)
        os.kill(glove_pid(sb, proc.pid), signal.SIGKILL)
        assert wait_until(lambda: not host_pids_with(marker), 5), (
            f"survived the library caller's death: {host_pids_with(marker)}"
        )
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=10)
        kill_marked(marker)


THREAD_EXIT_SCRIPT = """
import threading
from glove.container import Overrides, build_spec, decode_profile, launch
ws = __import__("sys").argv[1]
argv = ["/bin/sh", "-c", "sleep 1; touch /workspace/done"]
PROFILE = b'extends = "default"\\n[workspace]\\ntarget = "/workspace"\\n'
spec = build_spec(
    decode_profile(PROFILE, "t"), argv, cwd=ws, host_env={}, overrides=Overrides(workspace=ws)
)
box = {}
t = threading.Thread(target=lambda: box.update(p=launch(spec)))
t.start()
t.join()  # the launching thread is gone; the sandbox must not care
print("STATUS:", box["p"].wait())
box["p"].close()
"""


def test_sandbox_outlives_the_thread_that_launched_it(sb: Sandbox) -> None:
    """launch() from a short-lived thread: the sandbox runs to its own end, not SIGKILL.

    PR_SET_PDEATHSIG fires when the parent *thread* exits; a daemon launching from executor
    threads must not lose sandboxes when such a thread goes away.
    """
    p = sb.host([sb.user.python, "-P", "-c", THREAD_EXIT_SCRIPT, str(sb.ws)])
    out = p.stdout.decode(errors="replace")
    assert "STATUS:" in out, p.stderr.decode(errors="replace")[-2000:]
    status = out.split("STATUS:", 1)[1].strip()
    assert (sb.ws / "done").exists(), f"the sandbox died with its launching thread (init {status})"
