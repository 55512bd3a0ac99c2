"""The session service's control methods: typed params, one handler each, typed refusals.

Registered on gloved's :class:`~glove.control.MethodRegistry` as *gated* methods: they
exist only while the composed runtime is operational (a daemon without ``glove setup``, or
with the construction-only remote backend, answers ``method_not_found`` for each, as the
spec asks). Every refusal is a :class:`~glove.control.MethodError` with a stable code
(:data:`SESSION_ERROR_CODES`); the connection stays open and every other client is served.

A plan travels as its JSON **text** (``"plan": "{...}"``), so the daemon judges the very
bytes the controller wrote (size, nesting, duplicate keys after unescaping), or as a JSON
object, which is re-encoded first (the frame decoder has already refused duplicates).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from glove.control import CallContext, MethodError, MethodRegistry
from glove.journal.errors import JournalError, ReceiptAckError, ReceiptError
from glove.plan import IDENTIFIER_PATTERN, PlanError, PlanEvaluation
from glove.protocol import JsonObject
from glove.session._receipt_index import ReceiptPage
from glove.session._registry import MAX_LIST_PAGE, SessionRegistry
from glove.session._views import ExposureView, SessionView
from glove.session.errors import (
    ExposureError,
    SessionConflict,
    SessionLimit,
    SessionNotFound,
)

#: Each code a session method may answer with, and what it means (docs/sessions.md).
SESSION_ERROR_CODES: Final = {
    "invalid_plan": "the plan is malformed or not allowed here; data.errors lists each problem",
    "session_not_found": "no session has that id",
    "session_conflict": "the request does not fit the session's state",
    "session_limit": "gloved already runs as many sessions as gloved.toml allows",
    "exposure_error": "the exposure cannot be created, resolved or revoked",
    "receipt_not_next": "receipts are acknowledged in order: that is not the next one",
    "receipt_unavailable": "the receipt (or its sealed checkpoint) cannot be read",
    "no_terminal": "the session has no terminal (its plan says pipes), or no transcript now",
    "not_writer": "that viewer is not the session's writer (another attach took the terminal)",
    "transcript_corrupt": "the session's transcript files do not verify",
}

#: Deadlines: a create persists twice (session journal); a page reads the receipt journal.
UNARY_DEADLINE_S: Final = 30.0
#: A watch lasts until the session is terminal; the client asks again after a day.
WATCH_DEADLINE_S: Final = 24 * 3600.0
MAX_PLAN_TEXT_CHARS: Final = 64 * 1024
MAX_RECEIPTS_PAGE: Final = 1000

SessionId = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z-]+$")]
#: An exposure alias: exactly the identifiers a plan may name (``glove.plan``).
Alias = Annotated[str, Meta(pattern=f"^{IDENTIFIER_PATTERN}$")]
State = Literal["created", "preparing", "composed", "running", "finalizing", "terminal"]
#: A plan as text or as a JSON object: free-form here, decoded strictly from its bytes.
PlanParam = Annotated[str, Meta(max_length=MAX_PLAN_TEXT_CHARS)] | JsonObject


class PlanParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``plan.validate`` and ``session.create``: the plan, as JSON text or an object."""

    plan: PlanParam


class SessionParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.status``, ``session.watch``, ``session.stop``, ``session.cleanup``."""

    session_id: SessionId


class ListParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.list``: a page of sessions by id, optionally in one state."""

    state: State | None = None
    after: SessionId | None = None
    limit: Annotated[int, Meta(ge=1, le=MAX_LIST_PAGE)] = 100


class PageParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``receipts.page``: receipts after sequence number ``after``."""

    after: Annotated[int, Meta(ge=0)] = 0
    limit: Annotated[int, Meta(ge=1, le=MAX_RECEIPTS_PAGE)] = 100


class AckParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``receipts.ack``: the controller has durably taken receipt ``seq``."""

    seq: Annotated[int, Meta(ge=1)]


class ExportParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``receipts.export``: the bundle of a session's final receipt."""

    session_id: SessionId


class ExposeParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``exposure.create``: let sessions see directory ``path`` as ``alias``."""

    alias: Alias
    path: Annotated[str, Meta(min_length=1, max_length=4096)]
    mode: Literal["ro", "rw"] = "ro"
    target: Annotated[str, Meta(min_length=1, max_length=4096)] | None = None


class RevokeParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``exposure.revoke``."""

    alias: Alias


class NoParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A method without parameters."""


class PlanVerdict(msgspec.Struct, frozen=True, omit_defaults=True):
    """``plan.validate``: valid with both digests, or invalid with every problem; a valid
    refinement plan also shows its ``evaluation`` (kind and fixture digest and size)."""

    valid: bool
    sha256: str | None = None
    blake3: str | None = None
    errors: list[dict[str, str]] | None = None
    evaluation: PlanEvaluation | None = None


class SessionPage(msgspec.Struct, frozen=True):
    """``session.list``: the page and the cursor of the next one (null at the end)."""

    sessions: list[SessionView]
    next: str | None


class Acked(msgspec.Struct, frozen=True):
    """``receipts.ack``: the sequence number now acknowledged."""

    acked: int


class Bundle(msgspec.Struct, frozen=True):
    """``receipts.export``: the bundle's exact bytes, as text."""

    session_id: str
    bundle: str


class ExposureList(msgspec.Struct, frozen=True):
    """``exposure.list``."""

    exposures: list[ExposureView]


def plan_bytes(plan: str | JsonObject) -> bytes:
    """The plan's bytes as the plan decoder judges them."""
    if isinstance(plan, str):
        return plan.encode("utf-8", "surrogatepass")
    return msgspec.json.encode(plan)


def _plan_refusal(exc: PlanError) -> MethodError:
    errors = [{"path": p.path, "message": p.message} for p in exc.problems]
    return MethodError("invalid_plan", str(exc), {"errors": errors})


