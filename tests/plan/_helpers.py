"""The example plan of issue 9 and a local policy that accepts it, for the plan tests."""

from __future__ import annotations

import json
from typing import Any

from glove.plan import ExposurePolicy, HarnessPolicy, LocalPolicy

LIMITS: dict[str, Any] = {
    "wall_time_s": 30,
    "cpu_time_s": 10,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}
PLAN: dict[str, Any] = {
    "version": 1,
    "harness": "demo",
    "exposures": ["work"],
    "limits": LIMITS,
    "network": "none",
    "terminal": "pipes",
}
#: The canonical bytes of PLAN (RFC 8785): sorted keys, no whitespace, 30 and not 30.0.
EXAMPLE_CANONICAL = (
    b'{"exposures":["work"],"harness":"demo","limits":{"cpu_time_s":10,"disk_bytes":67108864,'
    b'"memory_bytes":268435456,"output_bytes":1048576,"pids":64,"wall_time_s":30},'
    b'"network":"none","terminal":"pipes","version":1}'
)
#: The whole-sandbox mechanism of each limit on a host with cgroup v1 controllers.
FULL_MECHANISMS: dict[str, str | None] = {
    "wall_time_s": "watchdog",
    "cpu_time_s": "cgroup-v1-cpuacct-watchdog",
    "memory_bytes": "cgroup-v1-memory",
    "pids": "cgroup-v1-pids",
    "disk_bytes": "tmpfs-size",
    "output_bytes": "pipe-accounting",
}


def plan_doc(**changes: Any) -> dict[str, Any]:
    """The example plan as a dict, top-level members replaced (``None`` removes one)."""
    doc = {**PLAN, "limits": dict(LIMITS), **changes}
    return {key: value for key, value in doc.items() if value is not None}


def plan_bytes(**changes: Any) -> bytes:
    """The example plan as JSON bytes, top-level members replaced (``None`` removes one)."""
    return json.dumps(plan_doc(**changes)).encode()


def limits(**changes: Any) -> dict[str, Any]:
    """The example limits, members replaced (``None`` removes one)."""
    doc = {**LIMITS, **changes}
    return {key: value for key, value in doc.items() if value is not None}


def local_policy(**changes: Any) -> LocalPolicy:
    """A local policy under which the example plan is valid, fields replaced."""
    fields: dict[str, Any] = {
        "harnesses": {"demo": HarnessPolicy(argv=("/bin/true",), env={"HOME": "/home/agent"})},
        "exposures": {
            "work": ExposurePolicy(generation=4, mode="rw", target="/workspace"),
            "ref": ExposurePolicy(generation=1, mode="ro", target="/ref"),
            "gone": ExposurePolicy(generation=2, mode="ro", target="/gone", revoked=True),
        },
        "limits_max": {
            "wall_time_s": 3600,
            "cpu_time_s": 3600,
            "memory_bytes": 2**32,
            "pids": 512,
            "disk_bytes": 2**30,
            "output_bytes": 2**24,
        },
        "mechanisms": dict(FULL_MECHANISMS),
        "terminals": frozenset({"pipes", "pty"}),
    }
    fields.update(changes)
    return LocalPolicy(**fields)
