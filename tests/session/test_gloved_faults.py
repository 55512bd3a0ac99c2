"""One session's fault is that session's receipt, never gloved's crash (issue 20, item 7).

A real gloved runs with a fault armed by ``glove.testing.faulty_gloved`` (the production
``gloved`` has no way to arm one): a ``TypeError`` raised in one session of eleven, in its
prepare, its launch or its finalize. The ten others end as they always do, the eleventh has
an ``internal_error`` receipt naming only the exception's type, ``glove session wait`` says
so, the traceback is in gloved's log and nowhere a controller sees, and gloved serves on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from glove.testing.faults import INJECTED_MESSAGE
from tests.conftest import Unpriv

from ._gloved import FAULTY_GLOVED, HARNESSES, MARKER, Gloved, leaked_sandboxes, plan_text

FAULT_HARNESSES = f"""
[harnesses.boom]
argv = ["/bin/sh", "-c", "/bin/sleep 30; : {MARKER}"]

[harnesses.boom_quick]
argv = ["/bin/sh", "-c", "echo boom"]
"""
#: The session whose plan names the faulty harness sits among ten that run normally.
ORDER = ("ok", "hello", "ok", "hello", "ok", "FAULT", "hello", "ok", "hello", "ok", "hello")
EXIT_OF = {"ok": 0, "hello": 3}
LEAK_DEADLINE_S = 30.0


def _home(request: pytest.FixtureRequest, who: str, unpriv: Unpriv, tmp_path: Path) -> Gloved:
    if who == "root":
        return Gloved(Path(os.path.realpath(tmp_path)))
    base = Path(tempfile.mkdtemp(prefix="glove-faults-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    return Gloved(base, python=unpriv.python, creds=unpriv.credentials())


def _plan_file(home: Gloved, harness: str) -> Path:
    path = home.base / f"{harness}.json"
    path.write_text(plan_text(harness))
    if home.creds:
        os.chown(path, int(home.creds["user"]), int(home.creds["group"]))
    return path


def _create(home: Gloved, plan: Path) -> str:
    done = home.glove("session", "create", str(plan), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads(done.stdout)["session_id"])


def _wait(home: Gloved, session_id: str) -> tuple[int, dict[str, object], str]:
    """``glove session wait --json``: its exit code, the final view, everything it printed."""
    done = home.glove("session", "wait", session_id, "--json")
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), done.stdout + done.stderr


@pytest.mark.parametrize("stage", ["prepare", "launch", "finalize"])
@pytest.mark.parametrize("who", ["root", "unpriv"] if os.getuid() == 0 else ["self"])
def test_one_faulty_session_of_eleven_ends_alone_with_internal_error(
    request: pytest.FixtureRequest, tmp_path: Path, unpriv: Unpriv, who: str, stage: str
) -> None:
    """A TypeError in one session's ``stage``: ten sessions end with their own exit codes,
    the eleventh with an ``internal_error`` receipt (type name only, traceback only in
    gloved's log), no sandbox outlives it, gloved serves a new session and stops cleanly."""
    faulty = "boom_quick" if stage == "finalize" else "boom"
    home = _home(request, who, unpriv, tmp_path)
    home.setup(HARNESSES + FAULT_HARNESSES)
    home.start(entry=(*FAULTY_GLOVED, "--fault", f"{stage}:{faulty}", "--"))
    try:
        plans = {name: _plan_file(home, name) for name in ("ok", "hello", faulty)}
        ids = [_create(home, plans[faulty if name == "FAULT" else name]) for name in ORDER]
        printed = []
        for name, session_id in zip(ORDER, ids, strict=True):
            code, view, text = _wait(home, session_id)
            printed.append(text)
            assert view["state"] == "terminal", view
            if name != "FAULT":
                outcome = view["outcome"]
                assert isinstance(outcome, dict)
                assert (outcome["kind"], outcome["exit_code"]) == ("exited", EXIT_OF[name])
                assert code == EXIT_OF[name]
                continue
            assert code == 1
            assert view["outcome"] == {
                "kind": "internal_error",
                "exit_code": None,
                "signal": None,
                "limit": None,
                "mechanism": None,
                "error": f"InjectedFault in {stage}; gloved's log has the traceback",
            }
        failed = ids[ORDER.index("FAULT")]
        human = home.glove("session", "wait", failed)
        assert (human.returncode, human.stdout.strip()) == (1, f"{failed}: internal_error")
        # gloved is up and serves a new session after the fault.
        assert home.proc is not None
        assert home.proc.poll() is None, home.stderr()
        after = _create(home, plans["ok"])
        assert _wait(home, after)[0] == 0
        # One receipt each, the faulty one's outcome as its view says; the journal verifies.
        page = home.glove("receipts", "page", "--json")
        assert page.returncode == 0, page.stderr
        receipts = json.loads(page.stdout)["receipts"]
        assert sorted(r["session_id"] for r in receipts) == sorted([*ids, after])
        (receipt,) = [r["receipt"] for r in receipts if r["session_id"] == failed]
        assert receipt["outcome"]["kind"] == "internal_error"
        if stage != "prepare":
            assert receipt["launch_binding"] is not None  # it was composed before it failed
        # What a controller sees never carries the exception's words; gloved's log does.
        seen = "".join(printed) + page.stdout + human.stdout + human.stderr
        assert INJECTED_MESSAGE not in seen
        assert "Traceback" not in seen
        log = home.stderr()
        assert "Traceback" in log
        assert INJECTED_MESSAGE in log
        assert f"session {failed}: internal error in {stage}" in log
        deadline = time.monotonic() + LEAK_DEADLINE_S
        while leaked_sandboxes():  # the launch fault's sandbox was running: it was killed
            assert time.monotonic() < deadline, f"sandboxes outlived: {leaked_sandboxes()}"
            time.sleep(0.05)
        verified = home.glove(
            "journal", "verify", str(home.state / "receipts"),
            "--key-file", str(home.config / "journal.key"),
        )  # fmt: skip
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        assert home.stop() == 0, home.stderr()


def test_the_production_gloved_never_loads_the_fault_hooks() -> None:
    """Importing gloved's entry point and the whole session service loads nothing of
    ``glove.testing``, and the fault points do nothing unarmed."""
    script = (
        "import sys\n"
        "import glove.daemon, glove.session._service, glove.session._registry\n"
        "from glove.session._faults import fault_point\n"
        "for stage in ('prepare', 'launch', 'finalize'):\n"
        "    fault_point(stage, 'id', 'boom')\n"
        "print(sorted(m for m in sys.modules if m.startswith('glove.testing')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_malformed_fault_is_a_usage_error() -> None:
    """The fault entry point refuses an unknown stage or a missing harness with exit 64."""
    for fault in ("boot:ok", "prepare", "prepare:"):
        done = subprocess.run(
            [sys.executable, *FAULTY_GLOVED, "--fault", fault],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 64, (fault, done.stderr)
        assert done.stderr.startswith("faulty_gloved: "), done.stderr
