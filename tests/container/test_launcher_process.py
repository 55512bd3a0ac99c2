"""The launcher process for real: forked before any thread, it clones each sandbox, hands
its descriptors back with SCM_RIGHTS, reports exits, refuses launches with typed errors and
malformed records by exiting; killed, it takes its sandboxes with it and its client says so.

Each case runs in a fresh interpreter (the launcher must be forked while the process has one
thread), as root and as the unprivileged user.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from glove.exits import EXIT_INTERNAL

from .conftest import GloveExec

DRIVER = r"""
import asyncio, json, os, signal, socket, sys, threading, time
from glove.container import Bind, SandboxSpec, SpecError
from glove.container.linux import (AsyncSandbox, LauncherClient, LauncherGone, fork_launcher,
                                   install_launcher)
from glove.container.linux._launcher_codec import encode, Exited

case, workspace = sys.argv[1:3]
binds = tuple(Bind(p, optional=p != "/usr") for p in ("/usr", "/bin", "/lib", "/lib64"))

def spec(*argv, **extra):
    extra.setdefault("binds", binds)
    return SandboxSpec(argv=argv, workspace=workspace, env={"PATH": "/usr/bin:/bin"}, **extra)

def ppid(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("PPid:"):
            return int(line.split()[1])

if case == "threads":
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
    try:
        fork_launcher()
    except Exception as exc:
        print(json.dumps({"refused": type(exc).__name__, "message": str(exc)}))
    sys.exit(0)

handle = fork_launcher()

if case == "malformed":
    channel = socket.socket(fileno=handle.channel)
    hello = channel.recv(4096)
    bad = sys.argv[3]
    if bad == "garbage":
        channel.send(b"\xc1\xc1 not msgpack")
    elif bad == "descriptors":  # a launch that says 3 descriptors and carries one
        r, w = os.pipe()
        from glove.container.linux._launcher_codec import Launch
        record = encode(Launch(id=1, spec=spec("true"), stdio=(True, True, True)))
        socket.send_fds(channel, [record], [w])
    else:  # a message gloved never sends
        channel.send(encode(Exited(id=1, wait_status=0)))
    _, status = os.waitpid(handle.pid, 0)
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "hello": len(hello) > 0}))
    sys.exit(0)

async def main():
    client = LauncherClient(handle)
    hello = await client.start()
    install_launcher(client)
    out = {"launcher": hello.pid, "me": os.getpid(), "launcher_ppid": ppid(hello.pid)}
    chunks = []
    def on_output(stream, data):
        chunks.append(data.decode())
    if case == "fds":
        # fd 3 is a pipe of ours; stdin a pipe we hold open until we have looked
        r3, w3 = os.pipe2(os.O_CLOEXEC)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        box = AsyncSandbox(spec("/bin/sh", "-c", "echo via-fd3 >&3; read x; echo out; exit 5",
                                pass_fds={3: w3}), on_output=on_output, stdin=in_r)
        await box.start()
        os.close(w3)
        out["fd3"] = os.read(r3, 100).decode()
        out["init_ppid"] = ppid(box.process.pid)
        out["remote"] = type(box.process).__name__
        os.write(in_w, b"go\n"); os.close(in_w)
        result = await box.wait()
        box.close()
        out.update(outcome=result.outcome, exit_code=result.exit_code, output="".join(chunks))
        out["launcher_running"] = client.running
    elif case == "late":
        # The loop is busy while the command runs and ends: the launch's reply and its exit
        # wait in the channel together, and both are read before start() resumes.
        box = AsyncSandbox(spec("/bin/sh", "-c", "echo late; exit 4"), on_output=on_output)
        starting = asyncio.ensure_future(box.start())
        await asyncio.sleep(0)  # the request is sent; start() waits for the reply
        time.sleep(2.0)
        await starting
        result = await box.wait()
        box.close()
        out.update(outcome=result.outcome, exit_code=result.exit_code, error=result.error,
                   output="".join(chunks))
    elif case == "refused":
        for name, bad in (("bind", spec("true", binds=(Bind("/nonexistent-x"),))),
                          ("datagram", None)):
            if bad is None:
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                bad = spec("true", pass_fds={3: a.fileno()})
            try:
                await client.launch(bad, (-1, -1, -1))
                out[name] = "launched"
            except SpecError as exc:
                out[name] = type(exc).__name__
        box = AsyncSandbox(spec("/bin/true"), on_output=on_output)  # it still launches
        await box.start(); result = await box.wait(); box.close()
        out["after"] = result.outcome
    elif case == "forbidden":
        from glove.container import ProjectionRecord
        from glove.container.linux import (InProcessLaunchForbidden, forbid_in_process_launch,
                                           launch)
        forbid_in_process_launch()
        try:
            launch(spec("/bin/true"))
            out["in_process"] = "launched"
        except InProcessLaunchForbidden as exc:
            out["in_process"] = type(exc).__name__
        box = AsyncSandbox(spec("/bin/true"), on_output=on_output)  # the launcher clones it
        await box.start(); result = await box.wait(); box.close()
        out["through_launcher"] = result.outcome
        class Portable:  # a projection this launcher (forked without a loader) refuses
            target = "/p.md"
            def __init__(self):
                self.fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
            def export(self):
                return ProjectionRecord(alias="p", target=self.target, digest="sha256:" + "0" * 64,
                                        size=0, freeze_method="detached-tmpfs", kind="bundle",
                                        inode=(0, 0)), self.fd
            def park(self, directory): pass
            def attach(self, root_fd): pass
            def close(self):
                if self.fd >= 0:
                    os.close(self.fd); self.fd = -1
        portable = Portable()
        box = AsyncSandbox(spec("/bin/true"), on_output=on_output, projections=(portable,))
        await box.start(); result = await box.wait(); box.close()
        out["projection"] = [result.outcome, result.error, portable.fd]
    elif case == "kill":
        box = AsyncSandbox(spec("/bin/sleep", "300"), on_output=on_output)
        await box.start()
        init = box.process.pid
        os.kill(hello.pid, signal.SIGKILL)
        try:
            await client.ended
        except LauncherGone as exc:
            out["ended"] = type(exc).__name__
        result = await box.wait()
        box.close()
        out["outcome"] = result.outcome
        os.waitpid(hello.pid, 0)
        while os.path.exists(f"/proc/{init}"):  # the init dies with its launcher
            await asyncio.sleep(0.02)
        out["init_gone"] = True
        try:
            await client.launch(spec("true"), (-1, -1, -1))
        except LauncherGone as exc:
            out["after"] = type(exc).__name__
    print(json.dumps(out))
    if case != "kill":
        client.close()
        out["reaped"] = client.reap()

