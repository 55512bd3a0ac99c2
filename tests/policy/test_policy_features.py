"""The policy's other sections: [[prompts]], [[resources]], [[features]] and allow-all."""

from __future__ import annotations

import pytest

from glove.policy import PolicyFileError, ToolDefinition, allow_all_policy, parse_policy

POLICY = """
version = 1

[[prompts]]
id = "greet"
name = "docs__greet"
[[prompts.args]]
pointer = "/who"
op = "in"
values = ["alice", "bob"]

[[prompts]]
name = "docs__*"
effect = "deny"

[[resources]]
uri = "docs+test://readme"

[[resources]]
id = "workspace"
roots = ["/srv/work"]
upstream = "fs"
dotdot = "deny"

[[resources]]
prefix = "docs+test://public/"

[[resources]]
uri = "docs+test://public/secret*"
effect = "deny"

[[features]]
upstream = "docs"
allow = ["logging", "completion"]

[[features]]
upstream = "llm-*"
allow = ["sampling"]
"""


def test_prompts_use_the_tool_rule_language() -> None:
    """An exact prompt rule with an argument rule; a later glob denies the rest."""
    policy = parse_policy(POLICY)
    assert policy.check_prompt("docs__greet").allowed
    assert not policy.check_prompt("docs__other").allowed
    assert not policy.check_prompt("fs__greet").allowed  # deny by default
    allowed = policy.check_prompt_get("docs__greet", {"who": "alice"})
    assert allowed.allowed
    assert allowed.inspected == {"/who": "alice"}
    denied = policy.check_prompt_get("docs__greet", {"who": "mallory"})
    assert not denied.allowed
    assert denied.rule == "greet"
    assert "mallory" not in denied.reason
    assert denied.reason.startswith("get of 'docs__greet' denied")


def test_resource_rules_exact_prefix_and_file_roots() -> None:
    """Exact first; then the first of glob, prefix and roots in file order; roots contain paths."""

    def check(uri: str, upstream: str = "docs", original: str | None = None) -> bool:
        return policy.check_resource(uri, upstream=upstream, upstream_uri=original or uri).allowed

    policy = parse_policy(POLICY)
    assert check("docs+test://readme")
    assert not check("docs+test://readme2")
    assert check("docs+test://public/a")
    assert check("docs+test://public/secret.txt")  # the prefix rule comes first in the file
    assert check("fs+file:///srv/work/a.txt", "fs", "file:///srv/work/a.txt")
    assert check("fs+file:///srv/work/a%20b", "fs", "file:///srv/work/a%20b")
    for original in (
        "file:///srv/work/../etc/passwd",  # dotdot = "deny"
        "file:///srv/work2/a",
        "file:///srv/work/a?x=1",
        "file://evil/srv/work/a",
        "file:///srv/work%2f..%2fetc",
        "file:///srv/work/%00",
        "http:///srv/work/a",
    ):
        assert not check("fs+" + original, "fs", original), original
    assert not check("docs+file:///srv/work/a", "docs", "file:///srv/work/a")  # other upstream


def test_features_are_allowed_per_upstream_by_id_or_glob() -> None:
    """A feature is allowed when a rule covering the upstream lists it; deny by default."""
    policy = parse_policy(POLICY)
    assert policy.check_feature("docs", "logging").allowed
    assert policy.check_feature("docs", "completion").allowed
    assert not policy.check_feature("docs", "sampling").allowed
    assert policy.check_feature("llm-a", "sampling").allowed
    assert not policy.check_feature("llm-a", "roots").allowed
    assert not policy.check_feature("other", "logging").allowed
    assert policy.allows_any("features")
    assert policy.allows_any("prompts")
    assert not parse_policy("version = 1\n").allows_any("resources")


def test_allow_all_allows_every_feature_and_is_named() -> None:
    """The built-in policy allows every tool, prompt, resource and feature, with its digest."""
    policy = allow_all_policy()
    assert policy.source == "allow-all"
    assert policy.digest.startswith("sha256:")
    assert policy.check_call("a__b", {"x": 1}, ToolDefinition("b")).allowed
    assert policy.check_prompt_get("a__p", {}).allowed
    assert policy.check_resource("a+x://y", upstream="a", upstream_uri="x://y").allowed
    for feature in ("logging", "completion", "sampling", "elicitation", "roots"):
        assert policy.check_feature("any-upstream", feature).allowed


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[[resources]]\nuri = "a"\nprefix = "b"\n', "resources[0]"),
        ("[[resources]]\n", "resources[0]"),
        ('[[resources]]\nuri = "a"\ndotdot = "deny"\n', "resources[0].dotdot"),
        ('[[resources]]\nroots = ["relative"]\n', "resources[0].roots[0]"),
        ('[[resources]]\nuri = "a"\nupstream = "no_underscore"\n', "resources[0].upstream"),
        ('[[features]]\nupstream = "x"\nallow = ["tasks"]\n', "features[0].allow[0]"),
        ('[[prompts]]\nname = "a__b"\nopp = 1\n', "prompts[0].opp"),
        (
            '[[prompts]]\nid = "x"\nname = "a"\n[[resources]]\nid = "x"\nuri = "u"\n',
            "resources[0].id",
        ),
        ('[[resources]]\nuri = "u"\n[[resources]]\nuri = "u"\n', "resources[1].uri"),
    ],
)
def test_bad_rules_name_their_key(text: str, where: str) -> None:
    """Each mistake in the new sections is a file error naming its key path."""
    with pytest.raises(PolicyFileError) as failure:
        parse_policy("version = 1\n" + text, source="p.toml")
    assert failure.value.key_path == where, failure.value
