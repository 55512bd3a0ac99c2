"""Fuzz target: bytes on the forced executor's stdin -> frames -> requests -> responses.

Contract under test: the executor's sans-IO path (``FrameDecoder`` at the executor's cap,
``decode_executor_request``, ``request_deadline``, ``respond``, ``encode_response``) either
produces a well-formed response to a well-formed request or raises a ``ProtocolError``
(oversized, truncated, malformed) or ``TtlExhausted``; nothing else. The input is also cut
into chunks at fuzzer-chosen points, so the decoder is exercised byte-split as the pipe
would deliver it. Run::

    python fuzz/remote_frame.py -atheris_runs=1000000        # with atheris
    python fuzz/remote_frame.py --replay [--seconds S]        # without: corpus + mutations
"""

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import mutate

try:
    import atheris  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - replay mode works without it
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["glove"]):
        from glove.protocol import FrameDecoder, ProtocolError, decode_response
        from glove.remote import (
            EXECUTOR_MAX_FRAME_BYTES,
            HEALTH_METHOD,
            TtlExhausted,
            decode_executor_request,
            request_deadline,
            respond,
        )
        from glove.remote._wire import encode_response
else:
    from glove.protocol import FrameDecoder, ProtocolError, decode_response
    from glove.remote import (
        EXECUTOR_MAX_FRAME_BYTES,
        HEALTH_METHOD,
        TtlExhausted,
        decode_executor_request,
        request_deadline,
        respond,
    )
    from glove.remote._wire import encode_response

CORPUS = Path(__file__).resolve().parent / "remote_corpus"
DEFAULT_REPLAY_SECONDS = 10.0
#: Frames handled per input at most (an input of many tiny frames stays cheap).
MAX_FRAMES_PER_INPUT = 64


def _check_response(request_id: int, method: str, payload: bytes) -> None:
    response = decode_response(payload)
    assert response.id == request_id
    if method == HEALTH_METHOD:
        assert response.result == {"status": "not_operational"}, response
    else:
        assert response.error is not None
        assert response.error.code == "method_not_found"


def one_input(data: bytes) -> None:
    """Feed ``data`` (its first byte picks the chunk size) through the executor's core."""
    if not data:
        return
    step = data[0] % 17 + 1
    stream = data[1:]
    decoder = FrameDecoder(max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)
    frames = 0
    try:
        for start in range(0, len(stream), step):
            decoder.feed(stream[start : start + step])
            while (payload := decoder.next_frame()) is not None:
                frames += 1
                if frames > MAX_FRAMES_PER_INPUT:
                    return
                request = decode_executor_request(payload)
                # A receipt of 1.5 ms: within any valid TTL except the 1 ms minimum.
                try:
                    deadline = request_deadline(request, 0.0, 0.0015)
                except TtlExhausted:
                    assert request.ttl_ms == 1
                    continue
                assert deadline == request.ttl_ms / 1000
                framed = encode_response(respond(request))
                assert int.from_bytes(framed[:4], "big") == len(framed) - 4
                _check_response(request.id, request.method, framed[4:])
        decoder.close()
    except ProtocolError:
        return


def _replay(seconds: float) -> None:
    corpus = [path.read_bytes() for path in sorted(CORPUS.iterdir())]
    for seed in corpus:
        one_input(seed)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    print(f"remote_frame: {len(corpus)} seeds and {runs} mutations, no failure")


if __name__ == "__main__":
    if "--replay" in sys.argv:
        seconds = DEFAULT_REPLAY_SECONDS
        if "--seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        _replay(seconds)
    elif atheris is None:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2)
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
