"""Deterministic offline fakes for the wallet status bridge: a clock, a world, adversaries.

Nothing here touches a network, a provider, a wallet or Sage. :class:`OfflineWorld` is one
consistent host view (plan, readiness, adapter digest, wallet-server status) behind the
four authority interfaces; tests change it between or during requests. :class:`Adversary`
wraps honest authorities and lets a hook rewrite, drop or delay any answer; the named
factories below are the attacks the authority contracts must stop::

    world = OfflineWorld(FakeClock(), owner_uid=os.getuid())
    processor = StatusProcessor(world.binding(), contracted(reuse_generation(world)),
                                clock=world.clock)

Secrets the bridge must never repeat (:data:`SECRETS`) are planted in every server status.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from glove.wallet import (
    AdapterSnapshot,
    Authorities,
    MonotonicClock,
    PlanSnapshot,
    ReadinessSnapshot,
    ServerStatusSnapshot,
    SessionBinding,
)

__all__ = [
    "SECRETS",
    "Adversary",
    "FakeClock",
    "OfflineWorld",
    "RealClock",
    "answer_for_other_session",
    "answer_late",
    "fail_read",
    "reuse_generation",
    "revise_between_reads",
    "roll_back",
]

NODE_ID: Final = "12D3KooWNodeIdentitySecretDoNotLeak"
WALLET_ADDRESS: Final = "0x52908400098527886E0F7030069857D2E4169EE7"
RPC_URL: Final = "https://rpc.example.invalid/v3/rpc-key-do-not-leak"
PEER: Final = "/ip4/10.9.8.7/tcp/4001/p2p/QmPeerDoNotLeak"
SIGNATURE: Final = "0xsignaturedonotleak00ff"
PROVIDER_ERROR: Final = "provider-error-do-not-leak: upstream 503"
DATA_DIR: Final = "/home/owner/.local/share/wallet-do-not-leak"
SECRETS: Final = (NODE_ID, WALLET_ADDRESS, RPC_URL, PEER, SIGNATURE, PROVIDER_ERROR, DATA_DIR)
"""What a real status carries and a bridge response must never contain."""


class FakeClock:
    """A monotonic clock that moves only when told, or by a script of steps.

    Each :meth:`monotonic` returns the current time, then advances by the next step of
    ``steps`` (cycling), or by ``step`` when there is no script. :meth:`peek` reads without
    advancing (for fakes that timestamp observations).
    """

    def __init__(self, start: float = 1000.0, *, steps: Sequence[float] = (), step: float = 0.0):
        self.now = start
        self._steps = tuple(steps)
        self._step = step
        self.samples = 0

    @classmethod
    def from_bytes(cls, data: bytes, *, unit_s: float, start: float = 1000.0) -> FakeClock:
        """A clock whose steps are ``data``'s bytes times ``unit_s`` (the fuzzer's clock)."""
        return cls(start, steps=[byte * unit_s for byte in data])

    def monotonic(self) -> float:
        """Return the current time, then advance by one step."""
        value = self.now
        step = self._steps[self.samples % len(self._steps)] if self._steps else self._step
        self.samples += 1
        self.now += step
        return value

    def peek(self) -> float:
        """Return the current time without advancing."""
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.now += seconds


class RealClock(MonotonicClock):
    """The production clock with the fake's test surface: :meth:`advance` really waits."""

    def peek(self) -> float:
        """Return :func:`time.monotonic` (reading a real clock never moves it)."""
        return time.monotonic()

    def advance(self, seconds: float) -> None:
        """Block for ``seconds``: an authority that is really slow to answer."""
        time.sleep(seconds)


def _digest(char: str, scheme: str = "sha256") -> str:
    return f"{scheme}:{char * 64}"


