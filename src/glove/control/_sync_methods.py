"""Generated from ``_async_methods.py`` by ``scripts/unasync.py``: do not edit.

Edit the source and run ``.venv/bin/python scripts/unasync.py``;
``tests/control/test_unasync.py`` fails while this file differs from what it writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

from glove.control._client_base import runtime_socket
from glove.control._client_core import ClientCore, Params, result_of
from glove.control._results import Exposure, PlanVerdict, SessionPage, SessionState, SessionStatus
from glove.protocol import Capabilities, Response

T = TypeVar("T")


class SyncMethods:
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

    def _unary(self, rid: int, frame: bytes, budget: float) -> Response:
        """Send ``frame`` (request ``rid``) and return its response within ``budget``."""
        raise NotImplementedError  # the transport: the client class's

    def call(
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
        return result_of(self._unary(rid, frame, budget), result_type)

    def capabilities(self, *, timeout: float | None = None) -> Capabilities:
        """``capabilities``: what this gloved can run and how it enforces each limit.

        Raises:
            as :meth:`call`.
        """
        result: Capabilities = self.call("capabilities", timeout=timeout, result_type=Capabilities)
        return result

    def session_status(self, session_id: str, *, timeout: float | None = None) -> SessionStatus:
        """``session.status``: one session's state, outcome and receipt.

        Raises:
            RemoteError: ``session_not_found`` and the rest of :meth:`call`'s.
        """
        return self._session("session.status", session_id, timeout)

    def session_create(
        self, plan: str | Mapping[str, Any], *, timeout: float | None = None
    ) -> SessionStatus:
        """``session.create``: validate, persist and start a session of ``plan`` (its JSON
        text, sent as is, or an object).

        Raises:
            RemoteError: ``invalid_plan``, ``session_limit`` and the rest of :meth:`call`'s.
        """
        result: SessionStatus = self.call(
            "session.create", {"plan": plan}, timeout=timeout, result_type=SessionStatus
        )
        return result

    def session_list(
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
        result: SessionPage = self.call(
            "session.list",
            {name: value for name, value in params.items() if value is not None},
            timeout=timeout,
            result_type=SessionPage,
        )
        return result

    def session_stop(self, session_id: str, *, timeout: float | None = None) -> SessionStatus:
        """``session.stop``: stop a session (its state as the stop left it).

        Raises:
            as :meth:`session_status`.
        """
        return self._session("session.stop", session_id, timeout)

    def session_cleanup(self, session_id: str, *, timeout: float | None = None) -> SessionStatus:
        """``session.cleanup``: remove a terminal session's files, keeping its receipt.

        Raises:
            as :meth:`session_status`.
        """
        return self._session("session.cleanup", session_id, timeout)

    def plan_validate(
        self, plan: str | Mapping[str, Any], *, timeout: float | None = None
    ) -> PlanVerdict:
        """``plan.validate``: judge ``plan`` against this gloved's policy; nothing is stored.

        Raises:
            as :meth:`call`.
        """
        result: PlanVerdict = self.call(
            "plan.validate", {"plan": plan}, timeout=timeout, result_type=PlanVerdict
        )
        return result

    def exposure_create(
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
        params: dict[str, Any] = {"alias": alias, "path": path, "mode": mode}
        if target is not None:
            params["target"] = target
        result: Exposure = self.call(
            "exposure.create", params, timeout=timeout, result_type=Exposure
        )
        return result

    def exposure_revoke(self, alias: str, *, timeout: float | None = None) -> Exposure:
        """``exposure.revoke``: end the exposure ``alias`` (sessions already running keep it).

        Raises:
            as :meth:`call`.
        """
        result: Exposure = self.call(
            "exposure.revoke", {"alias": alias}, timeout=timeout, result_type=Exposure
        )
        return result

    def _session(self, method: str, session_id: str, timeout: float | None) -> SessionStatus:
        result: SessionStatus = self.call(
            method, {"session_id": session_id}, timeout=timeout, result_type=SessionStatus
        )
        return result
