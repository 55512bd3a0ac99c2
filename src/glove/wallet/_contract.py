"""Authority contracts: a generation names one content, and generations never go back (sans-IO).

The processor re-reads the plan after the other authorities, which catches a revision in
the middle of one request. It cannot catch ABA: an authority that answers generation 7,
then different content under the same generation 7, or that rolls back to generation 6
once the processor has moved on (the processor keeps no state between requests, by
design, so it has nothing to compare with). That defence belongs to the authority
contracts, one per authority of a composition, which wrap the raw authority and remember,
per field that must only grow, the highest value accepted and the canonical content of the
highest generation:

* a lower value of any monotonic field → :class:`~glove.wallet.errors.GenerationRollback`;
* the highest generation again with different content →
  :class:`~glove.wallet.errors.GenerationReuse`.

Both are failed reads: the status worker of that composition terminates and nothing is
retried. Content is the snapshot's canonical msgspec JSON with the two echoes of the
request's binding blanked: the ``deadline`` and the ``plan_generation`` (a readiness or
status generation legitimately spans plan revisions; the plan generation itself is still
checked never to go back).
Only snapshots for the contract's own session are admitted; evidence for another session
is left for the processor to refuse as cross-boundary, so it cannot poison this ledger.

The ledger lives as long as the contract object (one composition). A live composition must
back it with durable storage (the session journal) so that a restart cannot reopen a
rollback window; see ``docs/wallet.md``.
"""

from __future__ import annotations

from typing import Final, TypeVar

import msgspec

from glove.wallet._authority import (
    AdapterAuthority,
    AdapterSnapshot,
    Authorities,
    PlanAuthority,
    PlanSnapshot,
    ReadinessAuthority,
    ReadinessSnapshot,
    ServerStatusAuthority,
    ServerStatusSnapshot,
    SessionBinding,
)
from glove.wallet.errors import GenerationReuse, GenerationRollback

_Snapshot = TypeVar(
    "_Snapshot", PlanSnapshot, ReadinessSnapshot, AdapterSnapshot, ServerStatusSnapshot
)
_ENCODER: Final = msgspec.json.Encoder(order="deterministic")


class GenerationLedger:
    """The high-water marks and the content of the highest generation of one authority.

    Attributes:
        authority: the authority's name, for errors.
        key: the field whose value names the content (``plan_generation`` or
            ``generation``).
        monotonic: every field that must never decrease, ``key`` first.
    """

    def __init__(self, authority: str, key: str, monotonic: tuple[str, ...]) -> None:
        if not monotonic or monotonic[0] != key:
            raise ValueError("the key generation must be the first monotonic field")
        self.authority = authority
        self.key = key
        self.monotonic = monotonic
        self._high: dict[str, int] = {}
        self._content: bytes | None = None

    def admit(self, snapshot: msgspec.Struct) -> None:
        """Accept ``snapshot`` or raise; on acceptance raise the high-water marks.

        Raises:
            GenerationRollback: a monotonic field is lower than one already accepted.
            GenerationReuse: the highest generation came back with different content.
        """
        values = {name: int(getattr(snapshot, name)) for name in self.monotonic}
        for name, value in values.items():
            seen = self._high.get(name)
            if seen is not None and value < seen:
                raise GenerationRollback(self.authority, name, seen, value)
        # The two echoes of the request's binding are not content: blank them.
        blanked = msgspec.structs.replace(snapshot, deadline=0.0, plan_generation=0)
        content = _ENCODER.encode(blanked)
        generation = values[self.key]
        if generation == self._high.get(self.key) and content != self._content:
            raise GenerationReuse(self.authority, generation)
        self._high.update(values)
        self._content = content

    def high(self, name: str) -> int | None:
        """The highest accepted value of monotonic field ``name``, if any."""
        return self._high.get(name)


def _admit(
    ledger: GenerationLedger, binding: SessionBinding, snap: _Snapshot, kind: type[_Snapshot]
) -> _Snapshot:
    # Only well-typed evidence for this session enters the ledger; anything else passes
    # through untouched for the processor to refuse (ambiguous or cross-boundary).
    if (
        type(snap) is kind
        and snap.session_id == binding.session_id
        and all(type(getattr(snap, name)) is int for name in ledger.monotonic)
    ):
        ledger.admit(snap)
    return snap


class PlanContract:
    """The plan authority under its contract: plan, audit and journal generations and the
    policy revision only grow; one plan generation names one content."""

    def __init__(self, inner: PlanAuthority) -> None:
        self.inner = inner
        self.ledger = GenerationLedger(
            "plan",
            "plan_generation",
            ("plan_generation", "policy_revision", "audit_generation", "journal_generation"),
        )

    def read_plan(self, binding: SessionBinding, deadline: float) -> PlanSnapshot | None:
        """Read through the contract.

        Raises:
            GenerationRollback: see :meth:`GenerationLedger.admit`.
            GenerationReuse: see :meth:`GenerationLedger.admit`.
            Exception: whatever the inner authority raised.
        """
        snap = self.inner.read_plan(binding, deadline)
        return None if snap is None else _admit(self.ledger, binding, snap, PlanSnapshot)


class ReadinessContract:
    """The readiness authority under its contract."""

    def __init__(self, inner: ReadinessAuthority) -> None:
        self.inner = inner
        self.ledger = GenerationLedger(
            "readiness",
            "generation",
            ("generation", "plan_generation", "audit_generation", "journal_generation"),
        )

    def read_readiness(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ReadinessSnapshot | None:
        """Read through the contract.

        Raises:
            GenerationRollback: see :meth:`GenerationLedger.admit`.
            GenerationReuse: see :meth:`GenerationLedger.admit`.
            Exception: whatever the inner authority raised.
        """
        snap = self.inner.read_readiness(binding, plan_generation, deadline)
        return None if snap is None else _admit(self.ledger, binding, snap, ReadinessSnapshot)


class AdapterContract:
    """The adapter-digest authority under its contract."""

    def __init__(self, inner: AdapterAuthority) -> None:
        self.inner = inner
        self.ledger = GenerationLedger("adapter", "generation", ("generation", "plan_generation"))

    def read_adapter(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> AdapterSnapshot | None:
        """Read through the contract.

        Raises:
            GenerationRollback: see :meth:`GenerationLedger.admit`.
            GenerationReuse: see :meth:`GenerationLedger.admit`.
            Exception: whatever the inner authority raised.
        """
        snap = self.inner.read_adapter(binding, plan_generation, deadline)
        return None if snap is None else _admit(self.ledger, binding, snap, AdapterSnapshot)


class ServerStatusContract:
    """The wallet-server status authority under its contract: one generation per observation."""

    def __init__(self, inner: ServerStatusAuthority) -> None:
        self.inner = inner
        self.ledger = GenerationLedger("server", "generation", ("generation", "plan_generation"))

    def read_server_status(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ServerStatusSnapshot | None:
        """Read through the contract.

        Raises:
            GenerationRollback: see :meth:`GenerationLedger.admit`.
            GenerationReuse: see :meth:`GenerationLedger.admit`.
            Exception: whatever the inner authority raised.
        """
        snap = self.inner.read_server_status(binding, plan_generation, deadline)
        return None if snap is None else _admit(self.ledger, binding, snap, ServerStatusSnapshot)


def contracted(authorities: Authorities) -> Authorities:
    """Wrap each of four raw authorities in its generation contract (one ledger each)."""
    return Authorities(
        plan=PlanContract(authorities.plan),
        readiness=ReadinessContract(authorities.readiness),
        adapter=AdapterContract(authorities.adapter),
        server=ServerStatusContract(authorities.server),
    )
