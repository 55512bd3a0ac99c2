"""Claude Code and Codex, the pinned npm releases, run contained and mediated by ``--agent``."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from tests.agents.conftest import FAKE_PORT, AgentBox
from tests.agents.fake_model_api import ALLOWED_TEXT, DONE_TEXT

#: How long a JSON-RPC answer from Codex's app-server may take.
APP_SERVER_DEADLINE_S = 60.0
#: The tools the test policy shows (the echo fixture has more; they must stay hidden).
POLICY_TOOLS = {"echo__echo", "echo__add"}


def _status(box: AgentBox) -> dict[str, object]:
    return json.loads((box.root / "status.json").read_text())


@pytest.mark.parametrize(
    ("agent", "version"), [("claude", "(Claude Code)"), ("codex", "codex-cli")]
)
def test_the_agent_starts_contained(box: AgentBox, agent: str, version: str) -> None:
    """``glove exec --agent NAME -- --version`` runs the real agent inside, offline, cleanly."""
    done = box.glove("exec", "-q", "--agent", agent, "--json-status", str(box.root / "status.json"),
                     "--", "--version")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert version in done.stdout
    status = _status(box)
    assert status["violation"] is None, status
    if box.owner is not None:  # it ran as that user: the mediator's audit log is theirs
        assert box.audit.stat().st_uid == box.owner.uid
    home = box.xdg / "glove" / "agents" / agent
    assert home.is_dir()
    assert home.stat().st_mode & 0o777 == 0o700


def test_an_agent_install_and_home_under_tmp_work_at_their_own_paths(
    each_tmp_box: AgentBox,
) -> None:
    """``--agent-install`` of an install under /tmp, with the workspace and the agent's home
    under /tmp too, runs the real agent (each bound at its own path inside the private /tmp),
    as this user and as an unprivileged one."""
    box = each_tmp_box
    install, binds = box.fake_install("claude")
    done = box.glove(
        "exec", "-q", "--agent", "claude", "--agent-install", str(install), *binds,
        "--json-status", str(box.root / "status.json"), "--", "--version",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(Claude Code)" in done.stdout
    assert str(box.root).startswith("/tmp/")
    assert (box.xdg / "glove" / "agents" / "claude").is_dir()
    assert _status(box)["violation"] is None


def test_claude_mcp_list_shows_the_glove_server_connected(box: AgentBox) -> None:
    """Under ``glove run --agent claude``, ``claude mcp list`` finds the server and connects."""
    done = box.glove("run", "-q", "--config", str(box.config), "--agent", "claude",
                     "--", "mcp", "list")  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("glove:"))
    assert "/opt/glove/glove-mcp" in line
    assert "Connected" in line, done.stdout


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], ident: int) -> dict[str, object]:
    assert proc.stdout is not None
    deadline = time.monotonic() + APP_SERVER_DEADLINE_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if not ready:
            continue
        line = proc.stdout.readline()
        assert line, "codex app-server closed its output"
        message: dict[str, object] = json.loads(line)
        if message.get("id") == ident:
            return message
    raise AssertionError(f"no answer to request {ident}")


def test_codex_app_server_lists_the_policys_tools(box: AgentBox) -> None:
    """Codex's app-server ``mcpServerStatus/list`` shows the ``glove`` server and its tools."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "glove", "run", "-q", "--config", str(box.config),
         "--agent", "codex", "--", "app-server"],
        cwd=box.workspace, env=box.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"clientInfo": {"name": "glove-test", "version": "1"}}})  # fmt: skip
        _answer(proc, 1)
        _rpc(proc, {"jsonrpc": "2.0", "method": "initialized"})
        tools: set[str] = set()
        for ident in range(10, 20):  # the MCP servers start in the background
            _rpc(proc, {"jsonrpc": "2.0", "id": ident, "method": "mcpServerStatus/list",
                        "params": {}})  # fmt: skip
            result = _answer(proc, ident)["result"]
            assert isinstance(result, dict)
            servers = {server["name"]: server for server in result["data"]}
            tools = set((servers.get("glove") or {}).get("tools") or {})
            if tools:
                break
            time.sleep(0.5)
        assert tools == POLICY_TOOLS
    finally:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def _end_to_end(box: AgentBox, agent: str, env: list[str], args: list[str]) -> None:
    install, binds = box.fake_install(agent)
    done = box.glove(
        "run", "--config", str(box.config), "--agent", agent, "--agent-install", str(install),
        *binds, *env, "--json-status", str(box.root / "status.json"), "--", *args,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert DONE_TEXT in done.stdout
    # The audit log holds both decisions, with the run's session id.
    records = box.audit_records()
    decisions = {(r["tool"], r["decision"]) for r in records}
    assert ("echo__echo", "allow") in decisions, records
    assert ("echo__add", "deny") in decisions, records
    assert len({r["run"] for r in records}) == 1
    # What came back to the model: the allowed tool's content, and the policy's refusal.
    bodies = json.dumps([request["body"] for request in box.model_requests()])
    assert ALLOWED_TEXT in bodies.replace('\\"', '"')
    assert "tool call denied by policy" in bodies
    assert "-32602" not in bodies  # the allowed tools were listed (not unknown)
    status = _status(box)
    assert status["violation"] is None, status


def test_claude_end_to_end_with_a_scripted_model(each_box: AgentBox) -> None:
    """Claude Code calls an allowed tool (result back) and a denied one (refusal back), run
    by this user and by an unprivileged one."""
    box = each_box
    env = ["--env", "ANTHROPIC_API_KEY=sk-ant-test-0000000000000000000000",
           "--env", f"ANTHROPIC_BASE_URL=http://127.0.0.1:{FAKE_PORT}",
           "--env", "ENABLE_TOOL_SEARCH=false"]  # fmt: skip
    _end_to_end(box, "claude", env, ["-p", "use the glove tools"])
    tools = {
        tool["name"]
        for request in box.model_requests()
        for tool in request["body"].get("tools", [])  # type: ignore[union-attr]
        if tool["name"].startswith("mcp__glove__")
    }
    assert tools == {f"mcp__glove__{name}" for name in POLICY_TOOLS}  # hidden ones absent


def _codex_provider(box: AgentBox) -> None:
    """Point Codex at the scripted model (the operator's keys Glove keeps as they are)."""
    codex = box.xdg / "glove" / "agents" / "codex" / ".codex"
    codex.mkdir(parents=True, mode=0o700)
    (codex / "config.toml").write_text(
        'model = "gpt-test"\nmodel_provider = "fake"\napproval_policy = "never"\n'
        "[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "http://127.0.0.1:{FAKE_PORT}/v1"\n'
        'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )


def test_codex_end_to_end_with_a_scripted_model(each_box: AgentBox) -> None:
    """Codex calls an allowed tool (result back) and a denied one (refusal back), run by
    this user and by an unprivileged one."""
    box = each_box
    _codex_provider(box)
    _end_to_end(box, "codex", ["--env", "OPENAI_API_KEY=sk-test"],
                ["exec", "use the glove tools"])  # fmt: skip
    config = (box.xdg / "glove" / "agents" / "codex" / ".codex" / "config.toml").read_text()
    assert 'model_provider = "fake"' in config  # the operator's keys are kept
    assert 'sandbox_mode = "danger-full-access"' in config
    assert "[mcp_servers.glove]" in config


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize(("agent", "prompt"), [("claude", "\u276f"), ("codex", "Ask Codex")])
def test_the_tui_reaches_its_prompt_under_tmux(box: AgentBox, agent: str, prompt: str) -> None:
    """On a terminal, ``glove run --agent NAME`` gives the TUI a terminal; it reaches its prompt."""
    if agent == "codex":
        _codex_provider(box)
    session = f"glove-agents-{os.getpid()}-{agent}"
    env = " ".join(f"{key}={json.dumps(value)}" for key, value in box.env().items()
                   if key in ("PATH", "XDG_DATA_HOME", "HOME"))  # fmt: skip
    key = "ANTHROPIC_API_KEY=sk-ant-test-1111111111111111111111" if agent == "claude" else (
        "OPENAI_API_KEY=sk-test")  # fmt: skip
    command = (f"cd {box.workspace} && env {env} {key} TERM=xterm-256color {sys.executable} -m "
               f"glove run -q --config {box.config} --agent {agent}")  # fmt: skip
    _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
    try:
        screen = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and prompt not in screen:
            time.sleep(0.5)
            screen = _tmux("capture-pane", "-p", "-t", session)
        assert prompt in screen, screen
        for word in ("Sign in", "Detected a custom API key", "trust"):
            assert word not in screen, screen  # no onboarding, key approval or trust dialog
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
