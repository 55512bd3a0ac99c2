"""Policy engine benchmark: decisions per second, and the safe regex versus Python's ``re``.

Measures, in one process:

* ``check_tool`` and ``check_call`` throughput on a realistic filesystem policy (exact
  names, a glob, path containment, a numeric bound, an ``each`` over an array, a pin);
* the cost of the linear-time regex subset against ``re`` on a benign pattern (the price
  of safety), and both on a catastrophic pattern (the reason for it): ``re`` is measured
  on short inputs only, since each extra character doubles its time.

    .venv/bin/python benchmarks/policy/bench.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable

from glove.policy import ToolDefinition, definition_digests, parse_policy
from glove.policy._regex import SafeRegex

DEFINITION = ToolDefinition(
    "read_text_file",
    "Read a file as text.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "head": {"type": "number"}},
        "required": ["path"],
    },
)


def _policy_text() -> str:
    description, schema = definition_digests(DEFINITION)
    return f"""
version = 1

[[tools]]
name = "fs__write_*"
effect = "deny"

[[tools]]
name = "fs__read_text_file"
description_sha256 = "{description}"
schema_sha256 = "{schema}"
[[tools.args]]
pointer = "/path"
op = "path"
roots = ["/srv/work", "/tmp/scratch"]
[[tools.args]]
pointer = "/head"
op = "range"
min = 1
max = 10000
optional = true

[[tools]]
name = "fs__read_multiple_files"
strict_args = true
[[tools.args]]
pointer = "/paths"
op = "length"
max = 16
[[tools.args]]
pointer = "/paths"
op = "path"
each = true
roots = ["/srv/work"]

[[tools]]
name = "git__*"
[[tools.args]]
pointer = "/repo_path"
op = "in"
values = ["/srv/work/repo", "/srv/work/docs"]
"""


def _rate(action: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``action`` over about ``seconds`` of wall time."""
    batch = 1000
    calls = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(batch):
            action()
        calls += batch
    return calls / elapsed


def _once(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    seconds = parser.parse_args().seconds

    policy = parse_policy(_policy_text(), source="bench")
    read_args = {"path": "/srv/work/project/src/main.py", "head": 200}
    many_args = {"paths": [f"/srv/work/f{i}.txt" for i in range(8)]}
    rows = [
        ("check_tool, pinned exact", lambda: policy.check_tool("fs__read_text_file", DEFINITION)),
        ("check_tool, deny glob", lambda: policy.check_tool("fs__write_file", DEFINITION)),
        ("check_tool, default deny", lambda: policy.check_tool("other__x", None)),
        (
            "check_call, pin + path + range",
            lambda: policy.check_call("fs__read_text_file", read_args, DEFINITION),
        ),
        (
            "check_call, traversal denied",
            lambda: policy.check_call(
                "fs__read_text_file", {"path": "/srv/work/../etc"}, DEFINITION
            ),
        ),
        (
            "check_call, 8 paths (each)",
            lambda: policy.check_call("fs__read_multiple_files", many_args),
        ),
        (
            "check_call, glob + in",
            lambda: policy.check_call("git__git_log", {"repo_path": "/srv/work/repo"}),
        ),
    ]
    print(f"{'decision':<34} {'per second':>12} {'us each':>9}")
    for label, action in rows:
        rate = _rate(action, seconds)
        print(f"{label:<34} {rate:>12,.0f} {1e6 / rate:>9.2f}")

    benign = r"[A-Za-z0-9_.-]{1,64}@[a-z0-9-]+(\.[a-z0-9-]+)*"
    text = "first.last_1@mail.example.org"
    safe, stdlib = SafeRegex(benign), re.compile(benign, re.DOTALL)
    safe_rate = _rate(lambda: safe.fullmatch(text), seconds)
    re_rate = _rate(lambda: stdlib.fullmatch(text), seconds)
    print()
    print(f"benign pattern, {len(text)} chars: SafeRegex {safe_rate:,.0f}/s, re {re_rate:,.0f}/s,")
    print(f"  re is {re_rate / safe_rate:.1f}x faster (warm transition cache)")

    catastrophic = "(a+)+b"
    safe_bad, re_bad = SafeRegex(catastrophic), re.compile(catastrophic)
    print(f"catastrophic pattern {catastrophic!r} on 'a' * n (no match):")
    for n in (16, 20, 22, 24):
        re_s = _once(lambda n=n: re_bad.fullmatch("a" * n))
        safe_s = _once(lambda n=n: safe_bad.fullmatch("a" * n))
        timings = f"re {re_s * 1e3:>9.2f} ms   SafeRegex {safe_s * 1e3:>7.3f} ms"
        print(f"  n={n:<5} {timings}   ratio {re_s / safe_s:>9,.0f}x")
    safe_long = _once(lambda: SafeRegex(catastrophic).fullmatch("a" * 8192))
    print(
        f"  n=8192  re (not run: ~2^8192 steps)   SafeRegex {safe_long * 1e3:>7.3f} ms (cold cache)"
    )


if __name__ == "__main__":
    main()
