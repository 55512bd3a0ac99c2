"""The contracts the kernel works against, and the refusal it raises (no I/O).

:class:`PolicyEngine` is what :class:`glove.policy.Policy` provides, :class:`AuditSink`
what :class:`glove.audit.AuditLog` provides; :class:`Refusal` carries the JSON-RPC error a
refused request is answered with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from glove.mcp._messages import McpObject

MAX_AUDITED_ID_CHARS: Final = 128
#: Audited digests of arguments and params: canonical JSON, keys sorted.
_CANONICAL: Final = msgspec.json.Encoder(order="sorted")

ProgressSink = Callable[[McpObject], None]
UpstreamRequest = Callable[
    [str, str, McpObject | None, int | str | None, ProgressSink | None],
    Awaitable[msgspec.Raw],
]
"""Forward ``method`` with ``params`` to upstream ``id`` (progress token and sink optional)."""


class PolicyDecision(Protocol):
    """What :mod:`glove.policy` decides (its ``Decision``)."""

    @property
    def allowed(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def rule(self) -> str | None: ...
    @property
    def inspected(self) -> Mapping[str, object]: ...


class PolicyEngine(Protocol):
    """The policy contract (:class:`glove.policy.Policy`)."""

    @property
    def digest(self) -> str: ...
    def check_tool(self, name: str, definition: Any) -> PolicyDecision: ...
    def check_call(self, name: str, arguments: Any, definition: Any) -> PolicyDecision: ...
    def check_prompt(self, name: str, definition: Any) -> PolicyDecision: ...
    def check_prompt_get(self, name: str, arguments: Any, definition: Any) -> PolicyDecision: ...
    def check_resource(self, uri: str, *, upstream: str, upstream_uri: str) -> PolicyDecision: ...
    def check_feature(self, upstream: str, feature: str) -> PolicyDecision: ...
    def allows_any(self, section: str) -> bool: ...


class AuditSink(Protocol):
    """Where decisions go: :class:`glove.audit.AuditLog` (append returns once durable)."""

    async def append(self, record: Mapping[str, object]) -> object: ...


class PendingAudit(Protocol):
    """A record written but perhaps not yet durable (:class:`glove.audit.PendingRecord`)."""

    @property
    def done(self) -> bool: ...
    @property
    def failed(self) -> bool: ...
    async def durable(self) -> object: ...
    def add_done_callback(self, callback: Callable[[], None]) -> None: ...


@runtime_checkable
class TwoPhaseAuditSink(Protocol):
    """A sink that can write a record now and make it durable while the caller works."""

    async def append(self, record: Mapping[str, object]) -> object: ...
    async def write(self, record: Mapping[str, object]) -> PendingAudit: ...


class Refusal(Exception):
    """A request refused with a JSON-RPC error (the endpoint writes it)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def canonical_json(value: object) -> bytes | None:
    """The canonical JSON of ``value`` (keys sorted), or ``None`` if it cannot be encoded."""
    try:
        return _CANONICAL.encode(value)
    except (TypeError, ValueError, RecursionError):
        return None


def digest_of(encoded: bytes | None) -> str:
    """The audited ``sha256:`` digest of a :func:`canonical_json` encoding (``None``: the
    value could not be encoded, and the digest says so by hashing ``<unencodable>``)."""
    return "sha256:" + hashlib.sha256(b"<unencodable>" if encoded is None else encoded).hexdigest()


def arguments_digest(arguments: object) -> str:
    """The SHA-256 of the canonical JSON of ``arguments``, as the audit records it."""
    return digest_of(canonical_json(arguments))


def audit_id(request_id: object) -> object:
    """The agent's id as recorded: a long string id is cut (the record size is bounded)."""
    if isinstance(request_id, str) and len(request_id) > MAX_AUDITED_ID_CHARS:
        return request_id[:MAX_AUDITED_ID_CHARS] + "..."
    return request_id
