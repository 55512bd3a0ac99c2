"""Helpers for the real-agent tests: the pinned npm agents, a mediated config, fake installs.

The agents are the pinned ``@anthropic-ai/claude-code`` and ``@openai/codex`` that
``scripts/setup`` installs into ``tests/agents/npm/node_modules``. A fake install wraps the
real executable so that the scripted model API (``fake_model_api.py``) starts inside the
same sandbox, on its own loopback, just before the agent: ``--agent-install`` points at it,
so ``--agent`` finds a package of the right name whose executable is that wrapper.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Unpriv

REPO = Path(__file__).resolve().parents[2]
NPM = REPO / "tests" / "agents" / "npm" / "node_modules"
FAKE_API = Path(__file__).parent / "fake_model_api.py"
SDK_SERVER = REPO / "tests" / "mcp" / "fixtures" / "sdk_server.py"
#: The scripted model API's port on the sandbox's own loopback.
FAKE_PORT = 8765
#: How long one contained agent run may take in these tests.
AGENT_DEADLINE_S = 120.0

POLICY = """version = 1
[[tools]]
name = "echo__echo"
[[tools]]
name = "echo__add"
[[tools.args]]
pointer = "/a"
op = "range"
min = 0
max = 100
"""
#: The real package directories of each agent (bound read-only beside a fake install).
PACKAGES = {
    "claude": ("@anthropic-ai/claude-code", "bin/claude.exe"),
    "codex": ("@openai/codex", "bin/codex.js"),
}


def agents_installed() -> Path:
    """The pinned npm agents, or fail naming the fix."""
    for name in ("claude", "codex"):
        if not (NPM / ".bin" / name).exists():
            pytest.fail(f"{NPM}/.bin/{name} is missing: run scripts/setup (it installs them)")
    return NPM


@dataclass
class AgentBox:
    """One test's layout: workspace, mediator config (outside it), XDG data home."""

    root: Path
    workspace: Path
    config: Path
    audit: Path
    xdg: Path
    #: Who runs glove: this process's user, or the unprivileged test user (as root).
    owner: Unpriv | None = None
    #: Where the agents, the scripted model API and the echo server are read from (a copy
    #: the owner can read when the checkout is not: see :func:`_staged`).
    npm: Path = NPM
    fake_api: Path = FAKE_API

    def env(self) -> dict[str, str]:
        """The environment ``glove`` runs with: the agents on PATH, a private data home."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env["PATH"] = f"{self.npm / '.bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        env["XDG_DATA_HOME"] = str(self.xdg)
        if self.owner is not None:
            env["HOME"] = str(self.root)
            env["USER"] = env["LOGNAME"] = self.owner.user
        return env

    @property
    def python(self) -> str:
        """The interpreter glove (and the echo upstream) run with."""
        return self.owner.python if self.owner is not None else sys.executable

    def _hand_over(self) -> None:
        """Give the layout (as the test wrote it so far) to the owner."""
        if self.owner is None or os.getuid() != 0:
            return
        for directory, dirs, files in os.walk(self.root):
            for name in [*dirs, *files]:
                os.chown(Path(directory) / name, self.owner.uid, self.owner.gid,
                         follow_symlinks=False)  # fmt: skip
        os.chown(self.root, self.owner.uid, self.owner.gid)

    def glove(
        self, *args: str, stdin: int | None = subprocess.DEVNULL, timeout: float = AGENT_DEADLINE_S
    ) -> subprocess.CompletedProcess[str]:
        """Run ``glove ARGS`` in the workspace; return the finished process (text)."""
        self._hand_over()
        creds = self.owner.credentials() if self.owner is not None else {}
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            [self.python, "-m", "glove", *args],
            **creds,
            cwd=self.workspace,
            env=self.env(),
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def audit_records(self) -> list[dict[str, object]]:
        """The mediator's audit log, one record per line."""
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    def fake_install(self, agent: str) -> tuple[Path, list[str]]:
        """A wrapper install of ``agent`` that starts the scripted model API first.

        Returns the ``--agent-install`` directory and the ``--bind`` flags it needs (the real
        packages and the fake API, read-only).
        """
        package, entry = PACKAGES[agent]
        real = self.npm / package
        fake = self.root / f"install-{agent}" / "node_modules"
        (fake / package / Path(entry).parent).mkdir(parents=True)
        (fake / package / "package.json").write_text(json.dumps({"name": package}))
        runner = f"node {real / entry}" if entry.endswith(".js") else str(real / entry)
        log = self.workspace / "model.log"
        wrapper = fake / package / entry
        wrapper.write_text(
            "#!/bin/sh\n"
            f"python3 {self.fake_api} {FAKE_PORT} {log} &\n"
            "while ! python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
            f'{FAKE_PORT})).close()" 2>/dev/null; do sleep 0.05; done\n'
            f'exec {runner} "$@"\n'
        )
        wrapper.chmod(0o755)
        (fake / ".bin").mkdir()
        (fake / ".bin" / agent).symlink_to(Path("..") / package / entry)
        binds = [str(real), str(self.fake_api.parent)]
        if agent == "codex":
            binds += [str(p) for p in (self.npm / "@openai").iterdir() if p.name != "codex"]
        flags: list[str] = []
        for bind in binds:
            flags += ["--bind", bind]
        return fake, flags

    def model_requests(self) -> list[dict[str, object]]:
        """Every request the scripted model API received (path and body)."""
        log = self.workspace / "model.log"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


