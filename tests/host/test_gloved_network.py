"""gloved.toml's ``[network]`` table: the owner's egress rules, decoded strictly."""

from __future__ import annotations

import pytest

from glove.config import parse_gloved_config
from glove.host.errors import GlovedConfigError
from glove.plan import LocalPolicy


def test_network_rules_decode_and_offer_proxy() -> None:
    """allow and deny load; proxy is offered only when something is allowed."""
    config = parse_gloved_config(b'[network]\nallow = ["pypi.org:443"]\ndeny = ["x.pypi.org"]\n')
    assert (config.network.allow, config.network.deny) == (["pypi.org:443"], ["x.pypi.org"])
    assert config.network.modes() == {"none", "proxy"}
    assert parse_gloved_config(b"").network.modes() == {"none"}
    local = LocalPolicy(
        harnesses={}, exposures={}, limits_max={}, mechanisms={},
        networks=config.network.modes(), egress_allow=tuple(config.network.allow),
        egress_deny=tuple(config.network.deny),
    )  # fmt: skip
    assert [r.text for r in local.egress_rules().allow] == ["allow pypi.org:443"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b'[network]\nallow = ["*"]\n', "`network`"),
        (b'[network]\ndeny = ["x.org+sni"]\n', "`network`"),
        (b'[network]\nmode = "proxy"\n', "unknown field `mode`"),
        (b'[network]\nallow = "pypi.org"\n', "Expected `array`"),
    ],
)
def test_bad_network_tables_are_refused(text: bytes, needle: str) -> None:
    """A rule that does not load, an unknown key or a wrong type: the config is refused."""
    with pytest.raises(GlovedConfigError, match=r"gloved\.toml") as caught:
        parse_gloved_config(text)
    assert needle in str(caught.value)
