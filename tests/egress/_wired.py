"""The harness of the wired tests: the real ``glove`` CLI with ``--network proxy``, real origins.

Names the proxy resolves come from the *host's* resolver, so each run starts in a mount
namespace the test creates (as root) whose ``/etc/hosts`` maps the test names to
127.0.0.1; ``glove`` itself (and, unprivileged, ``runuser`` then ``glove``) runs inside it.
The sandbox gets a plain hosts file instead (the test profile binds it at ``/etc/hosts``),
so inside, those names resolve only through the egress DNS stub, as they would for a real
registry. Every origin listens on host loopback; nothing here targets another address.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import Unpriv

from ._origin import Origin, Sshd, build_repo, origin, sshd
from .conftest import LocalCA

#: The names the host resolves to 127.0.0.1 in these tests (and rebind.test to 127.0.0.2,
#: an address no rule lists).
TEST_HOSTS = ("web.test", "git.test", "pypi.test", "ssh.test", "other.test")
#: Seconds one ``glove`` command of these tests may take.
GLOVE_TIMEOUT_S = 90.0
SANDBOX_HOSTS = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"


@dataclass(frozen=True)
class Done:
    """What one ``glove`` command produced, with its status document and audit records."""

    rc: int
    stdout: str
    stderr: str
    status: dict[str, Any]
    audit: list[dict[str, Any]]

    def decisions(self) -> list[tuple[object, ...]]:
        """``(proto, host, port, decision)`` of every egress decision record."""
        return [
            (r["proto"], r["host"], r["port"], r["decision"])
            for r in self.audit
            if r.get("kind") == "egress"
        ]


@dataclass
class World:
    """Origins on host loopback and the files every run uses (all under one 0755 root)."""

    root: Path
    https: Origin
    http: Origin
    ssh: Sshd
    repo: Path
    ca: Path
    profile: Path
    host_hosts: Path


@contextmanager
def world(test_ca: LocalCA) -> Iterator[World]:
    """Start the origins and write the hosts files, the CA copy and the test profile."""
    root = Path(tempfile.mkdtemp(prefix="glove-egress-wired-", dir="/var/tmp"))
    try:
        root.chmod(0o755)
        repo = build_repo(root / "git")
        ca = root / "ca.pem"
        shutil.copy(test_ca.ca_file, ca)
        ca.chmod(0o644)
        host_hosts = root / "host-hosts"
        host_hosts.write_text(
            "127.0.0.1 localhost\n"
            + "".join(f"127.0.0.1 {name}\n" for name in TEST_HOSTS)
            + "127.0.0.2 rebind.test\n"
        )
        sandbox_hosts = root / "sandbox-hosts"
        sandbox_hosts.write_text(SANDBOX_HOSTS)
        profile = root / "wired.toml"
        profile.write_text(
            'extends = "default"\n[workspace]\ntarget = "/workspace"\n'
            f'[[bind]]\nsource = "{sandbox_hosts}"\ntarget = "/etc/hosts"\n'
            f'[[bind]]\nsource = "{root}"\n'
        )
        for path in (host_hosts, sandbox_hosts, profile):
            path.chmod(0o644)
        with (
            origin(repo.parent, tls=test_ca.server_context()) as https,
            origin(repo.parent) as http,
            sshd(root / "ssh") as ssh,
        ):
            yield World(root, https, http, ssh, repo, ca, profile, host_hosts)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Launcher:
    """Runs ``glove`` as root or as the unprivileged test user, from a private directory."""

    world: World
    who: str
    unpriv: Unpriv
    base: Path

    @property
    def python(self) -> str:
        """The interpreter that runs ``glove`` for this launcher."""
        return self.unpriv.python if self.who == "unprivileged" else sys.executable

    @property
    def workspace(self) -> Path:
        """The run's workspace (appears at /workspace inside)."""
        return self.base / "ws"

    @property
    def audit_path(self) -> Path:
        """Where ``glove exec --audit`` writes in these tests."""
        return self.base / "egress-audit.log"

    def argv(self, *glove: str) -> list[str]:
        """``glove ARGS`` inside a mount namespace whose /etc/hosts has the test names."""
        user = ["runuser", "-u", self.unpriv.user, "--"] if self.who == "unprivileged" else []
        setup = 'mount --bind "$0" /etc/hosts && exec "$@"'
        return [
            "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", setup,
            str(self.world.host_hosts), *user, self.python, "-m", "glove", *glove,
        ]  # fmt: skip

    def glove(
        self, *args: str, audit: Path | None = None, env: dict[str, str] | None = None
    ) -> Done:
        """Run ``glove ARGS`` (with ``--json-status``); collect the status and the audit log."""
        status = self.base / "status.json"
        status.unlink(missing_ok=True)
        done = subprocess.run(
            self.argv(args[0], "--json-status", str(status), *args[1:]),
            cwd=self.workspace, capture_output=True, text=True, timeout=GLOVE_TIMEOUT_S,
            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        log = audit if audit is not None else self.audit_path
        lines = log.read_text().splitlines() if log.exists() else []
        records = [json.loads(line) for line in lines]
        document = json.loads(status.read_text()) if status.exists() else {}
        return Done(done.returncode, done.stdout, done.stderr, document, records)

    def exec(self, script: str, *flags: str, env: dict[str, str] | None = None) -> Done:
        """``glove exec --network proxy`` with the test profile and FLAGS, running ``script``."""
        return self.glove(
            "exec", "--profile", str(self.world.profile), "--network", "proxy",
            "--audit", str(self.audit_path), "--env", f"CURL_CA_BUNDLE={self.world.ca}",
            "--env", f"SSL_CERT_FILE={self.world.ca}", "--env", f"GIT_SSL_CAINFO={self.world.ca}",
            *flags, "--", "/bin/sh", "-c", script, env=env,
        )  # fmt: skip


@contextmanager
def launcher(world: World, who: str, unpriv: Unpriv) -> Iterator[Launcher]:
    """A private directory (owned by the launching user) with a workspace, for one test."""
    base = Path(tempfile.mkdtemp(prefix="glove-egress-run-", dir="/var/tmp"))
    try:
        (base / "ws").mkdir()
        if who == "unprivileged":
            for path in (base, base / "ws"):
                os.chown(path, unpriv.uid, unpriv.gid)
        yield Launcher(world, who, unpriv, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def web_rules(world: World) -> list[str]:
    """``--allow`` flags that open web.test on both origins, and their loopback address."""
    ports = f"{world.https.port},{world.http.port}"
    return ["--allow", f"web.test:{ports}", "--allow", f"127.0.0.1:{ports}"]
