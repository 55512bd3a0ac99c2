"""Plan v1's ``"network": {"mode": "proxy", ...}``: strict decoding, canonical form, narrowing."""

from __future__ import annotations

import hashlib

import pytest

from glove.plan import (
    LocalPolicyError,
    PlanError,
    PlanProblem,
    ProxyNetwork,
    canonical_bytes,
    decode_plan,
    network_mode,
    plan_digests,
    validate_plan,
)

from ._helpers import EXAMPLE_CANONICAL, local_policy, plan_bytes

#: The example plan's digest before proxy mode existed: "none" plans must keep it.
EXAMPLE_SHA256 = "sha256:" + hashlib.sha256(EXAMPLE_CANONICAL).hexdigest()
OWNER = {
    "networks": frozenset({"none", "proxy"}),
    "egress_allow": ("*.github.com:443+sni", "pypi.org", "files.pythonhosted.org:443"),
    "egress_deny": ("gist.github.com",),
}


def _problems(data: bytes, **local: object) -> list[PlanProblem]:
    with pytest.raises(PlanError) as caught:
        validate_plan(decode_plan(data), local_policy(**{**OWNER, **local}))
    return caught.value.problems


def test_none_plans_decode_and_digest_exactly_as_before() -> None:
    """The string "none" decodes as it did; canonical bytes and digest are unchanged."""
    plan = decode_plan(plan_bytes())
    assert plan.network == "none"
    assert network_mode(plan.network) == "none"
    assert canonical_bytes(plan) == EXAMPLE_CANONICAL
    assert plan_digests(canonical_bytes(plan)).sha256 == EXAMPLE_SHA256
    assert validate_plan(plan, local_policy(**OWNER)).egress is None


def test_a_proxy_plan_decodes_strictly_and_canonically() -> None:
    """The object keeps exactly the members sent (no deny added), sorted, rules as written."""
    plan = decode_plan(plan_bytes(network={"mode": "proxy", "allow": ["pypi.org:443"]}))
    assert plan.network == ProxyNetwork(allow=("pypi.org:443",))
    assert b'"network":{"allow":["pypi.org:443"],"mode":"proxy"}' in canonical_bytes(plan)
    with_deny = decode_plan(plan_bytes(network={"mode": "proxy", "allow": [], "deny": ["x.org"]}))
    assert b'"network":{"allow":[],"deny":["x.org"],"mode":"proxy"}' in canonical_bytes(with_deny)


@pytest.mark.parametrize(
    ("network", "path", "needle"),
    [
        ({"mode": "proxy"}, "$.network.allow", "required field `allow` is missing"),
        ({"mode": "proxy", "allow": [], "ports": [1]}, "$.network", "unknown field `ports`"),
        ({"mode": "proxy", "allow": ["*"]}, "$.network.allow[0]", "*"),
        ({"mode": "proxy", "allow": ["ok.org", "com"]}, "$.network.allow[1]", "com"),
        ({"mode": "proxy", "allow": [], "deny": ["x.org+sni"]}, "$.network.deny[0]", "option"),
        ({"mode": "proxy", "allow": ["a.org"] * 65}, "$.network.allow", "length"),
        ({"mode": "proxy", "allow": ["a" * 301]}, "$.network.allow[0]", "length"),
        ({"mode": "proxy", "allow": [1]}, "$.network.allow[0]", "Expected `str`"),
    ],
)
def test_malformed_proxy_networks_are_refused_with_their_path(
    network: dict[str, object], path: str, needle: str
) -> None:
    """Every structural fault names its JSON path."""
    with pytest.raises(PlanError) as caught:
        decode_plan(plan_bytes(network=network))
    problem = caught.value.problems[0]
    assert problem.path == path, caught.value.problems
    assert needle in problem.message


def test_a_plan_can_only_narrow_the_owners_allowlist() -> None:
    """Rules inside the owner's pass (with the owner's checks kept); the effective rules are
    the plan's allow rules and both denylists."""
    network = {
        "mode": "proxy",
        "allow": ["api.github.com:443+sni", "pypi.org:443"],
        "deny": ["pypi.org:80"],
    }
    validated = validate_plan(decode_plan(plan_bytes(network=network)), local_policy(**OWNER))
    assert validated.egress is not None
    assert [r.text for r in validated.egress.allow] == [
        "allow api.github.com:443+sni",
        "allow pypi.org:443",
    ]
    assert [r.text for r in validated.egress.deny] == ["deny gist.github.com", "deny pypi.org:80"]
    assert validated.egress.decide("gist.github.com", 443).allowed is False


def test_the_owners_own_wildcard_rule_is_accepted_as_is() -> None:
    """A plan may repeat the owner's wildcard rule exactly; a broader copy is refused."""
    same = {"mode": "proxy", "allow": ["*.github.com:443+sni"]}
    validated = validate_plan(decode_plan(plan_bytes(network=same)), local_policy(**OWNER))
    assert validated.egress is not None
    assert [r.text for r in validated.egress.allow] == ["allow *.github.com:443+sni"]
    assert validated.egress.decide("api.github.com", 443).allowed is True
    broader = plan_bytes(network={"mode": "proxy", "allow": ["*.github.com:443"]})
    assert [p.path for p in _problems(broader)] == ["$.network.allow[0]"]


def test_widening_rules_are_each_refused_with_their_path() -> None:
    """A plan rule outside the owner's (another host, a port, a dropped +sni) is refused."""
    network = {
        "mode": "proxy",
        "allow": ["evil.org", "pypi.org:8080", "api.github.com:443", "*.pythonhosted.org:443"],
    }
    problems = _problems(plan_bytes(network=network))
    assert [p.path for p in problems] == [f"$.network.allow[{i}]" for i in range(4)]
    assert all("not within the local allowlist" in p.message for p in problems)
    assert all("a plan can only narrow it" in p.message for p in problems)


def test_proxy_must_be_offered_here() -> None:
    """Without "proxy" in the owner's networks a proxy plan is refused at $.network."""
    data = plan_bytes(network={"mode": "proxy", "allow": []})
    assert _problems(data, networks=frozenset({"none"})) == [
        PlanProblem(path="$.network", message="network mode 'proxy' is not offered here")
    ]


def test_the_owners_rules_must_load() -> None:
    """A local rule that does not load is the owner's error, at policy construction."""
    with pytest.raises(LocalPolicyError, match="egress rules"):
        local_policy(egress_allow=("*.com",))
