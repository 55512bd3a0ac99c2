"""Fuzz target: wallet status frames through the scan, the processor's ladder, the decoder.

Input layout (see ``fuzz/wallet_corpus/README.md``)::

    byte 0      scenario: how the authorities misbehave (SCENARIOS, modulo 16)
    byte 1      flags: 0x01 connected, 0x02 under the contracts, 0x04 two requests,
                bits 4-5 the authority the scenario targets
    byte 2      the request's budget: deadline = now + byte * BUDGET_UNIT_S (0: expired)
    bytes 3-10  clock steps: the fake clock advances its monotonic component by
                step * CLOCK_UNIT_S at each sample (255 steps it back: a broken clock), so
                fuzzed frames reach the deadline checks and the revalidation ladder
    bytes 11-   the frame, at most 64 KiB (the bridge's limit; longer is refused first)

Contract under test: ``check_structure`` returns None or raises ``WalletFrameError``; the
processor returns an outcome or raises a ``WalletError``; the adapter's strict decoder
returns a reply or raises ``WalletFrameError``. Nothing else, ever. Every response the
processor produces decodes strictly, echoes the request id, carries ``["status"]`` and an
empty ``mutating_actions`` or no status at all, and repeats no planted secret.

Run::

    python fuzz/wallet_status_json.py -atheris_runs=1000000 -max_len=65547 fuzz/wallet_corpus
    python fuzz/wallet_status_json.py --replay [--seconds S]   # without atheris
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

try:
    import atheris  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # the replay mode and the CI slice run without it
    atheris = None

_FUZZING = atheris is not None and __name__ == "__main__" and "--replay" not in sys.argv
with atheris.instrument_imports(include=["glove"]) if _FUZZING else contextlib.nullcontext():
    import msgspec

    from glove.testing.wallet import (
        SECRETS,
        Adversary,
        FakeClock,
        OfflineWorld,
        answer_for_other_session,
        answer_late,
        fail_read,
        reuse_generation,
        revise_between_reads,
        roll_back,
    )
    from glove.wallet import (
        MAX_FRAME_BYTES,
        Authorities,
        StatusProcessor,
        WalletError,
        WalletFrameError,
        check_structure,
        contracted,
        decode_reply,
    )

CORPUS = Path(__file__).resolve().parent / "wallet_corpus"
HEADER_BYTES = 11
CLOCK_UNIT_S = 0.02
"""One clock step unit: 254 steps (5.08 s) age an observation past the 5-second bound."""
BUDGET_UNIT_S = 0.05
"""One budget unit: 40 is the bridge's 2-second request deadline, 255 is 12.75 s."""
DEADLINE_S = 2.0
OWNER_UID = 1000
AUTHORITY_NAMES = ("plan", "readiness", "adapter", "server")
DEFAULT_REPLAY_SECONDS = 10.0
MAX_MUTATED_BYTES = MAX_FRAME_BYTES + HEADER_BYTES


def _honest(world: OfflineWorld, _target: str) -> Authorities:
    return world.authorities()


def _rewrite(**changes: object) -> Callable[[OfflineWorld, str], Authorities]:
    def build(world: OfflineWorld, target: str) -> Authorities:
        def hook(name: str, call: int, honest: object) -> object:
            if name == target and isinstance(honest, msgspec.Struct):
                with contextlib.suppress(TypeError):
                    return msgspec.structs.replace(honest, **changes)
            return honest

        return Adversary(world.authorities(), hook).authorities()

    return build


def _missing(world: OfflineWorld, target: str) -> Authorities:
    return Adversary(
        world.authorities(), lambda name, call, honest: None if name == target else honest
    ).authorities()


def _world_change(**changes: object) -> Callable[[OfflineWorld, str], Authorities]:
    def build(world: OfflineWorld, _target: str) -> Authorities:
        for name, value in changes.items():
            setattr(world, name, value)
        return world.authorities()

    return build


SCENARIOS: tuple[Callable[[OfflineWorld, str], Authorities], ...] = (
    _honest,
    lambda w, t: answer_late(w, t, late_by_s=DEADLINE_S),
    fail_read,
    answer_for_other_session,
    lambda w, _t: revise_between_reads(w),
    lambda w, _t: reuse_generation(w),
    lambda w, _t: roll_back(w),
    _missing,
    _rewrite(owner_uid=OWNER_UID + 1),
    _rewrite(plan_generation=0),
    _rewrite(deadline=0.0),
    _rewrite(adapter_digest="sha256:" + "f" * 64, server_digest="sha256:" + "f" * 64),
    _world_change(server_state="stopped"),
    _world_change(stable=False, containment_ready=False),
    _world_change(chain_id="eip155:1", alias="https://x"),
    _world_change(observed_at=900.0),
)


