"""Write the seed corpus of ``plan_decode.py`` into ``fuzz/plan_corpus/``.

Valid plans, one seed per rejection rule, deep nesting, escaped duplicate keys, huge numbers,
invalid UTF-8, lone surrogates, truncations and the size cap. Run it again after changing the
seeds; the files are committed so the fuzzer and the CI slice start from them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "plan_corpus"
MAX_PLAN_BYTES = 64 * 1024
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
REJECTED = [
    "prompt_ref",
    "argv",
    "command",
    "cmd",
    "args",
    "env",
    "environment",
    "cwd",
    "path",
    "paths",
    "workspace",
    "binds",
    "mounts",
    "host_path",
    "bundles",
    "library",
]


def plan(**changes: Any) -> bytes:
    """The example plan with top-level members replaced (None removes one)."""
    doc = {**PLAN, **changes}
    return json.dumps({k: v for k, v in doc.items() if v is not None}).encode()


def limits(**changes: Any) -> dict[str, Any]:
    """The example limits with members replaced (None removes one)."""
    doc = {**LIMITS, **changes}
    return {k: v for k, v in doc.items() if v is not None}


def seeds() -> dict[str, bytes]:
    """Every seed, by file stem."""
    out: dict[str, bytes] = {
        "00-valid": plan(),
        "01-valid-pty-size-labels": plan(
            terminal="pty", rows=40, cols=120, labels={"sage.task": "t-17", "Run_ID": "42"}
        ),
        "02-valid-two-exposures-float-seconds": plan(
            exposures=["work", "ref"], limits=limits(wall_time_s=2.5, cpu_time_s=1e-3)
        ),
        "03-valid-32-exposures": plan(exposures=[f"e{i}" for i in range(32)]),
        "04-valid-no-exposures-pretty": json.dumps(
            {**PLAN, "exposures": []}, indent=2, ensure_ascii=False
        ).encode(),
        "05-valid-unicode-label": plan(labels={"note": "caf\u00e9 \U0001f600 \u05d3"}),
        "06-valid-pty-tight": plan(terminal="pty", harness="a", exposures=[]),
        "10-missing-limit": plan(limits=limits(pids=None)),
        "11-empty-limits": plan(limits={}),
        "12-above-maximum": plan(limits=limits(memory_bytes=2**52)),
        "13-revoked-exposure": plan(exposures=["old"]),
        "14-unknown-harness": plan(harness="nobody"),
        "15-unknown-exposure": plan(exposures=["elsewhere"]),
        "20-raw-path-exposure": plan(exposures=["/home/x", "../x"]),
        "21-raw-path-harness": plan(harness="/usr/bin/sh"),
        "22-not-identifier": plan(exposures=["Work", "a" * 65, ""]),
        "23-duplicate-alias": plan(exposures=["work", "work"]),
        "24-33-exposures": plan(exposures=[f"e{i}" for i in range(33)]),
        "25-rows-without-pty": plan(rows=24, cols=80),
        "26-rows-alone": plan(terminal="pty", rows=24),
        "27-size-out-of-bounds": plan(terminal="pty", rows=0, cols=1001),
        "28-labels-bad": plan(labels={"a/b": "x", "ok": "/etc/passwd", "c": "\u0007"}),
        "28b-label-line-separator": plan(labels={"note": "a\u2028b"}),
        "29-17-labels": plan(labels={f"k{i}": "v" for i in range(17)}),
        "30-network-proxy": plan(network={"mode": "proxy", "allow": ["example.org:443"]}),
        "31-network-object": plan(network={"mode": "none"}),
        "32-network-proxy-narrow": plan(
            network={"mode": "proxy", "allow": ["api.github.com:443+sni"], "deny": ["x.org"]}
        ),
        "33-network-proxy-widen": plan(network={"mode": "proxy", "allow": ["evil.org"]}),
        "34-network-proxy-untagged": plan(network={"allow": ["example.org"]}),
        "35-network-proxy-bad-rule": plan(network={"mode": "proxy", "allow": ["*.com"]}),
        "32-version-2": plan(version=2),
        "33-unknown-field": plan(extra=1),
        "34-unknown-limit": plan(limits=limits(gpus=1)),
        "35-bool-limit": plan(limits=limits(pids=True)),
        "36-null-limit": plan(limits=limits(pids=None) | {"pids": None}),
        "37-float-count": plan(limits=limits(memory_bytes=268435456.0)),
        "38-below-floor": plan(limits=limits(memory_bytes=1024, pids=1)),
        "39-not-object": b'["version", 1]',
        "40-missing-harness": plan(harness=None),
        "41-terminal-tty": plan(terminal="tty"),
        "42-zero-seconds": plan(limits=limits(wall_time_s=0)),
        "50-deep-64": b"[" * 64 + b"]" * 64,
        "51-deep-65": b"[" * 65 + b"]" * 65,
        "52-deep-in-labels": plan(labels={"x": "y"}).replace(b'"y"', b"[" * 70 + b"]" * 70),
        "53-deep-huge": b"[" * 60000,
        "60-duplicate-top": b'{"version":1,"version":1}',
        "61-duplicate-escaped": b'{"harness":"demo","h\\u0061rness":"demo"}',
        "62-duplicate-in-limits": plan().replace(b'"pids": 64', b'"pids": 64, "p\\u0069ds": 64'),
        "63-duplicate-in-labels": plan(labels={"a": "1"}).replace(b'"a": "1"', b'"a":"1","a":"2"'),
        "70-huge-float": plan().replace(b"30,", b"1e400,", 1),
        "71-huge-int-digits": plan().replace(b"64,", b"9" * 5000 + b",", 1),
        "72-big-int": plan(limits=limits(output_bytes=2**64)),
        "73-nan": plan().replace(b"30,", b"NaN,", 1),
        "74-minus-infinity": plan().replace(b"30,", b"-Infinity,", 1),
        "75-negative-zero": plan(limits=limits(output_bytes=-0.0)),
        "80-invalid-utf8": plan().replace(b"demo", b"de\xffmo"),
        "81-overlong-utf8": plan().replace(b"demo", b"de\xc0\xafmo"),
        "82-lone-surrogate-value": plan().replace(b'"demo"', b'"\\ud800"'),
        "83-lone-surrogate-key": plan().replace(b'"network"', b'"\\udc00network"'),
        "84-bom": b"\xef\xbb\xbf" + plan(),
        "85-control-in-key": b'{"a\\n\\u0000b": 1}',
        "90-truncated-half": plan()[: len(plan()) // 2],
        "91-truncated-one": plan()[:-1],
        "92-empty": b"",
        "93-two-values": plan() + b" " + plan(),
        "94-at-cap": plan() + b" " * (MAX_PLAN_BYTES - len(plan())),
        "95-over-cap": plan() + b" " * (MAX_PLAN_BYTES + 1 - len(plan())),
        "96-many-unknown": json.dumps({f"k{i}": 0 for i in range(200)}).encode(),
    }
    for index, name in enumerate(REJECTED):
        out[f"1{index:02d}-rejected-{name}"] = plan(**{name: ["x"]})
    out["120-rejected-in-limits"] = plan(limits=limits(env={"A": "1"}))
    out["121-rejected-and-unknown"] = plan(argv=["sh"], foo=1, env={}, prompt_ref="p")
    return out


def main() -> None:
    """Rewrite the corpus directory."""
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    for stem, data in seeds().items():
        (OUT / f"{stem}.json").write_bytes(data)
    print(f"wrote {len(seeds())} seeds to {OUT}")


if __name__ == "__main__":
    main()
