"""The seccomp filter as the command meets it: denials, ENOSYS for clone3, what still works."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from tests.container.conftest import GloveExec

# Each entry: name -> (syscall number on x86_64, args). Made from inside by ctypes.
PROBE = r"""
import ctypes, json, os, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = json.loads(os.environ["CALLS"])
out = {}
for name, (nr, args) in calls.items():
    pid = os.fork()
    if pid == 0:
        r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
        e = ctypes.get_errno()
        word = "ok" if r >= 0 else errno.errorcode.get(e, str(e))
        os.write(1, f"{name} {word}\n".encode())
        os._exit(0)
    os.waitpid(pid, 0)
"""
TIOCSTI_HIGH_BITS = 0x5412 | (1 << 32)
CALLS = {
    "ptrace_traceme": (101, [0, 0, 0, 0]),
    "process_vm_readv": (310, [1, 0, 0, 0, 0, 0]),
    "keyctl": (250, [0, 0, 0, 0]),
    "mount": (165, [0, 0, 0, 0, 0]),
    "fsopen": (430, [0, 0]),
    "unshare_user": (272, [0x10000000]),
    "setns": (308, [0, 0]),
    "clone3": (435, [0, 0]),
    "clone_newnet": (56, [0x40000000 | 17, 0, 0, 0, 0]),
    "bpf": (321, [0, 0, 0]),
    "perf_event_open": (298, [0, 0, 0, 0, 0]),
    "userfaultfd": (323, [0]),
    "io_uring_setup": (425, [1, 0]),
    "open_by_handle_at": (304, [0, 0, 0]),
    "ioctl_tiocsti_high_bits": (16, [0, TIOCSTI_HIGH_BITS, 0]),
    "socket_netlink_uevent": (41, [16, 3, 15]),
    "socket_vsock": (41, [40, 1, 0]),
    "socket_raw": (41, [2, 3, 1]),
    "chmod_setuid": (90, [0, 0o4755]),
    "getpid": (39, []),
    "socket_inet": (41, [2, 1, 0]),
    "socket_netlink_route": (41, [16, 3, 0]),
}
EXPECTED = dict.fromkeys(CALLS, "EPERM") | {
    "clone3": "ENOSYS",
    "getpid": "ok",
    "socket_inet": "ok",
    "socket_netlink_route": "ok",
}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="syscall numbers are x86_64")
def test_seccomp_denials_from_inside(glove_exec: GloveExec) -> None:
    """Each denied call fails with the planned errno; ordinary calls still work."""
    done = glove_exec("python3", "-c", PROBE, flags=("--env", f"CALLS={json.dumps(CALLS)}"))
    seen = dict(line.split() for line in done.stdout.splitlines())
    assert seen == EXPECTED
    assert done.status["violation"] == "seccomp"
    denied = done.status["denied_syscalls"]
    assert denied["ptrace"] == 1
    assert denied["ioctl"] == 1
    assert denied["socket"] == 3
    assert "getpid" not in denied
    assert "clone3" not in denied  # ENOSYS for the libc fallback is not a violation
    # The namespace probes are refused too, but counted apart: they are not violations.
    assert "unshare" not in denied
    assert "clone" not in denied
    assert "io_uring_setup" not in denied
    assert done.status["expected_denials"] == {
        "userns_probe": 1,
        "namespace_probe": 1,
        "io_uring_probe": 1,
    }


def test_clean_run_reports_no_violation(glove_exec: GloveExec) -> None:
    """A command that stays within the filter has no violation and no denied calls."""
    done = glove_exec.sh("ls / >/dev/null; python3 -c 'import socket; socket.socket().close()'")
    assert done.rc == 0
    assert done.status["violation"] is None
    assert done.status["denied_syscalls"] == {}
    assert done.status["expected_denials"] == {}


def test_foreign_architecture_entry_is_killed_and_reported(glove_exec: GloveExec) -> None:
    """An int 0x80 (i386) syscall kills the process; the result says seccomp violation."""
    # mmap an executable page holding: mov eax, 20 (getpid i386); int 0x80; ret
    code = (
        "import ctypes, mmap\n"
        "buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "buf.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))\n"
        "addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))\n"
        "ctypes.CFUNCTYPE(ctypes.c_int)(addr)()\n"
        "print('survived')\n"
    )
    done = glove_exec("python3", "-c", code)
    assert "survived" not in done.stdout
    assert done.rc == 128 + 31
    assert done.status["violation"] == "seccomp"


#: In a fresh interpreter: load pyseccomp (by soname, or with ``find_library`` when argv[1] is
#: ``broken``: a soname that does not exist), compile both filters, say what was loaded.
LOAD_BY_SONAME = """
import ctypes, json, sys
from glove.container.linux import _seccomp
if sys.argv[1] == "broken":
    _seccomp._SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.999"}
plain, notify = _seccomp.compile_program(False, False), _seccomp.compile_program(True, False)
loaded = {name: name in sys.modules for name in ("pyseccomp", "subprocess", "tempfile")}
import ctypes.util
loaded["lookup"] = ctypes.util.find_library("c")
print(json.dumps({**loaded, "sizes": [len(plain), len(notify)]}))
"""


@pytest.mark.parametrize("sonames", ["working", "broken"])
def test_libseccomp_loads_by_soname_and_falls_back_to_the_lookup(sonames: str) -> None:
    """pyseccomp comes up with libc and libseccomp loaded by soname, without ``ldconfig``
    (``ctypes.util`` and its ``subprocess`` stay unloaded, and the real ``find_library`` is
    there afterwards); a soname that does not load falls back to pyseccomp's own lookup, and
    the filters are the same either way."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_BY_SONAME, sonames],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pyseccomp"]
    assert report["lookup"] == "libc.so.6"  # the real ctypes.util, restored
    assert report["subprocess"] is (sonames == "broken")
    assert report["sizes"][0] > 0
    assert report["sizes"][1] > 0
