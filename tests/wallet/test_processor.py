"""The processor's ladder: binding, authority reads, clock samples, revalidation, sanitizing."""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec
import pytest

from glove.testing.wallet import (
    SECRETS,
    Adversary,
    FakeClock,
    OfflineWorld,
    answer_for_other_session,
    answer_late,
    fail_read,
    revise_between_reads,
    roll_back,
)
from glove.wallet import (
    MAX_OBSERVATION_AGE_S,
    Authorities,
    AuthorityDeadline,
    AuthorityFailed,
    RequestExpired,
    StatusOutcome,
    StatusProcessor,
    WalletFrameError,
    encode_request,
)
from tests.wallet.conftest import DEADLINE_S

AUTHORITIES = ("plan", "readiness", "adapter", "server")


def ask(world: OfflineWorld, authorities: Authorities | None = None, **kw: float) -> StatusOutcome:
    """Run one canonical request through a fresh processor over ``authorities``."""
    processor = StatusProcessor(
        world.binding(), authorities or world.authorities(), clock=world.clock, **kw
    )
    return processor.process(encode_request(1), world.clock.peek() + DEADLINE_S)


def rewrite(world: OfflineWorld, authority: str, **changes: object) -> Authorities:
    """Honest authorities, except that ``authority``'s answers get ``changes``."""

    def hook(name: str, call: int, honest: object) -> object:
        if name == authority and isinstance(honest, msgspec.Struct):
            return msgspec.structs.replace(honest, **changes)
        return honest

    return Adversary(world.authorities(), hook).authorities()


def answer(world: OfflineWorld, authority: str, value: object) -> Authorities:
    """Honest authorities, except that ``authority`` answers ``value``."""
    return Adversary(
        world.authorities(), lambda name, call, honest: value if name == authority else honest
    ).authorities()


def test_available_status_reads_the_plan_again_after_the_others(world: OfflineWorld) -> None:
    """A consistent world yields the status; the plan is read first and re-read last."""
    outcome = ask(world)
    assert outcome.available, outcome.reason
    assert world.reads == ["plan", "readiness", "adapter", "server", "plan"]
    body = json.loads(outcome.response)
    assert body["result"] == {
        "schema_version": 1,
        "connected": True,
        "chain": "eip155:8453",
        "available_actions": ["status"],
        "mutating_actions": [],
    }


def test_response_omits_everything_but_the_sanitized_fields(world: OfflineWorld) -> None:
    """No node id, address, RPC URL, peer, signature, provider error, digest or host path."""
    response = ask(world).response.decode()
    for secret in (
        *SECRETS,
        world.session_id,
        world.session_digest,
        world.plan_digest,
        world.adapter_digest,
        world.server_digest,
        world.alias,
    ):
        assert secret not in response
    assert set(json.loads(response)) == {"jsonrpc", "id", "result"}


def test_connected_false_is_reported_as_such(world: OfflineWorld) -> None:
    """A disconnected wallet is still a status: ``connected`` is false."""
    world.connected = False
    assert json.loads(ask(world).response)["result"]["connected"] is False


# -- the clock: before decoding, after each read, after validation ------------------------------


def test_clock_is_sampled_before_decoding(world: OfflineWorld) -> None:
    """Past its deadline, even a malformed frame is refused as expired, not parsed."""
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    with pytest.raises(RequestExpired, match="before decoding"):
        processor.process(b"{not json", world.clock.peek())
    assert world.reads == []


def test_session_expiry_refuses_before_decoding(world: OfflineWorld) -> None:
    """Once the host-derived session expiry passes, no request is processed."""
    world.clock.advance(world.lifetime_s)
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    with pytest.raises(RequestExpired, match="session expired"):
        processor.process(encode_request(1), world.clock.peek() + DEADLINE_S)


def test_non_finite_deadline_is_refused(world: OfflineWorld) -> None:
    """A NaN or infinite deadline would never pass: refused."""
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    for deadline in (float("nan"), float("inf")):
        with pytest.raises(RequestExpired):
            processor.process(encode_request(1), deadline)