def _check_response(response: bytes, request_id: object, available: bool) -> None:
    reply = decode_reply(response)  # a response the bridge wrote must decode strictly
    assert reply.id == request_id, (reply.id, request_id)
    if available:
        assert reply.result is not None
        assert reply.result.available_actions == ("status",)
        assert reply.result.mutating_actions == ()
    else:
        assert reply.result is None
    text = response.decode()
    for secret in SECRETS:
        assert secret not in text, secret


def one_input(data: bytes) -> None:
    """Run one fuzz input through the scan, the processor and the strict decoder."""
    control, frame = data[:HEADER_BYTES].ljust(HEADER_BYTES, b"\0"), data[HEADER_BYTES:]
    scenario, flags, budget, steps = control[0], control[1], control[2], control[3:]
    with contextlib.suppress(WalletFrameError):
        check_structure(frame)
    with contextlib.suppress(WalletFrameError):
        decode_reply(frame)  # the adapter's side: the raw result is scanned too
    clock = FakeClock(
        1000.0, steps=[-0.5 if step == 255 else step * CLOCK_UNIT_S for step in steps]
    )
    world = OfflineWorld(clock, owner_uid=OWNER_UID, connected=bool(flags & 0x01))
    build = SCENARIOS[scenario % len(SCENARIOS)]
    authorities = build(world, AUTHORITY_NAMES[(flags >> 4) % len(AUTHORITY_NAMES)])
    if flags & 0x02:
        authorities = contracted(authorities)
    processor = StatusProcessor(world.binding(), authorities, clock=clock)
    for _ in range(2 if flags & 0x04 else 1):
        try:
            outcome = processor.process(frame, clock.peek() + budget * BUDGET_UNIT_S)
        except WalletError:
            return  # typed: the worker closes the session
        _check_response(outcome.response, outcome.request_id, outcome.available)
        world.observe()


# -- running -------------------------------------------------------------------------------------


def seeds() -> list[bytes]:
    """The seed inputs, sorted by file name."""
    return [p.read_bytes() for p in sorted(CORPUS.iterdir()) if p.suffix == ".bin"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random mutation: a bit flip, an insertion, a deletion, a copy, a JSON token."""
    buffer = bytearray(data)
    choice = rng.randrange(6)
    position = rng.randrange(len(buffer) + 1)
    if choice == 0 and buffer:
        buffer[min(position, len(buffer) - 1)] ^= 1 << rng.randrange(8)
    elif choice == 1:
        buffer[position:position] = bytes([rng.randrange(256)])
    elif choice == 2 and buffer:
        del buffer[position : position + rng.randrange(1, 8)]
    elif choice == 3:
        buffer[position:position] = buffer[position : position + rng.randrange(1, 16)]
    elif choice == 4 and len(buffer) > 1:
        buffer[rng.randrange(min(HEADER_BYTES, len(buffer)))] = rng.randrange(256)
    else:
        token = rng.choice([b"[", b"]", b"{", b"}", b'"', b"\\u0061", b",", b":", b"1e9", b"\xff"])
        buffer[position:position] = token
    return bytes(buffer[:MAX_MUTATED_BYTES])


def replay(
    inputs: int | None = None, seconds: float = DEFAULT_REPLAY_SECONDS, seed: int = 0
) -> int:
    """Run every seed, then seeded mutations for ``inputs`` runs or ``seconds``; return runs."""
    corpus = seeds()
    for data in corpus:
        one_input(data)
    rng = random.Random(seed)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = 0
    while (runs < inputs) if inputs is not None else (time.monotonic() < deadline):
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    return runs + len(corpus)


def main() -> None:
    """Fuzz with atheris, or replay and mutate the corpus without it."""
    if "--replay" in sys.argv:
        seconds = DEFAULT_REPLAY_SECONDS
        if "--seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        runs = replay(seconds=seconds)
        print(f"wallet_status_json: {runs} inputs, no failure")
        return
    if atheris is None:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