def _layout(
    tmp_path_factory: pytest.TempPathFactory,
    owner: Unpriv | None,
    stage: Path | None = None,
    under: str = "/var/tmp",
) -> AgentBox:
    agents_installed()
    root = Path(tmp_path_factory.mktemp("agents", numbered=True))
    base = Path(under) / f"glove-agents-{os.getpid()}-{root.name}"
    base.mkdir(parents=True)
    base.chmod(0o755)
    workspace = base / "ws"
    workspace.mkdir()
    cfg = base / "cfg"
    cfg.mkdir()
    (cfg / "policy.toml").write_text(POLICY)
    config = cfg / "glove.toml"
    python = owner.python if owner is not None else sys.executable
    sdk_server = stage / SDK_SERVER.name if stage is not None else SDK_SERVER
    config.write_text(
        'policy = "policy.toml"\naudit = "audit.log"\n[upstreams.echo]\n'
        f"command = {json.dumps([python, str(sdk_server), 'echo'])}\n"
        'inherit_env = ["PATH", "HOME"]\n'
    )
    box = AgentBox(base, workspace, config, cfg / "audit.log", base / "xdg", owner)
    if stage is not None:
        box.npm, box.fake_api = stage / "node_modules", stage / FAKE_API.name
    return box


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem: a copy
        shutil.copy2(source, target)


@pytest.fixture(scope="session")
def _staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The agents, the model API and the echo server where every user can read them.

    A checkout may sit in a directory only root can enter (a CI clone under a 0700 temp
    dir), so the unprivileged runs read a copy: hard links where the filesystem allows,
    readable by all, removed at the end of the session.
    """
    agents_installed()
    stage = Path("/var/tmp") / f"glove-agents-stage-{os.getpid()}"
    stage.mkdir(mode=0o755)
    try:
        shutil.copytree(NPM, stage / "node_modules", symlinks=True, copy_function=_link_or_copy)
        for path in (FAKE_API, SDK_SERVER):
            shutil.copy2(path, stage / path.name)
        for directory, _dirs, files in os.walk(stage):
            os.chmod(directory, 0o755)
            for name in files:
                path = Path(directory) / name
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o444)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@pytest.fixture
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentBox]:
    """A fresh layout under /var/tmp (see :func:`each_tmp_box` for one under /tmp)."""
    layout = _layout(tmp_path_factory, None)
    try:
        yield layout
    finally:
        shutil.rmtree(layout.root, ignore_errors=True)


@pytest.fixture(params=["caller", "unprivileged"])
def each_box(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentBox]:
    """The layout run by this process's user, then by the unprivileged test user (reading
    a staged copy of the agents)."""
    owner, stage = None, None
    if request.param == "unprivileged":
        owner = request.getfixturevalue("unpriv")
        stage = request.getfixturevalue("_staged")
    layout = _layout(tmp_path_factory, owner, stage)
    try:
        yield layout
    finally:
        shutil.rmtree(layout.root, ignore_errors=True)


@pytest.fixture(params=["caller", "unprivileged"])
def each_tmp_box(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentBox]:
    """:func:`each_box` with the whole layout (workspace, agent home, fake install) under
    /tmp, where the sandbox shows each at its own path inside its private /tmp (both read
    the staged agents: a checkout's ``node_modules`` may be a link, never followed)."""
    owner = request.getfixturevalue("unpriv") if request.param == "unprivileged" else None
    stage = request.getfixturevalue("_staged")
    layout = _layout(tmp_path_factory, owner, stage, under="/tmp")
    try:
        yield layout
    finally:
        shutil.rmtree(layout.root, ignore_errors=True)
