"""The example in ``examples/mediated-agent`` runs exactly as its README says."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

RUN = REPO / "examples" / "mediated-agent" / "run"
REFERENCE_SERVER = REPO / "tests" / "peers" / "node_modules" / ".bin" / "mcp-server-filesystem"


@pytest.mark.parametrize("server", ["own", "reference"])
def test_the_example_agent_calls_a_mediated_tool(tmp_path: Path, server: str) -> None:
    """`examples/mediated-agent/run WORKSPACE`: one allowed call, two refusals, all audited,
    with the example's own filesystem server and with the reference one."""
    workspace = Path(tempfile.mkdtemp(prefix="glove-example-", dir="/var/tmp"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    if server == "reference":
        env["GLOVE_EXAMPLE_SERVER"] = str(REFERENCE_SERVER)
    try:
        done = subprocess.run(
            [str(RUN), str(workspace)], capture_output=True, text=True, env=env, timeout=120,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        steps = {
            step["step"]: step
            for line in done.stdout.splitlines()
            if line.startswith("{")
            for step in [json.loads(line)]
        }
        assert sorted(steps["list"]["tools"]) == ["fs__list_directory", "fs__read_text_file"]
        assert steps["allowed"]["ok"] is True
        assert steps["allowed"]["workspace"] == str(workspace)  # the same path on both sides
        assert "[FILE] hello.txt" in steps["allowed"]["listing"]
        assert steps["hidden"]["error"]["code"] == -32602  # hidden looks like unknown
        outside = steps["outside"]["error"]
        assert outside["code"] == -33001
        assert "outside the allowed roots" in outside["message"]  # the reason, in words
        assert "/etc" not in outside["message"]  # never the argument's value
        assert "glove run: 2 MCP call(s) denied (first: fs__write_file)" in done.stderr
        table = done.stdout.split("== the audit log")[1].splitlines()
        decisions = [line.split()[3] for line in table[2:] if line.strip()]
        assert decisions == ["allow", "deny", "deny"]
        config_dir = tmp_path / "config" / "glove" / "examples" / "mediated-agent"
        assert (config_dir / "audit.log").exists()
        assert not (workspace / "audit.log").exists()
    finally:
        subprocess.run(["rm", "-rf", str(workspace)], check=False)


def test_the_example_leaves_glove_setup_nothing_to_refuse(tmp_path: Path) -> None:
    """Every directory the example creates is 0700 and every file 0600, from
    ``$XDG_CONFIG_HOME`` down, so ``glove setup`` afterwards accepts its config directory."""
    config = tmp_path / "config"
    workspace = Path(tempfile.mkdtemp(prefix="glove-example-", dir="/var/tmp"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "XDG_STATE_HOME": str(tmp_path / "st")}
    try:
        done = subprocess.run(
            [str(RUN), str(workspace)], capture_output=True, text=True, env=env, timeout=120,
            check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        subprocess.run(["rm", "-rf", str(workspace)], check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    made = [config, *sorted(config.rglob("*"))]
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.lstat().st_mode) for p in made}
    assert len(modes) >= 7, modes  # config, glove, examples, mediated-agent and its files
    for path, mode in modes.items():
        wanted = 0o700 if (tmp_path / path).is_dir() else 0o600
        assert mode == wanted, f"{path} has mode {mode:04o}, not {wanted:04o}"
    setup = subprocess.run(
        [sys.executable, "-m", "glove", "setup"], capture_output=True, text=True, env=env,
        timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr
