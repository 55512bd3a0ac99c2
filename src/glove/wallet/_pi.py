"""The Pi adapter: the bridge's status as one minimal Pi-shaped tool (construction-only).

Disabled by default. It is not a kernel extension and nothing registers it: not Pi's
settings, not a native runtime, not ``gloved``, not a factory, not capability discovery.
It owns exactly one thing, a single-operation status channel (:class:`StatusChannel`:
"give me one status, for this id, before this deadline"; there is no other verb), and in
this milestone that channel is :class:`FakeStatusChannel`, which calls the host bridge's
processor in process. Its tests are not a child descriptor mapping, nor a contained Pi.

Every :meth:`PiStatusAdapter.list_tools` and every :meth:`PiStatusAdapter.call_tool`
re-attests through the bridge: nothing is cached between them. One transaction gate, with
one absolute deadline and cancellable throughout, covers taking the adapter's lock, the
exchange, the strict decoding (structural scan first, the raw ``result`` included) and
building the descriptor or result. If evidence is disabled, stale (an answer to an earlier
request), unavailable, mismatched, malformed, cancelled or expired, listing shows no tool
and an invocation returns only the generic absence; why stays on the host
(:attr:`PiStatusAdapter.last_reason`).

The accepted tool::

    {"name": "wallet_status", "label": "Wallet status", "description": "...",
     "parameters": {"type": "object", "properties": {}, "additionalProperties": false},
     "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}}

and its result: ``content`` is one text that follows the structured ``connected`` flag,
``details`` the sanitized v1 status fields only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NotRequired, Protocol, TypedDict, TypeVar

import msgspec

from glove.wallet._authority import Clock
from glove.wallet._messages import StatusResult, decode_reply, encode_request
from glove.wallet._processor import StatusProcessor
from glove.wallet.errors import StatusChannelError, WalletError

PI_TOOL_NAME: Final = "wallet_status"
PI_TOOL_LABEL: Final = "Wallet status"
PI_TOOL_DESCRIPTION: Final = (
    "Report whether the owner's wallet is connected (status only: no transactions, "
    "no addresses). Takes no arguments."
)
PI_TRANSACTION_DEADLINE_S: Final = 2.0
"""One listing's or invocation's absolute budget, in seconds: lock, exchange, decode, build."""

CONNECTED_TEXT: Final = "Wallet is connected."
DISCONNECTED_TEXT: Final = "Wallet is not connected."
ABSENT_TEXT: Final = "Wallet status is not available."


class _EmptySchema(TypedDict):
    type: str
    properties: dict[str, object]
    additionalProperties: bool


class _Text(TypedDict):
    type: str
    text: str


class PiToolJson(TypedDict):
    """The descriptor as Pi reads it (:meth:`PiToolDescriptor.to_json`)."""

    name: str
    label: str
    description: str
    parameters: dict[str, Any]  # a JSON Schema: MCP's boundary, free-form by definition
    annotations: dict[str, bool]


class PiResultJson(TypedDict):
    """A result as Pi reads it (:meth:`PiToolResult.to_json`); details are the status fields."""

    content: list[_Text]
    details: NotRequired[dict[str, Any]]
    isError: NotRequired[bool]


def empty_object_schema() -> _EmptySchema:
    """The tool's exact input schema: an object with no properties and nothing else."""
    return {"type": "object", "properties": {}, "additionalProperties": False}


def tool_annotations() -> dict[str, bool]:
    """Read-only, idempotent, closed-world."""
    return {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}


@dataclass(frozen=True, slots=True)
class PiToolDescriptor:
    """The one tool the adapter may list."""

    name: str = PI_TOOL_NAME
    label: str = PI_TOOL_LABEL
    description: str = PI_TOOL_DESCRIPTION
    parameters: Mapping[str, Any] = field(default_factory=empty_object_schema)
    annotations: Mapping[str, bool] = field(default_factory=tool_annotations)

    def to_json(self) -> PiToolJson:
        """The descriptor as Pi reads it."""
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "parameters": dict(self.parameters),
            "annotations": dict(self.annotations),
        }


@dataclass(frozen=True, slots=True)
class PiToolResult:
    """A tool result: ``details`` is None (and ``is_error`` True) for the generic absence."""

    text: str
    details: Mapping[str, Any] | None
    is_error: bool

    def to_json(self) -> PiResultJson:
        """The result as Pi reads it."""
        body: PiResultJson = {"content": [{"type": "text", "text": self.text}]}
        if self.details is not None:
            body["details"] = dict(self.details)
        if self.is_error:
            body["isError"] = True
        return body


ABSENT: Final = PiToolResult(ABSENT_TEXT, None, is_error=True)
"""The generic absence every failed invocation returns, whatever the reason."""


