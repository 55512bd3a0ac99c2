"""``glove network check`` on the command line: report, explanations, exit codes, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _glove(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glove", "network", "check", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_report_and_explanations_in_text() -> None:
    """Reachable hosts, the sockets inside, and which rule decides each query."""
    result = _glove(
        "--allow", "*.github.com:443+sni", "--deny", "gist.github.com", "api.github.com:443"
    )
    assert result.returncode == 0, result.stderr
    assert "every subdomain of github.com (not github.com itself), ports 443 [sni]" in result.stdout
    assert "except: deny gist.github.com" in result.stdout
    assert "127.0.0.1:3128 tcp: HTTP proxy (forward and CONNECT)" in result.stdout
    assert "api.github.com:443: allowed by allow *.github.com:443+sni" in result.stdout


def test_a_refused_query_exits_1() -> None:
    """A query no rule allows is explained and the exit status says refused."""
    result = _glove("--allow", "pypi.org", "--json", "github.com")
    assert result.returncode == 1
    answers = json.loads(result.stdout)["queries"]
    assert [(a["port"], a["allowed"], a["rule"]) for a in answers] == [
        (80, False, None),
        (443, False, None),
    ]


def test_bad_rules_exit_2_without_a_traceback() -> None:
    """`*` and bare TLDs are refused at load with a one-line message."""
    for rule in ("*", "com", "*.org"):
        result = _glove("--allow", rule)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("glove network check: rule")


def test_profile_network_table(tmp_path: Path) -> None:
    """A profile's [network] table is read; --allow adds to it; the default profile is none."""
    profile = tmp_path / "p.toml"
    profile.write_text('[network]\nmode = "proxy"\nallow = ["pypi.org"]\n')
    result = _glove("--profile", str(profile), "--allow", "files.pythonhosted.org", "--json")
    report = json.loads(result.stdout)["report"]
    assert [r["rule"] for r in report["reachable"]] == [
        "allow pypi.org",
        "allow files.pythonhosted.org",
    ]
    default = _glove("--profile", "default")
    assert (default.returncode, default.stdout.splitlines()[0]) == (0, "network mode: none")
    missing = _glove("--profile", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr
