"""The ``--network``/``--allow``/``--deny``/``--audit`` flags and the profile's ``[network]``
table through the real CLI: usage errors, dry runs, where the audit log goes, fail closed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

EXIT_USAGE = 64
EXIT_SETUP = 125


def _glove(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glove", *args], cwd=cwd, capture_output=True, text=True,
        timeout=60, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--network", "none", "--allow", "x.org"], "--allow and --deny go with --network proxy"),
        (["--allow", "*"], "--allow '*'"),
        (["--allow", "com"], "--allow 'com'"),
        (["--deny", "x.org+sni"], "--deny 'x.org+sni'"),
        (["--network", "host"], "invalid choice: 'host'"),
    ],
)
@pytest.mark.parametrize("command", ["exec", "run"])
def test_bad_network_flags_are_usage_errors(
    tmp_path: Path, command: str, flags: list[str], message: str
) -> None:
    """Each malformed network flag exits 64 naming it, before anything is loaded or run."""
    config = ["--config", str(tmp_path / "absent.toml")] if command == "run" else []
    done = _glove(command, *config, *flags, "--", "true", cwd=tmp_path)
    assert done.returncode == EXIT_USAGE, done
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_audit_is_a_glove_exec_flag_only(tmp_path: Path) -> None:
    """glove run's egress records go to its config's audit log: --audit is unknown there."""
    done = _glove("run", "--config", "c.toml", "--audit", "a.log", "--", "true", cwd=tmp_path)
    assert done.returncode == EXIT_USAGE
    assert "unrecognized arguments: --audit" in done.stderr or "--audit" in done.stderr


def _profile(tmp_path: Path, network: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(f'extends = "default"\n[network]\n{network}\n')
    return path


def test_dry_run_shows_the_mode_and_the_rules(tmp_path: Path) -> None:
    """--dry-run (text and JSON) shows proxy mode, the helper, fd 3 and every rule loaded."""
    profile = _profile(tmp_path, 'mode = "proxy"\nallow = ["PyPI.org:443+sni"]\ndeny = ["x.org"]')
    flags = ["--profile", str(profile), "--allow", "*.github.com", "--dry-run"]
    text = _glove("exec", *flags, "--", "curl", "x", cwd=tmp_path)
    assert text.returncode == 0, text
    lines = text.stdout.splitlines()
    assert lines[0] == "command:  /usr/bin/python3 /opt/glove/glove-egress 3 -- curl x"
    assert "network:  proxy (interfaces: lo; no routes)" in lines
    assert "          allow: pypi.org:443+sni" in lines
    assert "          allow: *.github.com" in lines
    assert "          deny:  x.org" in lines
    as_json = json.loads(_glove("exec", *flags, "--json", "--", "curl", cwd=tmp_path).stdout)
    assert as_json["network"] == {
        "mode": "proxy", "interfaces": ["lo"], "routes": 0,
        "allow": ["pypi.org:443+sni", "*.github.com"], "deny": ["x.org"],
    }  # fmt: skip
    assert as_json["env"]["HTTPS_PROXY"] == "http://127.0.0.1:3128"
    assert as_json["pass_fds"].keys() == {"3"}
    assert any(m["target"] == "/opt/glove" and m["mode"] == "ro" for m in as_json["mounts"])
    offline = json.loads(
        _glove("exec", *flags[:2], "--network", "none", "--dry-run", "--json", "--", "true",
               cwd=tmp_path).stdout
    )  # fmt: skip
    assert offline["network"] == {"mode": "none", "interfaces": ["lo"], "routes": 0}
    assert offline["argv"] == ["true"]


def test_a_bad_profile_rule_is_a_setup_error(tmp_path: Path) -> None:
    """A rule the profile carries that does not load: 125, named, nothing runs."""
    profile = _profile(tmp_path, 'mode = "proxy"\nallow = ["*.com"]')
    done = _glove("exec", "--profile", str(profile), "--", "true", cwd=tmp_path)
    assert done.returncode == EXIT_SETUP
    assert "network rules" in done.stderr
    assert "*.com" in done.stderr


def test_the_default_audit_log_is_owner_only_under_xdg_state(tmp_path: Path) -> None:
    """Without --audit, records go to $XDG_STATE_HOME/glove/egress-audit.log (0700 dir)."""
    state = tmp_path / "state"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = _glove(
        "exec", "--allow", "example.invalid", "--", "sh", "-c", "getent hosts example.org; true",
        cwd=workspace, env={"XDG_STATE_HOME": str(state)},
    )  # fmt: skip
    assert done.returncode == 0, done
    log = state / "glove" / "egress-audit.log"
    assert stat.S_IMODE((state / "glove").stat().st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) & 0o077 == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert {(r["proto"], r["host"], r["decision"]) for r in records} == {
        ("dns", "example.org", "deny")
    }


def test_the_sandbox_never_sees_its_audit_log(tmp_path: Path) -> None:
    """An audit log inside the workspace is a protected path: the launch is refused (125)."""
    done = _glove("exec", "--allow", "x.org", "--audit", "ws-audit.log", "--", "true", cwd=tmp_path)
    assert done.returncode == EXIT_SETUP, done
    assert "the egress audit log" in done.stderr
    log = tmp_path / "ws-audit.log"
    assert not log.exists() or log.read_bytes() == b""  # opened before the launch, never used


def test_no_audit_log_means_nothing_runs(tmp_path: Path) -> None:
    """An audit log that cannot be opened fails the session before the command starts."""
    marker = tmp_path / "ws" / "ran"
    (tmp_path / "ws").mkdir()
    done = _glove(
        "exec", "--allow", "x.org", "--audit", str(tmp_path / "missing" / "audit.log"),
        "--", "touch", str(marker),  # the workspace (under /tmp) is at its own path
        cwd=tmp_path / "ws",
    )  # fmt: skip
    assert done.returncode == EXIT_SETUP, done
    assert not marker.exists()


def test_under_a_pty_the_command_behind_the_helper_owns_the_terminal(tmp_path: Path) -> None:
    """--pty with the proxy: the helper makes its command's group the terminal's foreground
    one, so a TUI is not stopped by SIGTTOU/SIGTTIN (as glove-relay does under glove run)."""
    probe = "import os; print(os.tcgetpgrp(0) == os.getpgrp(), os.getpgrp() != os.getsid(0))"
    (tmp_path / "ws").mkdir()
    done = _glove(
        "exec", "--pty", "--allow", "x.org", "--audit", str(tmp_path / "a.log"),
        "--", "/usr/bin/python3", "-c", probe, cwd=tmp_path / "ws",
    )  # fmt: skip
    assert done.returncode == 0, done
    assert done.stdout.split() == ["True", "True"]
