"""Wallet bridge benchmark: the structural pre-scan against Python's json, and one request.

The scan is the price of refusing repeated keys before msgspec decodes; its peers, run in
the same process on the same frames:

* ``json.loads`` with an ``object_pairs_hook`` that refuses repeated keys (the standard
  library's way to get the same guarantee);
* ``msgspec.json.decode`` alone (what decoding costs without the guarantee).

And one whole ``wallet_status`` request through the processor (scan, strict decode, five
authority reads under their contracts, revalidation, encoding) against the same
``json.loads`` peer on the same request frame.

    .venv/bin/python benchmarks/wallet/bench.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

import msgspec

from glove.testing.wallet import FakeClock, OfflineWorld
from glove.wallet import StatusProcessor, check_structure, contracted, encode_request

REQUEST = encode_request(7)
RESPONSE_4K = json.dumps(
    {"jsonrpc": "2.0", "id": 7, "result": {f"k{i}": [i, "v\u00e9", None, True] for i in range(150)}}
).encode()
ARRAY_64K = json.dumps([{"a": i, "b": "x" * 8} for i in range(2600)]).encode()[: 64 * 1024 - 2]
ARRAY_64K = ARRAY_64K[: ARRAY_64K.rindex(b"},") + 1] + b"]"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("duplicate key")
    return dict(pairs)


def json_peer(frame: bytes) -> None:
    """The standard library's repeated-key refusal."""
    json.loads(frame, object_pairs_hook=_no_duplicates)


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``fn`` over about ``seconds``."""
    calls, start = 0, time.perf_counter()
    deadline = start + seconds
    while (now := time.perf_counter()) < deadline:
        for _ in range(50):
            fn()
        calls += 50
    return calls / (now - start)


def main() -> None:
    """Print the rates and the ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    seconds = parser.parse_args().seconds
    for name, frame in (("request", REQUEST), ("4k-object", RESPONSE_4K), ("64k-array", ARRAY_64K)):
        check_structure(frame)
        scan = rate(functools.partial(check_structure, frame), seconds)
        peer = rate(functools.partial(json_peer, frame), seconds)
        bare = rate(functools.partial(msgspec.json.decode, frame), seconds)
        print(
            f"{name:10} {len(frame):6d} B  scan {scan:10.0f}/s  json+dup-hook {peer:10.0f}/s "
            f"(scan is {scan / peer:.2f}x its speed)  msgspec alone {bare:10.0f}/s "
            f"(scan costs {bare / scan:.1f}x a decode)"
        )
    clock = FakeClock()
    world = OfflineWorld(clock, owner_uid=os.getuid())
    processor = StatusProcessor(world.binding(), contracted(world.authorities()), clock=clock)
    whole = rate(lambda: processor.process(REQUEST, clock.peek() + 2.0), seconds)
    peer = rate(lambda: json_peer(REQUEST), seconds)
    print(
        f"one wallet_status request: {whole:.0f}/s ({1e6 / whole:.1f} us), "
        f"{peer / whole:.1f}x the json+dup-hook decode of the same frame"
    )


if __name__ == "__main__":
    main()
