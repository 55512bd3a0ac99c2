"""Errors of the wallet status bridge, its synthetic owner and the Pi adapter.

Every error here ends the exchange it came from; none is answered with a retry. The
guest-facing side never sees these messages (it sees a closed socket, a generic
``unavailable`` error or no tool); they are for the host, its tests and its audit::

    GloveError
    └── WalletError                  base of everything :mod:`glove.wallet` raises
        ├── WalletDisabled           a disabled-by-default part was built without enabling it
        ├── WalletFrameError         a frame broke the structure or the strict schema (.reason)
        ├── RequestExpired           the request's absolute deadline or the session expired
        ├── AuthorityError           an authority read failed: the status worker terminates
        │   ├── AuthorityFailed      the read raised (or the callback misused the owner)
        │   ├── AuthorityDeadline    the read answered at or after the absolute deadline
        │   └── AuthorityContractError   the authority broke its generation contract (ABA)
        │       ├── GenerationReuse      a generation seen before came back with other content
        │       └── GenerationRollback   a generation lower than one already seen
        ├── EndpointError            the socketpair failed a construction check or was misused
        │   ├── EndpointCheckFailed  uid, family, type, non-blocking or close-on-exec (.check)
        │   └── GuestEndpointTaken   the guest end was already transferred (exactly once)
        ├── OwnerLifetimeError       destroy() reached from the owner's own worker
        └── StatusChannelError       the Pi adapter's fake channel refused an operation
"""

from __future__ import annotations

from glove.errors import GloveError

__all__ = [
    "AuthorityContractError",
    "AuthorityDeadline",
    "AuthorityError",
    "AuthorityFailed",
    "EndpointCheckFailed",
    "EndpointError",
    "GenerationReuse",
    "GenerationRollback",
    "GuestEndpointTaken",
    "OwnerLifetimeError",
    "RequestExpired",
    "StatusChannelError",
    "WalletDisabled",
    "WalletError",
    "WalletFrameError",
]


class WalletError(GloveError):
    """Base class of the errors of :mod:`glove.wallet`."""


class WalletDisabled(WalletError):
    """A construction-only part is disabled by default and was not explicitly enabled."""

    def __init__(self, part: str) -> None:
        super().__init__(f"{part} is disabled by default (construction-only): pass enabled=True")
        self.part = part


class WalletFrameError(WalletError):
    """A frame was refused before or during strict decoding.

    Attributes:
        reason: a short stable code (``frame_too_large``, ``invalid_utf8``, ``malformed``,
            ``too_deep``, ``duplicate_key``, ``number_too_long``, ``invalid_string``,
            ``schema``, ``unknown_method``), safe to log; the message adds where.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"wallet frame refused ({reason}): {detail}")
        self.reason = reason
        self.detail = detail


class RequestExpired(WalletError, TimeoutError):
    """The request's absolute deadline (or the session's expiry) passed on the bridge clock."""

    def __init__(self, where: str) -> None:
        super().__init__(f"wallet status request expired {where}")
        self.where = where


class AuthorityError(WalletError):
    """An authority read did not yield evidence; the status worker terminates, no retry.

    Attributes:
        authority: which of the four authorities (``plan``, ``readiness``, ``adapter``,
            ``server``).
    """

    def __init__(self, authority: str, message: str) -> None:
        super().__init__(f"{authority} authority: {message}")
        self.authority = authority


class AuthorityFailed(AuthorityError):
    """The authority read raised; its exception is the ``__cause__``."""


class AuthorityDeadline(AuthorityError, TimeoutError):
    """The authority answered at or after the request's absolute deadline."""


class AuthorityContractError(AuthorityError):
    """The authority broke its durable generation contract (reuse or rollback)."""


class GenerationReuse(AuthorityContractError):
    """A generation already seen was answered again with different content (ABA)."""

    def __init__(self, authority: str, generation: int) -> None:
        super().__init__(authority, f"generation {generation} reused with different content")
        self.generation = generation


class GenerationRollback(AuthorityContractError):
    """A generation lower than one this contract already accepted."""

    def __init__(self, authority: str, field: str, seen: int, got: int) -> None:
        super().__init__(authority, f"{field} rolled back from {seen} to {got}")
        self.field = field
        self.seen = seen
        self.got = got


class EndpointError(WalletError):
    """The synthetic owner's socketpair is unusable or was misused."""


class EndpointCheckFailed(EndpointError):
    """A construction check on the socketpair failed; nothing was kept open.

    Attributes:
        check: ``creator_uid``, ``peer_uid``, ``family``, ``type``, ``nonblocking`` or
            ``cloexec``.
    """

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"wallet socketpair check {check!r} failed: {detail}")
        self.check = check


class GuestEndpointTaken(EndpointError):
    """The guest end can be transferred exactly once, and only while the session is open."""


class OwnerLifetimeError(WalletError):
    """The owner cannot be destroyed from its own worker: its lifetime is independent."""


class StatusChannelError(WalletError):
    """The Pi adapter's single-operation channel refused what it was asked to do."""