def test_clock_is_sampled_after_authority_validation(world: OfflineWorld) -> None:
    """A deadline crossed only at the last sample (after the re-read) still refuses."""
    # samples: t0, after 5 reads, t1; only the step before t1 moves the clock past it
    world.clock = FakeClock(world.clock.peek(), steps=[0, 0, 0, 0, 0, DEADLINE_S, 0])
    with pytest.raises(RequestExpired, match="after authority validation"):
        ask(world)


def test_freshness_is_judged_at_the_second_sample(world: OfflineWorld) -> None:
    """An observation fresh at decoding but too old by the last sample is stale."""
    world.clock = FakeClock(world.clock.peek(), steps=[0, 0, 0, 0, 0, MAX_OBSERVATION_AGE_S + 1, 0])
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    outcome = processor.process(encode_request(1), world.clock.peek() + 100.0)
    assert outcome.reason == "stale"


def test_clock_regression_is_refused(world: OfflineWorld) -> None:
    """A bridge clock that runs backwards between its samples is not believed."""
    world.clock = FakeClock(world.clock.peek(), steps=[0, 0, 0, 0, 0, -1.0, 0])
    assert ask(world).reason == "clock_regressed"


@pytest.mark.parametrize("authority", AUTHORITIES)
def test_an_over_deadline_read_terminates(world: OfflineWorld, authority: str) -> None:
    """Any authority answering at or after the deadline is a failed read (one strike)."""
    with pytest.raises(AuthorityDeadline) as caught:
        ask(world, answer_late(world, authority, late_by_s=DEADLINE_S))
    assert caught.value.authority == authority


@pytest.mark.parametrize(("authority", "call"), [*((a, 1) for a in AUTHORITIES), ("plan", 2)])
def test_a_failed_read_terminates_without_retry(
    world: OfflineWorld, authority: str, call: int
) -> None:
    """A read that raises ends processing, its cause chained, and is never retried."""
    authorities = fail_read(world, authority, on_call=call)
    with pytest.raises(AuthorityFailed) as caught:
        ask(world, authorities)
    assert isinstance(caught.value.__cause__, ConnectionError)
    adversary = authorities.plan
    assert isinstance(adversary, Adversary)
    assert adversary.calls[authority] == call  # the failing read was the last one


def test_malformed_frames_are_typed_errors(world: OfflineWorld) -> None:
    """A frame that fails the scan or the schema raises WalletFrameError, no read is made."""
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    for frame in (b'{"a":1,"a":1}', b'{"jsonrpc":"2.0","id":1,"method":"x"}', b"\xff"):
        with pytest.raises(WalletFrameError):
            processor.process(frame, world.clock.peek() + DEADLINE_S)
    assert world.reads == []


# -- evidence that makes the method unavailable ------------------------------------------------


def _set(**changes: object) -> Callable[[OfflineWorld], None]:
    def apply(world: OfflineWorld) -> None:
        for name, value in changes.items():
            setattr(world, name, value)

    return apply


# Each row changes the world after the binding was taken, so host and authority disagree.
WORLD_CHANGES: list[tuple[str, Callable[[OfflineWorld], None], str]] = [
    ("session digest", _set(session_digest="blake3:" + "e" * 64), "session_digest"),
    ("plan digest", _set(plan_digest="blake3:" + "e" * 64), "plan_digest"),
    ("policy revision", _set(policy_revision=4), "policy_revision"),
    ("state", _set(state="stopping"), "not_running"),
    ("malformed adapter digest", _set(adapter_digest="sha256:abc"), "adapter_digest"),
    ("malformed server digest", _set(server_digest="md5:" + "0" * 32), "server_digest"),
    ("alias is a URL", _set(alias="https://rpc.example"), "alias"),
    ("alias with a newline", _set(alias="base\n"), "alias"),
    ("empty chain policy", _set(chain_policy=()), "chain_policy"),
    ("repeated chain", _set(chain_policy=("eip155:8453", "eip155:8453")), "chain_policy"),
    ("malformed chain", _set(chain_policy=("eip155:8453", "8453")), "chain_policy"),
    ("chain outside the policy", _set(chain_id="eip155:1"), "chain"),
    ("audit generation zero", _set(audit_generation=0), "audit_generation"),
    ("journal generation zero", _set(journal_generation=0), "journal_generation"),
    ("audit not ready", _set(audit_ready=False), "journal_not_ready"),
    ("journal not ready", _set(journal_ready=False), "journal_not_ready"),
    ("containment not ready", _set(containment_ready=False), "containment_not_ready"),
    ("server stopped", _set(server_state="stopped"), "stopped"),
    ("server failed", _set(server_state="failed"), "failed"),
    ("server starting", _set(server_state="starting"), "unstable"),
    ("server unstable", _set(stable=False), "unstable"),
    ("plan generation zero", _set(plan_generation=0), "unbound"),
]


