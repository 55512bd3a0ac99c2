"""The host-derived binding, the four private authority interfaces and their snapshots.

The bridge trusts nothing the guest says about who it is: the :class:`SessionBinding` is
built on the host when the session starts. Evidence comes from four authorities, each
behind a small interface a future composition implements with protected host objects:

* :class:`PlanAuthority`: the current plan, session and policy (digests, revision, state,
  expiry, the expected adapter and server digests, the wallet-server alias, the chain
  policy, and the audit/journal generations the session is bound to);
* :class:`ReadinessAuthority`: audit/journal and containment readiness;
* :class:`AdapterAuthority`: the owner-local adapter digest;
* :class:`ServerStatusAuthority`: the stable wallet-server status.

Every read receives the request's absolute deadline and, after the first plan read, its
plan generation; every snapshot echoes both, so evidence computed for another request or
another plan revision cannot pass for this one. Times are seconds on the bridge's own
monotonic clock (:class:`Clock`). Snapshots are frozen msgspec Structs: their content can be
encoded canonically for the generation contracts (``glove.wallet._contract``).

A read returns a snapshot, or None when the authority has no evidence ("missing"); a read
that raises is a failed read and terminates the status worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import msgspec


class Clock(Protocol):
    """The bridge's clock: monotonic seconds, never adjusted."""

    def monotonic(self) -> float:
        """Return the current monotonic time in seconds."""
        ...


class MonotonicClock:
    """The production clock: :func:`time.monotonic` (the same base as the asyncio loop)."""

    def monotonic(self) -> float:
        """Return :func:`time.monotonic`."""
        return time.monotonic()


@dataclass(frozen=True, slots=True)
class SessionBinding:
    """What the host knows about the running session, derived when it started.

    Attributes:
        session_id: the session this bridge serves; every snapshot must name it.
        session_digest: the exact session digest the plan authority must report.
        plan_digest: the exact plan digest the plan authority must report.
        policy_revision: the policy revision the session was admitted under.
        owner_uid: the uid owning the bridge; owner-local evidence must name it.
        expires_at: when the session expires, on the bridge clock.
    """

    session_id: str
    session_digest: str
    plan_digest: str
    policy_revision: int
    owner_uid: int
    expires_at: float


class PlanSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """The plan/session/policy authority's view, bound to one request."""

    session_id: str
    plan_generation: int
    deadline: float
    session_digest: str
    plan_digest: str
    policy_revision: int
    state: str
    expires_at: float
    adapter_digest: str
    server_digest: str
    wallet_server_alias: str
    chain_policy: tuple[str, ...]
    audit_generation: int
    journal_generation: int


class ReadinessSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Audit/journal and containment readiness, bound to one request and plan generation."""

    session_id: str
    plan_generation: int
    deadline: float
    generation: int
    audit_generation: int
    journal_generation: int
    audit_ready: bool
    journal_ready: bool
    containment_ready: bool


class AdapterSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """The owner-local adapter digest, bound to one request and plan generation."""

    session_id: str
    plan_generation: int
    deadline: float
    generation: int
    owner_uid: int
    adapter_digest: str


class ServerStatusSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """The wallet server's status as the owner-local status object observed it.

    The last group of fields is what a real status carries and a response must never
    repeat: node identity, the wallet address, RPC endpoints, peers, signatures, provider
    errors and host paths. They are here so the sanitizer is tested against them.
    """

    session_id: str
    plan_generation: int
    deadline: float
    generation: int
    owner_uid: int
    alias: str
    server_digest: str
    state: str
    stable: bool
    observed_at: float
    chain_id: str
    connected: bool
    node_id: str = ""
    wallet_address: str = ""
    rpc_url: str = ""
    peers: tuple[str, ...] = ()
    signature: str = ""
    provider_error: str = ""
    data_dir: str = ""


class PlanAuthority(Protocol):
    """The current plan, session and policy."""

    def read_plan(self, binding: SessionBinding, deadline: float) -> PlanSnapshot | None:
        """Return the plan as it is now, for ``binding``, bound to ``deadline``.

        Raises:
            Exception: any failure; the processor treats it as a failed read.
        """
        ...


class ReadinessAuthority(Protocol):
    """Audit/journal and containment readiness."""

    def read_readiness(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ReadinessSnapshot | None:
        """Return readiness for ``binding`` at ``plan_generation``, bound to ``deadline``.

        Raises:
            Exception: any failure; the processor treats it as a failed read.
        """
        ...


class AdapterAuthority(Protocol):
    """The owner-local adapter digest."""

    def read_adapter(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> AdapterSnapshot | None:
        """Return the adapter digest for ``binding`` at ``plan_generation``.

        Raises:
            Exception: any failure; the processor treats it as a failed read.
        """
        ...


class ServerStatusAuthority(Protocol):
    """The stable wallet-server status."""

    def read_server_status(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ServerStatusSnapshot | None:
        """Return the wallet server's status for ``binding`` at ``plan_generation``.

        Raises:
            Exception: any failure; the processor treats it as a failed read.
        """
        ...


@dataclass(frozen=True, slots=True)
class Authorities:
    """The four authorities one bridge composition reads, in the order it reads them."""

    plan: PlanAuthority
    readiness: ReadinessAuthority
    adapter: AdapterAuthority
    server: ServerStatusAuthority
