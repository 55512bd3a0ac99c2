"""Claude Code and Codex end to end with the model API on the *host*, through the egress proxy.

The scripted model API (``fake_model_api.py``) listens on host loopback at 127.0.0.2 (not
127.0.0.1: the proxy variables keep ``localhost,127.0.0.1,::1`` direct, since inside the
sandbox those are the sandbox's own loopback). The agent runs under ``glove run --agent
--network proxy --allow 127.0.0.2:PORT``: the only address it can reach. Each agent calls an
allowed tool (the result goes back to the model) and a denied one (the refusal goes back),
and the run's audit log holds both tool decisions and the egress decisions, all under the
agent's one run id.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.conftest import FAKE_API, AgentBox
from tests.agents.fake_model_api import ALLOWED_TEXT, DONE_TEXT

#: A host loopback address outside NO_PROXY (so the agent's requests go through the proxy).
MODEL_HOST = "127.0.0.2"
#: Seconds the host-side model API may take to listen.
LISTEN_DEADLINE_S = 10.0


class HostModel:
    """The scripted model API running on host loopback for one test."""

    def __init__(self, log: Path) -> None:
        with socket.socket() as probe:
            probe.bind((MODEL_HOST, 0))
            self.port = probe.getsockname()[1]
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, str(FAKE_API), str(self.port), str(log), MODEL_HOST]
        )
        deadline = time.monotonic() + LISTEN_DEADLINE_S
        while True:
            try:
                socket.create_connection((MODEL_HOST, self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.05)

    @property
    def url(self) -> str:
        """The base URL the agent is given."""
        return f"http://{MODEL_HOST}:{self.port}"

    def requests(self) -> list[dict[str, object]]:
        """Every request the model API received."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def close(self) -> None:
        """Stop the server."""
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def model(box: AgentBox) -> Iterator[HostModel]:
    """The model API on host loopback."""
    served = HostModel(box.root / "host-model.log")
    try:
        yield served
    finally:
        served.close()


def _through_the_proxy(
    box: AgentBox, model: HostModel, agent: str, env: list[str], args: list[str]
) -> None:
    done = box.glove(
        "run", "--config", str(box.config), "--agent", agent,
        "--network", "proxy", "--allow", f"{MODEL_HOST}:{model.port}", *env,
        "--json-status", str(box.root / "status.json"), "--", *args,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert DONE_TEXT in done.stdout
    records = box.audit_records()
    tools = {(r["tool"], r["decision"]) for r in records if "tool" in r}
    assert ("echo__echo", "allow") in tools, records
    assert ("echo__add", "deny") in tools, records
    egress = [r for r in records if r.get("kind") == "egress"]
    allowed = {(r["host"], r["port"]) for r in egress if r["decision"] == "allow"}
    assert (MODEL_HOST, model.port) in allowed, egress
    assert len({r["run"] for r in records}) == 1  # the agent's session, both kinds
    bodies = json.dumps([request["body"] for request in model.requests()])
    assert ALLOWED_TEXT in bodies.replace('\\"', '"')
    assert "tool call denied by policy" in bodies
    status = json.loads((box.root / "status.json").read_text())
    assert status["violation"] is None, status
    assert status["egress"]["allowed"] >= 1


def test_claude_reaches_a_host_model_api_only_through_the_proxy(
    box: AgentBox, model: HostModel
) -> None:
    """Claude Code on the host's model API via HTTP_PROXY: tools mediated, egress audited."""
    env = ["--env", "ANTHROPIC_API_KEY=sk-ant-test-0000000000000000000000",
           "--env", f"ANTHROPIC_BASE_URL={model.url}",
           "--env", "ENABLE_TOOL_SEARCH=false"]  # fmt: skip
    _through_the_proxy(box, model, "claude", env, ["-p", "use the glove tools"])


def test_codex_reaches_a_host_model_api_only_through_the_proxy(
    box: AgentBox, model: HostModel
) -> None:
    """Codex on the host's model API via HTTP_PROXY: tools mediated, egress audited."""
    codex = box.xdg / "glove" / "agents" / "codex" / ".codex"
    codex.mkdir(parents=True, mode=0o700)
    (codex / "config.toml").write_text(
        'model = "gpt-test"\nmodel_provider = "fake"\napproval_policy = "never"\n'
        "[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "{model.url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    _through_the_proxy(
        box, model, "codex", ["--env", "OPENAI_API_KEY=sk-test"],
        ["exec", "--skip-git-repo-check", "use the glove tools"],
    )  # fmt: skip
