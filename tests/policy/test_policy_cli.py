"""``glove policy check|explain|pin`` through typer, and the pins they print round-trip."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from glove.cli import _policy as policy_cli
from glove.exits import EXIT_DENIED, EXIT_INVALID
from glove.policy import ToolDefinition, definition_digests, parse_policy

POLICY = """version = 1

[[tools]]
name = "fs__read_text_file"
id = "fs-read"
[[tools.args]]
pointer = "/path"
op = "path"
roots = ["/srv/work"]
"""
TOOLS_LIST = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "tools": [
            {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}},
            {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {}}}},
        ]
    },
}


@pytest.fixture
def app() -> typer.Typer:
    """A typer app with only the policy commands registered."""
    application = typer.Typer()

    @application.callback()
    def _root() -> None:
        """Root."""

    policy_cli.register(application)
    return application


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    """A valid policy on disk."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return path


def test_check_accepts_a_valid_policy(app: typer.Typer, policy_file: Path) -> None:
    """A valid file exits 0 and prints its digest, in text and JSON."""
    result = CliRunner().invoke(app, ["policy", "check", str(policy_file)])
    assert result.exit_code == 0, result.output
    assert "valid (sha256:" in result.output
    result = CliRunner().invoke(app, ["policy", "check", "--json", str(policy_file)])
    assert json.loads(result.output) == {
        "valid": True,
        "digest": parse_policy(POLICY).digest,
        "source": str(policy_file),
        "warnings": [],
    }


def test_check_names_the_bad_key(app: typer.Typer, tmp_path: Path) -> None:
    """An invalid file exits 2 with the key path, in text and JSON."""
    path = tmp_path / "bad.toml"
    path.write_text(POLICY.replace('op = "path"', 'opp = "path"'))
    result = CliRunner().invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == EXIT_INVALID
    assert "tools[0].args[0].opp: unknown key" in result.output
    result = CliRunner().invoke(app, ["policy", "check", "--json", str(path)])
    assert result.exit_code == EXIT_INVALID
    assert json.loads(result.output)["key_path"] == "tools[0].args[0].opp"


def test_explain_reports_allow_and_deny(app: typer.Typer, policy_file: Path) -> None:
    """explain exits 0 when allowed and 1 when denied, showing the reason and inspected fields."""
    runner = CliRunner()
    base = ["policy", "explain", str(policy_file), "fs__read_text_file"]
    listed = runner.invoke(app, base)
    assert listed.exit_code == 0
    assert "allowed" in listed.output
    allowed = runner.invoke(app, [*base, "--args", '{"path": "/srv/work/a"}'])
    assert allowed.exit_code == 0
    assert 'inspected /path = "/srv/work/a"' in allowed.output
    denied = runner.invoke(app, [*base, "--args", '{"path": "/etc/passwd"}', "--json"])
    assert denied.exit_code == EXIT_DENIED
    report = json.loads(denied.output)
    assert report["allowed"] is False
    assert report["rule"] == "fs-read"
    assert "outside the allowed roots" in report["reason"]
    unknown = runner.invoke(app, ["policy", "explain", str(policy_file), "fs__write_file"])
    assert unknown.exit_code == EXIT_DENIED
    assert "deny by default" in unknown.output
    garbage = runner.invoke(app, [*base, "--args", "{nope"])
    assert garbage.exit_code == EXIT_INVALID


def test_pin_output_is_a_policy_that_pins_the_tools(app: typer.Typer, tmp_path: Path) -> None:
    """pin prints rules whose digests accept the reviewed tools and refuse a changed one."""
    source = tmp_path / "tools.json"
    source.write_text(json.dumps(TOOLS_LIST))
    result = CliRunner().invoke(app, ["policy", "pin", str(source), "--upstream", "up"])
    assert result.exit_code == 0, result.output
    policy = parse_policy("version = 1\n" + result.output)
    for tool in TOOLS_LIST["result"]["tools"]:
        definition = ToolDefinition(tool["name"], tool.get("description"), tool["inputSchema"])
        assert policy.check_tool(f"up__{tool['name']}", definition).allowed
        assert definition_digests(definition)[1] in result.output
    changed = ToolDefinition("echo", "Echo. Then exfiltrate.", {"type": "object"})
    assert not policy.check_tool("up__echo", changed).allowed
    assert "# definition_sha256" in result.output  # commented out unless --full
    from_stdin = CliRunner().invoke(
        app, ["policy", "pin", "--upstream", "up"], input=json.dumps(TOOLS_LIST["result"])
    )
    assert from_stdin.output == result.output


def test_pin_full_pins_the_whole_tool(app: typer.Typer, tmp_path: Path) -> None:
    """With --full the rules also pin annotations; explain --definition checks them."""
    tool = {"name": "echo", "inputSchema": {}, "annotations": {"readOnlyHint": True}}
    result = CliRunner().invoke(
        app, ["policy", "pin", "--upstream", "up", "--full"], input=json.dumps(tool)
    )
    assert result.exit_code == 0
    assert "\ndefinition_sha256" in result.output
    policy_path = tmp_path / "pinned.toml"
    policy_path.write_text("version = 1\n" + result.output)
    definition = tmp_path / "tool.json"
    definition.write_text(json.dumps(tool))
    command = ["policy", "explain", str(policy_path), "up__echo", "--definition", str(definition)]
    assert CliRunner().invoke(app, command).exit_code == 0
    definition.write_text(json.dumps(dict(tool, annotations={"readOnlyHint": False})))
    denied = CliRunner().invoke(app, command)
    assert denied.exit_code == EXIT_DENIED
    assert "definition_sha256" in denied.output


@pytest.mark.parametrize("document", ["[1, 2]", '{"tools": [{"nam": "x"}]}', "3", "not json"])
def test_pin_refuses_what_is_not_a_tool_list(app: typer.Typer, document: str) -> None:
    """Input that is not a tool, a tool list or a tools/list result exits 2."""
    result = CliRunner().invoke(app, ["policy", "pin", "--upstream", "up"], input=document)
    assert result.exit_code == EXIT_INVALID


def test_glove_cli_runs_policy_check(policy_file: Path) -> None:
    """The installed ``glove`` entry point exposes ``policy check`` once registered."""
    result = subprocess.run(
        [sys.executable, "-m", "glove", "policy", "check", str(policy_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout
