"""The private status protocol processor: one frame in, one response out (sans-IO).

The ladder, in order (``docs/wallet.md`` has the reasons)::

    t0 = clock            before decoding: deadline or session expiry passed → RequestExpired
    check_structure + strict decode (only wallet_status)              → WalletFrameError
    plan      = read_plan(binding, deadline)                  ┐ each read: raised → AuthorityFailed,
    readiness = read_readiness(binding, plan_gen, deadline)   │ answered at/after the deadline
    adapter   = read_adapter(binding, plan_gen, deadline)     │ → AuthorityDeadline; both end the
    server    = read_server_status(binding, plan_gen, deadline)│ worker (one strike, no retry)
    again     = read_plan(binding, deadline)                  ┘ the re-read: revised? rolled back?
    t1 = clock            after authority validation: passed → RequestExpired
    revalidate at t1: digests, policy revision, state, expiry, adapter/server digests,
    alias, chain policy, audit/journal generations, readiness, server state, freshness
    → the sanitized v1 status, or the generic "unavailable" error

Every snapshot must be well-typed (it is round-tripped through its msgspec type), name the
bound session and owner, and echo the same nonzero plan generation and the same absolute
deadline. Evidence that is missing, ambiguous, cross-boundary, rolled back, revised,
mismatched, stale, from the future, stopped, failed or expired makes the method
unavailable for this request; the response then carries no status at all, cached or not.

The processor keeps no state between requests: no cache, no high-water mark. Generation
reuse and rollback across requests are the authority contracts' job (``_contract.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

import msgspec

from glove.wallet._authority import (
    AdapterSnapshot,
    Authorities,
    Clock,
    MonotonicClock,
    PlanSnapshot,
    ReadinessSnapshot,
    ServerStatusSnapshot,
    SessionBinding,
)
from glove.wallet._messages import (
    CHAIN_ID_RE,
    StatusResult,
    decode_request,
    encode_status,
    encode_unavailable,
)
from glove.wallet.errors import AuthorityDeadline, AuthorityError, AuthorityFailed, RequestExpired

MAX_OBSERVATION_AGE_S: Final = 5.0
"""Oldest wallet-server observation, in seconds on the bridge clock, that still counts."""
MAX_CHAIN_POLICY_ENTRIES: Final = 16
"""Most chain ids a plan's chain policy may name."""

RUNNING_STATE: Final = "running"
SERVER_READY_STATE: Final = "ready"
AVAILABLE: Final = "available"

ALIAS_RE: Final = re.compile(r"^[a-z][a-z0-9-]{0,31}\Z")
"""An owner-local wallet-server alias: a short name, never a URL, address or path."""
DIGEST_RE: Final = re.compile(r"^(?:sha256|blake3):[0-9a-f]{64}\Z")

_S = TypeVar("_S", PlanSnapshot, ReadinessSnapshot, AdapterSnapshot, ServerStatusSnapshot)
_T = TypeVar("_T")
_ENCODER: Final = msgspec.json.Encoder()
_VALIDATORS: Final[dict[type, msgspec.json.Decoder[object]]] = {
    kind: msgspec.json.Decoder(kind)
    for kind in (PlanSnapshot, ReadinessSnapshot, AdapterSnapshot, ServerStatusSnapshot)
}


@dataclass(frozen=True, slots=True)
class StatusOutcome:
    """What one request produced.

    Attributes:
        request_id: the guest's id, echoed in ``response``.
        available: True when ``response`` carries the status.
        reason: ``"available"``, or why the method was unavailable (host-side only: the
            guest's response never says).
        response: the response payload to frame and send.
    """

    request_id: int | str
    available: bool
    reason: str
    response: bytes


@dataclass(frozen=True, slots=True)
class _Evidence:
    plan: PlanSnapshot
    readiness: ReadinessSnapshot
    adapter: AdapterSnapshot
    server: ServerStatusSnapshot


