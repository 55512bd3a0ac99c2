"""Agents without network or key get guidance (issue 23, item 7): before the start, one line
names the API host the network does not reach and the flag that allows it, and one says the
key is missing; `codex exec` runs in the (trusted) workspace; the not-on-PATH hint names the
npm package. Real agents, real glove exec, as this user and the unprivileged one."""

from __future__ import annotations

from pathlib import Path

import pytest

from glove.agents import NEEDS, AgentLaunch, agent_notes
from glove.container import AgentSection
from glove.egress import RuleSet

from .conftest import AgentBox


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("glove exec: --agent")]


@pytest.mark.parametrize(("agent", "host", "key"),
                         [("claude", "api.anthropic.com", "ANTHROPIC_API_KEY"),
                          ("codex", "api.openai.com", "OPENAI_API_KEY")])  # fmt: skip
def test_no_network_and_no_key_are_said_before_the_start(
    each_box: AgentBox, agent: str, host: str, key: str
) -> None:
    """`glove exec --agent NAME` offline and keyless: two lines, first, naming the host,
    `--allow HOST` and the key variable; the agent still starts (a note, not a refusal)."""
    args = ["-p", "hi"] if agent == "claude" else ["exec", "hi"]
    done = each_box.glove("exec", "--agent", agent, "--wall-time", "20", "--", *args)
    notes = _notes(done.stderr)
    assert len(notes) == 2, done.stderr
    assert f"talks to {host}, which --network none does not reach" in notes[0]
    assert f"--network proxy --allow {host}" in notes[0]
    assert f"has no key: {key} is not set" in notes[1]
    assert "Not inside a trusted directory" not in done.stderr + done.stdout


def test_a_proxy_without_the_api_host_says_the_allow_flag(each_box: AgentBox) -> None:
    """In proxy mode with an allowlist that misses the API: `add --allow api.anthropic.com`;
    with a key given, no key line."""
    done = each_box.glove("exec", "--agent", "claude", "--network", "proxy", "--allow",
                          "127.0.0.1:9", "--audit", str(each_box.root / "egress.log"),
                          "--env", "ANTHROPIC_API_KEY=sk-ant-test-00000000000000",
                          "--wall-time", "10", "--", "-p", "hi")  # fmt: skip
    notes = _notes(done.stderr)
    expected = (
        "glove exec: --agent claude talks to api.anthropic.com, which no --allow rule reaches "
        "(it would wait for the network): add --allow api.anthropic.com"
    )
    assert notes == [expected], done.stderr


def test_an_allowed_or_loopback_api_gets_no_line(tmp_path: Path) -> None:
    """The allowlist that names the API host, or a base URL on the sandbox's own loopback,
    gives no network line; a login in the home stands for the key."""
    home = tmp_path
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text("{}")
    launch = AgentLaunch(AgentSection(kind="claude", command="claude",
                                      packages=["@anthropic-ai/claude-code"], home="claude"),
                         home, (), {}, ("claude", "-p", "hi"))  # fmt: skip
    rules = RuleSet.load(["api.anthropic.com"])
    allowed = agent_notes(launch, {}, network="proxy",
                          reaches=lambda h, p: rules.decide(h, p, tunnel=True).allowed)  # fmt: skip
    assert allowed == []
    local = agent_notes(launch, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"},
                        network="none", reaches=lambda h, p: False)  # fmt: skip
    assert local == []
    assert set(NEEDS) == {"claude", "codex"}


@pytest.mark.parametrize(("agent", "package"), [("claude", "@anthropic-ai/claude-code"),
                                                ("codex", "@openai/codex")])  # fmt: skip
def test_the_not_on_path_hint_names_the_package(box: AgentBox, agent: str, package: str) -> None:
    """Without the agent on PATH the one line says `npm install -g PACKAGE`."""
    box.npm = box.root / "no-such-dir"
    done = box.glove("exec", "--agent", agent, "--", "--version")
    assert done.returncode == 125, done.stderr
    assert f"npm install -g {package})" in done.stderr