class StatusChannel(Protocol):
    """The adapter's only channel: one operation, one status exchange."""

    async def status(self, request_id: int, deadline: float) -> bytes:
        """Return the bridge's raw response frame to a ``wallet_status`` request.

        Raises:
            WalletError: the channel could not complete the exchange.
        """
        ...


class FakeStatusChannel:
    """The single-operation fake channel: the host bridge's processor, called in process.

    It builds the one request itself (the adapter cannot send anything else) and runs one
    exchange at a time.
    """

    def __init__(self, bridge: StatusProcessor) -> None:
        self._bridge = bridge
        self._busy = False
        self.exchanges = 0

    async def status(self, request_id: int, deadline: float) -> bytes:
        """Exchange one status request with the bridge.

        Raises:
            StatusChannelError: an exchange is already in flight, or the bridge refused
                (its typed error is the cause).
        """
        if self._busy:
            raise StatusChannelError("the status channel carries one exchange at a time")
        self._busy = True
        try:
            await asyncio.sleep(0)  # an exchange is a suspension point, as on a real channel
            self.exchanges += 1
            return self._bridge.process(encode_request(request_id), deadline).response
        except WalletError as exc:
            raise StatusChannelError(f"the bridge refused: {type(exc).__name__}") from exc
        finally:
            self._busy = False


_T = TypeVar("_T")


class PiStatusAdapter:
    """Projects the bridge's status into one Pi tool, re-attesting on every use."""

    def __init__(
        self,
        channel: StatusChannel,
        *,
        clock: Clock,
        enabled: bool = False,
        deadline_s: float = PI_TRANSACTION_DEADLINE_S,
    ) -> None:
        if deadline_s <= 0:
            raise ValueError("deadline_s must be positive")
        self._channel = channel
        self._clock = clock
        self.enabled = enabled
        self._deadline_s = deadline_s
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self.attestations = 0
        self.last_reason = "disabled" if not enabled else "not attested yet"

    async def list_tools(self) -> list[PiToolDescriptor]:
        """Re-attest, then return the tool, or nothing.

        Raises:
            asyncio.CancelledError: the caller was cancelled (nothing is listed).
        """
        descriptor = await self._transaction(lambda _status: PiToolDescriptor())
        return [] if descriptor is None else [descriptor]

    async def call_tool(self, name: str, arguments: object) -> PiToolResult:
        """Re-attest, then return the status, or the generic absence.

        Only ``wallet_status`` with an exact empty object of arguments is accepted.

        Raises:
            asyncio.CancelledError: the caller was cancelled.
        """
        if name != PI_TOOL_NAME or type(arguments) is not dict or arguments:
            self.last_reason = "invalid_invocation"
            return ABSENT
        result = await self._transaction(_status_result)
        return ABSENT if result is None else result

    async def _transaction(  # noqa: PLR0911 - one return per kind of absent evidence
        self, build: Callable[[StatusResult], _T]
    ) -> _T | None:
        """The gate: lock, exchange, decode and build under one cancellable deadline."""
        if not self.enabled:
            self.last_reason = "disabled"  # an answer (no tool), not an error
            return None
        loop = asyncio.get_running_loop()
        now = self._clock.monotonic()
        deadline = now + self._deadline_s
        loop_deadline = loop.time() + self._deadline_s
        request_id = next(self._ids)
        self.attestations += 1
        try:
            async with asyncio.timeout_at(loop_deadline):
                async with self._lock:
                    raw = await self._channel.status(request_id, deadline)
                    reply = decode_reply(raw)
                    if reply.id != request_id:
                        earlier = type(reply.id) is int and reply.id < request_id
                        self.last_reason = "stale" if earlier else "mismatched"
                        return None
                    if reply.result is None:
                        self.last_reason = "unavailable"
                        return None
                    built = build(reply.result)
        except TimeoutError:
            self.last_reason = "expired"
            return None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                self.last_reason = "cancelled"
                raise  # our caller was cancelled: propagate, having listed nothing
            self.last_reason = "cancelled"  # the channel's exchange was cancelled under us
            return None
        except WalletError as exc:
            self.last_reason = f"malformed: {type(exc).__name__}"
            return None
        if self._clock.monotonic() >= deadline:
            self.last_reason = "expired"
            return None
        self.last_reason = "attested"
        return built


def _status_result(status: StatusResult) -> PiToolResult:
    """The accepted invocation's result: text that follows ``connected``, sanitized details."""
    text = CONNECTED_TEXT if status.connected else DISCONNECTED_TEXT
    details = msgspec.structs.asdict(status)
    details["available_actions"] = list(status.available_actions)
    details["mutating_actions"] = list(status.mutating_actions)
    return PiToolResult(text, details, is_error=False)
