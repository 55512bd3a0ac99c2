"""Fuzz target: the sd_notify environment and datagram parsers (``glove.control._notify_wire``).

Contract under test: ``parse_notify_socket``, ``watchdog_interval_s`` and ``decode_message``
return a value or raise ``NotifyError``, nothing else; ``encode_message`` of what
``decode_message`` returned either raises ``NotifyError`` or round-trips.

    python fuzz/notify_env.py [-atheris_runs=N ...]     # with atheris
    python fuzz/notify_env.py --replay [--seconds S]    # without: seeds + mutations

An input is up to three fields separated by NUL: NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID;
the whole input is also decoded as a datagram.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from policy_common import mutate

from glove.control._notify_wire import (
    decode_message,
    encode_message,
    parse_notify_socket,
    watchdog_interval_s,
)
from glove.control.errors import NotifyError

SEEDS = Path(__file__).resolve().parent / "notify_corpus" / "env"


def one_input(data: bytes) -> None:
    """Feed ``data`` to every parser; raise only on a contract violation."""
    fields = [part.decode(errors="surrogateescape") for part in data.split(b"\0")[:3]]
    sock, usec, pid = ([*fields, None, None])[:3]
    with contextlib.suppress(NotifyError):
        parse_notify_socket(sock or "")
    try:
        interval = watchdog_interval_s(usec, pid, own_pid=4242)
    except NotifyError:
        pass
    else:
        assert interval is None or interval > 0
    try:
        decoded = decode_message(data)
    except NotifyError:
        return
    try:
        again = decode_message(encode_message(list(decoded.items())))
    except NotifyError:
        return
    assert again == decoded


def main() -> None:
    """Run under atheris, or replay the seeds and random mutations of them."""
    import random
    import time

    if "--replay" not in sys.argv:
        import atheris  # type: ignore[import-not-found]

        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
        return
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 10
    seeds = [p.read_bytes() for p in sorted(SEEDS.iterdir())]
    for seed in seeds:
        one_input(seed)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not secrets
    deadline, count = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        one_input(mutate(rng.choice(seeds), rng))
        count += 1
    print(f"notify_env: {len(seeds)} seeds and {count} mutations, no contract violation")


if __name__ == "__main__":
    main()
