"""The agent adapters' pure parts and the home's safety: configs, TOML, links, profiles."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from glove.agents import (
    AgentHomeError,
    claude_settings,
    claude_user_config,
    codex_config,
)
from glove.agents._home import read_home_file, write_home_file
from glove.agents._toml import dumps
from glove.container import load_profile
from glove.container._denials import classify_denial


def test_claude_config_keeps_the_operators_keys_and_sets_glove_s() -> None:
    """Onboarding, trust, the server and the key approval are set; other keys stay."""
    before: dict[str, Any] = {"theme": "dark", "mcpServers": {"mine": {"command": "x"}}}
    after = claude_user_config(before, workdir="/w", mcp=True, api_key="k" * 30 + "TAIL-OF-KEY")
    assert after["theme"] == "dark"
    assert after["mcpServers"]["mine"] == {"command": "x"}
    assert after["mcpServers"]["glove"]["command"] == "/opt/glove/glove-mcp"
    assert after["hasCompletedOnboarding"] is True
    assert after["projects"]["/w"]["hasTrustDialogAccepted"] is True
    assert after["customApiKeyResponses"]["approved"] == [("k" * 30 + "TAIL-OF-KEY")[-20:]]
    assert before == {"theme": "dark", "mcpServers": {"mine": {"command": "x"}}}  # a copy
    without = claude_user_config(after, workdir="/w", mcp=False, api_key=None)
    assert "glove" not in without["mcpServers"]  # glove exec: no tools, no server


def test_claude_settings_allow_the_glove_tools_once() -> None:
    """``mcp__glove`` is added to permissions.allow, once, beside the operator's rules."""
    settings = claude_settings({"permissions": {"allow": ["Bash(ls)"]}})
    assert settings["permissions"]["allow"] == ["Bash(ls)", "mcp__glove"]
    assert claude_settings(settings) == settings


def test_codex_config_turns_its_sandbox_and_daemon_off() -> None:
    """Codex's own sandbox and daemon are off, the server is wired, other keys stay."""
    config = codex_config({"model": "m", "features": {"x": True}}, workdir="/w", mcp=True)
    assert config["model"] == "m"
    assert config["sandbox_mode"] == "danger-full-access"
    assert config["features"] == {"x": True, "daemon_auto_start": False}
    assert config["mcp_servers"]["glove"]["command"] == "/opt/glove/glove-mcp"
    assert config["projects"]["/w"]["trust_level"] == "trusted"
    assert "mcp_servers" not in codex_config(config, workdir="/w", mcp=False)


_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=12,
)


@given(st.dictionaries(_keys, _values, max_size=5))
@example({"0\n": {}, "a\n": 1})  # a key ending in a newline: `$` matched before it (bare)
def test_the_toml_writer_round_trips_what_tomllib_reads(document: dict[str, Any]) -> None:
    """Whatever is written reads back as the same document."""
    assert tomllib.loads(dumps(document, "a header")) == document


def test_a_link_planted_in_the_home_is_replaced_never_followed(tmp_path: Path) -> None:
    """A symlink where Glove writes is replaced; the file it pointed at is untouched."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("host file")
    (home / ".claude.json").symlink_to(victim)
    with pytest.raises(AgentHomeError, match="symlink"):
        read_home_file(home, ".claude.json")
    write_home_file(home, ".claude.json", b"{}")
    assert victim.read_text() == "host file"
    assert not (home / ".claude.json").is_symlink()
    (home / ".codex").symlink_to(tmp_path)
    with pytest.raises(AgentHomeError, match="not a directory"):
        write_home_file(home, ".codex/config.toml", b"")
    assert not (tmp_path / "config.toml").exists()
    assert os.stat(home / ".claude.json").st_mode & 0o777 == 0o600


def test_the_agent_profiles_extend_node_agent() -> None:
    """claude and codex are node-agent plus an [agent] section and their variables."""
    base = load_profile("node-agent")
    for name, variable in (("claude", "ANTHROPIC_API_KEY"), ("codex", "OPENAI_API_KEY")):
        profile = load_profile(name)
        assert profile.agent is not None
        assert profile.agent.kind == name
        assert variable in profile.env.pass_
        assert set(base.env.pass_) <= set(profile.env.pass_)
        assert profile.limits == base.limits


@pytest.mark.parametrize(
    ("name", "args", "probe"),
    [
        ("unshare", (0x10000000,), "userns_probe"),
        ("clone", (0x10000000 | 17,), "userns_probe"),
        ("unshare", (0x00020000,), "namespace_probe"),
        ("clone", (0x40000000 | 17,), "namespace_probe"),
        ("io_uring_setup", (1, 0), "io_uring_probe"),
        ("unshare", (0x400,), None),  # CLONE_FILES: not a probe
        ("setns", (0, 0), None),
        ("ptrace", (0,), None),
        ("socket", (16, 3, 9), None),
    ],
)
def test_expected_denials_are_only_the_documented_probes(
    name: str, args: tuple[int, ...], probe: str | None
) -> None:
    """Namespace, user-namespace and io_uring probes are expected; anything else is not."""
    assert classify_denial(name, args) == probe