@dataclass
class OfflineWorld:
    """One consistent host view behind the four authorities; mutate it to change evidence.

    ``peek`` reads the clock without advancing it (``FakeClock.peek``, or a real
    monotonic clock); with ``auto_observe`` every server read is a fresh observation.
    """

    clock: FakeClock | RealClock
    owner_uid: int
    auto_observe: bool = False
    session_id: str = "session-1"
    session_digest: str = field(default_factory=lambda: _digest("1", "blake3"))
    plan_digest: str = field(default_factory=lambda: _digest("2", "blake3"))
    policy_revision: int = 3
    plan_generation: int = 5
    state: str = "running"
    lifetime_s: float = 3600.0
    adapter_digest: str = field(default_factory=lambda: _digest("3"))
    server_digest: str = field(default_factory=lambda: _digest("4"))
    alias: str = "base-wallet"
    chain_policy: tuple[str, ...] = ("eip155:8453",)
    audit_generation: int = 10
    journal_generation: int = 20
    readiness_generation: int = 1
    audit_ready: bool = True
    journal_ready: bool = True
    containment_ready: bool = True
    adapter_generation: int = 1
    server_generation: int = 1
    server_state: str = "ready"
    stable: bool = True
    chain_id: str = "eip155:8453"
    connected: bool = True
    observed_at: float = 0.0
    expires_at: float = 0.0
    reads: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.observed_at = self.clock.peek()
        self.expires_at = self.clock.peek() + self.lifetime_s

    def binding(self) -> SessionBinding:
        """The host-derived binding of this world's session."""
        return SessionBinding(
            session_id=self.session_id,
            session_digest=self.session_digest,
            plan_digest=self.plan_digest,
            policy_revision=self.policy_revision,
            owner_uid=self.owner_uid,
            expires_at=self.expires_at,
        )

    def authorities(self) -> Authorities:
        """Four honest authorities reading this world."""
        return Authorities(_Plan(self), _Readiness(self), _Adapter(self), _Server(self))

    def observe(self) -> None:
        """A fresh wallet-server observation now (a new server generation)."""
        self.server_generation += 1
        self.observed_at = self.clock.peek()

    def revise_plan(self) -> None:
        """A new plan generation (same content otherwise)."""
        self.plan_generation += 1

    def plan(self, deadline: float) -> PlanSnapshot:
        """The plan snapshot as the honest authority reports it."""
        return PlanSnapshot(
            session_id=self.session_id,
            plan_generation=self.plan_generation,
            deadline=deadline,
            session_digest=self.session_digest,
            plan_digest=self.plan_digest,
            policy_revision=self.policy_revision,
            state=self.state,
            expires_at=self.expires_at,
            adapter_digest=self.adapter_digest,
            server_digest=self.server_digest,
            wallet_server_alias=self.alias,
            chain_policy=self.chain_policy,
            audit_generation=self.audit_generation,
            journal_generation=self.journal_generation,
        )


class _Plan:
    def __init__(self, world: OfflineWorld) -> None:
        self.world = world

    def read_plan(self, binding: SessionBinding, deadline: float) -> PlanSnapshot | None:
        self.world.reads.append("plan")
        return self.world.plan(deadline)


