"""The kernel: resolve, decide, audit, forward, for every MCP feature.

The catalog (:mod:`._catalog`, pure) says which upstream offers what under which exposed
name. :class:`Mediator` adds the policy and the audit: every decision is appended to the
audit log **before** the request is forwarded or the refusal returned, and a failed append
refuses the request. Tool calls are here; prompts, resources, logging, completion and
server-to-client requests are in :mod:`._features`, mixed into the same class.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import msgspec

from glove.mcp._catalog import (
    MAX_EXPOSED_NAME_CHARS,
    SEPARATOR,
    Catalog,
    ExposedTool,
    ToolRegistry,
    expose_name,
)
from glove.mcp._contracts import (
    AuditSink,
    PendingAudit,
    PolicyDecision,
    PolicyEngine,
    Refusal,
    TwoPhaseAuditSink,
    UpstreamRequest,
    arguments_digest,
    audit_id,
    canonical_json,
    digest_of,
)
from glove.mcp._features import FeatureMediation
from glove.mcp._messages import McpObject, ToolInfo
from glove.mcp.errors import (
    AUDIT_FAILED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    UPSTREAM_FAILED,
    UPSTREAM_TIMEOUT,
    agent_message,
)

__all__ = [
    "MAX_EXPOSED_NAME_CHARS",
    "SEPARATOR",
    "AuditSink",
    "CallUpstream",
    "Catalog",
    "ExposedTool",
    "Mediator",
    "PolicyDecision",
    "PolicyEngine",
    "Refusal",
    "ToolRegistry",
    "arguments_digest",
    "expose_name",
]

_log = logging.getLogger(__name__)


ProgressSink = Callable[[McpObject], None]
CallUpstream = Callable[
    [ExposedTool, McpObject | msgspec.Raw | None, int | str | None, ProgressSink | None],
    Awaitable[msgspec.Raw],
]
"""Forward a call of the upstream's own tool; returns the raw JSON result."""


MAX_AUDITED_ID_CHARS: Final = 128
#: Random bytes of a run id (hex in the record: 12 characters).
RUN_ID_BYTES: Final = 6
_audit_id = audit_id


class _AbortIfNotDurable:
    """While a call is forwarded, a decision that cannot be made durable stops the wait.

    The audit log fails closed and its mediation ends; the agent must hear that the audit
    failed, not that the session ended, so the forward is cancelled at once (the task's own
    cancellation, taken back by :meth:`aborted`) and the call answered with the audit error.
    """

    def __init__(self, pending: PendingAudit) -> None:
        self._task = asyncio.current_task()
        self._forwarding = True
        self._cancelled = False
        pending.add_done_callback(lambda: self._check(pending))

    def _check(self, pending: PendingAudit) -> None:
        if self._forwarding and pending.failed and self._task is not None:
            self._cancelled = True
            self._task.cancel(msg="the audit record could not be made durable")

    def forwarded(self) -> None:
        """The forward is over: from now on the caller waits for the record itself."""
        self._forwarding = False

    def aborted(self) -> bool:
        """Whether a CancelledError is this guard's own (then it is taken back)."""
        self._forwarding = False
        if not self._cancelled or self._task is None:
            return False
        self._cancelled = False
        self._task.uncancel()
        return True