class SessionMethods:
    """The handlers, bound to the registry they drive: each asks it one message
    (``_messages.py``) under the request's own deadline."""

    def __init__(self, registry: Callable[[], SessionRegistry | None]) -> None:
        self._registry = registry

    def _live(self) -> SessionRegistry:
        registry = self._registry()
        if registry is None or registry.store is None:
            raise MethodError("session_conflict", "the session registry is not running")
        return registry

    def register(self, methods: MethodRegistry) -> None:
        """Add every session method to ``methods``, gated on the lifecycle.

        Raises:
            RegistryError: a name is already registered.
        """
        unary: list[tuple[str, type[msgspec.Struct], Any]] = [
            ("plan.validate", PlanParams, self.validate),
            ("session.create", PlanParams, self.create),
            ("session.status", SessionParams, self.status),
            ("session.list", ListParams, self.list),
            ("session.stop", SessionParams, self.stop),
            ("session.cleanup", SessionParams, self.cleanup),
            ("receipts.page", PageParams, self.receipts_page),
            ("receipts.ack", AckParams, self.receipts_ack),
            ("receipts.export", ExportParams, self.receipts_export),
            ("exposure.create", ExposeParams, self.expose),
            ("exposure.revoke", RevokeParams, self.revoke),
            ("exposure.list", NoParams, self.exposures),
        ]
        for name, params, handler in unary:
            methods.unary(name, params, handler, deadline_s=UNARY_DEADLINE_S, gated=True)
        methods.stream(
            "session.watch", SessionParams, self.watch, deadline_s=WATCH_DEADLINE_S, gated=True
        )
        from glove.session._attach import TerminalMethods

        TerminalMethods(self._registry).register(methods)

    # -- plans and sessions -----------------------------------------------------------------

    async def validate(self, params: PlanParams, _call: CallContext) -> PlanVerdict:
        """Judge a plan against local policy now; nothing is stored."""
        try:
            validated = await self._live().validate(plan_bytes(params.plan))
        except PlanError as exc:
            errors = [{"path": p.path, "message": p.message} for p in exc.problems]
            return PlanVerdict(valid=False, errors=errors)
        return PlanVerdict(
            valid=True,
            sha256=validated.digests.sha256,
            blake3=validated.digests.blake3,
            evaluation=validated.evaluation,
        )

    async def create(self, params: PlanParams, _call: CallContext) -> SessionView:
        """Validate, persist and start a session; its id once the plan is durable."""
        try:
            return await self._live().create(plan_bytes(params.plan))
        except PlanError as exc:
            raise _plan_refusal(exc) from exc
        except SessionLimit as exc:
            raise MethodError("session_limit", str(exc)) from exc

    async def status(self, params: SessionParams, _call: CallContext) -> SessionView:
        """One session's state (and its outcome and receipt once terminal)."""
        try:
            return await self._live().status(params.session_id)
        except SessionNotFound as exc:
            raise MethodError("session_not_found", str(exc)) from exc

    async def list(self, params: ListParams, _call: CallContext) -> SessionPage:
        """A page of sessions ordered by id."""
        registry = self._live()
        page, cursor = await registry.list(
            state=params.state, after=params.after, limit=params.limit
        )
        return SessionPage(page, cursor)

    async def stop(self, params: SessionParams, _call: CallContext) -> SessionView:
        """Ask a session to stop (its sandbox is killed); returns its state now."""
        try:
            return await self._live().stop_session(params.session_id)
        except SessionNotFound as exc:
            raise MethodError("session_not_found", str(exc)) from exc

    async def cleanup(self, params: SessionParams, _call: CallContext) -> SessionView:
        """Remove a terminal session's output files (its record and receipt stay)."""
        try:
            return await self._live().cleanup(params.session_id)
        except SessionNotFound as exc:
            raise MethodError("session_not_found", str(exc)) from exc
        except SessionConflict as exc:
            raise MethodError("session_conflict", str(exc)) from exc

    async def watch(self, params: SessionParams, call: CallContext) -> AsyncIterator[SessionView]:
        """The session's state now, then each change as it is durable, until terminal."""
        registry = self._live()
        try:
            queue = await registry.watch(params.session_id)
        except SessionNotFound as exc:
            raise MethodError("session_not_found", str(exc)) from exc
        try:
            while (view := await queue.get()) is not None:
                yield view
                if call.client_gone:
                    return
        finally:
            registry.unwatch(params.session_id, queue)

    # -- receipts -----------------------------------------------------------------------------

    async def receipts_page(self, params: PageParams, _call: CallContext) -> ReceiptPage:
        """Receipts after ``after``, in order, with the acknowledged position."""
        try:
            page = await self._live().receipts_page(params.after, params.limit)
        except JournalError as exc:
            raise MethodError("receipt_unavailable", str(exc)) from exc
        return page

    async def receipts_ack(self, params: AckParams, _call: CallContext) -> Acked:
        """Acknowledge the next receipt (exactly the next: acks are in order)."""
        try:
            return Acked(await self._live().receipts_ack(params.seq))
        except ReceiptAckError as exc:
            raise MethodError("receipt_not_next", str(exc)) from exc

    async def receipts_export(self, params: ExportParams, _call: CallContext) -> Bundle:
        """The self-contained bundle of the session's final receipt (docs/receipts.md)."""
        try:
            data = await self._live().export_bundle(params.session_id)
        except (ReceiptError, JournalError) as exc:
            raise MethodError("receipt_unavailable", str(exc)) from exc
        return Bundle(params.session_id, data.decode())

    # -- exposures ----------------------------------------------------------------------------

    async def expose(self, params: ExposeParams, _call: CallContext) -> ExposureView:
        """Create an exposure (or a new generation of one)."""
        if not Path(params.path).is_absolute():
            raise MethodError("exposure_error", f"the path must be absolute, not {params.path!r}")
        try:
            made = await self._live().expose(params.alias, params.path, params.mode, params.target)
        except ExposureError as exc:
            raise MethodError("exposure_error", str(exc)) from exc
        return msgspec.structs.replace(made, path=params.path)

    async def revoke(self, params: RevokeParams, _call: CallContext) -> ExposureView:
        """Revoke an exposure: sessions created with it fail at prepare."""
        try:
            return await self._live().revoke(params.alias)
        except ExposureError as exc:
            raise MethodError("exposure_error", str(exc)) from exc

    async def exposures(self, _params: NoParams, _call: CallContext) -> ExposureList:
        """Every live exposure, with its current generation."""
        live = await self._live().live_exposures()
        return ExposureList(
            [
                ExposureView(
                    alias=e.alias,
                    generation=e.generation,
                    mode=e.mode,
                    target=e.target,
                    path=e.path,
                )
                for e in live
            ]
        )
