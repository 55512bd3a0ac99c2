"""The method registry: what the control socket can be asked, with typed params per method.

A method is registered once, by name, with the msgspec Struct its ``params`` decode to
(``forbid_unknown_fields`` required, so a misspelt field is an ``invalid_params`` naming it,
never silently ignored), its handler, the longest deadline a request may have, and whether
it is *gated*: a gated method exists only while ``lifecycle_operational()`` is true (the
spec: lifecycle methods are offered only when the constructed runtime says it can run
them; otherwise they answer ``method_not_found``, exactly as an unknown name does).

Handlers::

    async def status(params: StatusParams, call: CallContext) -> StatusResult: ...
    registry.unary("session.status", StatusParams, status, deadline_s=5.0)

    async def watch(params: WatchParams, call: CallContext) -> AsyncIterator[StateChange]:
        async for change in ...:
            yield change          # one {"id": N, "event": {...}} frame each
    registry.stream("session.watch", WatchParams, watch)

A handler refuses with :class:`~glove.control.MethodError`; any other exception is an
``internal_error`` for the client and a log line for the operator.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import msgspec

from glove.control._auth import PeerCredentials
from glove.control.errors import RegistryError
from glove.protocol import MAX_DEADLINE_MS, MAX_METHOD_CHARS

_log = logging.getLogger(__name__)

#: A unary request's deadline when its method does not set one (and the most it may ask).
DEFAULT_UNARY_DEADLINE_S: Final = 30.0
#: A stream's deadline when its method does not set one: a watch ends after an hour unless
#: the method allows longer; the client asks again.
DEFAULT_STREAM_DEADLINE_S: Final = 3600.0
MAX_METHOD_DEADLINE_S: Final = MAX_DEADLINE_MS / 1000
#: Method names: dotted lowercase words, ``session.watch``.
METHOD_NAME_PATTERN: Final = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
#: Answered by the server itself, before and after authentication.
HELLO: Final = "hello"

P = TypeVar("P", bound=msgspec.Struct)
UnaryHandler = Callable[[P, "CallContext"], Awaitable[msgspec.Struct]]
StreamHandler = Callable[[P, "CallContext"], AsyncIterator[msgspec.Struct]]


@dataclass(eq=False, slots=True)
class CallContext:
    """What a handler knows about the request it serves.

    ``deadline`` is absolute (``loop.time()``); the handler already runs under it, and actor
    asks made inside it inherit it. ``gone`` is set when the client's connection ends (a
    stream is also cancelled then; the event lets a handler notice without polling).
    """

    request_id: int
    method: str
    deadline: float
    peer: PeerCredentials
    connection_id: int
    client: str
    gone: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def client_gone(self) -> bool:
        """True once the client's connection has ended."""
        return self.gone.is_set()

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - asyncio.get_running_loop().time())


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One registered method."""

    name: str
    kind: Literal["unary", "stream"]
    params_type: type[msgspec.Struct]
    handler: Callable[..., Any]
    deadline_s: float
    gated: bool
    paced: bool = False


class MethodRegistry:
    """Every method the control socket serves, and the lifecycle gate."""

    def __init__(self, *, lifecycle_operational: Callable[[], bool] | None = None) -> None:
        self._methods: dict[str, MethodSpec] = {}
        self._operational = lifecycle_operational

    # -- registration ---------------------------------------------------------------------

    def unary(
        self,
        name: str,
        params_type: type[P],
        handler: UnaryHandler[P],
        *,
        deadline_s: float = DEFAULT_UNARY_DEADLINE_S,
        gated: bool = False,
    ) -> None:
        """Register a request/response method.

        Raises:
            RegistryError: the name is taken or malformed, ``params_type`` is not a strict
                msgspec Struct, or ``deadline_s`` is out of range.
        """
        self._add(MethodSpec(name, "unary", params_type, handler, deadline_s, gated))

    def stream(
        self,
        name: str,
        params_type: type[P],
        handler: StreamHandler[P],
        *,
        deadline_s: float = DEFAULT_STREAM_DEADLINE_S,
        gated: bool = False,
        paced: bool = False,
    ) -> None:
        """Register a streaming method: each item the handler yields is one event frame.

        A *paced* stream is pulled at the pace its client reads: the next item is asked of
        the handler only once the connection's unsent output is below the transport's
        low-water mark, so a slow reader is never ended with ``stream_overflow``. Only a
        handler that can resume from its own position (a transcript at an offset) should be
        paced: its producer must not queue on the reader's behalf.

        Raises:
            RegistryError: as for :meth:`unary`.
        """
        self._add(MethodSpec(name, "stream", params_type, handler, deadline_s, gated, paced))

    def _add(self, spec: MethodSpec) -> None:
        if spec.name == HELLO:
            raise RegistryError("hello is answered by the server itself")
        if len(spec.name) > MAX_METHOD_CHARS or not METHOD_NAME_PATTERN.match(spec.name):
            raise RegistryError(f"method name {spec.name!r} is not dotted lowercase words")
        if spec.name in self._methods:
            raise RegistryError(f"method {spec.name!r} is already registered")
        if not (
            isinstance(spec.params_type, type) and issubclass(spec.params_type, msgspec.Struct)
        ):
            raise RegistryError(f"{spec.name}: params type must be a msgspec Struct")
        if not spec.params_type.__struct_config__.forbid_unknown_fields:
            raise RegistryError(
                f"{spec.name}: {spec.params_type.__name__} must set forbid_unknown_fields=True"
            )
        if not 0 < spec.deadline_s <= MAX_METHOD_DEADLINE_S:
            raise RegistryError(
                f"{spec.name}: deadline_s must be in (0, {MAX_METHOD_DEADLINE_S}], "
                f"not {spec.deadline_s}"
            )
        if not callable(spec.handler):
            raise RegistryError(f"{spec.name}: the handler is not callable")
        self._methods[spec.name] = spec

    def set_lifecycle_predicate(self, predicate: Callable[[], bool]) -> None:
        """Set the predicate that says whether the constructed runtime can run lifecycles."""
        self._operational = predicate

    # -- lookup ---------------------------------------------------------------------------

    def lifecycle_operational(self) -> bool:
        """Ask the predicate; no predicate, or one that fails, means not operational."""
        if self._operational is None:
            return False
        try:
            return bool(self._operational())
        except Exception:  # noqa: BLE001 - fail closed: a failing predicate means "not operational"
            _log.exception("control: lifecycle_operational() failed; gated methods are off")
            return False

    def lookup(self, name: str) -> MethodSpec | None:
        """The method called ``name`` if it is available now (gated ones only when operational)."""
        spec = self._methods.get(name)
        if spec is None or (spec.gated and not self.lifecycle_operational()):
            return None
        return spec

    def available(self) -> list[str]:
        """Sorted names of every method a client can call now, ``hello`` included."""
        operational = self.lifecycle_operational()
        names = [n for n, s in self._methods.items() if operational or not s.gated]
        return sorted([HELLO, *names])

    def registered(self) -> list[str]:
        """Sorted names of every registered method, gated or not (for diagnostics)."""
        return sorted(self._methods)
