"""One usage-error vocabulary: every command's usage error is one line naming the command,
exits 64, and says which name was meant when one was mistyped (issue 23, item 13)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from glove.cli._main import build_app

USAGE = 64


def _leaves() -> list[list[str]]:
    """Every command and group path of the typer app (``glove`` excluded)."""
    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        if path:
            found.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(build_app()), [])
    return found


#: The own-parsing commands (argparse) with a bogus flag, beside the typer ones.
OWN_PARSERS = [["exec", "--no-such-flag", "--", "true"], ["run", "--no-such-flag", "--", "true"],
               ["mcp", "serve", "--no-such-flag"]]  # fmt: skip


def _run(argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    command = (
        [sys.executable, "-c", "from glove.daemon import main; main()", *argv[1:]]
        if argv[0] == "gloved"
        else [sys.executable, "-m", "glove", *argv]
    )
    return subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=60,
                          check=False, stdin=subprocess.DEVNULL,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(tmp)})  # fmt: skip


def _one_line_64(done: subprocess.CompletedProcess[str], prefix: str) -> None:
    assert done.returncode == USAGE, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(prefix + ": "), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("path", _leaves(), ids=" ".join)
def test_every_typer_command_has_a_one_line_usage_error(path: list[str], tmp_path: Path) -> None:
    """An unknown option to any command (or group) is one line and exit 64."""
    _one_line_64(_run([*path, "--no-such-flag"], tmp_path), "glove " + " ".join(path))


@pytest.mark.parametrize("argv", [*OWN_PARSERS, ["gloved", "--no-such-flag"]], ids=" ".join)
def test_the_own_parsing_commands_answer_the_same(argv: list[str], tmp_path: Path) -> None:
    """exec, run, mcp serve and gloved: one line, exit 64, like the typer commands."""
    prefix = (
        "gloved"
        if argv[0] == "gloved"
        else "glove " + " ".join(a for a in argv[:2] if not a.startswith("-"))
    )
    _one_line_64(_run(argv, tmp_path), prefix)


@pytest.mark.parametrize(
    ("argv", "prefix", "meant"),
    [(["exec", "--netwrk", "none", "--", "true"], "glove exec", "did you mean --network?"),
     (["run", "--config", "x.toml", "--worksapce", ".", "--", "true"], "glove run",
      "did you mean --workspace?"),
     (["session", "lst"], "glove session", "Did you mean 'list'?"),
     (["doctor", "--jsn"], "glove doctor", "--json"),
     (["session", "list", "--state", "runing"], "glove session list", "did you mean running?")],
    ids=["exec", "run", "session", "doctor", "state"],
)  # fmt: skip
def test_a_mistyped_name_says_what_was_meant(
    argv: list[str], prefix: str, meant: str, tmp_path: Path
) -> None:
    """A mistyped flag, command or value: one line, exit 64, naming the likely one."""
    done = _run(argv, tmp_path)
    _one_line_64(done, prefix)
    assert meant in done.stderr


@pytest.mark.parametrize(
    ("argv", "prefix"),
    [(["session", "list", "--state", "bogus"], "glove session list"),
     (["session", "list", "--limit", "0"], "glove session list"),
     (["session", "list", "--limit", "501"], "glove session list"),
     (["init", "wrk", "--mode", "rx"], "glove init"),
     (["session", "wait", "x", "--timeout", "0"], "glove session wait"),
     (["attach", "x", "--from", "1", "--tail", "1"], "glove attach"),
     (["session", "resize", "x", "0", "0"], "glove session resize"),
     (["receipts", "page", "--limit", "x"], "glove receipts page"),
     (["receipts", "page", "--limit", "0"], "glove receipts page"),
     (["receipts", "page", "--limit", "1001"], "glove receipts page")],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)  # fmt: skip
def test_a_bad_value_is_a_usage_error_before_any_daemon(
    argv: list[str], prefix: str, tmp_path: Path
) -> None:
    """A value the command cannot take exits 64 (not 1, not 69: no daemon is asked)."""
    _one_line_64(_run(argv, tmp_path), prefix)
