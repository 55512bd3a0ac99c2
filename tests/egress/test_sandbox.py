"""The helper inside a real Glove sandbox (glove.container): it works there and costs one PID.

The library path (``glove.container.run_async``): a spec in ``network = "proxy"`` mode (the
route-less namespace, port 53 bindable without privilege) with the helper bound at
/opt/glove and the channel passed as descriptor 3; the DNS stub included.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.actors import running
from glove.container import Bind, Limits, SandboxSpec, run_async
from glove.egress import GUEST_DIR, EgressProxy, RuleSet, StaticResolver, prepare_guest

from ._origin import origin
from .conftest import ListSink

SYSTEM_BINDS = (
    Bind("/usr"),
    Bind("/bin", optional=True),
    Bind("/lib", optional=True),
    Bind("/lib64", optional=True),
    Bind("/etc/ssl/certs", optional=True),
)
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
#: Processes the count probe may start before the limit stops it.
PIDS_LIMIT = 12
COUNT_FORKS = """
import os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
print(children, flush=True)
os.killpg(0, 9)
"""


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A private workspace."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as path:
        yield Path(path)


async def _sandboxed(
    workspace: Path,
    argv: tuple[str, ...],
    *,
    limits: Limits | None = None,
    allow: list[str] | None = None,
) -> tuple[int | None, str, ListSink]:
    guest, host_end, guest_end = prepare_guest(workspace / "guest")
    sink = ListSink()
    proxy = EgressProxy(
        host_end, RuleSet.load(allow or []), sink, session="sandbox",
        resolver=StaticResolver({"web.test": ["127.0.0.1"]}),
    )  # fmt: skip
    spec = SandboxSpec(
        argv=guest.command(argv),
        network="proxy",
        binds=(*SYSTEM_BINDS, Bind(guest.bind_dir, GUEST_DIR)),
        env={**ENV, **guest.env},
        pass_fds=guest.pass_fds,
        limits=limits or Limits(),
    )
    with tempfile.TemporaryFile() as out, open(os.devnull, "rb") as null:
        try:
            async with running(proxy):
                result = await run_async(spec, stdin=null.fileno(), stdout=out.fileno())
        finally:
            guest_end.close()
        out.seek(0)
        return result.exit_code, out.read().decode(), sink


async def test_curl_through_the_helper_in_a_glove_sandbox(workspace: Path) -> None:
    """Inside the real sandbox, curl reaches an allowed host-loopback origin via the proxy."""
    with origin(workspace) as web:
        rules = [f"web.test:{web.port}", f"127.0.0.1:{web.port}"]
        code, out, sink = await _sandboxed(
            workspace,
            ("sh", "-c", (f"curl -sS --max-time 10 http://web.test:{web.port}/hello; "
                          f"curl -sS --noproxy '*' --max-time 3 http://127.0.0.1:{web.port}/; "
                          "echo rc=$?")),
            allow=rules,
        )  # fmt: skip
    assert (code, out) == (0, "hello from the origin\nrc=7\n")
    assert [r["decision"] for r in sink.records if r["kind"] == "egress"] == ["allow"]


def _python_probe() -> tuple[str, ...]:
    return ("/usr/bin/python3", "-c", COUNT_FORKS)


@pytest.mark.skipif(os.getuid() != 0, reason="the cgroup pids limit needs a root launcher")
async def test_the_helper_takes_exactly_one_pid_of_the_limit(workspace: Path) -> None:
    """Under the same pids limit, the command behind the helper can start one process fewer."""
    limits = Limits(pids=PIDS_LIMIT)
    spec = SandboxSpec(argv=_python_probe(), binds=SYSTEM_BINDS, env=ENV, limits=limits)
    with tempfile.TemporaryFile() as out, open(os.devnull, "rb") as null:
        await run_async(spec, stdin=null.fileno(), stdout=out.fileno())
        out.seek(0)
        alone = int(out.read().decode().split()[0])
    _, behind, _ = await _sandboxed(workspace, _python_probe(), limits=limits)
    assert alone > 2
    assert int(behind.split()[0]) == alone - 1


def test_prepare_guest_plans_the_sandbox(tmp_path: Path) -> None:
    """The plan: a 0700 directory with the helper (0555) and resolv.conf, fd 3, the command."""
    guest, host_end, guest_end = prepare_guest(tmp_path / "g")
    with host_end, guest_end:
        assert guest.pass_fds == {3: guest_end.fileno()}
        assert oct(Path(guest.bind_dir).stat().st_mode & 0o777) == "0o700"
        helper = Path(guest.bind_dir, "glove-egress")
        assert oct(helper.stat().st_mode & 0o777) == "0o555"
        assert Path(guest.resolv_conf).read_text().count("nameserver 127.0.0.1") == 1
        assert guest.command(["agent", "-x"], mcp=True) == (
            "/usr/bin/python3", "/opt/glove/glove-egress", "3", "--mcp", "--", "agent", "-x",
        )  # fmt: skip
        assert guest.env["HTTPS_PROXY"] == "http://127.0.0.1:3128"
        assert host_end.family == socket.AF_UNIX
