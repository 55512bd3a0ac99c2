"""Network mode ``proxy`` in the sandbox itself: the profile table, and port 53 for the helper."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import msgspec
import pytest

from glove.container import (
    Bind,
    ProfileError,
    SandboxSpec,
    UnsupportedPlatform,
    decode_profile,
    run,
)
from tests.conftest import Unpriv

PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
#: Inside: the per-netns value, whether 53 binds, and whether the command can change it.
PROBE = textwrap.dedent(
    f"""
    import json, socket
    report = {{"start": int(open({PORT_START!r}).read())}}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", 53))
        report["bound"] = True
    except OSError as exc:
        report["bound"] = exc.strerror
    try:
        with open({PORT_START!r}, "w") as f:
            f.write("0")
        report["changed"] = True
    except OSError as exc:
        report["changed"] = exc.strerror
    print(json.dumps(report))
    """
)
SYSTEM = (Bind("/usr"), *(Bind(p, optional=True) for p in ("/bin", "/lib", "/lib64")))
RUNNER = textwrap.dedent(
    """
    import sys
    from glove.container import Bind, SandboxSpec, run
    binds = (Bind("/usr"), *(Bind(p, optional=True) for p in ("/bin", "/lib", "/lib64")))
    spec = SandboxSpec(argv=("/usr/bin/python3", "-c", sys.argv[2]), binds=binds,
                       env={"PATH": "/usr/bin"}, network=sys.argv[1])
    raise SystemExit(run(spec).exit_code)
    """
)


def _host_port_start() -> int:
    return int(Path(PORT_START).read_text())


def _probe(mode: str, unpriv: Unpriv | None, tmp_path: Path) -> dict[str, object]:
    if unpriv is None:
        out = tmp_path / "out"
        with out.open("wb") as sink, open(os.devnull, "rb") as null:
            spec = SandboxSpec(
                argv=("/usr/bin/python3", "-c", PROBE),
                binds=SYSTEM,
                env={"PATH": "/usr/bin"},
                network=mode,  # type: ignore[arg-type]
            )
            assert run(spec, stdin=null.fileno(), stdout=sink.fileno()).exit_code == 0
        text = out.read_text()
    else:
        done = subprocess.run(
            unpriv.command(unpriv.python, "-c", RUNNER, mode, PROBE),
            capture_output=True, text=True, timeout=60, cwd="/", check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        text = done.stdout
    report: dict[str, object] = json.loads(text)
    return report


@pytest.mark.parametrize("who", ["root", "unprivileged"])
def test_proxy_mode_lets_the_helper_bind_53_and_nothing_else_changes(
    who: str, unpriv: Unpriv, tmp_path: Path
) -> None:
    """In proxy mode ports from 53 up bind without privilege, only in the sandbox's netns."""
    before = _host_port_start()
    report = _probe("proxy", unpriv if who == "unprivileged" else None, tmp_path)
    assert report["start"] == 53
    assert report["bound"] is True
    assert report["changed"] != True  # noqa: E712 - the strerror, never True
    assert _host_port_start() == before


def test_mode_none_keeps_privileged_ports(tmp_path: Path) -> None:
    """Offline, the sandbox keeps the kernel's default: 53 does not bind without privilege."""
    report = _probe("none", None, tmp_path)
    assert report["start"] == _host_port_start()
    assert report["bound"] == "Permission denied"


def test_profile_network_table_is_strict(tmp_path: Path) -> None:
    """``[network]`` takes mode, allow and deny; typos and rules without proxy are refused."""
    profile = decode_profile(
        b'[network]\nmode = "proxy"\nallow = ["pypi.org:443"]\ndeny = ["evil.org"]\n', "p"
    )
    assert (profile.network.mode, profile.network.allow, profile.network.deny) == (
        "proxy", ["pypi.org:443"], ["evil.org"],
    )  # fmt: skip
    with pytest.raises(ProfileError, match=r"unknown field `alow` - at `\$\.network`"):
        decode_profile(b'[network]\nmode = "proxy"\nalow = ["x.org"]\n', "p")
    with pytest.raises(ProfileError, match="need mode"):
        decode_profile(b'[network]\nallow = ["x.org"]\n', "p")
    with pytest.raises(ProfileError, match="mode"):
        decode_profile(b'[network]\nmode = "host"\n', "p")
    base = tmp_path / "base.toml"
    base.write_text('[network]\nmode = "proxy"\nallow = ["a.org"]\ndeny = ["b.a.org"]\n')
    child = decode_profile(
        b'extends = "base.toml"\n[network]\nallow = ["c.org"]\n', "child", folder=tmp_path
    )
    assert (child.network.allow, child.network.deny) == (["a.org", "c.org"], ["b.a.org"])


def test_spec_accepts_proxy_and_macos_refuses_it() -> None:
    """``SandboxSpec.network`` is ``none`` or ``proxy``; the macOS backend has no proxy."""
    spec = SandboxSpec(argv=("true",), network="proxy")
    assert spec.network == "proxy"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"argv": ["true"], "network": "host"}, SandboxSpec)
    from glove.container.macos._run import _refuse_unsupported

    with pytest.raises(UnsupportedPlatform, match="no proxy"):
        _refuse_unsupported(spec)
