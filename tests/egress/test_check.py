"""``glove network check`` as a library: the report, explanations, profiles and narrowing."""

from __future__ import annotations

import pytest

from glove.egress import (
    NetworkPolicy,
    RuleError,
    RuleSet,
    explain,
    narrow,
    network_report,
    policy_from_toml,
)


def test_report_lists_hosts_ports_checks_denies_and_sockets() -> None:
    """Every allow rule is a line with its hosts, ports and checks; sockets are listed."""
    policy = NetworkPolicy(
        mode="proxy",
        allow=["*.github.com:443+sni", "pypi.org", "127.0.0.1:8080"],
        deny=["gist.github.com"],
    )
    report = network_report(policy, mcp=True)
    assert report.mode == "proxy"
    first, second, third = report.reachable
    assert first.hosts == "every subdomain of github.com (not github.com itself)"
    assert (first.ports, first.checks, first.denied_within) == (
        "443",
        ["sni"],
        ["deny gist.github.com"],
    )
    assert (second.hosts, second.ports) == ("pypi.org only", "80,443")
    assert third.hosts == "the address 127.0.0.1"
    assert report.denied == ["deny gist.github.com"]
    sockets = {(s.address, s.transport) for s in report.sockets}
    assert sockets == {
        ("127.0.0.1:3128", "tcp"),
        ("127.0.0.1:1080", "tcp"),
        ("127.0.0.1:53", "udp"),
        ("127.0.0.1:53", "tcp"),
        ("@glove-mcp", "unix-abstract"),
    }


def test_empty_allowlist_says_so() -> None:
    """An empty allowlist is reported as reaching nothing, never as "all"."""
    report = network_report(NetworkPolicy(mode="proxy"))
    assert report.reachable == []
    assert report.notes[0] == "the allowlist is empty: no host is reachable through the proxy"


def test_mode_none_reaches_nothing() -> None:
    """Mode none lists no host and no proxy socket."""
    report = network_report(NetworkPolicy(mode="none", allow=["pypi.org"]))
    assert report.reachable == []
    assert report.sockets == []


def test_explain_names_the_deciding_rule_per_port() -> None:
    """HOST without a port shows 80 and 443; HOST:PORT one line; deny wins."""
    policy = NetworkPolicy(
        mode="proxy", allow=["*.example.org", "x.example.org:22"], deny=["bad.example.org"]
    )
    lines = explain(policy, "a.example.org")
    assert [(e.port, e.allowed, e.rule) for e in lines] == [
        (80, True, "allow *.example.org"),
        (443, True, "allow *.example.org"),
    ]
    assert lines[0].address_check
    (ssh,) = explain(policy, "x.example.org:22")
    assert (ssh.allowed, ssh.rule) == (True, "allow x.example.org:22")
    (bad,) = explain(policy, "bad.example.org:443")
    assert (bad.allowed, bad.rule) == (False, "deny bad.example.org")
    (nothing,) = explain(policy, "example.org:443")
    assert (nothing.allowed, nothing.rule, nothing.reason) == (
        False,
        None,
        "no rule allows this host and port",
    )


def test_explain_refuses_patterns_and_options() -> None:
    """A query is one host and at most one port."""
    policy = NetworkPolicy(mode="proxy", allow=["example.org"])
    for query in ("*.example.org", "example.org+sni", "example.org:1-5", "*"):
        with pytest.raises(RuleError):
            explain(policy, query)


def test_profile_network_table() -> None:
    """The ``[network]`` table of a profile decodes strictly; other tables are ignored."""
    toml = b"""
hostname = "glove"
[network]
mode = "proxy"
allow = ["pypi.org", "files.pythonhosted.org"]
deny = ["evil.pypi.org"]
[limits]
pids = 10
"""
    policy = policy_from_toml(toml, "p.toml")
    assert policy.rules().allow[0].text == "allow pypi.org"
    with pytest.raises(RuleError, match="alow"):
        policy_from_toml(b'[network]\nmode = "proxy"\nalow = []\n', "typo.toml")
    with pytest.raises(RuleError, match="single label"):
        policy_from_toml(b'[network]\nmode = "proxy"\nallow = ["com"]\n', "tld.toml")
    assert policy_from_toml(b"", "empty.toml").mode == "none"


def test_a_plan_can_only_narrow_the_local_allowlist() -> None:
    """Plan rules inside local ones load (with both denylists); wider ones are refused."""
    local = RuleSet.load(["*.github.com:443", "pypi.org+read-only"], ["gist.github.com"])
    plan = RuleSet.load(
        ["api.github.com:443+sni", "*.raw.github.com:443", "pypi.org+read-only"], ["x.y.org"]
    )
    merged = narrow(local, plan)
    assert [r.text for r in merged.allow] == [
        "allow api.github.com:443+sni",
        "allow *.raw.github.com:443",
        "allow pypi.org+read-only",
    ]
    assert [r.text for r in merged.deny] == ["deny gist.github.com", "deny x.y.org"]
    for wider in ("github.com:443", "api.github.com:80", "pypi.org", "*.com.github.com:22"):
        with pytest.raises(RuleError, match="not within the local allowlist"):
            narrow(local, RuleSet.load([wider]))


def test_an_identical_wildcard_is_within_the_local_one() -> None:
    """A plan wildcard equal to the owner's (same ports and checks, or narrower) is covered."""
    local = RuleSet.load(["*.github.com:443+sni"])
    for same in ("*.github.com:443+sni", "*.github.com:443+sni+read-only"):
        assert [r.text for r in narrow(local, RuleSet.load([same])).allow] == [f"allow {same}"]
    for wider in ("*.github.com:443", "*.github.com+sni", "*.github.com:22+sni"):
        with pytest.raises(RuleError, match="not within the local allowlist"):
            narrow(local, RuleSet.load([wider]))


def test_wildcards_nest_only_downwards() -> None:
    """``*.a.github.com`` lies inside ``*.github.com``; ``*.x.com`` is not inside ``*.y.x.com``."""
    inner = narrow(RuleSet.load(["*.github.com"]), RuleSet.load(["*.a.github.com"]))
    assert [r.text for r in inner.allow] == ["allow *.a.github.com"]
    with pytest.raises(RuleError, match="not within the local allowlist"):
        narrow(RuleSet.load(["*.y.x.com"]), RuleSet.load(["*.x.com"]))
    with pytest.raises(RuleError, match="not within the local allowlist"):
        narrow(RuleSet.load(["*.github.com"]), RuleSet.load(["github.com"]))


def test_what_remains_outside_the_network_is_stated() -> None:
    """Both modes say what a sandbox still reaches besides addresses: with a gate, sockets
    outside its own files are refused; without one, that they are reachable; FIFOs and
    shared files in either case."""
    gated = network_report(NetworkPolicy(mode="none"), unix_gate="seccomp-notify-connect")
    assert gated.unix_gate == "seccomp-notify-connect"
    (unix,) = [n for n in gated.notes if n.startswith("Unix sockets")]
    assert "(seccomp-notify-connect)" in unix
    assert "refused (EACCES)" in unix
    assert "datagram Unix sockets are refused" in unix
    assert any(n.startswith("FIFOs:") and "made after the launch" in n for n in gated.notes)
    ungated = network_report(NetworkPolicy(mode="proxy", allow=["pypi.org"]))
    assert ungated.unix_gate is None
    (unix,) = [n for n in ungated.notes if n.startswith("Unix sockets")]
    assert "no gate" in unix
    assert "is reachable" in unix
    assert any(n.startswith("files:") for n in ungated.notes)
