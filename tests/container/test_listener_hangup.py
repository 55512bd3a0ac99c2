"""Once the command has exited, neither monitor shell watches the seccomp listener again.

A listener whose filter has no users left reports POLLHUP without POLLIN for good: a shell
that kept it registered woke for it again and again until the run ended (67 to 375 wakeups
per ``/bin/true`` launch were counted here before the fix). Each case runs a real sandbox in a
subprocess, as root and as the unprivileged user, with a counting wrapper around the one
function both shells call when the listener is ready (``answer_denial``): it may run once
for the hang-up, plus once per denied call, and the denial is still recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import Unpriv

#: Run /bin/true, then a command that makes one denied call (unshare), through the blocking
#: ``run`` and the asyncio ``run_async``; print the wakeups and what each result recorded.
COUNT = """
import asyncio, json, os, sys, tempfile
from glove.container import Overrides, build_spec, load_profile, run, run_async
from glove.container.linux import _async, _supervise

counts = {}

def spy(module, shell):
    real = module.answer_denial
    def counted(*args, **kwargs):
        counts[shell] = counts.get(shell, 0) + 1
        return real(*args, **kwargs)
    module.answer_denial = counted

spy(_supervise, "blocking")
spy(_async, "async")
workspace = tempfile.mkdtemp()
null = os.open(os.devnull, os.O_RDWR)
report = {}
for name, argv in (("true", ["/bin/true"]), ("denied", ["/usr/bin/unshare", "-U", "/bin/true"])):
    spec = build_spec(
        load_profile(None), argv, cwd=workspace, host_env={"PATH": "/usr/bin:/bin"},
        overrides=Overrides(workspace=workspace),
    )
    for shell in ("blocking", "async"):
        counts.clear()
        if shell == "blocking":
            result = run(spec, stdin=null, stdout=null, stderr=null)
        else:
            result = asyncio.run(run_async(spec, stdin=null, stdout=null, stderr=null))
        report[f"{name}/{shell}"] = {
            "wakeups": counts.get(shell, 0),
            "outcome": result.outcome,
            "denied": result.violation is not None or bool(result.expected_denials),
        }
print(json.dumps(report))
"""


@pytest.fixture(params=["root", "unpriv"] if os.getuid() == 0 else ["self"])
def launcher(request: pytest.FixtureRequest, unpriv: Unpriv) -> list[str]:
    """The interpreter (and its wrapper) of each launcher identity."""
    if request.param == "unpriv":
        return unpriv.command(unpriv.python)
    return [sys.executable]


def test_a_hung_up_listener_is_dropped_at_once(launcher: list[str]) -> None:
    """Each shell wakes for the listener at most once more than the calls it answered."""
    done = subprocess.run(
        [*launcher, "-c", COUNT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for shell in ("blocking", "async"):
        quiet, denied = report[f"true/{shell}"], report[f"denied/{shell}"]
        assert quiet["outcome"] == "exited"
        assert quiet["wakeups"] <= 1, report
        # unshare's one refused call (plus, at most, the hang-up): still answered, recorded.
        assert denied["denied"], report
        assert 1 <= denied["wakeups"] <= 3, report
