"""glove.container picks its backend by platform, and off Linux never imports linux/.

A real macOS is not available here, so the other platforms are simulated honestly: a fresh
interpreter sets ``sys.platform`` before its first import of ``glove``, which is exactly the
value ``glove.container._backend`` reads. What the simulation cannot show (that the macOS
branch then works on macOS) is not claimed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import glove.container

_PROBE = """
import json, sys
sys.platform = {platform!r}
import glove.container as c
from glove.container import SandboxSpec, UnsupportedPlatform
report = {{
    "linux_modules": sorted(m for m in sys.modules if m.startswith("glove.container.linux")),
    "run": c.run.__module__,
    "probe": c.probe_host_limits.__module__,
    "all": c.__all__,
}}
try:
    c.run(SandboxSpec(argv=("true",)))
except UnsupportedPlatform as exc:
    report["run_refused"] = str(exc)
try:
    c.launch(SandboxSpec(argv=("true",)))
except UnsupportedPlatform as exc:
    report["launch_refused"] = str(exc)
report["platform_in_plan"] = c.probe_host_limits().platform
print(json.dumps(report))
"""


def _simulate(platform: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(platform=platform)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("platform", ["darwin", "freebsd14"])
def test_non_linux_import_loads_nothing_from_linux(platform: str) -> None:
    """On another platform the package imports, exports the same names, and loads no linux/."""
    report = _simulate(platform)
    assert report["linux_modules"] == []
    assert report["run"] == "glove.container.macos._run"
    assert report["probe"] == "glove.container.macos._run"
    assert report["all"] == glove.container.__all__
    assert "Linux-only" in str(report["launch_refused"])
    assert report["platform_in_plan"] == "macos"


def test_simulated_darwin_run_needs_sandbox_exec() -> None:
    """Simulated darwin takes the macOS path, which refuses without /usr/bin/sandbox-exec."""
    assert "sandbox-exec is missing" in str(_simulate("darwin")["run_refused"])


def test_other_unix_run_is_refused_as_not_macos() -> None:
    """On a platform that is neither Linux nor macOS, run refuses with UnsupportedPlatform."""
    assert "runs only on macOS" in str(_simulate("freebsd14")["run_refused"])


def test_linux_keeps_its_backend_and_public_api() -> None:
    """On Linux the names come from linux/ as before, and every public name is still there."""
    assert glove.container.run.__module__ == "glove.container.linux._supervise"
    assert glove.container.launch.__module__ == "glove.container.linux._launch"
    assert glove.container.probe_host_limits.__module__ == "glove.container.linux._cgroups"
    assert glove.container.create_file_no_symlinks.__module__ == "glove.container.linux._syscalls"
    before_the_seam = [
        "EXIT_NOT_EXECUTABLE", "EXIT_NOT_FOUND", "EXIT_SETUP_FAILED", "LIMIT_NAMES", "Bind",
        "Durations", "HostLimitSupport", "LimitPlan", "LimitRefused", "LimitReport",
        "LimitSupport", "Limits", "OutputReport", "Overrides", "Profile", "ProfileError",
        "Retained", "RetainedReport", "SandboxError", "SandboxProcess", "SandboxResult",
        "SandboxSetupError", "SandboxSpec", "SpecError", "UnsupportedPlatform", "build_spec",
        "create_file_no_symlinks", "decode_profile", "launch", "limit_support", "load_profile",
        "parse_seconds", "parse_size", "plan_limits", "probe_host_limits", "run", "run_async",
        "self_test",
    ]  # fmt: skip
    assert set(before_the_seam) <= set(glove.container.__all__)
