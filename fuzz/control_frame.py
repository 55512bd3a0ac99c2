"""Fuzz target: bytes on the control socket -> frames -> strict JSON -> typed requests and params.

Contract under test: what ``gloved`` does with a client's bytes before any handler runs --
``FrameDecoder`` at the request cap, ``decode_client_frame`` (strict JSON: one value, no
repeated key at any depth, bounded nesting; then the request/cancel envelope), and
``decode_params`` into each method's Struct -- either produces typed values or raises a
``ProtocolError`` (frame_too_large, truncated_frame, malformed_frame, duplicate_key) or an
``InvalidParams`` whose path starts ``$.params``; nothing else. Every error the server would
send is encoded and decoded again by the client's decoder (``decode_server_frame``), and
the client's decoder is also run on the raw payloads. The input is cut into chunks at
fuzzer-chosen points, as a socket delivers it. Run::

    python fuzz/control_frame.py -atheris_runs=1000000 fuzz/control_corpus   # with atheris
    python fuzz/control_frame.py --replay [--seconds S]                      # without
"""

import random
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import mutate

try:
    import atheris  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - replay mode works without it
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["glove"]):
        from glove.control._auth import secret_matches
        from glove.protocol import (
            CONTROL_MAX_REQUEST_BYTES,
            Cancel,
            Event,
            FrameDecoder,
            HelloParams,
            InvalidParams,
            NoParams,
            ProtocolError,
            Request,
            Response,
            decode_client_frame,
            decode_params,
            decode_server_frame,
            encode,
            error_response,
        )
else:
    from glove.control._auth import secret_matches
    from glove.protocol import (
        CONTROL_MAX_REQUEST_BYTES,
        Cancel,
        Event,
        FrameDecoder,
        HelloParams,
        InvalidParams,
        NoParams,
        ProtocolError,
        Request,
        Response,
        decode_client_frame,
        decode_params,
        decode_server_frame,
        encode,
        error_response,
    )

CORPUS = Path(__file__).resolve().parent / "control_corpus"
DEFAULT_REPLAY_SECONDS = 10.0
#: Frames handled per input at most (an input of many tiny frames stays cheap).
MAX_FRAMES_PER_INPUT = 64
SECRET = b"0123456789abcdef" * 4


class ListParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Shaped like session.list: optional enums, bounded ints and strings."""

    state: Literal["running", "terminal"] | None = None
    after: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50


class Limits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    wall_time_s: Annotated[float, msgspec.Meta(gt=0)]
    memory_bytes: Annotated[int, msgspec.Meta(ge=0)]


class PlanParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Shaped like plan.validate: nested Structs, lists, a free-form mapping."""

    version: Literal[1]
    harness: str
    exposures: list[str] = []
    limits: Limits | None = None
    labels: dict[str, str] = {}
    extra: dict[str, Any] = {}


PARAMS: dict[str, type[msgspec.Struct]] = {
    "hello": HelloParams,
    "health": NoParams,
    "session.list": ListParams,
    "plan.validate": PlanParams,
}


def _roundtrip(response: Response) -> None:
    """What the server would send decodes, on the client's side, to the same response."""
    again = decode_server_frame(encode(response))
    assert isinstance(again, Response), again
    assert again.id == response.id
    if response.error is not None:
        assert again.error is not None
        assert again.error.code == response.error.code


def _invalid(request: Request, exc: InvalidParams) -> None:
    """What the server sends for bad params: a path under ``$.params``, bounded."""
    assert exc.path.startswith("$.params"), exc.path
    assert len(exc.path) <= 256
    _roundtrip(error_response(request.id, "invalid_params", str(exc), {"path": exc.path}))


def _request(request: Request) -> None:
    kind = PARAMS.get(request.method)
    if kind is None:
        _roundtrip(error_response(request.id, "method_not_found", f"{request.method[:64]!r}"))
        return
    try:
        params = decode_params(request.params, kind)
    except InvalidParams as exc:
        _invalid(request, exc)
        return
    assert isinstance(params, kind)
    if isinstance(params, HelloParams):
        assert isinstance(secret_matches(SECRET, params.secret), bool)
    _roundtrip(Response(id=request.id, result=params))


def one_input(data: bytes) -> None:
    """Feed ``data`` (its first byte picks the chunk size) through the server's decoding."""
    if not data:
        return
    step = data[0] % 17 + 1
    stream = data[1:]
    decoder = FrameDecoder(max_frame_bytes=CONTROL_MAX_REQUEST_BYTES)
    frames = 0
    try:
        for start in range(0, len(stream), step):
            decoder.feed(stream[start : start + step])
            while (payload := decoder.next_frame()) is not None:
                frames += 1
                if frames > MAX_FRAMES_PER_INPUT:
                    return
                try:
                    reply = decode_server_frame(payload)
                    assert isinstance(reply, Response | Event)
                except ProtocolError:
                    pass
                frame = decode_client_frame(payload)
                if isinstance(frame, Cancel):
                    assert frame.cancel is True
                else:
                    _request(frame)
        decoder.close()
    except ProtocolError as exc:
        _roundtrip(error_response(0, exc.code, str(exc)))


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
    print(f"control_frame: {len(corpus)} seeds and {runs} mutations, no failure")


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