@pytest.mark.parametrize(
    ("case", "change", "expected"), WORLD_CHANGES, ids=[r[0] for r in WORLD_CHANGES]
)
def test_mismatched_evidence_is_unavailable(
    world: OfflineWorld, case: str, change: Callable[[OfflineWorld], None], expected: str
) -> None:
    """Each revalidated field, wrong, makes the method unavailable with its own reason."""
    binding = world.binding()
    change(world)
    processor = StatusProcessor(binding, world.authorities(), clock=world.clock)
    outcome = processor.process(encode_request(1), world.clock.peek() + DEADLINE_S)
    assert (outcome.available, outcome.reason) == (False, expected)
    assert "result" not in json.loads(outcome.response)


def test_expired_plan_is_unavailable(world: OfflineWorld) -> None:
    """The plan's own expiry passing (before the session's) makes the method unavailable."""
    binding = world.binding()
    world.expires_at = world.clock.peek()
    processor = StatusProcessor(binding, world.authorities(), clock=world.clock)
    assert processor.process(encode_request(1), world.clock.peek() + 1).reason == "expired"


@pytest.mark.parametrize(
    ("observed_offset_s", "expected"),
    [
        (-(MAX_OBSERVATION_AGE_S + 0.001), "stale"),
        (0.001, "future"),
        (-MAX_OBSERVATION_AGE_S, "available"),
    ],
)
def test_observation_freshness(
    world: OfflineWorld, observed_offset_s: float, expected: str
) -> None:
    """An observation older than the bound is stale, one from the future is refused."""
    world.observed_at = world.clock.peek() + observed_offset_s
    assert ask(world).reason == expected


REWRITES: list[tuple[str, dict[str, object], str]] = [
    ("adapter", {"adapter_digest": "sha256:" + "9" * 64}, "adapter_digest"),
    ("server", {"server_digest": "sha256:" + "9" * 64}, "server_digest"),
    ("server", {"alias": "other-wallet"}, "alias"),
    ("readiness", {"audit_generation": 11}, "audit_generation"),
    ("readiness", {"journal_generation": 19}, "journal_generation"),
    ("adapter", {"owner_uid": 4242}, "cross_boundary"),
    ("server", {"owner_uid": 4242}, "cross_boundary"),
    ("readiness", {"plan_generation": 4}, "rolled_back"),
    ("server", {"plan_generation": 6}, "revised"),
    ("adapter", {"deadline": 0.5}, "unbound"),
    ("plan", {"deadline": 0.5}, "unbound"),
    ("plan", {"plan_generation": "5"}, "ambiguous"),
    ("server", {"observed_at": float("nan")}, "ambiguous"),
    ("server", {"connected": 1}, "ambiguous"),
    ("readiness", {"containment_ready": "yes"}, "ambiguous"),
    ("plan", {"chain_policy": ["eip155:8453", object()]}, "ambiguous"),
]


