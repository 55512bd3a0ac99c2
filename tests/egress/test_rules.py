"""Allow and deny rules: loading, matching, the decision and the address-class check."""

from __future__ import annotations

import ipaddress

import pytest

from glove.egress import RuleError, RuleSet, address_class, is_public, normalize_host, parse_rule


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("*", "matches everything"),
        ("*.com", "top-level domain"),
        ("com", "single label"),
        ("intranet", "single label"),
        ("*x.com", "matches everything"),
        ("a.*.com", "first label"),
        ("x.com:0", "bad port"),
        ("x.com:65536", "bad port"),
        ("x.com:80-70", "bad port"),
        ("x.com:", "bad port"),
        ("x.com:http", "bad port"),
        ("x.com:²", "bad port"),
        ("x.com+sni+fast", "unknown option"),
        ("127.1", "numeric label"),
        ("10.0.0.256", "numeric label"),
        ("-x.com", "not a valid host name"),
        ("x..com", "not a valid host name"),
        ("[::1", "unclosed"),
        ("[x.com]:80", "not an IPv6 address"),
        ("a" * 64 + ".com", "not a valid host name"),
    ],
)
def test_bad_rules_are_refused_at_load(text: str, why: str) -> None:
    """``*``, bare TLDs, single labels, bad ports and options never load."""
    with pytest.raises(RuleError, match=why):
        parse_rule(text, "allow")


def test_options_are_for_allow_rules_only() -> None:
    """A deny rule with an option is a mistake the loader names."""
    with pytest.raises(RuleError, match="allow rules only"):
        parse_rule("x.com+sni", "deny")


def test_rule_text_is_normalized_for_replies() -> None:
    """Rules are shown lowercase, IDNA-encoded, IPv6 bracketed, with their options."""
    assert parse_rule("GitHub.COM.", "allow").text == "allow github.com"
    assert parse_rule("*.Bücher.de:443+sni", "allow").text == "allow *.xn--bcher-kva.de:443+sni"
    assert parse_rule("[::1]:8080", "allow").text == "allow [::1]:8080"
    assert parse_rule("::1", "allow").text == "allow [::1]"
    assert parse_rule("x.org:80,8000-8010+read-only", "allow").read_only


def test_wildcard_matches_subdomains_only() -> None:
    """``*.x.com`` matches a.x.com and a.b.x.com, never x.com or evil-x.com."""
    rules = RuleSet.load(["*.github.com"])
    assert rules.decide("api.github.com", 443).allowed
    assert rules.decide("a.b.github.com", 443).allowed
    assert not rules.decide("github.com", 443).allowed
    assert not rules.decide("evilgithub.com", 443).allowed
    assert not rules.decide("github.com.evil.org", 443).allowed


def test_exact_name_matches_only_itself() -> None:
    """``x.com`` matches x.com (any case, trailing dot) and no subdomain."""
    rules = RuleSet.load(["github.com"])
    assert rules.decide("GITHUB.com.", 443).allowed
    assert not rules.decide("api.github.com", 443).allowed


def test_ports_default_to_80_and_443() -> None:
    """An allow rule without ports covers 80 and 443 only; listed ports replace them."""
    rules = RuleSet.load(["a.example.org", "b.example.org:8443,9000-9001"])
    assert rules.decide("a.example.org", 80).allowed
    assert rules.decide("a.example.org", 443).allowed
    assert not rules.decide("a.example.org", 22).allowed
    assert rules.decide("b.example.org", 9001).allowed
    assert not rules.decide("b.example.org", 443).allowed


def test_deny_beats_allow_and_covers_every_port_by_default() -> None:
    """A matching deny refuses whatever allows it; without ports it covers all of them."""
    rules = RuleSet.load(["*.example.org:1-65535"], ["secret.example.org"])
    decision = rules.decide("secret.example.org", 8443)
    assert not decision.allowed
    assert decision.rule_text == "deny secret.example.org"
    assert "denied by rule 'deny secret.example.org'" in decision.reason
    assert rules.decide("open.example.org", 8443).allowed


def test_empty_allowlist_allows_nothing() -> None:
    """No rule, no destination: an empty allowlist is not "allow all"."""
    decision = RuleSet.load([], []).decide("example.org", 443)
    assert not decision.allowed
    assert decision.rule is None
    assert decision.reason == "no rule allows this host and port"


def test_most_specific_allow_rule_decides_and_its_options_apply() -> None:
    """An exact rule beats a wildcard; the wildcard's read-only does not bind the exact host."""
    rules = RuleSet.load(["*.example.org+read-only", "upload.example.org"])
    assert rules.decide("upload.example.org", 80, method="POST").allowed
    refused = rules.decide("other.example.org", 80, method="POST")
    assert not refused.allowed
    assert "read-only: method refused" in refused.reason


def test_read_only_rules_refuse_tunnels_and_writes() -> None:
    """``read-only`` lets GET/HEAD/OPTIONS through on plain HTTP, nothing opaque."""
    rules = RuleSet.load(["deb.example.org+read-only"])
    for method in ("GET", "HEAD", "OPTIONS"):
        assert rules.decide("deb.example.org", 80, method=method).allowed
    assert not rules.decide("deb.example.org", 80, method="PUT").allowed
    tunnel = rules.decide("deb.example.org", 443, tunnel=True)
    assert not tunnel.allowed
    assert "tunnels are refused" in tunnel.reason


