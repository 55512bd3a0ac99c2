"""Write the adversarial seed corpus of ``wallet_status_json.py`` into ``fuzz/wallet_corpus/``.

Each seed is ``scenario, flags, budget, 8 clock steps, frame`` (the layout is in the
target's docstring). Run it again after changing
the seeds; the files are committed so the fuzzer and the CI slice start from them.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "wallet_corpus"
REQUEST = b'{"jsonrpc":"2.0","id":7,"method":"wallet_status","params":{}}'
RESULT = (
    b'{"schema_version":1,"connected":true,"chain":"eip155:8453",'
    b'"available_actions":["status"],"mutating_actions":[]}'
)
RESPONSE = b'{"jsonrpc":"2.0","id":7,"result":' + RESULT + b"}"
STILL = bytes(8)  # the clock does not move
BUDGET = 40  # 2 seconds
CONNECTED, CONTRACTED, TWICE = 0x01, 0x02, 0x04
MAX_FRAME_BYTES = 64 * 1024


def seed(
    frame: bytes, scenario: int = 0, flags: int = 0, budget: int = BUDGET, steps: bytes = STILL
) -> bytes:
    """One fuzz input."""
    assert len(steps) == 8
    return bytes([scenario, flags, budget]) + steps + frame


def nested(depth: int, inner: bytes = b"0") -> bytes:
    """``depth`` nested arrays around ``inner``."""
    return b"[" * depth + inner + b"]" * depth


def max_frame() -> bytes:
    """A request padded with an unknown field to exactly the 64-KiB limit."""
    head, tail = (
        b'{"jsonrpc":"2.0","id":"' + b"a" * 64 + b'","method":"wallet_status","pad":"',
        b'"}',
    )
    return head + b"x" * (MAX_FRAME_BYTES - len(head) - len(tail)) + tail


SEEDS: dict[str, bytes] = {
    # the success path, and the ladder through each scenario against each authority,
    # alone and under the contracts, once and twice
    "00-request": seed(REQUEST),
    "01-request-connected-contracted-twice": seed(REQUEST, 0, CONNECTED | CONTRACTED | TWICE),
    "02-request-no-params": seed(b'{"jsonrpc":"2.0","id":"s","method":"wallet_status"}'),
    **{
        f"03-scenario-{n:02d}-on-{target}": seed(REQUEST, n, (target << 4) | TWICE | CONNECTED)
        for n in range(16)
        for target in range(4)
    },
    **{f"04-scenario-{n:02d}-contracted": seed(REQUEST, n, CONTRACTED | TWICE) for n in range(16)},
    # the clock and the budget: expired before decoding, crossing the deadline mid-ladder
    # and at the second sample, stale at the second sample only, a clock going back
    "10-budget-zero": seed(REQUEST, budget=0),
    "11-clock-mid-ladder": seed(REQUEST, steps=bytes([0, 0, 0, 100, 0, 0, 0, 0])),
    "12-clock-after-validation": seed(REQUEST, steps=bytes([0, 0, 0, 0, 0, 100, 0, 0])),
    "13-stale-at-second-sample": seed(REQUEST, budget=255, steps=bytes([0, 0, 0, 0, 0, 254, 0, 0])),
    "14-clock-backwards": seed(REQUEST, steps=bytes([0, 0, 0, 0, 0, 255, 0, 0])),
    "15-clock-slow-drift": seed(REQUEST, 0, TWICE, 200, bytes([7, 13, 1, 30, 2, 40, 3, 90])),
    # deep nesting, at and over the bound, in the request and in a response's result
    "20-deep-64": seed(nested(64)),
    "21-deep-65": seed(nested(65)),
    "22-deep-objects": seed(b'{"a":' * 65 + b"1" + b"}" * 65),
    "23-deep-params": seed(
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","params":' + nested(63) + b"}"
    ),
    "24-deep-result": seed(b'{"jsonrpc":"2.0","id":1,"result":' + nested(64) + b"}"),
    "25-open-brackets": seed(b"[" * 4096),
    # escaped duplicate keys, at every level, in the raw result too
    "30-dup-method": seed(
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_send","method":"wallet_status"}'
    ),
    "31-dup-escaped-id": seed(b'{"jsonrpc":"2.0","id":1,"\\u0069d":2,"method":"wallet_status"}'),
    "32-dup-in-params": seed(
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","params":{"a":1,"\\u0061":2}}'
    ),
    "33-dup-in-result": seed(
        b'{"jsonrpc":"2.0","id":7,"result":{"schema_version":1,"connected":true,'
        b'"conn\\u0065cted":false,"chain":"eip155:8453","available_actions":["status"],'
        b'"mutating_actions":[]}}'
    ),
    "34-dup-surrogate-pair": seed(b'{"\\ud83d\\ude00":1,"\xf0\x9f\x98\x80":2}'),
    "35-response": seed(RESPONSE),
    "36-response-unavailable": seed(
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"wallet status unavailable"}}'
    ),
    "37-response-mutating": seed(
        RESPONSE.replace(b'"mutating_actions":[]', b'"mutating_actions":["send"]')
    ),
    "38-binding-in-params": seed(
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","params":{"session_digest":"x"}}'
    ),
    # huge numbers
    "40-huge-int-id": seed(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"wallet_status"}'),
    "41-huge-exponent": seed(b'{"jsonrpc":"2.0","id":1e999999,"method":"wallet_status"}'),
    "42-id-over-2-53": seed(b'{"jsonrpc":"2.0","id":9007199254740992,"method":"wallet_status"}'),
    "43-negative-zero": seed(b'{"jsonrpc":"2.0","id":-0,"method":"wallet_status"}'),
    "44-float-id": seed(b'{"jsonrpc":"2.0","id":1.0e-400,"method":"wallet_status"}'),
    # invalid UTF-8 and bad strings
    "50-invalid-utf8": seed(b'{"jsonrpc":"2.0","id":"\xff","method":"wallet_status"}'),
    "51-overlong": seed(b'{"jsonrpc":"2.0","id":"\xc0\xaf","method":"wallet_status"}'),
    "52-encoded-surrogate": seed(b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"wallet_status"}'),
    "53-lone-surrogate-escape": seed(b'{"jsonrpc":"2.0","id":"\\ud800","method":"wallet_status"}'),
    "54-nul-in-string": seed(b'{"jsonrpc":"2.0","id":"a\x00","method":"wallet_status"}'),
    "55-bom": seed(b"\xef\xbb\xbf" + REQUEST),
    # truncated frames
    **{
        f"60-truncated-{cut:02d}": seed(REQUEST[:cut])
        for cut in (0, 1, 13, 30, 48, len(REQUEST) - 1)
    },
    "61-truncated-response": seed(RESPONSE[:-2]),
    # size: exactly at the limit, and one byte over (refused before decoding)
    "70-max-frame": seed(max_frame()),
    "71-over-limit": seed(b"\xff" + b" " * MAX_FRAME_BYTES),
    "72-many-keys": seed(
        json.dumps({f"k{i}": [i, None, True] for i in range(3000)}).encode()[:MAX_FRAME_BYTES]
    ),
}


def main() -> None:
    """(Re)write every seed file."""
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.bin"):
        old.unlink()
    for name, data in SEEDS.items():
        (OUT / f"{name}.bin").write_bytes(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