class StatusProcessor:
    """Answers ``wallet_status`` for one host-bound session from four authorities.

    The processor owns its clock; deadlines passed to :meth:`process` are on that clock.
    """

    def __init__(
        self,
        binding: SessionBinding,
        authorities: Authorities,
        *,
        clock: Clock | None = None,
        max_observation_age_s: float = MAX_OBSERVATION_AGE_S,
    ) -> None:
        self._binding = binding
        self._authorities = authorities
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._max_age_s = max_observation_age_s

    @property
    def binding(self) -> SessionBinding:
        """The host-derived session binding this processor serves."""
        return self._binding

    @property
    def clock(self) -> Clock:
        """The processor's own clock."""
        return self._clock

    def process(self, frame: bytes, deadline: float) -> StatusOutcome:
        """Answer one request frame before ``deadline`` (absolute, on :attr:`clock`).

        Raises:
            RequestExpired: ``deadline`` or the session's expiry passed before decoding or
                after authority validation.
            WalletFrameError: the frame is malformed or not a strict ``wallet_status``.
            AuthorityError: an authority read failed, broke its contract or answered at or
                after ``deadline``: the caller must terminate this worker.
        """
        started = self._clock.monotonic()  # before decoding
        self._check_time(started, deadline, "before decoding")
        request = decode_request(frame)
        gathered = self._gather(deadline)
        if isinstance(gathered, str):
            return self._unavailable(request.id, gathered)
        now = self._clock.monotonic()  # after authority validation
        self._check_time(now, deadline, "after authority validation")
        reason = self._revalidate(gathered, started, now)
        if reason is not None:
            return self._unavailable(request.id, reason)
        result = StatusResult(connected=gathered.server.connected, chain=gathered.server.chain_id)
        return StatusOutcome(request.id, True, AVAILABLE, encode_status(request.id, result))

    # -- the ladder ----------------------------------------------------------------------------

    def _check_time(self, now: float, deadline: float, where: str) -> None:
        if not math.isfinite(deadline):
            raise RequestExpired(f"{where}: the deadline is not a finite time")
        if now >= self._binding.expires_at:
            raise RequestExpired(f"{where}: the session expired")
        if now >= deadline:
            raise RequestExpired(f"{where}: the absolute deadline passed")

    def _read(self, name: str, deadline: float, read: Callable[[], _T]) -> _T:
        try:
            value = read()
        except AuthorityError:
            raise  # a contract's own rejection (reuse, rollback): already typed
        except Exception as exc:  # authorities are foreign code: any failure is one strike
            raise AuthorityFailed(name, f"the read raised {type(exc).__name__}") from exc
        if self._clock.monotonic() >= deadline:
            raise AuthorityDeadline(name, "answered at or after the absolute deadline")
        return value

    def _gather(self, deadline: float) -> _Evidence | str:  # noqa: PLR0911 - one per read
        binding, auth = self._binding, self._authorities
        plan = self._read("plan", deadline, lambda: auth.plan.read_plan(binding, deadline))
        plan_ok = self._bound(plan, PlanSnapshot, None, deadline)
        if isinstance(plan_ok, str):
            return plan_ok
        generation = plan_ok.plan_generation
        readiness = self._bound(
            self._read(
                "readiness",
                deadline,
                lambda: auth.readiness.read_readiness(binding, generation, deadline),
            ),
            ReadinessSnapshot,
            generation,
            deadline,
        )
        if isinstance(readiness, str):
            return readiness
        adapter = self._bound(
            self._read(
                "adapter",
                deadline,
                lambda: auth.adapter.read_adapter(binding, generation, deadline),
            ),
            AdapterSnapshot,
            generation,
            deadline,
        )
        if isinstance(adapter, str):
            return adapter
        server = self._bound(
            self._read(
                "server",
                deadline,
                lambda: auth.server.read_server_status(binding, generation, deadline),
            ),
            ServerStatusSnapshot,
            generation,
            deadline,
        )
        if isinstance(server, str):
            return server
        # The plan again, after the others: a revision in the middle of this request shows.
        again = self._bound(
            self._read("plan", deadline, lambda: auth.plan.read_plan(binding, deadline)),
            PlanSnapshot,
            generation,
            deadline,
        )
        if isinstance(again, str):
            return again
        if again != plan_ok:
            return "ambiguous"  # one generation, two contents: which one is current?
        return _Evidence(plan_ok, readiness, adapter, server)

    def _bound(  # noqa: PLR0911 - one return per reason, in precedence order
        self, snap: object, kind: type[_S], generation: int | None, deadline: float
    ) -> _S | str:
        """Return ``snap`` if it is well-typed evidence bound to this request, else why not."""
        if snap is None:
            return "missing"
        if type(snap) is not kind:
            return "ambiguous"
        try:
            checked = _VALIDATORS[kind].decode(_ENCODER.encode(snap))
        except (TypeError, ValueError, msgspec.MsgspecError):
            return "ambiguous"  # a field of the wrong type, NaN, infinity, an unencodable
        assert isinstance(checked, kind)
        if checked.session_id != self._binding.session_id:
            return "cross_boundary"
        if isinstance(checked, AdapterSnapshot | ServerStatusSnapshot) and (
            checked.owner_uid != self._binding.owner_uid
        ):
            return "cross_boundary"
        if checked.plan_generation <= 0:
            return "unbound"
        if generation is not None and checked.plan_generation != generation:
            return "rolled_back" if checked.plan_generation < generation else "revised"
        if checked.deadline != deadline:
            return "unbound"  # computed for another request
        return checked

    def _revalidate(self, ev: _Evidence, started: float, now: float) -> str | None:
        """Check the gathered evidence at ``now``; return why it fails, or None."""
        binding, plan, ready, adapter, server = (
            self._binding,
            ev.plan,
            ev.readiness,
            ev.adapter,
            ev.server,
        )
        checks: tuple[tuple[bool, str], ...] = (
            (now < started, "clock_regressed"),
            (plan.session_digest != binding.session_digest, "session_digest"),
            (plan.plan_digest != binding.plan_digest, "plan_digest"),
            (plan.policy_revision != binding.policy_revision, "policy_revision"),
            (plan.state != RUNNING_STATE, "not_running"),
            (now >= plan.expires_at, "expired"),
            (not DIGEST_RE.match(adapter.adapter_digest), "adapter_digest"),
            (adapter.adapter_digest != plan.adapter_digest, "adapter_digest"),
            (not DIGEST_RE.match(server.server_digest), "server_digest"),
            (server.server_digest != plan.server_digest, "server_digest"),
            (not ALIAS_RE.match(plan.wallet_server_alias), "alias"),
            (server.alias != plan.wallet_server_alias, "alias"),
            (not _chain_policy_ok(plan.chain_policy), "chain_policy"),
            (server.chain_id not in plan.chain_policy, "chain"),
            (ready.audit_generation <= 0, "audit_generation"),
            (ready.audit_generation != plan.audit_generation, "audit_generation"),
            (ready.journal_generation <= 0, "journal_generation"),
            (ready.journal_generation != plan.journal_generation, "journal_generation"),
            (not (ready.audit_ready and ready.journal_ready), "journal_not_ready"),
            (not ready.containment_ready, "containment_not_ready"),
            (server.state == "stopped", "stopped"),
            (server.state == "failed", "failed"),
            (server.state != SERVER_READY_STATE or not server.stable, "unstable"),
            (server.observed_at > now, "future"),
            (now - server.observed_at > self._max_age_s, "stale"),
        )
        for failed, reason in checks:
            if failed:
                return reason
        return None

    def _unavailable(self, request_id: int | str, reason: str) -> StatusOutcome:
        return StatusOutcome(request_id, False, reason, encode_unavailable(request_id))


def _chain_policy_ok(policy: tuple[str, ...]) -> bool:
    """A chain policy names 1-16 distinct, well-formed CAIP-2 chain ids."""
    return (
        0 < len(policy) <= MAX_CHAIN_POLICY_ENTRIES
        and len(set(policy)) == len(policy)
        and all(CHAIN_ID_RE.match(chain) for chain in policy)
    )