def test_read_only_rules_refuse_a_body() -> None:
    """A GET with a body under ``read-only`` is refused (an origin that ignores the body would
    read it as a second request); other rules do not care."""
    rules = RuleSet.load(["deb.example.org+read-only", "up.example.org"])
    refused = rules.decide("deb.example.org", 80, method="GET", body=True)
    assert not refused.allowed
    assert refused.reason == (
        "rule 'allow deb.example.org+read-only' is read-only: a body is refused"
    )
    assert rules.decide("up.example.org", 80, method="GET", body=True).allowed


def test_ip_literals_match_only_ip_rules() -> None:
    """An address request is matched by an address (or localhost) rule, never by a name."""
    rules = RuleSet.load(["127.0.0.1:8080", "localhost:5432", "example.org"])
    assert rules.decide("127.0.0.1", 8080).allowed
    assert rules.decide("[::ffff:127.0.0.1]", 8080).allowed  # the same address
    assert rules.decide("::1", 5432).allowed  # localhost lists ::1
    assert not rules.decide("93.184.216.34", 443).allowed
    assert not rules.decide("127.0.0.2", 8080).allowed


def test_malformed_hosts_are_refused_not_raised() -> None:
    """A host no resolver should see is a refusal with a fixed reason."""
    rules = RuleSet.load(["example.org"])
    for host in ("", "a b", "ex\x00ample.org", "127.1", "é" * 300, "[::1", "[example.org]"):
        decision = rules.decide(host, 443)
        assert not decision.allowed
        assert decision.reason == "malformed host name"
    assert not rules.decide("0x7f000001", 443).allowed  # a name no rule names, never an address
    assert not rules.decide("example.org", 0).allowed


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00::1", "unique-local"),
        ("100.64.0.1", "shared"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("192.0.2.1", "reserved"),
        ("240.0.0.1", "reserved"),
        ("93.184.216.34", "public"),
        ("2606:4700::1111", "public"),
    ],
)
def test_address_classes(address: str, kind: str) -> None:
    """Each non-public class is named; IPv4 embedded in IPv6 is judged as IPv4."""
    assert address_class(_ip(address)) == kind
    assert is_public(_ip(address)) == (kind == "public")


def test_a_name_that_resolves_to_loopback_is_refused_unless_listed() -> None:
    """DNS rebinding: a private answer for an allowed name needs the address listed too."""
    rules = RuleSet.load(["git.example.org:8443"])
    check = rules.check_addresses(8443, [_ip("127.0.0.1"), _ip("10.0.0.5")])
    assert check.allowed == ()
    assert check.refused == "the name resolves to a loopback address that no rule lists"
    listed = RuleSet.load(["git.example.org:8443", "127.0.0.1:8443"])
    assert listed.check_addresses(8443, [_ip("127.0.0.1")]).allowed == (_ip("127.0.0.1"),)
    assert listed.check_addresses(9000, [_ip("127.0.0.1")]).allowed == ()  # wrong port


def test_public_addresses_pass_and_order_is_kept() -> None:
    """Public answers pass in the resolver's order; refused ones are dropped."""
    rules = RuleSet.load(["example.org"])
    answer = [_ip("2606:4700::1111"), _ip("10.0.0.1"), _ip("93.184.216.34")]
    check = rules.check_addresses(443, answer)
    assert check.allowed == (_ip("2606:4700::1111"), _ip("93.184.216.34"))


def test_deny_rule_for_an_address_refuses_it_however_reached() -> None:
    """A denied address is refused even when a name that is allowed resolves to it."""
    rules = RuleSet.load(["example.org"], ["93.184.216.34"])
    check = rules.check_addresses(443, [_ip("93.184.216.34")])
    assert check.allowed == ()
    assert check.rule is not None
    assert check.rule.text == "deny 93.184.216.34"


def test_dns_decision_ignores_ports_but_not_full_denies() -> None:
    """The stub answers a name some rule names; a deny without ports makes it NXDOMAIN."""
    rules = RuleSet.load(["git.example.org:22", "*.cdn.example.org"], ["bad.cdn.example.org"])
    assert rules.decide_name("git.example.org").allowed
    assert rules.decide_name("a.cdn.example.org").allowed
    assert not rules.decide_name("bad.cdn.example.org").allowed
    assert not rules.decide_name("example.org").allowed
    assert not rules.decide_name("127.0.0.1").allowed
    partial = RuleSet.load(["x.example.org"], ["x.example.org:80"])
    assert partial.decide_name("x.example.org").allowed


def test_normalize_host_forms() -> None:
    """Requested hosts: brackets dropped, IPv6 compressed, names lowercased."""
    assert normalize_host("[0:0::1]") == "::1"
    assert normalize_host("Example.ORG.") == "example.org"
    with pytest.raises(RuleError):
        normalize_host("[example.org]")
