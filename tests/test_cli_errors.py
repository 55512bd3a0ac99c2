"""Every command, every bad input: one line naming the problem, a documented code, no traceback.

The exit codes are the ones in ``docs/cli.md``: 64 for a usage error in every command, the
command's own documented codes otherwise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = 64
RUN = ["glove", "run", "--workspace", "{ws}", "--config"]


def _files(tmp: Path) -> dict[str, str]:
    """Inputs the table refers to by name."""
    (tmp / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp / "bad.toml").write_text("[limits\n")
    (tmp / "policy.toml").write_text('version = 1\n[[tools]]\nname = "x__y"\n')
    (tmp / "bogus-key.toml").write_text(
        'policy = "policy.toml"\naudit = "audit.log"\n[upstreams.fs]\ncommand = ["x"]\nbogus = 1\n'
    )
    (tmp / "no-dir.toml").write_text(
        'policy = "policy.toml"\naudit = "/nonexistent/dir/audit.log"\n'
        f'[upstreams.q]\ncommand = ["{sys.executable}", "-c", "pass"]\n'
    )
    (tmp / "exits.toml").write_text(
        'policy = "policy.toml"\naudit = "audit.log"\n[upstreams.q]\ncommand = ["/bin/true"]\n'
    )
    (tmp / "short.key").write_bytes(b"short")
    (tmp / "ws").mkdir()
    (tmp / "a-file").write_text("not a journal")
    (tmp / "walltime.toml").write_text('[limits]\nwall_time = "forever"\n')
    return {path.name: str(path) for path in tmp.iterdir()}


# (argv, expected exit code, a phrase the message must contain)
CASES: list[tuple[list[str], int, str]] = [
    (["glove", "nosuch"], USAGE, "No such command"),
    (["glove", "doctor", "--bogus"], USAGE, "No such option"),
    (["glove", "exec"], USAGE, "a command to run is required"),
    (["glove", "exec", "--bogus", "--", "true"], USAGE, "unrecognized arguments"),
    (["glove", "exec", "--network", "wide", "--", "true"], USAGE, "invalid choice"),
    (["glove", "exec", "--json", "--", "true"], USAGE, "--json goes with --dry-run"),
    (["glove", "exec", "--platform", "macos", "--", "true"], USAGE, "--platform goes with"),
    (["glove", "exec", "--profile", "{bad.toml}", "--", "true"], 125, "bad.toml"),
    (["glove", "exec", "--profile", "nosuch", "--", "true"], 125, "no embedded profile"),
    (["glove", "exec", "--profile", "{walltime.toml}", "--", "true"], 125, "not a duration"),
    (["glove", "exec", "--memory", "lots", "--", "true"], 125, "--memory: not a size"),
    (["glove", "exec", "--json-status", "97", "--", "true"], 125, "not open for writing"),
    (["glove", "run", "--", "true"], USAGE, "--config"),
    ([*RUN, "{missing}", "--", "true"], 125, "cannot read"),
    ([*RUN, "{bogus-key.toml}", "--", "true"], 125, "$.upstreams.fs"),
    ([*RUN, "{no-dir.toml}", "--", "true"], 125, "does not exist"),
    ([*RUN, "{exits.toml}", "--", "true"], 125, "closed its stdout"),
    (["glove", "mcp", "serve"], USAGE, "--config"),
    (["glove", "mcp", "serve", "--config", "{bad.toml}"], 2, "bad.toml"),
    (["glove", "mcp", "tools", "--config", "{exits.toml}"], 2, "closed its stdout"),
    (["glove", "policy", "check", "{bad.toml}"], 2, "invalid"),
    (["glove", "policy", "check"], USAGE, "Missing argument"),
    (["glove", "policy", "pin", "--upstream", "x", "{binary.bin}"], 2, "not UTF-8"),
    (["glove", "policy", "explain", "{policy.toml}", "x__y", "--args", "{{"], 2, "not JSON"),
    (["glove", "journal", "verify", "{a-file}", "--key-file", "{short.key}"], 4, "not a journal"),
    (["glove", "journal", "verify", "{tmp}", "--key-file", "{missing}"], 4, "cannot read key file"),
    (["glove", "journal", "verify", "{tmp}", "--key-file", "{short.key}"], 4, "at least 32"),
    (["glove", "journal", "repair", "{tmp}", "--key-file", "{short.key}", "--truncate-at", "x"],
     4, "SEGMENT:OFFSET"),
    (["glove", "audit", "show", "{missing}"], 1, "cannot read"),
    (["glove", "diag", "tree", "--runtime-dir", "{tmp}/nosock"], 1, "no gloved listens"),
    (["glove", "setup", "--bogus"], USAGE, "No such option"),
    (["glove", "init"], USAGE, "Missing argument"),
    (["glove", "capabilities"], 69, "no gloved listens"),
    (["glove", "plan", "validate", "{missing}"], 1, "cannot read"),
    (["glove", "plan", "validate", "{binary.bin}"], 69, "no gloved listens"),
    (["glove", "session", "status"], USAGE, "Missing argument"),
    (["glove", "session", "list", "--limit", "x"], USAGE, "Invalid value for '--limit'"),
    (["glove", "session", "create", "{missing}"], 1, "cannot read"),
    (["glove", "session", "log"], USAGE, "Missing argument"),
    (["glove", "session", "signal", "x", "KILL"], USAGE, "is not one of"),
    (["glove", "attach"], USAGE, "Missing argument"),
    (["glove", "attach", "x", "--detach-key", "bogus"], USAGE, "a detach key is"),
    (["glove", "receipts", "page"], 69, "no gloved listens"),
    (["glove", "receipts", "verify", "{missing}", "--public-key", "{missing}"], 6, "cannot read"),
    (["glove", "network", "check", "--allow", "*"], 2, "'*'"),
    (["glove", "library", "add"], USAGE, "Missing argument"),
    (["glove", "library", "add", "{missing}"], 2, "library_source_unreadable"),
    (["glove", "library", "add", "{ws}"], 2, "not a regular file"),
    (["glove", "library", "remove", "sha256:zz"], 2, "not a digest"),
    (["glove", "daemon", "bogus"], USAGE, "No such command"),
    (["gloved", "--log-level", "verbose"], USAGE, "invalid choice"),
    (["gloved", "--bogus"], USAGE, "unrecognized arguments"),
]  # fmt: skip


def _command(argv: list[str]) -> list[str]:
    if argv[0] == "gloved":
        return [
            sys.executable,
            "-c",
            "from glove.daemon import main; main()",
            *argv[1:],
        ]
    return [sys.executable, "-m", "glove", *argv[1:]]


@pytest.mark.parametrize(("argv", "code", "phrase"), CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_bad_input_gets_one_line_and_its_code(
    tmp_path: Path, argv: list[str], code: int, phrase: str
) -> None:
    """A bad input prints what is wrong (no traceback) and exits with the documented code."""
    names = {**_files(tmp_path), "missing": str(tmp_path / "missing.toml"), "tmp": str(tmp_path)}
    args = [re.sub(r"\{([^{}]+)\}", lambda m: names[m.group(1)], part) for part in argv]
    done = subprocess.run(
        _command(args),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.PIPE,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)},
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert "never retrieved" not in done.stderr, done.stderr
    assert done.returncode == code, (done.returncode, done.stderr)
    assert phrase in done.stderr, done.stderr


@pytest.mark.parametrize(
    "argv",
    [["exec"], ["run"], ["mcp"], ["mcp", "tools"], ["policy", "check"], ["journal", "verify"],
     ["audit", "show"], ["diag", "tree"], ["doctor"]],
)  # fmt: skip
def test_dash_h_works_wherever_dash_dash_help_does(argv: list[str]) -> None:
    """``-h`` prints the same help as ``--help``, exit 0."""
    short = subprocess.run([sys.executable, "-m", "glove", *argv, "-h"], capture_output=True,
                           text=True, timeout=30, check=False)  # fmt: skip
    long = subprocess.run([sys.executable, "-m", "glove", *argv, "--help"], capture_output=True,
                          text=True, timeout=30, check=False)  # fmt: skip
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout
    assert "usage" in short.stdout.lower()
