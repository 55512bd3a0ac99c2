"""The README, as a person follows it: ``scripts/setup`` says one line per step, skips what
is current and, without a way to become root, names exactly what to install; every shell
block of the README runs as written, top to bottom, in a private home."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, Unpriv

SETUP_DEADLINE_S = 600
README_DEADLINE_S = 900
README = REPO / "README.md"
#: The README's test command, which its run leaves out: it is the suite this test is in.
TEST_COMMAND = "./scripts/test"


@pytest.mark.parametrize("part", ["main", "test"])
def test_setup_says_one_line_per_step_and_skips_what_is_current(part: str) -> None:
    """Run again (``scripts/test`` ran it first), every step of either part is a ``setup:``
    line saying it is current, and nothing is installed."""
    done = subprocess.run(
        [str(REPO / "scripts" / "setup"), part], cwd=REPO, capture_output=True, text=True,
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
    npm = any("npm" in line for line in steps)
    assert npm == (part == "test"), steps  # the main part needs no Node.js
    if os.getuid() == 0:
        assert any("test user's venv" in line for line in steps) == (part == "test")


FAKE_DPKG_QUERY = """#!/bin/sh
# dpkg-query, except that python3-venv is not installed (fault injection for the test).
for last; do :; done
if [ "$last" = python3-venv ]; then
  echo "dpkg-query: no packages found matching $last" >&2
  exit 1
fi
exec /usr/bin/dpkg-query "$@"
"""
REFUSING_SUDO = """#!/bin/sh
echo "sudo: a password is required" >&2
exit 1
"""


@pytest.mark.parametrize("sudo", ["absent", "refuses"])
def test_setup_without_root_names_exactly_what_to_install(unpriv: Unpriv, sudo: str) -> None:
    """A user who is not root, with no sudo (or one that refuses) and one package missing,
    gets one line naming the ``sudo apt-get install`` to run, and nothing else happens."""
    clone = Path(tempfile.mkdtemp(prefix="glove-setup-", dir="/var/tmp"))
    try:
        (clone / "scripts").mkdir()
        shutil.copy2(REPO / "scripts" / "setup", clone / "scripts" / "setup")
        shutil.copy2(REPO / "pyproject.toml", clone / "pyproject.toml")
        bin_dir = clone / "bin"
        bin_dir.mkdir()
        # Only the tools the package step uses: no sudo on this PATH unless the case adds one.
        for tool in ("bash", "dirname", "id", "grep", "cat"):
            found = shutil.which(tool)
            assert found is not None, tool
            (bin_dir / tool).symlink_to(found)
        (bin_dir / "dpkg-query").write_text(FAKE_DPKG_QUERY)
        if sudo == "refuses":
            (bin_dir / "sudo").write_text(REFUSING_SUDO)
        for path in bin_dir.iterdir():
            if not path.is_symlink():
                path.chmod(0o755)
        subprocess.run(["chmod", "-R", "a+rX", str(clone)], check=True)
        done = subprocess.run(
            [*unpriv.command("env", f"PATH={bin_dir}"), str(clone / "scripts" / "setup"), "main"],
            capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        line = (
            "setup: Debian packages missing: python3-venv; install them as root, then run this"
            " again: sudo apt-get install python3-venv"
        )
        assert done.stderr.splitlines() == [line], done.stderr
        assert done.stdout == "", done.stdout  # nothing was attempted
        assert not (clone / ".venv").exists()
    finally:
        shutil.rmtree(clone, ignore_errors=True)


def readme_blocks(text: str) -> tuple[list[str], list[str]]:
    """The README's ``sh`` blocks to run, in order, and the lines left out of them: those
    that run the test command."""
    run: list[str] = []
    skipped: list[str] = []
    for match in re.finditer(r"(?ms)^```sh\n(.*?)^```$", text):
        kept = []
        for line in match.group(1).splitlines(keepends=True):
            (skipped if line.split()[:1] == [TEST_COMMAND] else kept).append(line)
        run.append("".join(kept))
    return run, skipped


def test_the_readme_starts_with_the_main_job_and_the_tests() -> None:
    """The README's first block, before any section, is the two commands of a fresh clone:
    the main job (set up with setup's main part) and the tests (its test part), which is
    exactly what CI runs."""
    text = README.read_text()
    first = re.search(r"(?ms)^```sh\n(.*?)^```$", text)
    assert first is not None
    assert "\n## " not in text[: first.start()], "a section comes before the two commands"
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["./scripts/demo", TEST_COMMAND], commands

    def commands_of(script: str) -> list[str]:
        lines = (REPO / script).read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]

    assert "scripts/setup main" in commands_of("scripts/demo")
    assert "scripts/setup test" in commands_of("scripts/test")
    assert commands_of(".ci/run")[-1] == TEST_COMMAND


def test_the_readme_runs_top_to_bottom() -> None:
    """Every ``sh`` block of the README, in order, as one shell session in a fresh home with
    no XDG variables (as a new user has): the demo shows the sandbox and the mediated agent,
    every later command finds what the one before it made, and gloved's flow ends in a
    receipt verified offline."""
    run, skipped = readme_blocks(README.read_text())
    assert [line.split()[0] for line in skipped] == [TEST_COMMAND]
    assert run[0].split()[0] == "./scripts/demo", run[0]
    # Not under /tmp: the example's workspace is ~/glove-example.
    home = Path(tempfile.mkdtemp(prefix="glove-readme-", dir="/var/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(home)
    script = "\n".join(
        [
            "set -euo pipefail",
            "trap 'echo \"README: failed: $BASH_COMMAND\" >&2' ERR",
            "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT",  # what the README left running
            *run,
        ]
    )
    proc = subprocess.Popen(
        ["bash", "-c", script], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=README_DEADLINE_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        modes = {
            str(path): stat.S_IMODE(path.lstat().st_mode)
            for path in [home / ".config" / "glove", *(home / ".config" / "glove").rglob("*")]
            if path.exists()
        }
        shutil.rmtree(home, ignore_errors=True)
    assert proc.returncode == 0, out + err
    # The demo: what the sandbox sees, then the example agent.
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
    assert "MCP call(s) denied" in err
    # Using it: each command found what the one before it made.
    assert re.search(r"fs__list_directory\s.*allow", out), out  # glove mcp tools
    assert "an agent reaches its tools through /opt/glove/glove-mcp" in out
    assert ": exited 0" in out  # glove session wait
    assert "OK: the receipt of session" in out  # glove receipts verify
    assert "hello from a contained session" in out  # glove attach, to the session's end
    assert "SessionRegistry" in out  # glove diag tree
    assert "Traceback" not in out + err
    assert modes, "glove setup made no ~/.config/glove"
    for path, mode in modes.items():
        assert mode & 0o077 == 0, f"{path} has mode {mode:04o}"


def test_the_readme_and_the_architecture_page_draw_the_same_picture() -> None:
    """The README's overview diagram is the one in docs/architecture.md, and it names the
    parts an overview must show."""

    def mermaid(path: Path) -> list[str]:
        return re.findall(r"(?ms)^```mermaid\n(.*?)^```$", path.read_text())

    readme = mermaid(README)
    assert len(readme) == 1
    assert mermaid(REPO / "docs" / "architecture.md") == readme
    for part in ("controller", "gloved", "session-ID", "sandbox", "mcp", "egress", "journal"):
        assert part in readme[0], part