asyncio.run(main())
"""


def _drive(glove_exec: GloveExec, *args: str) -> dict[str, Any]:
    argv = [*glove_exec.wrap, glove_exec.python, "-c", DRIVER, args[0], str(glove_exec.workspace)]
    done = subprocess.run(
        [*argv, *args[1:]], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_descriptors_pass_both_ways_and_the_exit_is_reported(glove_exec: GloveExec) -> None:
    """fd 3 and stdin go to the launcher and into the command; the pidfd, status pipe and
    output come back; the init is the launcher's child, the launcher ours; exit 5 is seen."""
    out = _drive(glove_exec, "fds")
    assert out["fd3"] == "via-fd3\n"
    assert out["remote"] == "RemoteSandboxProcess"
    assert out["init_ppid"] == out["launcher"]
    assert out["launcher_ppid"] == out["me"]
    assert (out["outcome"], out["exit_code"], out["output"]) == ("exited", 5, "out\n")
    assert out["launcher_running"] == 0


def test_an_exit_read_before_the_launch_resumed_keeps_the_result_and_output(
    glove_exec: GloveExec,
) -> None:
    """The launcher's exit record can arrive in the same wakeup as its launch reply (a
    busy gloved): the result is still the command's, with its output (it was a
    ``setup_error`` "[Errno 9] Bad file descriptor", the output lost)."""
    out = _drive(glove_exec, "late")
    assert (out["outcome"], out["exit_code"], out["error"]) == ("exited", 4, None)
    assert out["output"] == "late\n"


def test_a_refused_launch_is_a_typed_error_and_the_launcher_goes_on(
    glove_exec: GloveExec,
) -> None:
    out = _drive(glove_exec, "refused")
    assert out["bind"] == "SpecError"
    assert out["datagram"] == "SpecError"
    assert out["after"] == "exited"


def test_a_killed_launcher_takes_its_sandboxes_and_fails_its_client(
    glove_exec: GloveExec,
) -> None:
    out = _drive(glove_exec, "kill")
    assert out["ended"] == "LauncherGone"
    assert out["outcome"] != "exited"
    assert out["init_gone"] is True
    assert out["after"] == "LauncherGone"


@pytest.mark.parametrize("bad", ["garbage", "descriptors", "unexpected"])
def test_the_launcher_exits_on_a_malformed_record(glove_exec: GloveExec, bad: str) -> None:
    """A record the codec refuses ends the launcher (gloved then fails closed)."""
    out = _drive(glove_exec, "malformed", bad)
    assert out["hello"] is True
    assert out["exit"] == EXIT_INTERNAL


def test_once_forbidden_nothing_launches_in_process_and_the_launcher_still_clones(
    glove_exec: GloveExec,
) -> None:
    """After ``forbid_in_process_launch`` an in-process launch raises its typed error; the
    launcher still clones; a projection it has no loader for is a setup error (its
    descriptor closed here), nothing ran."""
    out = _drive(glove_exec, "forbidden")
    assert out["in_process"] == "InProcessLaunchForbidden"
    assert out["through_launcher"] == "exited"
    outcome, error, fd = out["projection"]
    assert outcome == "setup_error"
    assert "takes no projections" in error
    assert fd == -1


def test_the_launcher_is_never_forked_from_a_threaded_process(glove_exec: GloveExec) -> None:
    out = _drive(glove_exec, "threads")
    assert out["refused"] == "SandboxSetupError"
