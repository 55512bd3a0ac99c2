"""The README's first command, as a person sees it: ``scripts/setup`` says one line per step
and skips what is current; ``scripts/demo`` shows the sandbox and the mediated agent."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import REPO

SETUP_DEADLINE_S = 600
DEMO_DEADLINE_S = 300


def test_setup_says_one_line_per_step_and_skips_what_is_current() -> None:
    """Run again (``scripts/test`` ran it first), every step is a ``setup:`` line saying it
    is current, and nothing is installed."""
    done = subprocess.run(
        [str(REPO / "scripts" / "setup")], cwd=REPO, capture_output=True, text=True,
        timeout=SETUP_DEADLINE_S, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines, "setup printed nothing"
    assert all(line.startswith("setup: ") for line in lines), lines
    assert lines[-1] == "setup: done"
    steps = lines[:-1]
    assert any("Debian packages" in line for line in steps)
    assert any(".venv" in line for line in steps)
    for line in steps:
        assert re.search(r"current|present", line), f"a second run redid a step: {line}"
    if os.getuid() == 0:
        assert any("test user's venv" in line for line in steps)


def test_demo_shows_the_sandbox_and_the_mediated_agent() -> None:
    """The demo prints the doctor, what the sandbox sees (only our uid mapped, pid 2,
    offline, read-only /usr), the result, then the example agent and its audit."""
    done = subprocess.run(
        [str(REPO / "scripts" / "demo")], cwd=REPO, capture_output=True, text=True,
        timeout=DEMO_DEADLINE_S, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "== glove doctor" in out
    uid_map = re.search(r"^uid map:\s+(\d+) (\d+) (\d+)\s", out, re.MULTILINE)
    assert uid_map is not None, out
    assert (uid_map.group(2), uid_map.group(3)) == (str(os.getuid()), "1")  # only our own uid
    assert re.search(r"^inside: uid \d+, pid 2, hostname glove", out, re.MULTILINE), out
    assert "1 route lines (1 = header only: offline)" in out
    assert "Read-only file system" in out  # write /usr
    assert "== on the host: hello from the sandbox" in out
    assert '"outcome":"exited"' in out
    assert "== glove run: an agent calling mediated tools" in out
    assert '"step": "allowed"' in out
    assert "MCP call(s) denied" in out + done.stderr
    assert "Traceback" not in out + done.stderr
