"""``glove run --network proxy`` for real: one helper for MCP and egress, one audit log.

A stock MCP SDK client inside the sandbox (``tests/mcp/fixtures/sandboxed_agent.py``) uses
its mediated tools while curl goes through the egress proxy, as root and as the
unprivileged test user; the helper (``glove-egress --mcp``) is the only process Glove adds
inside, and the run's audit log holds the tool decisions and the egress decisions under
one run id.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv
from tests.mcp.conftest import FIXTURES, write_config

from ._wired import Launcher, World, launcher, world
from .conftest import LocalCA
from .test_wired import FORKS, PIDS_LIMIT, SYSTEM_PYTHON, counted, forks

POLICY = 'version = 1\n\n[[tools]]\nname = "echo__echo"\n'
REPO = Path(__file__).resolve().parents[2]
GUEST_FILES = {"glove-egress": "-r-xr-xr-x", "glove-mcp": "-r-xr-xr-x", "resolv.conf": "-r--r--r--"}


@pytest.fixture(scope="module")
def origins(test_ca: LocalCA) -> Iterator[World]:
    """The module's origins."""
    with world(test_ca) as made:
        yield made


def _mediated(run: Launcher) -> tuple[Path, Path]:
    """A mediator config (outside the workspace) the launching user owns; and its venv."""
    cfg = run.base / "cfg"
    cfg.mkdir()
    if run.who == "unprivileged":
        shutil.copy(FIXTURES / "sdk_server.py", cfg)  # the work tree may be 0700 in CI
        server = [run.unpriv.python, str(cfg / "sdk_server.py"), "echo"]
        venv = Path(run.unpriv.python).parent.parent
    else:
        server = [sys.executable, str(FIXTURES / "sdk_server.py"), "echo"]
        venv = REPO / ".venv"
    config = write_config(cfg, {"echo": {"command": server}}, POLICY)
    shutil.copy(FIXTURES / "sandboxed_agent.py", run.workspace)
    if run.who == "unprivileged":
        for path in (cfg, *cfg.iterdir(), *run.workspace.iterdir()):
            os.chown(path, run.unpriv.uid, run.unpriv.gid)
    return config, venv


@pytest.mark.parametrize("who", ["root", "unprivileged"])
def test_mcp_and_egress_through_one_helper(origins: World, unpriv: Unpriv, who: str) -> None:
    """Mediated tools and the proxy in one run: one helper, one channel, one audit log."""
    with launcher(origins, who, unpriv) as run:
        config, venv = _mediated(run)
        http = origins.http.port
        script = (
            f"curl -sS --max-time 10 http://web.test:{http}/hello; "
            f"curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}\\n' "
            f"http://other.test:{http}/hello; "
            f"exec {venv}/bin/python sandboxed_agent.py"
        )
        done = run.glove(
            "run", "--config", str(config), "--profile", str(origins.profile),
            "--network", "proxy", "--allow", f"web.test:{http}", "--allow", f"127.0.0.1:{http}",
            "--bind", str(venv), "--accept-weaker", "all", "--", "/bin/sh", "-c", script,
            audit=config.parent / "audit.log",
        )  # fmt: skip
    assert done.rc == 0, done
    lines = done.stdout.splitlines()
    assert lines[:2] == ["hello from the origin", "403"], done
    report = json.loads(lines[2])
    assert report["tools"] == ["echo__echo"]
    assert report["echo"] == "from the sandbox"
    assert report["inherited"] == []
    assert report["guest_dir"] == GUEST_FILES
    helpers = [cmd for cmd in report["processes"] if "/opt/glove/glove-egress 3 --mcp --" in cmd]
    assert len(helpers) == 1, report["processes"]
    assert not [cmd for cmd in report["processes"] if "glove-relay" in cmd]
    # One log, one run id: the tool decisions and the egress decisions side by side.
    tools = [(r["tool"], r["decision"]) for r in done.audit if "tool" in r]
    assert ("echo__echo", "allow") in tools
    egress = [(r["host"], r["decision"]) for r in done.audit if r.get("kind") == "egress"]
    assert ("web.test", "allow") in egress
    assert ("other.test", "deny") in egress
    assert len({r["run"] for r in done.audit}) == 1
    assert done.status["egress"]["denied"] == 1
    assert "egress: 1 connection(s)" in done.stderr


def test_one_helper_takes_one_pid_under_glove_run(origins: World, unpriv: Unpriv) -> None:
    """glove run with MCP and egress spends one PID of the limit on its helper, not two."""
    with launcher(origins, "root", unpriv) as run:
        config, _ = _mediated(run)
        (run.workspace / "forks.py").write_text(FORKS)
        common = ("--profile", str(origins.profile), "--pids", PIDS_LIMIT)
        alone = run.glove("exec", *common, "--", SYSTEM_PYTHON, "/workspace/forks.py")
        behind = run.glove(
            "run", "--config", str(config), *common, "--network", "proxy",
            "--allow", "web.test", "--", SYSTEM_PYTHON, "/workspace/forks.py",
        )  # fmt: skip
    assert counted(alone), alone
    assert counted(behind), behind
    assert 2 < forks(behind) == forks(alone) - 1
