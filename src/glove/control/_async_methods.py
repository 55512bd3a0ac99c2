"""The control clients' calls, once: ``call`` and one typed call per method the CLI uses.

This is the source: ``_sync_methods.py`` is generated from it by ``scripts/unasync.py``
(httpcore's model: ``async def`` becomes ``def``, ``await`` goes, ``Async`` leaves the
names), and ``tests/control/test_unasync.py`` fails when the generated file differs, so the
blocking and the asyncio clients make every call the same way. A client class supplies the
transport (``_unary``: send one frame, return the response to it) over its sans-IO
:class:`~glove.control._client_core.ClientCore`. Each typed call is :meth:`call` with the
method's params and its result type (:mod:`glove.control._results`, decoded strictly);
:meth:`call` itself is for every method.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from glove.control._client_base import runtime_socket
from glove.control._client_core import ClientCore, Params, result_of
from glove.control._results import (
    Acked,
    AttachEvent,
    DetachResult,
    Exposure,
    InputResult,
    PlanVerdict,
    ReceiptPage,
    ResizeResult,
    SessionPage,
    SessionState,
    SessionStatus,
    SignalName,
    SignalResult,
)
from glove.protocol import Capabilities, Response

if TYPE_CHECKING:
    from glove.control._async_client import AsyncStream

T = TypeVar("T")


class AsyncMethods:
    """The calls of a client; the class supplies ``timeout``, ``_core`` and ``_unary``."""

    timeout: float
    _core: ClientCore

    def __init__(self, socket_path: Path, **kwargs: Any) -> None:
        raise NotImplementedError  # the client class's (declared for for_runtime_dir)

    @classmethod
    def for_runtime_dir(cls, directory: Path | None = None, **kwargs: Any) -> Self:
        """A client of the daemon whose runtime directory is ``directory`` (default: ours)."""
        sock, secret = runtime_socket(directory)
        return cls(sock, secret_path=secret, **kwargs)

    async def _unary(self, rid: int, frame: bytes, budget: float) -> Response:
        """Send ``frame`` (request ``rid``) and return its response within ``budget``."""
        raise NotImplementedError  # the transport: the client class's

    def stream(
        self,
        method: str,
        params: Params = None,
        *,
        timeout: float | None = None,
        event_type: type[T] | None = None,
    ) -> AsyncStream[T]:
        """A streaming call of ``method``: its events (``event_type`` instances, or dicts)."""
        raise NotImplementedError  # the transport: the client class's

    async def call(
        self,
        method: str,
        params: Params = None,
        *,
        timeout: float | None = None,
        result_type: type[T] | None = None,
    ) -> Any:
        """Call ``method`` and return its result (a dict, or a ``result_type`` instance).

        Raises:
            RemoteError: the daemon answered with a typed error.
            ClientTimeout: no reply within ``timeout``.
            ConnectionLost: the connection broke.
            ClientClosed: this client was closed.
            RequestInvalid: the request cannot be sent.
            DaemonProtocolError: the reply is not valid (or not a ``result_type``).
        """
        budget = self.timeout if timeout is None else timeout
        rid = self._core.next_id()
        frame = self._core.request_frame(rid, method, params, budget)
        return result_of(await self._unary(rid, frame, budget), result_type)

    async def capabilities(self, *, timeout: float | None = None) -> Capabilities:
        """``capabilities``: what this gloved can run and how it enforces each limit.

        Raises:
            as :meth:`call`.
        """
        result: Capabilities = await self.call(
            "capabilities", timeout=timeout, result_type=Capabilities
        )
        return result

    async def session_status(
        self, session_id: str, *, timeout: float | None = None
    ) -> SessionStatus:
        """``session.status``: one session's state, outcome and receipt.

        Raises:
            RemoteError: ``session_not_found`` and the rest of :meth:`call`'s.
        """
        return await self._session("session.status", session_id, timeout)

    async def session_create(
        self, plan: str | Mapping[str, Any], *, timeout: float | None = None
    ) -> SessionStatus:
        """``session.create``: validate, persist and start a session of ``plan`` (its JSON
        text, sent as is, or an object).

        Raises:
            RemoteError: ``invalid_plan``, ``session_limit`` and the rest of :meth:`call`'s.
        """
        result: SessionStatus = await self.call(
            "session.create", {"plan": plan}, timeout=timeout, result_type=SessionStatus
        )
        return result

    async def session_list(
        self,
        *,
        state: SessionState | None = None,
        after: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> SessionPage:
        """``session.list``: a page of sessions by id, optionally in one ``state``.

        Raises:
            as :meth:`call`.
        """
        params = {"state": state, "after": after, "limit": limit}
        result: SessionPage = await self.call(
            "session.list", _given(params), timeout=timeout, result_type=SessionPage
        )
        return result

    async def session_stop(self, session_id: str, *, timeout: float | None = None) -> SessionStatus:
        """``session.stop``: stop a session (its state as the stop left it).

        Raises:
            as :meth:`session_status`.
        """
        return await self._session("session.stop", session_id, timeout)

    async def session_cleanup(
        self, session_id: str, *, timeout: float | None = None
    ) -> SessionStatus:
        """``session.cleanup``: remove a terminal session's files, keeping its receipt.

        Raises:
            as :meth:`session_status`.
        """
        return await self._session("session.cleanup", session_id, timeout)

    async def plan_validate(
        self, plan: str | Mapping[str, Any], *, timeout: float | None = None
    ) -> PlanVerdict:
        """``plan.validate``: judge ``plan`` against this gloved's policy; nothing is stored.

        Raises:
            as :meth:`call`.
        """
        result: PlanVerdict = await self.call(
            "plan.validate", {"plan": plan}, timeout=timeout, result_type=PlanVerdict
        )
        return result

    async def exposure_create(
        self,
        alias: str,
        path: str,
        *,
        mode: str = "ro",
        target: str | None = None,
        timeout: float | None = None,
    ) -> Exposure:
        """``exposure.create``: let sessions see directory ``path`` (absolute) as ``alias``.

        Raises:
            as :meth:`call`.
        """
        params = {"alias": alias, "path": path, "mode": mode, "target": target}
        result: Exposure = await self.call(
            "exposure.create", _given(params), timeout=timeout, result_type=Exposure
        )
        return result

    async def exposure_revoke(self, alias: str, *, timeout: float | None = None) -> Exposure:
        """``exposure.revoke``: end the exposure ``alias`` (sessions already running keep it).

        Raises:
            as :meth:`call`.
        """
        result: Exposure = await self.call(
            "exposure.revoke", {"alias": alias}, timeout=timeout, result_type=Exposure
        )
        return result

    def session_watch(
        self, session_id: str, *, timeout: float | None = None
    ) -> AsyncStream[SessionStatus]:
        """``session.watch``: the session's state now, then each change, until terminal.

        Raises:
            as :meth:`session_status` (while iterating).
        """
        params = {"session_id": session_id}
        return self.stream("session.watch", params, timeout=timeout, event_type=SessionStatus)

    def session_attach(
        self,
        session_id: str,
        *,
        mode: Literal["read", "write"] = "read",
        offset: int | None = None,
        tail: int | None = None,
        follow: bool = True,
        timeout: float | None = None,
    ) -> AsyncStream[AttachEvent]:
        """``session.attach``: the transcript from ``offset`` (or its last ``tail`` bytes, or
        all the ring holds), then live unless ``follow`` is false; first :class:`Attached`,
        last :class:`Ended`.

        Raises:
            RemoteError: ``no_terminal`` and the rest of :meth:`session_status`'s.
        """
        params: dict[str, object] = {"session_id": session_id, "mode": mode, "follow": follow}
        if offset is not None:
            params["from"] = offset
        if tail is not None:
            params["tail"] = tail
        kind: Any = AttachEvent  # a union of tagged Structs: msgspec's type, not a class
        events: AsyncStream[AttachEvent] = self.stream(
            "session.attach", params, timeout=timeout, event_type=kind
        )
        return events

    async def session_input(
        self,
        session_id: str,
        *,
        data: str | None = None,
        raw: bytes | None = None,
        viewer: int | None = None,
        timeout: float | None = None,
    ) -> InputResult:
        """``session.input``: ``data`` (text) or ``raw`` bytes to the session's terminal,
        as ``viewer`` (the writer) if given.

        Raises:
            RemoteError: ``busy``, ``not_writer``, ``no_terminal`` and the rest of
                :meth:`session_status`'s.
        """
        params = {"session_id": session_id, "data": data, "raw": raw, "viewer": viewer}
        result: InputResult = await self.call(
            "session.input", _given(params), timeout=timeout, result_type=InputResult
        )
        return result

    async def session_resize(
        self,
        session_id: str,
        rows: int,
        cols: int,
        *,
        viewer: int | None = None,
        timeout: float | None = None,
    ) -> ResizeResult:
        """``session.resize``: the terminal's new size in cells (the agent gets SIGWINCH).

        Raises:
            RemoteError: ``not_writer``, ``no_terminal`` and the rest of :meth:`session_status`'s.
        """
        params = {"session_id": session_id, "rows": rows, "cols": cols, "viewer": viewer}
        result: ResizeResult = await self.call(
            "session.resize", _given(params), timeout=timeout, result_type=ResizeResult
        )
        return result

    async def session_signal(
        self, session_id: str, signal: SignalName, *, timeout: float | None = None
    ) -> SignalResult:
        """``session.signal``: ``signal`` (by name) to the agent.

        Raises:
            as :meth:`session_status`.
        """
        params = {"session_id": session_id, "signal": signal}
        result: SignalResult = await self.call(
            "session.signal", params, timeout=timeout, result_type=SignalResult
        )
        return result

    async def session_detach(
        self, session_id: str, viewer: int, *, timeout: float | None = None
    ) -> DetachResult:
        """``session.detach``: end viewer ``viewer``'s attach stream.

        Raises:
            as :meth:`session_status`.
        """
        params = {"session_id": session_id, "viewer": viewer}
        result: DetachResult = await self.call(
            "session.detach", params, timeout=timeout, result_type=DetachResult
        )
        return result

    async def receipts_page(
        self, *, after: int = 0, limit: int | None = None, timeout: float | None = None
    ) -> ReceiptPage:
        """``receipts.page``: terminal receipts after sequence number ``after``, in order.

        Raises:
            RemoteError: ``receipt_unavailable`` and the rest of :meth:`call`'s.
        """
        params = {"after": after, "limit": limit}
        result: ReceiptPage = await self.call(
            "receipts.page", _given(params), timeout=timeout, result_type=ReceiptPage
        )
        return result

    async def receipts_ack(self, seq: int, *, timeout: float | None = None) -> Acked:
        """``receipts.ack``: the controller has durably taken receipt ``seq`` (the next one).

        Raises:
            RemoteError: ``receipt_not_next`` and the rest of :meth:`call`'s.
        """
        result: Acked = await self.call(
            "receipts.ack", {"seq": seq}, timeout=timeout, result_type=Acked
        )
        return result

    async def _session(self, method: str, session_id: str, timeout: float | None) -> SessionStatus:
        result: SessionStatus = await self.call(
            method, {"session_id": session_id}, timeout=timeout, result_type=SessionStatus
        )
        return result


def _given(params: Mapping[str, object]) -> dict[str, object]:
    """``params`` without the ones not given (None): the method's defaults apply."""
    return {name: value for name, value in params.items() if value is not None}
