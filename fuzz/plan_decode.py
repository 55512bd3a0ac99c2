"""Fuzz target: bytes -> decode_plan -> canonical_bytes -> plan_digests -> validate_plan.

Contract under test: ``decode_plan`` returns a Plan or raises ``PlanError``; a decoded plan
always has canonical bytes, which are the RFC 8785 form of the input's strict parse (the plan
"as decoded"), decode back to the same plan and are a fixed point; ``validate_plan`` against
each of a few local policies returns a ValidatedPlan carrying exactly those bytes and their
digests, or raises ``PlanError``. Every PlanError lists between 1 and MAX_PROBLEMS problems,
each with a ``$``-rooted path, and reads as one printable line that any JSON encoder accepts.
Nothing else is ever raised. Run::

    python fuzz/plan_decode.py -atheris_runs=1000000 -max_len=65600 fuzz/plan_corpus
    python fuzz/plan_decode.py --replay [--seconds S]     # without atheris
    python fuzz/make_plan_corpus.py                       # rewrite the seed corpus
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import mutate

try:
    import atheris  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # the replay mode and the CI slice run without it
    atheris = None

_FUZZING = atheris is not None and __name__ == "__main__" and "--replay" not in sys.argv
with atheris.instrument_imports(include=["glove"]) if _FUZZING else contextlib.nullcontext():
    import msgspec

    from glove.plan import (
        PLAN_LIMIT_NAMES,
        ExposurePolicy,
        HarnessPolicy,
        LocalPolicy,
        PlanError,
        ProxyNetwork,
        ValidatedPlan,
        canonical_bytes,
        decode_plan,
        jcs_dumps,
        plan_digests,
        validate_plan,
    )
    from glove.plan._decode import MAX_PROBLEMS
    from glove.plan.errors import MAX_PROBLEM_TEXT_CHARS
    from glove.protocol._json import loads_strict

CORPUS = Path(__file__).resolve().parent / "plan_corpus"
DEFAULT_REPLAY_SECONDS = 10.0
_HEX = frozenset("0123456789abcdef")

_HARNESSES = {"demo": HarnessPolicy(argv=("/bin/true",)), "a": HarnessPolicy(argv=("a",))}
_EXPOSURES = {
    "work": ExposurePolicy(generation=3, mode="rw", target="/workspace"),
    "ref": ExposurePolicy(generation=1, mode="ro", target="/ref"),
    "old": ExposurePolicy(generation=2, mode="ro", target="/old", revoked=True),
}
_FULL = {
    "wall_time_s": "watchdog",
    "cpu_time_s": "cgroup-v1-cpuacct-watchdog",
    "memory_bytes": "cgroup-v1-memory",
    "pids": "cgroup-v1-pids",
    "disk_bytes": "tmpfs-size",
    "output_bytes": "pipe-accounting",
}
#: A generous host, a host with weaker mechanisms (one accepted), a tight one.
LOCALS = (
    LocalPolicy(
        harnesses=_HARNESSES,
        exposures=_EXPOSURES,
        limits_max=dict.fromkeys(PLAN_LIMIT_NAMES, 2**53 - 1),
        mechanisms=dict(_FULL),
        terminals=frozenset({"pipes", "pty"}),
    ),
    LocalPolicy(
        harnesses=_HARNESSES,
        exposures=_EXPOSURES,
        limits_max=dict.fromkeys(PLAN_LIMIT_NAMES, 2**40),
        mechanisms={**_FULL, "cpu_time_s": "rlimit-cpu-per-process", "memory_bytes": None},
        accept_weaker=frozenset({"cpu_time_s"}),
    ),
    LocalPolicy(
        harnesses={"demo": _HARNESSES["demo"]},
        exposures={"work": _EXPOSURES["work"]},
        limits_max={"wall_time_s": 60, "memory_bytes": 2**30, "pids": 128},
        mechanisms={**_FULL, "pids": "rlimit-nproc-per-user"},
        accept_weaker=frozenset({"all"}),
        networks=frozenset(),
    ),
    LocalPolicy(
        harnesses=_HARNESSES,
        exposures=_EXPOSURES,
        limits_max=dict.fromkeys(PLAN_LIMIT_NAMES, 2**53 - 1),
        mechanisms=dict(_FULL),
        networks=frozenset({"none", "proxy"}),
        egress_allow=("*.github.com:443+sni", "example.org", "10.0.0.5:443"),
        egress_deny=("gist.github.com",),
    ),
)


def _check_error(error: PlanError) -> None:
    """A refusal is well formed: bounded, located, one printable line, encodable."""
    assert 1 <= len(error.problems) <= MAX_PROBLEMS, len(error.problems)
    line = str(error)
    assert line.isprintable(), line
    assert line.startswith("plan refused at $"), line
    for problem in error.problems:
        assert problem.path.startswith("$"), problem
        assert problem.path.isprintable(), problem
        assert problem.message.isprintable(), problem
        assert len(problem.path) <= MAX_PROBLEM_TEXT_CHARS + 3, problem
        assert len(problem.message) <= MAX_PROBLEM_TEXT_CHARS + 3, problem
    msgspec.json.encode(error.problems)


def _check_digest(value: str, prefix: str) -> None:
    assert value.startswith(prefix), value
    hexits = value[len(prefix) :]
    assert len(hexits) == 64, value
    assert set(hexits) <= _HEX, value


def one_input(data: bytes) -> None:
    """Decode ``data`` as a plan, canonicalize, digest and validate it; check every contract."""
    try:
        plan = decode_plan(data)
    except PlanError as error:
        _check_error(error)
        return
    canonical = canonical_bytes(plan)
    # "As decoded": the canonical bytes are those of the input's own members.
    assert canonical == jcs_dumps(loads_strict(data, ValueError)), canonical
    again = decode_plan(canonical)
    assert again == plan, (again, plan)
    assert canonical_bytes(again) == canonical
    digests = plan_digests(canonical)
    _check_digest(digests.sha256, "sha256:")
    _check_digest(digests.blake3, "blake3:")
    for local in LOCALS:
        try:
            validated = validate_plan(plan, local)
        except PlanError as error:
            _check_error(error)
            continue
        assert validated.plan == plan
        assert validated.canonical == canonical
        assert validated.digests == digests
        assert validated.harness is local.harnesses[plan.harness]
        assert list(validated.exposures) == list(plan.exposures)
        assert set(validated.mechanisms) == set(PLAN_LIMIT_NAMES)
        _check_egress(validated, local)


def _check_egress(validated: ValidatedPlan, local: LocalPolicy) -> None:
    """Proxy mode carries narrowed rules: only the plan's allow rules, every local deny."""
    network = validated.plan.network
    if not isinstance(network, ProxyNetwork):
        assert validated.egress is None
        return
    assert validated.egress is not None
    assert len(validated.egress.allow) == len(network.allow)
    own = local.egress_rules()
    assert validated.egress.deny[: len(own.deny)] == own.deny


def seeds() -> list[bytes]:
    """The seed inputs, sorted by file name."""
    return [path.read_bytes() for path in sorted(CORPUS.iterdir()) if path.suffix == ".json"]


def replay(seconds: float) -> int:
    """Feed every seed, then random mutations of them, for ``seconds``; return the count."""
    corpus = seeds()
    for data in corpus:
        one_input(data)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = len(corpus)
    while time.monotonic() < deadline:
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    return runs


if __name__ == "__main__":
    if "--replay" in sys.argv:
        seconds = DEFAULT_REPLAY_SECONDS
        if "--seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        print(f"plan_decode: {replay(seconds)} inputs, no failure")
    elif atheris is None:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2)
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
