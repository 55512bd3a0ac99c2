"""``glove mcp tools`` and ``glove policy check --config``: the real tools, the policy's view."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from glove.policy import ToolDefinition, lint_policy, parse_policy

from .conftest import PYTHON, sdk_server, write_config

POLICY = (
    'version = 1\n\n[[tools]]\nname = "echo__echo"\n\n[[tools]]\nname = "echo__write_*"\n'
    'effect = "deny"\n\n[[tools]]\nname = "echo__nosuch"\n\n'
    '[[tools]]\nname = "echo__a*"\nstrict_args = true\n'
    '[[tools.args]]\npointer = "/a"\nop = "range"\nmin = 0\nmax = 10\n'
)


def _glove(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "glove", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_mcp_tools_lists_every_tool_with_the_policy_verdict(tmp_path: Path) -> None:
    """Every tool appears with its exposed name; listed or hidden, with the deciding rule."""
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, POLICY)
    done = _glove("mcp", "tools", "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    tools = {item["name"]: item for item in json.loads(done.stdout)["tools"]}
    assert {"echo__echo", "echo__write_file", "echo__add", "echo__pid"} <= set(tools)
    assert tools["echo__echo"]["listed"] is True
    assert tools["echo__echo"]["rule"] == "tools[0]"
    assert tools["echo__write_file"]["listed"] is False
    assert "denied by tools[1]" in tools["echo__write_file"]["reason"]
    assert tools["echo__pid"]["listed"] is False
    assert tools["echo__pid"]["rule"] is None
    assert tools["echo__add"]["tool"] == "add"
    assert not (tmp_path / "audit.log").exists()  # listing mediates nothing
    table = _glove("mcp", "tools", "--config", str(config))
    assert any(line.split()[:2] == ["echo__echo", "listed"] for line in table.stdout.splitlines())


def test_policy_check_with_config_warns_about_dead_rules(tmp_path: Path) -> None:
    """A rule matching no offered tool, and a strict rule that refuses every valid call."""
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, POLICY)
    done = _glove(
        "policy", "check", str(tmp_path / "policy.toml"), "--config", str(config), "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["valid"] is True
    messages = {(w["rule"], w["tool"]): w["message"] for w in report["warnings"]}
    assert "matches no tool" in messages[("tools[2]", None)]
    assert "requires 'b'" in messages[("tools[3]", "echo__add")]
    assert len(report["warnings"]) == 2
    plain = _glove("policy", "check", str(tmp_path / "policy.toml"))
    assert "warning" not in plain.stdout  # without --config, nothing to measure against


def test_lint_flags_a_required_key_a_closed_schema_refuses() -> None:
    """An argument rule on a key a closed schema does not accept can never pass."""
    policy = parse_policy(
        'version = 1\n[[tools]]\nname = "x__t"\n[[tools.args]]\npointer = "/nope"\nop = "type"\n'
        'types = ["string"]\n'
    )
    closed = {"type": "object", "properties": {"p": {}}, "additionalProperties": False}
    warnings = lint_policy(policy, {"x__t": ToolDefinition("t", None, closed)})
    assert len(warnings) == 1
    assert "does not accept" in warnings[0].message
    open_schema = {"type": "object", "properties": {"p": {}}}
    assert lint_policy(policy, {"x__t": ToolDefinition("t", None, open_schema)}) == []
