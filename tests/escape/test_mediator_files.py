"""The mediator's own files stay out of the agent's reach, as root and unprivileged.

``glove run`` refuses, before any upstream starts, a layout that would show the sandbox its
configuration, policy, audit log or an upstream's working directory, or let it write an
upstream's program, however the overlap is spelt (decision 0006). When the layout is sound,
an agent that tries every way in (read, write, append, rename, hard link, a symlink it
plants) reaches nothing, and a planted symlink does not lead the host-side filesystem
server there either. ``glove exec --json-status FILE`` follows the same rule.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, Unpriv
from tests.mcp.conftest import toml_value

FIXTURES = REPO / "tests" / "mcp" / "fixtures"
EXAMPLE_AGENT = REPO / "examples" / "mediated-agent" / "agent.py"
FS_SERVER = REPO / "tests" / "peers" / "node_modules" / ".bin" / "mcp-server-filesystem"
#: The same server, copied where the test user can read it (scripts/setup does it).
UNPRIV_FS_SERVER = Path("/var/tmp/glove-unpriv/peers/node_modules/.bin/mcp-server-filesystem")
RUN_TIMEOUT_S = 90.0
POLICY = 'version = 1\n\n[[tools]]\nname = "echo__echo"\n'


@dataclass
class Layout:
    """A host folder owned by the launching user: ``cfg/`` (the mediator) and ``ws/``."""

    who: str
    base: Path
    python: str
    wrap: list[str]
    uid: int
    gid: int

    @property
    def cfg(self) -> Path:
        """The mediator's folder."""
        return self.base / "cfg"

    @property
    def ws(self) -> Path:
        """The agent's workspace."""
        return self.base / "ws"

    def config(
        self, *, policy: str | None = None, audit: str = "audit.log", **upstream: object
    ) -> Path:
        """Write ``cfg/glove.toml`` (one ``echo`` upstream); return its path."""
        fields = {
            "command": [self.python, str(self.cfg / "sdk_server.py"), "echo"],
            "env": {"GLOVE_TEST_CALL_LOG": str(self.cfg / "calls")},
            **upstream,
        }
        lines = [f"policy = {toml_value(policy or 'policy.toml')}", f"audit = {toml_value(audit)}"]
        lines.append("[upstreams.echo]")
        lines += [f"{key} = {toml_value(value)}" for key, value in fields.items()]
        path = self.cfg / "glove.toml"
        path.write_text("\n".join(lines) + "\n")
        self.own(path)
        return path

    def own(self, *paths: Path) -> None:
        """Give ``paths`` to the launching user."""
        for path in paths:
            os.lchown(path, self.uid, self.gid)

    def glove(
        self, command: str, *flags: str, agent: list[str], cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``glove COMMAND FLAGS -- AGENT`` as the launching user."""
        argv = [*self.wrap, self.python, "-P", "-m", "glove", command, *flags, "--", *agent]
        return subprocess.run(
            argv,
            cwd=cwd or self.base,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )

    def run(self, *flags: str, agent: list[str] | None = None, cwd: Path | None = None,
            config: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """``glove run --config CFG FLAGS -- AGENT`` (default agent: touch a marker)."""
        marker = ["/bin/sh", "-c", "touch ran"]
        conf = config or self.cfg / "glove.toml"
        return self.glove("run", "--config", str(conf), *flags, agent=agent or marker, cwd=cwd)


@pytest.fixture(params=["root", "unpriv"] if os.getuid() == 0 else ["self"])
def layout(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[Layout]:
    """A fresh mediator folder and workspace, for root and for the unprivileged user."""
    if request.param == "unpriv":
        who, python, wrap, uid, gid = (
            "unpriv",
            unpriv.python,
            unpriv.command(),
            unpriv.uid,
            unpriv.gid,
        )
    else:
        who, python, wrap, uid, gid = request.param, sys.executable, [], os.getuid(), os.getgid()
    base = Path(tempfile.mkdtemp(prefix="glove-mf-", dir="/var/tmp"))
    item = Layout(who, base, python, wrap, uid, gid)
    item.cfg.mkdir()
    item.ws.mkdir()
    shutil.copy(FIXTURES / "sdk_server.py", item.cfg)
    (item.cfg / "policy.toml").write_text(POLICY)
    item.own(base, item.cfg, item.ws, item.cfg / "sdk_server.py", item.cfg / "policy.toml")
    item.config()
    try:
        yield item
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 125, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_config_folder_as_the_workspace_is_refused(layout: Layout) -> None:
    """The reported hole: started from its config folder, glove run refuses and runs nothing."""
    done = layout.run(cwd=layout.cfg)
    _refused(done, f"the workspace {layout.cfg}", "--workspace DIR", "glove.toml")
    assert not (layout.cfg / "ran").exists()
    assert not (layout.cfg / "audit.log").exists(), "the mediation must not even start"


def test_a_workspace_holding_the_config_folder_is_refused(layout: Layout) -> None:
    """A workspace that is a parent of the mediator's folder shows it, so it is refused."""
    _refused(layout.run("--workspace", str(layout.base)), f"the workspace {layout.base}")


@pytest.mark.parametrize("spelling", ["{ws}/../cfg", "{cfg}/sub/..", "{cfg}/./", "{base}//cfg"])
def test_dot_dot_spellings_are_refused(layout: Layout, spelling: str) -> None:
    """``..``, ``.`` and doubled slashes name the same folder, and are refused the same."""
    (layout.cfg / "sub").mkdir()
    workspace = spelling.format(ws=layout.ws, cfg=layout.cfg, base=layout.base)
    _refused(layout.run("--workspace", workspace), "the workspace")


def test_a_bind_of_the_config_folder_under_another_path_is_refused(layout: Layout) -> None:
    """Binding the mediator's folder anywhere inside, even read-only, is refused."""
    done = layout.run("--workspace", str(layout.ws), "--bind", f"{layout.cfg}:/mnt/cfg:ro")
    _refused(done, f"the bind {layout.cfg}", "the mediator's configuration", "drop or narrow")


def test_a_single_file_bind_of_the_policy_is_refused(layout: Layout) -> None:
    """A bind of the policy file itself is caught by its inode."""
    done = layout.run("--workspace", str(layout.ws), "--bind", f"{layout.cfg}/policy.toml:/p")
    _refused(done, "the mediator's policy file")


@pytest.mark.skipif(os.getuid() != 0, reason="making a host bind mount needs root")
def test_a_host_bind_mount_alias_of_the_config_folder_is_refused(layout: Layout) -> None:
    """The same folder reached through a host bind mount at another path is still refused."""
    alias = layout.base / "alias"
    alias.mkdir()
    layout.own(alias)
    subprocess.run(["mount", "--bind", str(layout.cfg), str(alias)], check=True)
    try:
        _refused(layout.run("--workspace", str(alias)), f"the workspace {alias}")
        _refused(layout.run("--workspace", str(layout.ws), "--bind", f"{alias}:/mnt/a"), "bind")
    finally:
        subprocess.run(["umount", str(alias)], check=True)


def test_a_config_reached_through_a_symlink_in_the_workspace_is_refused(layout: Layout) -> None:
    """A workspace holding a symlink to the config could re-point it: refused."""
    link = layout.ws / "glove.toml"
    link.symlink_to(layout.cfg / "glove.toml")
    done = layout.run("--workspace", str(layout.ws), config=link)
    _refused(done, f"the workspace {layout.ws}", "the mediator's configuration")


def test_a_policy_reached_through_a_symlink_in_the_workspace_is_refused(layout: Layout) -> None:
    """A policy path that passes a symlink the sandbox could rewrite is refused."""
    link = layout.ws / "policy-link.toml"
    link.symlink_to(layout.cfg / "policy.toml")
    layout.config(policy=str(link))
    _refused(layout.run("--workspace", str(layout.ws)), "the mediator's policy file")


def test_a_hard_link_to_the_policy_is_refused(layout: Layout) -> None:
    """Another name for the policy on the workspace's filesystem is refused."""
    os.link(layout.cfg / "policy.toml", layout.ws / "innocent.txt")
    _refused(layout.run("--workspace", str(layout.ws)), "hard links", "policy")


def test_an_audit_log_in_the_workspace_is_refused_before_it_exists(layout: Layout) -> None:
    """An audit log the mediation would create inside the workspace is refused up front."""
    layout.config(audit=str(layout.ws / "audit.log"))
    _refused(layout.run("--workspace", str(layout.ws)), "the mediator's audit log")
    assert not (layout.ws / "audit.log").exists()


def test_an_upstream_working_directory_in_view_is_refused(layout: Layout) -> None:
    """An upstream started in the workspace could load what the agent planted: refused."""
    layout.config(cwd=str(layout.ws))
    _refused(layout.run("--workspace", str(layout.ws)), "the working directory of upstream")


def test_an_upstream_program_in_a_writable_workspace_is_refused(layout: Layout) -> None:
    """An upstream script the agent could rewrite is refused; read-only it is allowed."""
    script = layout.ws / "server.py"
    shutil.copy(FIXTURES / "sdk_server.py", script)
    layout.own(script)
    layout.config(command=[layout.python, str(script), "echo"])
    _refused(layout.run("--workspace", str(layout.ws)), "a file upstream 'echo' is started with")
    done = layout.run("--workspace", str(layout.ws), "--workspace-mode", "ro", "--dry-run")
    assert done.returncode == 0, done.stderr


def _http_upstream_config(layout: Layout, token: Path) -> Path:
    """``cfg/glove.toml`` with one Streamable HTTP upstream whose bearer token is ``token``."""
    header = {"file": str(token), "prefix": "Bearer "}
    path = layout.cfg / "glove.toml"
    path.write_text(
        'policy = "policy.toml"\naudit = "audit.log"\n[upstreams.web]\n'
        'url = "http://127.0.0.1:9/mcp"\n'
        f"headers = {{ Authorization = {toml_value(header)} }}\n"
    )
    layout.own(path)
    return path


def test_an_http_upstreams_key_file_in_view_is_refused(layout: Layout) -> None:
    """An HTTP upstream's token file is a key: in the workspace it is refused, outside it
    the run goes on (no working directory or program to protect for a URL)."""
    inside = layout.ws / "token"
    inside.write_text("s3cret\n")
    layout.own(inside)
    _http_upstream_config(layout, inside)
    done = layout.run("--workspace", str(layout.ws), "--dry-run")
    _refused(done, "the Authorization header's key file of upstream 'web'", "--workspace")
    outside = layout.cfg / "token"
    outside.write_text("s3cret\n")
    layout.own(outside)
    _http_upstream_config(layout, outside)
    done = layout.run("--workspace", str(layout.ws), "--dry-run")
    assert done.returncode == 0, done.stderr


def test_json_status_inside_what_the_sandbox_sees_is_refused(layout: Layout) -> None:
    """``glove exec --json-status`` into the workspace or a bind could be swapped: refused."""
    for flags in (
        ("--workspace", str(layout.ws), "--json-status", str(layout.ws / "status.json")),
        ("--workspace", str(layout.ws), "--bind", f"{layout.cfg}:/mnt/c:rw",
         "--json-status", str(layout.cfg / "status.json")),
    ):  # fmt: skip
        done = layout.glove("exec", *flags, agent=["/bin/sh", "-c", "touch ran"])
        _refused(done, "the --json-status file")
        assert not (layout.ws / "ran").exists()
    outside = layout.base / "status.json"
    done = layout.glove(
        "exec", "--workspace", str(layout.ws), "--json-status", str(outside), agent=["true"]
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(outside.read_text())["outcome"] == "exited"


ATTACK = r"""
cfg={cfg}
for f in glove.toml policy.toml audit.log; do
  cat "$cfg/$f" >/dev/null 2>&1 && echo "READ $f"
  printf '{{"forged":true}}\n' >> "$cfg/$f" 2>/dev/null && echo "APPENDED $f"
  mv "$cfg/$f" "$cfg/$f.moved" 2>/dev/null && echo "RENAMED $f"
  ln "$cfg/$f" "$PWD/hard-$f" 2>/dev/null && echo "LINKED $f"
  ln -s "$cfg/$f" "$PWD/sym-$f" && cat "$PWD/sym-$f" >/dev/null 2>&1 && echo "FOLLOWED $f"
done
mv "$cfg" "$cfg.moved" 2>/dev/null && echo "RENAMED cfg"
mkdir -p "$cfg" 2>/dev/null && echo x > "$cfg/policy.toml" 2>/dev/null && echo "PLANTED"
ls -a "$(dirname "$cfg")" | tr '\n' ' '; echo
echo done
"""


def test_the_agent_reaches_none_of_the_mediator_files(layout: Layout) -> None:
    """Read, append, rename, hard link, planted symlink: nothing inside reaches the files."""
    before = {name: (layout.cfg / name).read_bytes() for name in ("glove.toml", "policy.toml")}
    script = ATTACK.format(cfg=layout.cfg)
    done = layout.run("--workspace", str(layout.ws), agent=["/bin/sh", "-c", script])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("done"), done.stdout
    for verb in ("READ", "APPENDED", "RENAMED", "LINKED", "FOLLOWED", "PLANTED"):
        assert verb not in done.stdout, done.stdout
    listing = done.stdout.strip().splitlines()[-2].split()
    assert "cfg" not in listing, listing  # only the workspace is shown of that folder
    assert "ws" in listing, listing
    for name, content in before.items():
        assert (layout.cfg / name).read_bytes() == content
    records = (
        (layout.cfg / "audit.log").read_text().splitlines()
        if (layout.cfg / "audit.log").exists()
        else []
    )
    assert all("forged" not in line for line in records)
    # The symlinks the agent planted are still there, pointing at the mediator's files.
    assert (layout.ws / "sym-policy.toml").is_symlink()


@pytest.mark.parametrize(("target", "asked"), [("policy.toml", "link"), (".", "link/policy.toml")])
def test_a_planted_symlink_does_not_lead_the_filesystem_server_out(
    layout: Layout, target: str, asked: str
) -> None:
    """The host-side filesystem server, asked for a planted link to the mediator, refuses."""
    server = UNPRIV_FS_SERVER if layout.who == "unpriv" else FS_SERVER
    (layout.ws / "link").symlink_to(layout.cfg / target)
    client_dir = layout.base / "client"  # the work tree may be unreadable to the test user
    client_dir.mkdir()
    shutil.copy(EXAMPLE_AGENT, client_dir)
    layout.own(client_dir, client_dir / EXAMPLE_AGENT.name)
    (layout.cfg / "glove.toml").write_text(
        'policy = "policy.toml"\naudit = "audit.log"\n[upstreams.fs]\n'
        f"command = {toml_value([str(server), str(layout.ws)])}\n"
        'inherit_env = ["PATH", "HOME"]\n'
    )
    (layout.cfg / "policy.toml").write_text('version = 1\n\n[[tools]]\nname = "fs__*"\n')
    script = (
        "import json, os, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from agent import McpClient\n"
        "c = McpClient([os.environ['GLOVE_MCP_COMMAND']])\n"
        "c.request('initialize', {'protocolVersion': '2025-11-25', 'capabilities': {},"
        " 'clientInfo': {'name': 't', 'version': '1'}})\n"
        "c.notify('notifications/initialized')\n"
        "call = {'name': 'fs__read_text_file', 'arguments': {'path': sys.argv[2]}}\n"
        "print(json.dumps(c.request('tools/call', call)))\n"
    )
    done = layout.run(
        "--workspace", str(layout.ws), "--bind", str(client_dir),
        agent=["/usr/bin/python3", "-c", script, str(client_dir), str(layout.ws / asked)],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout.strip().splitlines()[-1])
    assert "echo__echo" not in json.dumps(reply), (
        "the server followed the link out of the workspace"
    )
    assert reply.get("error") or reply["result"].get("isError"), reply
