"""Authority contracts reject generation reuse and rollback (ABA); adversaries try both."""

from __future__ import annotations

import msgspec
import pytest

from glove.testing.wallet import (
    Adversary,
    OfflineWorld,
    answer_for_other_session,
    answer_late,
    reuse_generation,
    revise_between_reads,
    roll_back,
)
from glove.wallet import (
    Authorities,
    AuthorityContractError,
    AuthorityDeadline,
    AuthorityError,
    GenerationLedger,
    GenerationReuse,
    GenerationRollback,
    PlanContract,
    StatusProcessor,
    contracted,
    encode_request,
)
from tests.wallet.conftest import DEADLINE_S


def run(world: OfflineWorld, authorities: Authorities, requests: int = 2) -> list[str]:
    """Send ``requests`` requests through one processor; return each outcome's reason."""
    processor = StatusProcessor(world.binding(), authorities, clock=world.clock)
    reasons = []
    for request_id in range(1, requests + 1):
        deadline = world.clock.peek() + DEADLINE_S
        reasons.append(processor.process(encode_request(request_id), deadline).reason)
        world.clock.advance(0.1)
    return reasons


def test_contract_errors_are_failed_reads() -> None:
    """Reuse and rollback are authority errors: the worker treats them as one strike."""
    assert issubclass(GenerationReuse, AuthorityContractError)
    assert issubclass(GenerationRollback, AuthorityContractError)
    assert issubclass(AuthorityContractError, AuthorityError)


def test_honest_authorities_pass_their_contracts(world: OfflineWorld) -> None:
    """Repeated reads of unchanged generations, and growing ones, are accepted."""
    authorities = contracted(world.authorities())
    assert run(world, authorities, 3) == ["available"] * 3
    world.revise_plan()
    world.observe()
    assert run(world, authorities, 2) == ["available"] * 2


def test_reuse_is_invisible_to_the_processor_alone(world: OfflineWorld) -> None:
    """The reuse attack is consistent within each request: without contracts it passes."""
    assert run(world, reuse_generation(world)) == ["available", "available"]


def test_reuse_is_rejected_by_the_contract(world: OfflineWorld) -> None:
    """Generation 5 with another adapter digest, the second time: GenerationReuse."""
    authorities = contracted(reuse_generation(world))
    with pytest.raises(GenerationReuse) as caught:
        run(world, authorities)
    assert (caught.value.authority, caught.value.generation) == ("plan", world.plan_generation)


def test_rollback_is_rejected_by_the_contract(world: OfflineWorld) -> None:
    """A consistent rollback to generation 1 after 5: GenerationRollback on the plan."""
    with pytest.raises(GenerationRollback) as caught:
        run(world, contracted(roll_back(world)))
    assert (caught.value.field, caught.value.seen, caught.value.got) == ("plan_generation", 5, 1)


def test_revision_between_reads_passes_the_contract_but_not_the_processor(
    world: OfflineWorld,
) -> None:
    """A forward revision is legal for the contract; the re-read still makes it unavailable."""
    assert run(world, contracted(revise_between_reads(world))) == ["revised", "revised"]


@pytest.mark.parametrize("authority", ["plan", "readiness", "adapter", "server"])
def test_late_answers_fail_through_the_contract(world: OfflineWorld, authority: str) -> None:
    """An answer after the deadline is a failed read, contract or not."""
    with pytest.raises(AuthorityDeadline):
        run(world, contracted(answer_late(world, authority, late_by_s=DEADLINE_S)), 1)


@pytest.mark.parametrize("authority", ["plan", "readiness", "adapter", "server"])
def test_other_session_answers_do_not_enter_the_ledger(world: OfflineWorld, authority: str) -> None:
    """Another session's evidence is refused as cross-boundary and not remembered."""
    authorities = contracted(answer_for_other_session(world, authority))
    assert run(world, authorities, 1) == ["cross_boundary"]
    contract = getattr(authorities, authority)
    if authority == "plan":
        assert contract.ledger.high("plan_generation") is None
    else:
        assert contract.ledger.high("generation") is None


def _rewrite_after_first_request(
    world: OfflineWorld, authority: str, **changes: object
) -> Authorities:
    first_calls = 2 if authority == "plan" else 1

    def hook(name: str, call: int, honest: object) -> object:
        if name == authority and call > first_calls and isinstance(honest, msgspec.Struct):
            return msgspec.structs.replace(honest, **changes)
        return honest

    return Adversary(world.authorities(), hook).authorities()


ATTACKS = [
    ("plan", {"policy_revision": 2}, GenerationRollback, "policy_revision"),
    ("plan", {"audit_generation": 9}, GenerationRollback, "audit_generation"),
    ("plan", {"journal_generation": 19}, GenerationRollback, "journal_generation"),
    ("plan", {"state": "stopping"}, GenerationReuse, None),
    ("readiness", {"generation": 0}, GenerationRollback, "generation"),
    ("readiness", {"containment_ready": False}, GenerationReuse, None),
    ("adapter", {"generation": 0}, GenerationRollback, "generation"),
    ("adapter", {"adapter_digest": "sha256:" + "8" * 64}, GenerationReuse, None),
    ("server", {"generation": 0}, GenerationRollback, "generation"),
    ("server", {"observed_at": 1000.05}, GenerationReuse, None),
    ("server", {"connected": False}, GenerationReuse, None),
]


@pytest.mark.parametrize(("authority", "changes", "error", "field"), ATTACKS)
def test_every_contract_rejects_reuse_and_rollback(
    world: OfflineWorld,
    authority: str,
    changes: dict[str, object],
    error: type[AuthorityContractError],
    field: str | None,
) -> None:
    """Each authority's contract rejects its own monotonic fields going back and reuse."""
    with pytest.raises(error) as caught:
        run(world, contracted(_rewrite_after_first_request(world, authority, **changes)))
    assert caught.value.authority == authority
    if field is not None:
        assert isinstance(caught.value, GenerationRollback)
        assert caught.value.field == field


def test_the_deadline_is_not_content(world: OfflineWorld) -> None:
    """Two reads of one generation for two requests differ only in deadline: accepted."""
    contract = PlanContract(world.authorities().plan)
    binding = world.binding()
    first = contract.read_plan(binding, 1001.0)
    second = contract.read_plan(binding, 1002.0)
    assert first is not None
    assert second is not None
    assert contract.ledger.high("plan_generation") == world.plan_generation


def test_ledger_requires_its_key_first() -> None:
    """A ledger whose key generation is not monotonic is a programming error."""
    with pytest.raises(ValueError, match="key generation"):
        GenerationLedger("x", "generation", ("plan_generation",))