class _Readiness:
    def __init__(self, world: OfflineWorld) -> None:
        self.world = world

    def read_readiness(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ReadinessSnapshot | None:
        w = self.world
        w.reads.append("readiness")
        return ReadinessSnapshot(
            session_id=w.session_id,
            plan_generation=plan_generation,
            deadline=deadline,
            generation=w.readiness_generation,
            audit_generation=w.audit_generation,
            journal_generation=w.journal_generation,
            audit_ready=w.audit_ready,
            journal_ready=w.journal_ready,
            containment_ready=w.containment_ready,
        )


class _Adapter:
    def __init__(self, world: OfflineWorld) -> None:
        self.world = world

    def read_adapter(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> AdapterSnapshot | None:
        w = self.world
        w.reads.append("adapter")
        return AdapterSnapshot(
            session_id=w.session_id,
            plan_generation=plan_generation,
            deadline=deadline,
            generation=w.adapter_generation,
            owner_uid=w.owner_uid,
            adapter_digest=w.adapter_digest,
        )


class _Server:
    def __init__(self, world: OfflineWorld) -> None:
        self.world = world

    def read_server_status(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ServerStatusSnapshot | None:
        w = self.world
        w.reads.append("server")
        if w.auto_observe:
            w.observe()
        return ServerStatusSnapshot(
            session_id=w.session_id,
            plan_generation=plan_generation,
            deadline=deadline,
            generation=w.server_generation,
            owner_uid=w.owner_uid,
            alias=w.alias,
            server_digest=w.server_digest,
            state=w.server_state,
            stable=w.stable,
            observed_at=w.observed_at,
            chain_id=w.chain_id,
            connected=w.connected,
            node_id=NODE_ID,
            wallet_address=WALLET_ADDRESS,
            rpc_url=RPC_URL,
            peers=(PEER,),
            signature=SIGNATURE,
            provider_error=PROVIDER_ERROR,
            data_dir=DATA_DIR,
        )


Hook = Callable[[str, int, object], object]
"""``hook(authority, call_number, honest_answer) -> answer``; call numbers start at 1."""


class Adversary:
    """All four authority interfaces over honest ones, each answer passed through ``hook``.

    The hook may return the honest answer, a rewritten one, None, or anything at all (the
    processor must cope), or raise. ``calls`` counts reads per authority.
    """

    def __init__(self, honest: Authorities, hook: Hook) -> None:
        self.honest = honest
        self.hook = hook
        self.calls: dict[str, int] = {"plan": 0, "readiness": 0, "adapter": 0, "server": 0}

    def authorities(self) -> Authorities:
        """This adversary in all four roles."""
        return Authorities(self, self, self, self)

    def _answer(self, name: str, honest: object) -> object:
        self.calls[name] += 1
        return self.hook(name, self.calls[name], honest)

    def read_plan(self, binding: SessionBinding, deadline: float) -> PlanSnapshot | None:
        """The plan authority's answer, through the hook."""
        return self._answer("plan", self.honest.plan.read_plan(binding, deadline))  # type: ignore[return-value]

    def read_readiness(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ReadinessSnapshot | None:
        """The readiness authority's answer, through the hook."""
        honest = self.honest.readiness.read_readiness(binding, plan_generation, deadline)
        return self._answer("readiness", honest)  # type: ignore[return-value]

    def read_adapter(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> AdapterSnapshot | None:
        """The adapter authority's answer, through the hook."""
        honest = self.honest.adapter.read_adapter(binding, plan_generation, deadline)
        return self._answer("adapter", honest)  # type: ignore[return-value]

    def read_server_status(
        self, binding: SessionBinding, plan_generation: int, deadline: float
    ) -> ServerStatusSnapshot | None:
        """The server-status authority's answer, through the hook."""
        honest = self.honest.server.read_server_status(binding, plan_generation, deadline)
        return self._answer("server", honest)  # type: ignore[return-value]


def reuse_generation(world: OfflineWorld) -> Authorities:
    """ABA by reuse: from the second request on, the plan keeps its generation but names
    another adapter digest, and the adapter authority agrees. Consistent within each
    request, so only a contract that remembers generation content can see it."""
    other = _digest("9")

    def hook(name: str, call: int, honest: object) -> object:
        second_request = (name == "plan" and call > 2) or (name == "adapter" and call > 1)
        if not second_request:
            return honest
        if isinstance(honest, PlanSnapshot):
            return msgspec.structs.replace(honest, adapter_digest=other)
        if isinstance(honest, AdapterSnapshot):
            return msgspec.structs.replace(honest, adapter_digest=other)
        return honest

    return Adversary(world.authorities(), hook).authorities()


def roll_back(world: OfflineWorld, *, to_generation: int = 1) -> Authorities:
    """ABA by rollback: from the second request on, every answer names an older plan
    generation (consistently), as a restored backup would."""

    def hook(name: str, call: int, honest: object) -> object:
        first_request = call <= (2 if name == "plan" else 1)
        if first_request or not isinstance(honest, msgspec.Struct):
            return honest
        return msgspec.structs.replace(honest, plan_generation=to_generation)

    return Adversary(world.authorities(), hook).authorities()


def revise_between_reads(world: OfflineWorld) -> Authorities:
    """The plan is revised after the first plan read, before the re-read, in every request."""

    def hook(name: str, call: int, honest: object) -> object:
        if name == "server":
            world.revise_plan()
        return honest

    return Adversary(world.authorities(), hook).authorities()


def answer_late(world: OfflineWorld, authority: str, *, late_by_s: float) -> Authorities:
    """``authority`` answers correctly but only after the clock moved ``late_by_s`` on."""

    def hook(name: str, call: int, honest: object) -> object:
        if name == authority:
            world.clock.advance(late_by_s)
        return honest

    return Adversary(world.authorities(), hook).authorities()


def answer_for_other_session(world: OfflineWorld, authority: str) -> Authorities:
    """``authority`` answers with another session's evidence."""

    def hook(name: str, call: int, honest: object) -> object:
        if name == authority and isinstance(honest, msgspec.Struct):
            return msgspec.structs.replace(honest, session_id="session-2")
        return honest

    return Adversary(world.authorities(), hook).authorities()


def fail_read(world: OfflineWorld, authority: str, *, on_call: int = 1) -> Authorities:
    """``authority``'s ``on_call``-th read raises (a transient fault the bridge must not retry)."""

    def hook(name: str, call: int, honest: object) -> object:
        if name == authority and call == on_call:
            raise ConnectionError(f"{authority} authority unreachable (fault injected)")
        return honest

    return Adversary(world.authorities(), hook).authorities()
