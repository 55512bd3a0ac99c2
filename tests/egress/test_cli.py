"""``glove network check`` on the command line: report, explanations, exit codes, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: A plan v1 document (issue 9's example) whose network is replaced per test.
PLAN: dict[str, Any] = {
    "version": 1,
    "harness": "demo",
    "exposures": ["work"],
    "limits": {
        "wall_time_s": 30,
        "cpu_time_s": 10,
        "memory_bytes": 268435456,
        "pids": 64,
        "disk_bytes": 67108864,
        "output_bytes": 1048576,
    },
    "network": "none",
    "terminal": "pipes",
}


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


def _plan_file(tmp_path: Path, network: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**PLAN, "network": network}))
    return str(path)


def test_a_plans_network_rules_decide(tmp_path: Path) -> None:
    """--plan checks with the plan's proxy allow and deny rules: allowed 0, refused 1."""
    network = {"mode": "proxy", "allow": ["*.github.com:443+sni"], "deny": ["gist.github.com"]}
    plan = _plan_file(tmp_path, network)
    allowed = _glove("--plan", plan, "api.github.com:443")
    assert allowed.returncode == 0, allowed.stderr
    assert "network mode: proxy" in allowed.stdout
    assert "api.github.com:443: allowed by allow *.github.com:443+sni" in allowed.stdout
    refused = _glove("--plan", plan, "--json", "gist.github.com:443", "pypi.org:443")
    assert refused.returncode == 1, refused.stderr
    answers = json.loads(refused.stdout)["queries"]
    assert [(a["host"], a["allowed"], a["rule"]) for a in answers] == [
        ("gist.github.com", False, "deny gist.github.com"),
        ("pypi.org", False, None),
    ]


def test_a_plan_with_network_none_reaches_nothing(tmp_path: Path) -> None:
    """A plan whose network is "none" lists nothing reachable and refuses every query."""
    result = _glove("--plan", _plan_file(tmp_path, "none"), "--json", "pypi.org:443")
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    assert (out["report"]["mode"], out["report"]["reachable"]) == ("none", [])
    assert out["report"]["sockets"] == []
    assert out["queries"][0]["reason"] == "network mode none: nothing is reachable"


def test_a_malformed_plan_exits_2_with_one_line(tmp_path: Path) -> None:
    """Not JSON, not plan v1, a bad rule, a missing file: exit 2, one line, no traceback."""
    bad_rule = _plan_file(tmp_path, {"mode": "proxy", "allow": ["*"]})
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1,')
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**PLAN, "argv": ["sh"]}))
    for path in (bad_rule, str(broken), str(other), str(tmp_path / "missing.json")):
        result = _glove("--plan", path)
        assert result.returncode == 2, (path, result.stdout)
        assert result.stdout == ""
        assert result.stderr.startswith("glove network check: "), result.stderr
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr
    assert "$.network.allow[0]" in _glove("--plan", bad_rule).stderr


def test_plan_is_not_combined_with_other_rules(tmp_path: Path) -> None:
    """--plan with --profile, --allow or --deny is a usage error (64)."""
    plan = _plan_file(tmp_path, "none")
    for extra in (("--profile", "default"), ("--allow", "pypi.org"), ("--deny", "x.org")):
        result = _glove("--plan", plan, *extra)
        assert result.returncode == 64, (extra, result.stderr)
        assert "a plan's network is checked alone" in result.stderr
        assert "Traceback" not in result.stderr


def test_the_report_names_this_hosts_unix_socket_gate() -> None:
    """The command asks the kernel: this host's gate is named in JSON and in the text."""
    result = _glove("--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["report"]
    assert report["unix_gate"] == "seccomp-notify-connect"
    text = _glove()
    assert "note: Unix sockets (seccomp-notify-connect): connect() reaches only" in text.stdout