class Mediator(FeatureMediation):
    """Resolve, decide, audit and forward: the request flow of the architecture.

    ``definition_of`` turns an upstream tool into the policy's ``ToolDefinition``.
    ``catalog`` (prompts, resources, templates; its ``tools`` is ``registry``) and
    ``request`` (forward any method to an upstream) enable the other features; without
    them only tools are mediated.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        policy: PolicyEngine,
        audit: AuditSink,
        forward: CallUpstream,
        definition_of: Callable[[ToolInfo], Any],
        *,
        audit_errors: tuple[type[BaseException], ...],
        upstream_errors: tuple[type[BaseException], ...],
        timeout_errors: tuple[type[BaseException], ...],
        run_id: str | None = None,
        catalog: Catalog | None = None,
        request: UpstreamRequest | None = None,
        upstream_capabilities: Callable[[str], Mapping[str, Any]] | None = None,
    ) -> None:
        self.registry = registry
        if catalog is None:
            catalog = Catalog({})
            catalog.tools = registry
        self.catalog = catalog
        self._request = request
        self._upstream_capabilities = upstream_capabilities or (lambda _uid: {})
        self.policy = policy
        self._audit = audit
        # Asked once: isinstance against a runtime-checkable protocol walks its members
        # (tens of microseconds), which every call paid.
        self._two_phase: TwoPhaseAuditSink | None = (
            audit if isinstance(audit, TwoPhaseAuditSink) else None
        )
        self._forward = forward
        self._definition_of = definition_of
        self._audit_errors = audit_errors
        self._upstream_errors = upstream_errors
        self._timeout_errors = timeout_errors
        #: Names this mediation in every audit record (several runs may share one log).
        self.run_id = run_id or secrets.token_hex(RUN_ID_BYTES)
        #: Calls refused by policy or for an unknown tool, and the first one's tool name.
        self.denied = 0
        self.first_denied: str | None = None
        self._last_written: PendingAudit | None = None
        FeatureMediation.__init__(self)

    def _count_denial(self, name: str) -> None:
        self.denied += 1
        if self.first_denied is None:
            self.first_denied = name[:MAX_AUDITED_ID_CHARS]

    def visible_tools(self) -> list[McpObject]:
        """The tool definitions the policy lets the agent see, renamed."""
        return [
            tool.listing()
            for tool in self.registry.tools()
            if self.policy.check_tool(tool.name, self._definition_of(tool.info)).allowed
        ]

    async def record(self, record: dict[str, object]) -> None:
        """Append one audit record durably.

        Raises:
            Refusal: the append failed (code AUDIT_FAILED); the request must be refused.
        """
        record.setdefault("run", self.run_id)
        record.setdefault("policy", self.policy.digest)
        try:
            await self._audit.append(record)
        except self._audit_errors as exc:
            _log.error("audit append failed, refusing the request: %s", exc)
            raise Refusal(AUDIT_FAILED, "the audit log is unavailable; request refused") from exc

    async def malformed(self, request_id: object, code: int, why: str) -> None:
        """Audit a malformed frame or request (the caller then answers with ``code``).

        Raises:
            Refusal: the append failed.
        """
        await self.record(
            {
                "kind": "mcp.request",
                "decision": "malformed",
                "request_id": _audit_id(request_id),
                "code": code,
                "reason": why[:512],
            }
        )

    async def call_tool(
        self,
        request_id: int | str,
        params: McpObject | None,
        progress: Callable[[McpObject], None] | None,
    ) -> msgspec.Raw:
        """Run one ``tools/call``: resolve, check, audit, forward.

        Raises:
            Refusal: the call was malformed, unknown, denied, not durably audited, or the
                upstream failed it; the exception carries the JSON-RPC error to return.
        """
        params = params or {}
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            await self.malformed(request_id, INVALID_PARAMS, "tools/call needs a name and object")
            raise Refusal(INVALID_PARAMS, "tools/call needs a string name and object arguments")
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if not isinstance(token, int | str):
            token = None
        record: dict[str, object] = {
            "kind": "mcp.call",
            "request_id": _audit_id(request_id),
            "tool": name[:128],
        }
        # One canonical encoding serves both the audit digest and the forwarded request:
        # what is hashed is byte for byte what the upstream receives, and the forward needs
        # no second encoding once the audit record is durable.
        encoded = canonical_json(arguments if arguments is not None else {})
        record["args_sha256"] = digest_of(encoded)
        forwarded: Any = arguments
        if arguments is not None and encoded is not None:
            forwarded = msgspec.Raw(encoded)
        tool = self.registry.lookup(name)
        if tool is None:
            record.update(decision="unknown_tool", reason="no upstream exposes this tool")
            await self.record(record)
            self._count_denial(name)
            raise Refusal(INVALID_PARAMS, f"Unknown tool: {name[:128]}")
        definition = self._definition_of(tool.info)
        record.update(upstream=tool.upstream_id, upstream_tool=tool.info.name)
        # check_call re-checks everything check_tool does; check_tool is asked only to tell
        # a hidden tool (answered like an unknown one) from a call whose arguments failed.
        decision = self.policy.check_call(name, arguments, definition)
        hidden = not decision.allowed and not self.policy.check_tool(name, definition).allowed
        if not decision.allowed or self._two_phase is None:
            await self.record_decision(record, decision, inspected=True)
            # A tool the policy hides looks exactly like a tool that does not exist.
            self.refuse_denied(name, decision, hidden=hidden, kind="tool", action="tool call")
            return await self._forward_call(
                request_id, tool, forwarded, (token, progress if token else None)
            )
        # Overlapped (decision 0046): the allow is written (in the kernel: it survives a
        # kill -9 of this process) before the upstream sees the call, its fdatasync runs
        # while the upstream works, and nothing reaches the agent before it is durable.
        pending = await self._write_decision(record, decision)
        guard = _AbortIfNotDurable(pending)
        try:
            result = await self._forward_call(
                request_id, tool, forwarded, (token, progress if token else None)
            )
        except asyncio.CancelledError:
            if not guard.aborted():
                raise
            raise Refusal(
                AUDIT_FAILED, "the audit log failed; the call's answer is withheld"
            ) from None
        except Refusal:
            guard.forwarded()
            await self._settle(pending)
            raise
        guard.forwarded()
        await self._settle(pending)
        return result

    async def _write_decision(
        self, record: dict[str, object], decision: PolicyDecision
    ) -> PendingAudit:
        """Write an allow decision without waiting for its fdatasync.

        Raises:
            Refusal: the write failed (code AUDIT_FAILED); nothing was forwarded.
        """
        assert self._two_phase is not None
        record.update(decision="allow", reason=decision.reason, rule=decision.rule)
        record["inspected"] = dict(decision.inspected)
        record.setdefault("run", self.run_id)
        record.setdefault("policy", self.policy.digest)
        try:
            pending = await self._two_phase.write(record)
        except self._audit_errors as exc:
            _log.error("audit write failed, refusing the request: %s", exc)
            raise Refusal(AUDIT_FAILED, "the audit log is unavailable; request refused") from exc
        self._last_written = pending
        return pending

    def undurable(self) -> PendingAudit | None:
        """The last decision written and not yet durable, if any: what a frame to an agent
        that is not a call's answer waits for (records are durable in the order written)."""
        last = self._last_written
        return last if last is not None and not last.done else None

    async def _settle(self, pending: PendingAudit) -> None:
        """Wait until the decision is durable; an audit that failed turns the answer into
        an error (the log itself has failed closed).

        Raises:
            Refusal: the record could not be made durable (code AUDIT_FAILED).
        """
        try:
            await pending.durable()
        except self._audit_errors as exc:
            _log.error("audit record not durable, refusing the answer: %s", exc)
            raise Refusal(
                AUDIT_FAILED, "the audit log failed; the call's answer is withheld"
            ) from exc

    async def _forward_call(
        self,
        request_id: int | str,
        tool: ExposedTool,
        forwarded: Any,
        progress: tuple[int | str | None, Callable[[McpObject], None] | None],
    ) -> msgspec.Raw:
        """Forward an allowed, audited call; audit and map an upstream's failure.

        Raises:
            Refusal: the upstream failed, timed out or answered with an error.
        """
        name = tool.name
        token, sink = progress
        try:
            return await self._forward(tool, forwarded, token, sink)
        except self._upstream_errors + self._timeout_errors as exc:
            timed_out = isinstance(exc, self._timeout_errors)
            code = getattr(exc, "code", None)
            await self.record(
                {
                    "kind": "mcp.call",
                    "decision": "upstream_error",
                    "request_id": _audit_id(request_id),
                    "tool": name,
                    "upstream": tool.upstream_id,
                    "reason": agent_message(exc)[:512],
                }
            )
            if isinstance(code, int) and not timed_out:
                # The upstream's own JSON-RPC error travels back as it was.
                raise Refusal(code, getattr(exc, "remote_message", agent_message(exc))) from exc
            if timed_out:
                raise Refusal(UPSTREAM_TIMEOUT, f"upstream {tool.upstream_id!r} timed out") from exc
            raise Refusal(UPSTREAM_FAILED, agent_message(exc)) from exc
        except Refusal:
            raise
        except Exception as exc:
            _log.exception("internal error forwarding %s", name)
            raise Refusal(INTERNAL_ERROR, "internal error") from exc
