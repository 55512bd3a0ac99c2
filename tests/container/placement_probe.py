"""Launch ``sleep`` in a default-profile sandbox and print, as JSON, the sandbox's groups and
the command's own ``/proc/PID/cgroup`` as the host sees it (run by test_cgroup_placement).

    python placement_probe.py WORKSPACE [V1_BASE] [--broken-join]

``V1_BASE`` names the directory under each v1 controller the groups go in (a base the test
made and handed to the unprivileged user; Glove's own ``glove`` otherwise). A single-threaded
process, so the launch takes the clone3 path unless ``GLOVE_SANDBOX_LAUNCH=fork`` is set.
``--broken-join`` is the fault injection: the init inherits a read-only descriptor instead of
a v1 group's ``tasks`` file, so its self-placement fails; the probe prints the result.
"""

from __future__ import annotations

import json
import os
import sys
import time

from glove.container import Overrides, build_spec, load_profile, run
from glove.container.linux import _cgroups
from glove.container.linux._launch import launch

ENV = {"PATH": "/usr/bin:/bin"}


def _descendant(pid: int, comm: str, deadline: float) -> int:
    """The first process named ``comm`` under ``pid``, waiting until ``deadline``."""
    while time.monotonic() < deadline:
        todo = [pid]
        while todo:
            current = todo.pop()
            try:
                with open(f"/proc/{current}/comm") as handle:
                    if handle.read().strip() == comm and current != pid:
                        return current
                with open(f"/proc/{current}/task/{current}/children") as handle:
                    todo += [int(child) for child in handle.read().split()]
            except OSError:
                continue
        time.sleep(0.01)
    raise SystemExit(f"no {comm} under {pid}")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    workspace = args[0]
    if len(args) > 1:
        _cgroups.GLOVE_GROUP = args[1]  # type: ignore[misc] # the test's delegated v1 base
    spec = build_spec(
        load_profile(None),
        ["/bin/sleep", "30"],
        cwd=workspace,
        host_env=ENV,
        overrides=Overrides(workspace=workspace),
    )
    devnull = os.open(os.devnull, os.O_RDWR)
    if "--broken-join" in sys.argv:
        _cgroups.SandboxCgroups.open_v1_tasks = (  # type: ignore[method-assign]
            lambda self: (
                tuple(os.open(os.devnull, os.O_RDONLY) for _ in self.v1.dirs)
                if self.v1 is not None
                else ()
            )
        )
        spec = build_spec(
            load_profile(None),
            ["/bin/true"],
            cwd=workspace,
            host_env=ENV,
            overrides=Overrides(workspace=workspace),
        )
        result = run(spec, stdin=devnull, stdout=devnull, stderr=devnull)
        print(json.dumps({"outcome": result.outcome, "error": result.error}))
        return
    process = launch(spec, (devnull, devnull, devnull))
    try:
        command = _descendant(process.pid, "sleep", time.monotonic() + 20)
        with open(f"/proc/{command}/cgroup") as handle:
            lines = handle.read().splitlines()
        v2, v1 = process.cgroups.where() if process.cgroups is not None else (None, {})
        plans = {name: plan.mechanism for name, plan in process.plans.items()}
        print(json.dumps({"v2": v2, "v1": v1, "cgroup": lines, "plans": plans}))
    finally:
        process.close()


if __name__ == "__main__":
    main()