@pytest.mark.parametrize(("authority", "changes", "expected"), REWRITES)
def test_inconsistent_authorities_are_unavailable(
    world: OfflineWorld, authority: str, changes: dict[str, object], expected: str
) -> None:
    """Authorities that disagree with each other, or answer mistyped evidence, are refused."""
    assert ask(world, rewrite(world, authority, **changes)).reason == expected


@pytest.mark.parametrize("authority", AUTHORITIES)
def test_missing_evidence_is_unavailable(world: OfflineWorld, authority: str) -> None:
    """An authority with no evidence (None) makes the method unavailable."""
    assert ask(world, answer(world, authority, None)).reason == "missing"


@pytest.mark.parametrize("authority", AUTHORITIES)
def test_evidence_of_the_wrong_kind_is_ambiguous(world: OfflineWorld, authority: str) -> None:
    """An answer that is not the authority's snapshot type is refused as ambiguous."""
    assert ask(world, answer(world, authority, {"session_id": "session-1"})).reason == "ambiguous"


@pytest.mark.parametrize("authority", AUTHORITIES)
def test_evidence_shaped_like_a_snapshot_is_still_ambiguous(
    world: OfflineWorld, authority: str
) -> None:
    """A mapping with exactly the snapshot's fields is not the snapshot: ambiguous."""
    authorities = Adversary(
        world.authorities(),
        lambda name, call, honest: (
            msgspec.structs.asdict(honest)
            if name == authority and isinstance(honest, msgspec.Struct)
            else honest
        ),
    ).authorities()
    assert ask(world, authorities).reason == "ambiguous"


@pytest.mark.parametrize("authority", AUTHORITIES)
def test_evidence_for_another_session_is_cross_boundary(
    world: OfflineWorld, authority: str
) -> None:
    """An authority answering for another session is refused as cross-boundary."""
    assert ask(world, answer_for_other_session(world, authority)).reason == "cross_boundary"


def test_revision_between_the_two_plan_reads_is_detected(world: OfflineWorld) -> None:
    """A plan revised while the other authorities were read is unavailable: revised."""
    assert ask(world, revise_between_reads(world)).reason == "revised"


def test_rollback_between_the_two_plan_reads_is_detected(world: OfflineWorld) -> None:
    """A plan re-read with a lower generation is unavailable: rolled back."""
    authorities = Adversary(
        world.authorities(),
        lambda name, call, honest: (
            msgspec.structs.replace(honest, plan_generation=4)
            if name == "plan" and call == 2 and isinstance(honest, msgspec.Struct)
            else honest
        ),
    ).authorities()
    assert ask(world, authorities).reason == "rolled_back"


def test_same_generation_other_content_on_the_re_read_is_ambiguous(world: OfflineWorld) -> None:
    """The re-read names the same generation with other content: which one is current?"""
    authorities = Adversary(
        world.authorities(),
        lambda name, call, honest: (
            msgspec.structs.replace(honest, expires_at=world.expires_at - 1)
            if name == "plan" and call == 2 and isinstance(honest, msgspec.Struct)
            else honest
        ),
    ).authorities()
    assert ask(world, authorities).reason == "ambiguous"


# -- no state between requests -----------------------------------------------------------------


def test_no_cached_status_after_evidence_turns_bad(world: OfflineWorld) -> None:
    """After an available answer, a stopped server yields no status, not the last one."""
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    assert processor.process(encode_request(1), world.clock.peek() + DEADLINE_S).available
    for change in (_set(server_state="stopped"), _set(observed_at=world.clock.peek() - 60)):
        change(world)
        outcome = processor.process(encode_request(2), world.clock.peek() + DEADLINE_S)
        assert not outcome.available
        assert "result" not in json.loads(outcome.response)
        world.server_state = "ready"


def test_processor_keeps_no_high_water_state(world: OfflineWorld) -> None:
    """Without the contracts, a consistent rollback passes: that defence is not global state."""
    processor = StatusProcessor(world.binding(), roll_back(world), clock=world.clock)
    for request_id in (1, 2, 3):
        outcome = processor.process(encode_request(request_id), world.clock.peek() + DEADLINE_S)
        assert outcome.available, outcome.reason
